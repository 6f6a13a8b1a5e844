r"""Write a manifest as TFRecord shards (int16 PCM, text, label ids) plus an index.

    ds2-make-shards --manifest data/tiny/train.jsonl --vocab data/tiny/vocab.txt \
        --out data/tiny/shards/train --num_shards 4
"""

import sys

from absl import flags

from deepspeech2.audio import MAX_DURATION
from deepspeech2.data.shards import ShardConfig, make_shards
from deepspeech2.model_config import load_model_config
from deepspeech2.vocab import Vocabulary

flags.DEFINE_string("manifest", None, "Manifest (JSON lines) to shard.")
flags.DEFINE_string("vocab", None, "Vocabulary file from ds2-build-vocab.")
flags.DEFINE_string("out", None, "Output folder for shards and index.json.")
flags.DEFINE_integer("num_shards", 8, "Number of shard files (>= number of training workers).")
flags.DEFINE_integer("num_workers", 4, "Audio decoding threads.")
flags.DEFINE_integer("seed", 0, "Seed of the utterance-to-shard assignment.")
flags.DEFINE_string("model", None, "Optional: skip utterances CTC can't fit through this model (its exact output "
                    "steps), listing them in index.json; a preset (tiny, ds2-small, ...) or a model_config.json.")
flags.DEFINE_float("max_duration", MAX_DURATION, "Skip longer utterances (s), unread: ds2-train drops them anyway "
                   "(keep this >= its --max_duration); 0: keep all.")
flags.mark_flags_as_required(["manifest", "vocab", "out"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    try:
        config = ShardConfig(out_dir=FLAGS.out, num_shards=FLAGS.num_shards, num_workers=FLAGS.num_workers,
                             seed=FLAGS.seed, model=load_model_config(FLAGS.model) if FLAGS.model else None,
                             max_duration=FLAGS.max_duration or None)
        index = make_shards(FLAGS.manifest, Vocabulary.load(FLAGS.vocab), config)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-make-shards: error: {e}")
    kinds = [s.get("kind") for s in index["skipped"]]
    print(f"{FLAGS.out}: {index['total_count']} utterances, {index['total_duration'] / 3600:.2f} h "
          f"in {index['num_shards']} shards; {len(kinds)} skipped ({kinds.count('malformed')} malformed manifest "
          f"lines, {kinds.count('unusable')} unusable, {kinds.count('too_long')} longer than {FLAGS.max_duration:g} s, "
          f"{kinds.count('infeasible')} CTC-infeasible; listed in index.json)")


def run():
    """Console-script entry point: absl's app.run with --help showing this module's docstring and flags."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_x.py
        from _app import run as run_app
    run_app(main)


if __name__ == "__main__":
    run()
