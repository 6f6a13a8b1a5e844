r"""Transcribe audio files (or lines of a manifest) with a trained model.

    ds2-infer --model_dir runs/tiny/model recording.wav other.flac
    ds2-infer --model_dir runs/tiny/model --decoder beam --lm data/tiny/lm/tiny3.bin --alpha 0.5 --beta 2 *.wav
    ds2-infer --model_dir runs/tiny/model --manifest data/tiny/test.clean.jsonl --num_samples 5

Any format soundfile reads (WAV, FLAC, OGG, MP3...), resampled to the model's rate and downmixed to mono.
Prints one `FILE<TAB>transcript` line per input, in order; for manifest lines the reference follows on
its own line. A file that can't be read, or is longer than --max_seconds (refused by its header, with the
sox command that cuts it into pieces), gets `FILE<TAB>error: ...` and the others are still transcribed;
the exit status is 1 if any input failed.
"""

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
flags.mark_flags_as_required(["model_dir"])
FLAGS = flags.FLAGS


def main(argv):
    files = _inputs.files("ds2-infer", argv, FLAGS)
    try:
        from deepspeech2.bundle import load_bundle
        from deepspeech2.data.manifest import read_manifest, sample_utterances
        from deepspeech2.decode import Decoder
        from deepspeech2.decode.beam import check_lm_files
        from deepspeech2.inference import file_utterances, transcribe

        decoder_config = _decoding.config(FLAGS)
        check_lm_files(decoder_config)
        bundle = load_bundle(FLAGS.model_dir)
        if FLAGS.manifest:
            utterances = sample_utterances(read_manifest(FLAGS.manifest), FLAGS.num_samples, FLAGS.seed)
        else:
            utterances = file_utterances(files)
        with Decoder(decoder_config, bundle.vocab) as decoder:
            results = transcribe(bundle, utterances, decoder, FLAGS.batch_size, max_seconds=FLAGS.max_seconds or None)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-infer: error: {e}")
    for r in results:
        print(f"{r.source}\t{r.text}" if r.text is not None else f"{r.source}\terror: {r.error}")
        if r.reference is not None:
            print(f"  (reference: {r.reference})")
    _inputs.exit_status(sum(r.text is None for r in results))


def run():
    """Console-script entry point: absl's app.run with --help showing this module's docstring and flags."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_x.py
        from _app import run as run_app
    run_app(main)


if __name__ == "__main__":
    run()
