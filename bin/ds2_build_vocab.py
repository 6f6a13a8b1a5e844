"""Build the character vocabulary from manifests.

    ds2-build-vocab --manifest_paths data/tiny/train.jsonl --out data/tiny/vocab.txt [--count_threshold 0]
    ds2-build-vocab --manifest_paths data/aishell/train.jsonl --out data/aishell/vocab.txt   # Mandarin: <unk> too

Ids: 0 is the CTC blank, then <unk> (Mandarin), space and apostrophe (when present), then the other
characters sorted. A vocabulary without a space (Mandarin) gets an <unk> id, as in PaddleSpeech: characters
it lacks (unseen in training, or seen --count_threshold times or fewer) are encoded as <unk> instead of
making their utterance unusable; --unk / --nounk force it either way.
Transcripts should be normalized first (English `[a-z' ]`, Mandarin CJK only): it warns, with examples,
when they aren't; `ds2-prepare normalize MANIFEST --language en --out OUT` normalizes a manifest. No
transcripts (an empty manifest) is an error.
"""

import collections
import sys

from absl import flags

from deepspeech2.data.manifest import read_manifests
from deepspeech2.vocab import Vocabulary, normalization_warning

flags.DEFINE_list("manifest_paths", None, "Comma-separated manifests whose transcripts define the vocabulary.")
flags.DEFINE_string("out", None, "Vocabulary file to write (one token per line, id order).")
flags.DEFINE_integer("count_threshold", 0, "Drop characters seen this many times or fewer (to <unk>, if any).")
flags.DEFINE_boolean("unk", None, "Add an <unk> id for characters outside the vocabulary; default: only "
                     "for a vocabulary without a space (Mandarin).")
flags.mark_flags_as_required(["manifest_paths", "out"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    try:
        utts = read_manifests(FLAGS.manifest_paths)
        if not utts:
            raise ValueError(f"{FLAGS.manifest_paths} hold no utterances; nothing to build a vocabulary from")
        vocab = Vocabulary.from_texts((u.text for u in utts), FLAGS.count_threshold, FLAGS.unk)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-build-vocab: error: {e}")
    warning = normalization_warning([u.text for u in utts], [u.language for u in utts])
    if warning:
        print(f"ds2-build-vocab: warning: {warning}", file=sys.stderr)
    vocab.save(FLAGS.out)
    chars = "".join(vocab.chars) if vocab.size <= 100 else f"{''.join(vocab.chars[:60])}... ({vocab.size - 61} more)"
    print(f"{FLAGS.out}: {vocab.size} ids (blank=0): {chars!r}")
    dropped = sum((vocab.unknown(u.text) for u in utts), start=collections.Counter())
    if dropped:
        fate = "encoded as <unk>" if vocab.unk_id is not None else "unusable without <unk>"
        print(f"{sum(dropped.values())} training characters ({len(dropped)} distinct, each seen at most "
              f"--count_threshold={FLAGS.count_threshold} times) are {fate}")


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
