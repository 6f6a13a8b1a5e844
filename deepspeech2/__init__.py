"""DeepSpeech 2 in TensorFlow 2 / Keras 3: the few calls that use a trained model (docs/python-api.md).

    import deepspeech2

    bundle = deepspeech2.load_bundle("runs/tiny/model")                       # what ds2-train writes
    greedy = deepspeech2.decoder(bundle, kind="greedy")                       # or kind="beam", lm_path=..., alpha=...
    transcripts = deepspeech2.transcribe_files(bundle, ["recording.wav"], greedy)
    stream = deepspeech2.streaming_model(bundle)                              # chunk by chunk (a unidirectional model)

Importing this package loads no TensorFlow: each call imports what it needs, so the TF-free parts of the library (the
decoders, the configs, data tools) stay light. Everything else is in the modules named in each docstring.
"""

from __future__ import annotations


def load_bundle(path):
    """The model bundle in folder `path`: `deepspeech2.bundle.load_bundle`.

    Raises:
        FileNotFoundError: `path` holds no bundle.
    """
    from deepspeech2.bundle import load_bundle as load

    return load(path)


def decoder(bundle, **config):
    """A `deepspeech2.decode.Decoder` for `bundle`'s vocabulary, with `DecoderConfig(**config)` (its defaults: the
    beam search, no LM); `kind="greedy"` for best-path decoding.

    Raises:
        ValueError, TypeError: `config` holds a bad value or a key that is not a `DecoderConfig` field.
        FileNotFoundError: the LM, or a binary LM's unigram list, is missing.
    """
    from deepspeech2.decode import Decoder, DecoderConfig

    return Decoder(DecoderConfig(**config), bundle.vocab)


def transcribe_files(bundle, paths, decoder, **options):
    """One `deepspeech2.inference.Transcript` per audio file in `paths`, in their order:
    `deepspeech2.inference.transcribe` over the files (`options` are its keyword arguments). A file that can't be
    read gets its `error`; the others are still transcribed."""
    from deepspeech2.inference import file_utterances, transcribe

    return transcribe(bundle, file_utterances(paths), decoder, **options)


def streaming_model(bundle):
    """`bundle`'s model as a `deepspeech2.streaming.StreamingModel`: `initial_state()`, then `step` per chunk.

    Raises:
        ValueError: the model can't stream (`deepspeech2.streaming.check_streamable` says why).
    """
    from deepspeech2.streaming import StreamingModel

    return StreamingModel(bundle.model, bundle.model_config, bundle.feature_config, bundle.normalizer)


__all__ = ["decoder", "load_bundle", "streaming_model", "transcribe_files"]
