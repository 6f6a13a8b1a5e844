r"""Evaluate a trained model on manifests: WER and CER with substitutions, deletions and insertions.

    ds2-eval --model_dir runs/tiny/model --manifest data/tiny/test.clean.jsonl
    ds2-eval --model_dir runs/tiny/model --manifest data/tiny/test.clean.jsonl --decoder beam \
        --lm data/tiny/lm/tiny3.bin --alpha 0.5 --beta 2 --group_by speaker --report runs/tiny/eval.json
    ds2-eval --model_dir runs/chime/model --manifest data/chime4/et05_real.jsonl --group_by environment
    ds2-eval --model_dir runs/tiny/model --manifest data/tiny/test.clean.jsonl --channel g711   # over a phone
    ds2-eval --model_dir runs/tiny/model --manifest data/tiny/test.clean.jsonl --decoder beam \
        --lm data/tiny/lm/tiny3.bin --words --words_config runs/tiny/words.json --report runs/tiny/eval.json

Reads the manifests the importers write (offsets honoured), runs the model in batches sorted by length,
decodes greedily or with the beam search and an LM, and prints the totals, a table per --group_by key
(any manifest key) and the real-time factor (features + acoustic model, and decoder). Audio that can't be
read, or is longer than --max_seconds, is skipped and reported. --report writes every utterance's reference,
hypothesis and errors, the totals, the groups, the decoder settings and the timing as JSON.
--words (beam search only) adds each word's start and end (s), confidence and whether it is right to every
utterance of the report (`word_times`), and how well the confidences separate right from wrong words (AUROC) and
match their share (expected calibration error, 10 bins) to the totals (`word_confidence`); --words_config shifts
and calibrates them (bench/words.py writes one for a model and LM).
--channel g711 scores any split as it would sound over a phone: each utterance resampled to 8 kHz, band-passed
300-3400 Hz, G.711 μ-law encoded and decoded, and resampled back to the model's rate (deterministic; the same
channel as the `telephone` augmentation, deepspeech2.data.telephone).
"""

import sys

from absl import flags

try:
    from . import _decoding
    from ._flags import from_flags
except ImportError:  # python bin/ds2_eval.py
    import _decoding
    from _flags import from_flags

flags.DEFINE_string("model_dir", None, "Model bundle folder (a ds2-train workdir's model/).")
flags.DEFINE_list("manifest", None, "Manifest(s) to evaluate, comma-separated (their utterances are pooled).")
_decoding.define_flags(kind="greedy")
flags.adopt_module_key_flags(_decoding)  # --help lists them with this command's own
flags.DEFINE_list("group_by", [], "Manifest keys to break the results down by (speaker, environment, accent...).")
flags.DEFINE_integer("batch_size", 16, "Utterances per acoustic-model call.")
# deepspeech2.inference.MAX_SECONDS, not imported here: it loads TensorFlow, which --help doesn't need.
flags.DEFINE_float("max_seconds", 600.0, "Refuse longer audio (s), by its header, with how to cut it into pieces "
                   "(the model takes an utterance whole); 0: no limit.")
flags.DEFINE_integer("max_utterances", 0, "Evaluate only the first N utterances; 0: all.")
flags.DEFINE_enum("channel", "none", ["none", "g711"], "What the audio goes through before the model: none, or "
                  "g711: a phone line (8 kHz, 300-3400 Hz, G.711 μ-law, back to the model's rate).")
flags.DEFINE_bool("words", False, "Time and score every word (needs --decoder beam): per utterance in the report, "
                  "AUROC and calibration error of the confidences in the totals.")
flags.DEFINE_string("words_config", None, "With --words: the word config JSON (time shifts, confidence "
                    "calibration) of this model and LM, from bench/words.py.")
flags.DEFINE_string("report", "", "Write the JSON report here.")
flags.DEFINE_integer("examples", 3, "Reference/hypothesis pairs to print.")
flags.mark_flags_as_required(["model_dir", "manifest"])
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        sys.exit(f"ds2-eval: error: unexpected arguments {argv[1:]}; give manifests with --manifest")
    try:
        from deepspeech2.decode.beam import check_lm_files
        from deepspeech2.decode.words import WordConfig
        from deepspeech2.evaluate import EvalConfig, evaluate, format_report

        decoder = _decoding.config(FLAGS)
        check_lm_files(decoder)
        if FLAGS.words_config and not FLAGS.words:
            raise ValueError(f"`--words_config` ({FLAGS.words_config}) is given without --words")
        words = (WordConfig.load(FLAGS.words_config) if FLAGS.words_config else WordConfig()) if FLAGS.words else None
        # --model_dir, --group_by, --batch_size, --max_utterances and --channel by field name.
        config = from_flags(EvalConfig, manifests=tuple(FLAGS.manifest), decoder=decoder, words=words,
                            max_seconds=FLAGS.max_seconds or None, report_path=FLAGS.report)
        report = evaluate(config)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-eval: error: {e}")
    print(format_report(report, FLAGS.examples))
    if FLAGS.report:
        print(f"wrote {FLAGS.report}")


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
