r"""Transcribe audio files (or lines of a manifest) with a trained model.

    ds2-infer --model_dir runs/tiny/model recording.wav other.flac
    ds2-infer --model_dir runs/tiny/model --decoder beam --lm data/tiny/lm/tiny3.bin --alpha 0.5 --beta 2 *.wav
    ds2-infer --model_dir runs/tiny/model --manifest data/tiny/test.clean.jsonl --num_samples 5
    ds2-infer --model_dir runs/tiny/model --tflite runs/tiny/export/ds2.dynamic.tflite *.wav   # ds2-export --quantize
    ds2-infer --model_dir runs/tiny/model --decoder beam --lm data/tiny/lm/tiny3.bin --words \
        --words_config runs/tiny/words.json recording.wav   # each word's start, end and confidence, as JSON

Any format soundfile reads (WAV, FLAC, OGG, MP3...), resampled to the model's rate and downmixed to mono.
Prints one `FILE<TAB>transcript` line per input, in order; for manifest lines the reference follows on
its own line. A file that can't be read, or is longer than --max_seconds (refused by its header, with the
sox command that cuts it into pieces), gets `FILE<TAB>error: ...` and the others are still transcribed;
the exit status is 1 if any input failed. With --words (beam search only), one JSON object per input instead:
`source`, `text` (or `error`), `reference` for manifest lines, and `words`, each `{word, start, end, confidence}`
(seconds into the audio; the confidence in [0, 1]), shifted and calibrated by --words_config (bench/words.py
writes one; without it: unshifted, and the raw n-best posterior).
"""

import json
import sys

from absl import flags

try:
    from . import _decoding, _inputs
except ImportError:  # python bin/ds2_infer.py
    import _decoding
    import _inputs

flags.DEFINE_string("model_dir", None, "Model bundle folder (a ds2-train workdir's model/).")
_inputs.define_flags()
_decoding.define_flags(kind="greedy")
flags.adopt_module_key_flags(_inputs)  # --help lists them with this command's own
flags.adopt_module_key_flags(_decoding)
flags.DEFINE_integer("batch_size", 16, "Utterances per acoustic-model call.")
# deepspeech2.inference.MAX_SECONDS, not imported here: it loads TensorFlow, which --help doesn't need.
flags.DEFINE_float("max_seconds", 600.0, "Refuse longer audio (s), by its header, with how to cut it into pieces "
                   "(the model takes an utterance whole); 0: no limit.")
flags.DEFINE_bool("words", False, "Print JSON with each word's start and end (s) and confidence (needs --decoder "
                  "beam).")
flags.DEFINE_string("words_config", None, "With --words: the word config JSON (time shifts, confidence "
                    "calibration) of this model and LM, from bench/words.py.")
flags.DEFINE_string("tflite", None, "Run this TFLite model (ds2-export --quantize) instead of the bundle's Keras "
                    "model; the bundle it was exported from still gives the features and the vocabulary.")
flags.mark_flags_as_required(["model_dir"])
FLAGS = flags.FLAGS


def main(argv):
    files = _inputs.files("ds2-infer", argv, FLAGS)
    try:
        from deepspeech2.bundle import load_bundle
        from deepspeech2.data.manifest import read_manifest, sample_utterances
        from deepspeech2.decode import Decoder
        from deepspeech2.decode.beam import check_lm_files
        from deepspeech2.decode.words import WordConfig
        from deepspeech2.inference import file_utterances, transcribe

        decoder_config = _decoding.config(FLAGS)
        check_lm_files(decoder_config)
        if FLAGS.words_config and not FLAGS.words:
            raise ValueError(f"`--words_config` ({FLAGS.words_config}) is given without --words")
        if FLAGS.words and decoder_config.kind != "beam":
            raise ValueError("--words needs --decoder beam (word times and confidences come from the beam search)")
        words = (WordConfig.load(FLAGS.words_config) if FLAGS.words_config else WordConfig()) if FLAGS.words else None
        bundle = load_bundle(FLAGS.model_dir)
        forward = None
        if FLAGS.tflite:
            from deepspeech2_export.tflite import tflite_acoustic_model

            forward = tflite_acoustic_model(FLAGS.tflite, bundle)
        if FLAGS.manifest:
            utterances = sample_utterances(read_manifest(FLAGS.manifest), FLAGS.num_samples, FLAGS.seed)
        else:
            utterances = file_utterances(files)
        with Decoder(decoder_config, bundle.vocab) as decoder:
            results = transcribe(bundle, utterances, decoder, FLAGS.batch_size, max_seconds=FLAGS.max_seconds or None,
                                 words=words, forward=forward)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-infer: error: {e}")
    for r in results:
        if FLAGS.words:
            print(json.dumps({"source": r.source, **({"text": r.text} if r.text is not None else {"error": r.error}),
                              **({"reference": r.reference} if r.reference is not None else {}),
                              "words": [w.to_dict() for w in r.words or []]}, ensure_ascii=False))
            continue
        print(f"{r.source}\t{r.text}" if r.text is not None else f"{r.source}\terror: {r.error}")
        if r.reference is not None:
            print(f"  (reference: {r.reference})")
    _inputs.exit_status(sum(r.text is None for r in results))


def run():
    """absl's app.run with --help showing this module's docstring and flags (the console script gets here through
    its launcher in deepspeech2_cli, which has quieted TensorFlow first)."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_x.py
        from _app import run as run_app
    run_app(main)


if __name__ == "__main__":
    run()
