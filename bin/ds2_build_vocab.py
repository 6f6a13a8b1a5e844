"""Build the character vocabulary from manifests.

    ds2-build-vocab --manifest_paths data/tiny/train.jsonl --out data/tiny/vocab.txt [--count_threshold 0]

Ids: 0 is the CTC blank, then space and apostrophe (when present), then the other characters sorted.
"""

import sys

from absl import app, flags

from deepspeech2.data.manifest import read_manifests
from deepspeech2.vocab import Vocabulary

flags.DEFINE_list("manifest_paths", None, "Comma-separated manifests whose transcripts define the vocabulary.")
flags.DEFINE_string("out", None, "Vocabulary file to write (one token per line, id order).")
flags.DEFINE_integer("count_threshold", 0, "Drop characters seen this many times or fewer.")
flags.mark_flags_as_required(["manifest_paths", "out"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    try:
        vocab = Vocabulary.from_texts((u.text for u in read_manifests(FLAGS.manifest_paths)),
                                      FLAGS.count_threshold)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-build-vocab: error: {e}")
    vocab.save(FLAGS.out)
    print(f"{FLAGS.out}: {vocab.size} ids (blank=0): {''.join(vocab.chars)!r}")


def run():
    """Console-script entry point: absl's app.run with --help showing this module's docstring and flags."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_x.py
        from _app import run as run_app
    run_app(main)


if __name__ == "__main__":
    run()
