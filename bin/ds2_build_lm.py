"""Build a KenLM n-gram language model for the beam search decoder.

    ds2-build-lm --text_paths data/tiny/lm_text.txt --out data/tiny/lm/tiny3 --order 3
    ds2-build-lm --text_paths data/zh/tiny/lm_text.txt --out data/zh/tiny/lm/char5 --order 5 --token char
    ds2-build-lm --text_paths data/zh/tiny/lm_text.txt,data/zh/tiny/poetry.txt --text_weights 10,1 \
        --out data/zh/tiny/lm/char3 --order 3 --token char
    ds2-build-lm --text_paths librispeech-lm-norm.txt.gz --nonormalize --lowercase --out data/librispeech/lm/ls4 \
        --order 4 --prune 0,0,1,1
    ds2-build-lm --arpa 4-gram.arpa.gz --lowercase --out data/librispeech/lm/official-4gram --nokeep_arpa

Writes <out>.arpa, <out>.bin (KenLM trie), <out>.unigrams.txt (the LM's words, which the decoder loads
next to a binary LM) and <out>.json (this config and the corpus counts). Each line is normalized like the
transcripts: English to [a-z' ] with numbers spelled out (lines that can't be read confidently are dropped
and counted); Mandarin (--token char, or --language zh) to characters, one LM token each: a character LM,
which the beam search scores character by character (its beta is then a per-character bonus). The files are
built in a temporary folder and replace the LM's only once all are done: an interrupted build leaves the previous
LM whole. The PaddlePaddle DS2 English LM is --order 5 --prune 0,1,1,1,1 --top_k 400000 --quantize_bits 8
--pointer_bits 22. --arpa takes an existing ARPA model instead of text (LibriSpeech's official ones: --lowercase,
as they spell words in capitals) and gives it the same unigram list and binary. Text and ARPA files may be
gzipped. Needs KenLM's lmplz and build_binary: `make kenlm`.
"""

import sys

from absl import flags

from deepspeech2.decode.lm import LMConfig, build_lm

try:
    from ._flags import default, from_flags
except ImportError:  # python bin/ds2_build_lm.py
    from _flags import default, from_flags

L = LMConfig

flags.DEFINE_list("text_paths", [], "Comma-separated text files (or .gz), one sentence per line.")
flags.DEFINE_string("arpa", default(L, "arpa"), "An ARPA model (.arpa or .arpa.gz) to convert instead of building one "
                    "from text.")
flags.DEFINE_list("text_weights", [], "How many times each text file's lines count, one int per file (e.g. "
                  "10,1: a small in-domain text weighed against a large one). Default: once each.")
flags.DEFINE_string("out", None, "Output prefix: writes <out>.arpa, <out>.bin, <out>.unigrams.txt, <out>.json.")
flags.DEFINE_enum("language", None, ["en", "zh"], "en: word LM; zh: character LM. Default: zh with --token "
                  "char, else en.")
flags.DEFINE_enum("token", None, ["word", "char"], "What one LM token is: word (English) or char (Mandarin, "
                  "characters space-separated). Default: by --language.")
flags.DEFINE_integer("order", default(L, "order"), "N-gram order (2-6).")
flags.DEFINE_list("prune", [], "lmplz --prune count thresholds per order, e.g. 0,1,1 (empty: no pruning).")
flags.DEFINE_integer("top_k", default(L, "top_k"), "Keep the K most frequent words; others become UNKNOWNWORD. 0 "
                     "keeps all.")
flags.DEFINE_boolean("binary", default(L, "binary"), "Also build the KenLM binary (trie) <out>.bin.")
flags.DEFINE_integer("quantize_bits", default(L, "quantize_bits"), "build_binary -q/-b bits (e.g. 8); 0: no "
                     "quantization.")
flags.DEFINE_integer("pointer_bits", default(L, "pointer_bits"), "build_binary -a pointer compression bits (e.g. 22); "
                     "0: default.")
flags.DEFINE_boolean("keep_arpa", default(L, "keep_arpa"), "Keep <out>.arpa next to the binary.")
flags.DEFINE_string("memory", default(L, "memory"), "lmplz's and build_binary's -S sorting memory (e.g. 20%, 2G).")
flags.DEFINE_boolean("normalize", default(L, "normalize"), "Normalize each line; --nonormalize for text already "
                     "normalized.")
flags.DEFINE_boolean("lowercase", default(L, "lowercase"), "Lower-case each line (with --nonormalize: text normalized "
                     "in capitals, such as librispeech-lm-norm.txt), or the words of the --arpa model.")
flags.DEFINE_string("kenlm_bin_dir", default(L, "kenlm_bin_dir"), "Where lmplz and build_binary are; default: next to "
                    "this python, then the PATH.")
flags.mark_flags_as_required(["out"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    try:
        language = FLAGS.language or ("zh" if FLAGS.token == "char" else "en")
        # --text_paths, --order, --binary, ... by field name; these four need converting first.
        config = from_flags(LMConfig, language=language, token=FLAGS.token or "",
                            text_weights=tuple(_ints(FLAGS.text_weights, "text_weights")),
                            prune=tuple(_ints(FLAGS.prune, "prune")))
        result = build_lm(config)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        sys.exit(f"ds2-build-lm: error: {e}")
    source = f"from {config.arpa}" if config.arpa else (
        f"{result.lines_read - result.lines_dropped} of {result.lines_read} lines used ({result.lines_dropped} could "
        f"not be normalized), {result.tokens} tokens")
    print(f"{result.model_path}: {max(result.ngrams)}-gram LM, n-grams {result.ngrams}, {result.vocabulary_size} "
          f"words in {result.unigrams_path}; {source}")


def _ints(values, name):
    try:
        return [int(v) for v in values]
    except ValueError:
        raise ValueError(f"`{name}` must be comma-separated integers, got {','.join(values)!r}") from None


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
