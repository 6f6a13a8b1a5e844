r"""Tune the beam search's LM weight alpha and word bonus beta by a grid search on a dev set.

    ds2-tune --model_dir runs/tiny/model --manifest data/tiny/dev.jsonl --lm data/tiny/lm/tiny3.bin \
        --alpha_from 0 --alpha_to 2.5 --num_alphas 11 --beta_from 0 --beta_to 5 --num_betas 6

The model's log-probabilities are computed once and every (alpha, beta) decodes them, the points in
parallel. Prints the error at each point and the best pair (WER, or CER for a vocabulary without a space:
Mandarin, whose beta is a per-character bonus); writes them to --out_json and draws the error
surface to --out_png. A coarse first pass: --num_batches 4 tunes on a random 4 x --batch_size utterances;
then narrow the ranges and tune on the whole set (--num_batches 0).
"""

import sys
from pathlib import Path

from absl import flags

from deepspeech2.decode.beam import check_lm_files
from deepspeech2.decode.tune import TuneConfig, plot_error_surface, save_result, tune

try:
    from . import _decoding
    from ._flags import default, from_flags
except ImportError:  # python bin/ds2_tune.py
    import _decoding
    from _flags import default, from_flags

T = TuneConfig
flags.DEFINE_string("model_dir", None, "Model bundle folder (a ds2-train workdir's model/).")
flags.DEFINE_string("manifest", None, "Dev manifest (JSON lines) to tune on.")
_decoding.define_flags(kind=None)
flags.adopt_module_key_flags(_decoding)  # --help lists them with this command's own
flags.DEFINE_float("alpha_from", default(T, "alpha_from"), "Smallest alpha (LM weight).")
flags.DEFINE_float("alpha_to", default(T, "alpha_to"), "Largest alpha.")
flags.DEFINE_integer("num_alphas", default(T, "num_alphas"), "Alphas on the grid.")
flags.DEFINE_float("beta_from", default(T, "beta_from"), "Smallest beta (word insertion bonus).")
flags.DEFINE_float("beta_to", default(T, "beta_to"), "Largest beta.")
flags.DEFINE_integer("num_betas", default(T, "num_betas"), "Betas on the grid.")
flags.DEFINE_enum("error_rate_type", None, ["wer", "cer"], "What to minimise; default: wer for a vocabulary "
                  "with a space (English), cer without (Mandarin).")
flags.DEFINE_integer("num_batches", 0, "Tune on a random num_batches x batch_size utterances; 0: all.")
flags.DEFINE_integer("batch_size", 16, "Utterances per acoustic model call.")
flags.DEFINE_integer("num_workers", default(T, "num_workers"), "Grid points decoded at once; 0: one per CPU core.")
flags.DEFINE_integer("seed", 0, "Seed of the --num_batches sample.")
flags.DEFINE_string("out_json", "tune.json", "Where to write every point's error and the best pair.")
flags.DEFINE_string("out_png", "", "Where to draw the error surface ('': beside --out_json, as .png).")
flags.mark_flags_as_required(["model_dir", "manifest", "lm"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    try:
        # --alpha_from, ..., --num_betas and --num_workers by field name.
        grid = from_flags(TuneConfig, metric=FLAGS.error_rate_type or "auto")
        decoder = _decoding.config(FLAGS)
        check_lm_files(decoder)
        from deepspeech2.inference import manifest_log_probs  # TensorFlow loads here, after the flags are checked

        dev = manifest_log_probs(FLAGS.model_dir, FLAGS.manifest, FLAGS.num_batches * FLAGS.batch_size,
                                 FLAGS.batch_size, FLAGS.seed)
        metric = (FLAGS.error_rate_type or dev.vocab.metric).upper()
        result = tune(dev.log_probs, dev.references, dev.vocab, grid, decoder,
                      on_point=lambda a, b, error: print(f"alpha {a:.4g} beta {b:.4g}: {metric} {100 * error:.2f}%",
                                                         flush=True))
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-tune: error: {e}")
    out_png = FLAGS.out_png or str(Path(FLAGS.out_json).with_suffix(".png"))
    save_result(result, FLAGS.out_json)
    plot_error_surface(result, out_png)
    print(f"best: alpha {result.best_alpha:.4g} beta {result.best_beta:.4g} {result.metric.upper()} "
          f"{100 * result.best_error:.2f}% on {result.num_utterances} utterances; wrote {FLAGS.out_json}, "
          f"{out_png}")


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
