"""Offline preparation: everything that runs once, before training, and writes files (`ds2-prepare`,
`ds2-compute-stats`). The online input pipeline that reads them every epoch is `deepspeech2.data`.

Each corpus, imported or made, has `prepare_<module>(...)`, lhotse's shape: it writes its manifests (or text) into
an output folder or file it is given, returns them, and is safe to run again (finished work is reused).

Importers of corpora as distributed (`prepare_<corpus>(corpus_dir, output_dir, *, num_workers=2, splits=None)`;
`output_dir/<split>.jsonl` and `output_dir/<split>.report.json`, what was skipped and why):
    librispeech.py voxforge.py aishell.py wsj.py chime4.py tedlium.py
    folder.py          your own recordings: audio with transcripts beside, or a table (Common Voice, DeepSpeech)
    importer.py        what they share: finding the layout, converting audio once, normalizing, reporting

Corpus makers (a frozen config dataclass holding the output place):
    tiny.py            the tiny synthetic corpus (`prepare_tiny(TinyCorpusConfig)`), from its parts:
      sentences.py       fortunes split, cleaned and normalized into sentences; the LM text less dev and test
      voices.py          the speakers of each split
      synthesis.py       one utterance: its draws, its synthesizer, its trimming and level
      neural.py voicebanks.py channel.py   the neural voices, the voice banks of real people, recording channels
    heldout.py         a manifest's sentences read by festival, an engine the tiny corpus never uses
    poetry.py          classical Chinese LM text (`prepare_poetry(PoetryTextConfig)`)
    english_text.py    broad English LM text (`prepare_english_text(EnglishTextConfig)`)

And for the pipeline's inputs:
    noise.py           coloured noise, babble and room impulse responses for the `noise` and `impulse` augmentation
    validate.py        every manifest line checked as make-shards, compute-stats and training will use it
    stats.py           the normalizer's per-bin mean and std
"""
