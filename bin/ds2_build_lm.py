"""Build a KenLM n-gram language model for the beam search decoder.

    ds2-build-lm --text_paths data/tiny/lm_text.txt --out data/tiny/lm/tiny3 --order 3
    ds2-build-lm --text_paths data/zh/tiny/lm_text.txt --out data/zh/tiny/lm/char5 --order 5 --token char
    ds2-build-lm --text_paths data/zh/tiny/lm_text.txt,data/zh/tiny/poetry.txt --text_weights 10,1 \
        --out data/zh/tiny/lm/char3 --order 3 --token char

Writes <out>.arpa, <out>.bin (KenLM trie), <out>.unigrams.txt (the LM's words, which the decoder loads
next to a binary LM) and <out>.json (this config and the corpus counts). Each line is normalized like the
transcripts: English to [a-z' ] with numbers spelled out (lines that can't be read confidently are dropped
and counted); Mandarin (--token char, or --language zh) to characters, one LM token each: a character LM,
which the beam search scores character by character (its beta is then a per-character bonus). The files are
built in a temporary folder and replace the LM's only once all are done: an interrupted build leaves the previous
LM whole. The PaddlePaddle DS2 English LM is --order 5 --prune 0,1,1,1,1 --top_k 400000 --quantize_bits 8
--pointer_bits 22. Needs KenLM's lmplz and build_binary: `make kenlm`.
"""

import sys

from absl import flags

from deepspeech2.decode.lm import LMConfig, build_lm

flags.DEFINE_list("text_paths", None, "Comma-separated text files, one sentence per line.")
flags.DEFINE_list("text_weights", [], "How many times each text file's lines count, one int per file (e.g. "
                  "10,1: a small in-domain text weighed against a large one). Default: once each.")
flags.DEFINE_string("out", None, "Output prefix: writes <out>.arpa, <out>.bin, <out>.unigrams.txt, <out>.json.")
flags.DEFINE_enum("language", None, ["en", "zh"], "en: word LM; zh: character LM. Default: zh with --token "
                  "char, else en.")
flags.DEFINE_enum("token", None, ["word", "char"], "What one LM token is: word (English) or char (Mandarin, "
                  "characters space-separated). Default: by --language.")
flags.DEFINE_integer("order", 5, "N-gram order (2-6).")
flags.DEFINE_list("prune", [], "lmplz --prune count thresholds per order, e.g. 0,1,1 (empty: no pruning).")
flags.DEFINE_integer("top_k", 0, "Keep the K most frequent words; others become UNKNOWNWORD. 0 keeps all.")
flags.DEFINE_boolean("binary", True, "Also build the KenLM binary (trie) <out>.bin.")
flags.DEFINE_integer("quantize_bits", 0, "build_binary -q/-b bits (e.g. 8); 0: no quantization.")
flags.DEFINE_integer("pointer_bits", 0, "build_binary -a pointer compression bits (e.g. 22); 0: default.")
flags.DEFINE_boolean("keep_arpa", True, "Keep <out>.arpa next to the binary.")
flags.DEFINE_string("memory", "20%", "lmplz -S sorting memory (e.g. 20%, 2G).")
flags.DEFINE_boolean("normalize", True, "Normalize each line; --nonormalize for text already normalized.")
flags.DEFINE_string("kenlm_bin_dir", None, "Where lmplz and build_binary are; default: next to this python, then "
                    "the PATH.")
flags.mark_flags_as_required(["text_paths", "out"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    try:
        language = FLAGS.language or ("zh" if FLAGS.token == "char" else "en")
        config = LMConfig(text_paths=tuple(FLAGS.text_paths), out=FLAGS.out, language=language,
                          text_weights=tuple(_ints(FLAGS.text_weights, "text_weights")),
                          token=FLAGS.token or "", order=FLAGS.order, prune=tuple(_ints(FLAGS.prune, "prune")),
                          top_k=FLAGS.top_k, binary=FLAGS.binary, quantize_bits=FLAGS.quantize_bits,
                          pointer_bits=FLAGS.pointer_bits, keep_arpa=FLAGS.keep_arpa, memory=FLAGS.memory,
                          normalize=FLAGS.normalize, kenlm_bin_dir=FLAGS.kenlm_bin_dir)
        result = build_lm(config)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        sys.exit(f"ds2-build-lm: error: {e}")
    print(f"{result.model_path}: {config.order}-gram LM, n-grams {result.ngrams}, {result.vocabulary_size} words "
          f"in {result.unigrams_path}; {result.lines_read - result.lines_dropped} of {result.lines_read} lines "
          f"used ({result.lines_dropped} could not be normalized), {result.tokens} tokens")


def _ints(values, name):
    try:
        return [int(v) for v in values]
    except ValueError:
        raise ValueError(f"`{name}` must be comma-separated integers, got {','.join(values)!r}") from None


def run():
    """Console-script entry point: absl's app.run with --help showing this module's docstring and flags."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_x.py
        from _app import run as run_app
    run_app(main)


if __name__ == "__main__":
    run()
