r"""Write a manifest as TFRecord shards (int16 PCM, text, label ids) plus an index.

    ds2-make-shards --manifest data/tiny/train.jsonl --vocab data/tiny/vocab.txt \
        --out data/tiny/shards/train --num_shards 4
"""

import sys

from absl import flags

from deepspeech2.data.shards import ShardConfig, make_shards
from deepspeech2.model_config import load_model_config
from deepspeech2.vocab import Vocabulary

try:
    from ._flags import default, from_flags
except ImportError:  # python bin/ds2_make_shards.py
    from _flags import default, from_flags

flags.DEFINE_string("manifest", None, "Manifest (JSON lines) to shard.")
flags.DEFINE_string("vocab", None, "Vocabulary file from ds2-build-vocab.")
flags.DEFINE_string("out", None, "Output folder for shards and index.json.")
flags.DEFINE_integer("num_shards", default(ShardConfig, "num_shards"), "Number of shard files (>= number of training "
                     "workers).")
flags.DEFINE_integer("num_workers", default(ShardConfig, "num_workers"), "Audio decoding threads.")
flags.DEFINE_integer("seed", default(ShardConfig, "seed"), "Seed of the utterance-to-shard assignment.")
flags.DEFINE_string("model", None, "Optional: skip utterances CTC can't fit through this model (its exact output "
                    "steps), listing them in index.json; a preset (tiny, ds2-small, ...) or a model_config.json.")
flags.DEFINE_float("max_duration", default(ShardConfig, "max_duration"), "Skip longer utterances (s), unread: "
                   "ds2-train drops them anyway (keep this >= its --max_duration); 0: keep all.")
flags.mark_flags_as_required(["manifest", "vocab", "out"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    try:
        config = from_flags(ShardConfig, out_dir=FLAGS.out, max_duration=FLAGS.max_duration or None,
                            model=load_model_config(FLAGS.model) if FLAGS.model else None)
        index = make_shards(FLAGS.manifest, Vocabulary.load(FLAGS.vocab), config)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-make-shards: error: {e}")
    kinds = [s.get("kind") for s in index["skipped"]]
    print(f"{FLAGS.out}: {index['total_count']} utterances, {index['total_duration'] / 3600:.2f} h "
          f"in {index['num_shards']} shards; {len(kinds)} skipped ({kinds.count('malformed')} malformed manifest "
          f"lines, {kinds.count('unusable')} unusable, {kinds.count('too_long')} longer than {FLAGS.max_duration:g} s, "
          f"{kinds.count('infeasible')} CTC-infeasible; listed in index.json)")


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
