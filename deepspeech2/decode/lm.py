"""Building a KenLM n-gram language model for the beam search, the way the DS2 recipes do.

    text files -> normalized corpus -> lmplz (ARPA) -> build_binary (trie) -> unigram list

- English (a word LM): each line goes through `normalize_english` (`[a-z' ]`, numbers spelled out); a line
  that can't be normalized confidently is dropped and counted. With `top_k`, only the K most frequent words
  are kept and every other word becomes `UNKNOWNWORD`, as the PaddlePaddle DS2 README prepares its
  Common Crawl LM (top 400,000 words). The placeholder is upper case, so the decoder (lower case
  `[a-z' ]`) can never spell it, and it is left out of the unigram list.
- Mandarin (a character LM, DS2 §6.2 and the PaddlePaddle README; `token="char"`, `ds2-build-lm --token
  char`): `normalize_mandarin`, then one space between characters, so every character is a token to lmplz
  and, through the unigram list, a "word" to the decoder (see `deepspeech2.decode.beam`), whose β is then a
  per-character bonus.

An existing ARPA model (`arpa`: LibriSpeech's official 3- and 4-grams from openslr resource 11) takes the place of
the text and lmplz: its words are lower-cased (`lowercase`; those models spell words in capitals, the decoder in
lower case), then it gets the same unigram list and binary. Text files and ARPA models may be gzipped (`.gz`).

lmplz runs with `--discount_fallback`, which small corpora need (Kneser-Ney's discounts can't be estimated
from a few thousand sentences); on a large corpus it changes nothing. The tools are the `lmplz` and
`build_binary` that `make kenlm` puts next to the venv's python. Every output is built in a temporary folder
and moved in only when all of them are done, the report last: an interrupted build leaves the previous LM as it
was, and the report records each file's size (and the word list's hash), so that the decoder refuses a binary
beside another build's word list (`check_lm_pair`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gzip
import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from deepspeech2.fileio import durable_replace, temp_prefix, write_json
from deepspeech2.progress import progress_bar
from deepspeech2.text import normalize

logger = logging.getLogger(__name__)

LANGUAGES = ("en", "zh")
TOKENS = ("word", "char")  # what one LM token is: a word (English) or a character (Mandarin)
MAX_ORDER = 6  # the KENLM_MAX_ORDER `make kenlm` compiles lmplz and build_binary with
UNKNOWN_WORD = "UNKNOWNWORD"  # the PaddlePaddle DS2 README's placeholder for words outside the top K
ARPA_SPECIAL = ("<s>", "</s>", "<unk>")
SUFFIXES = (".arpa", ".bin", ".unigrams.txt", ".json")
PROGRESS_LINES = 100_000  # lines read between progress-bar refreshes
ARPA_PREAMBLE_LINES = 100  # lines an ARPA model may hold before its \data\ line
FILES = "files"  # the report's record of the files one build wrote: name -> {"bytes", and "sha256" for the word list}


@dataclass(frozen=True)
class LMConfig:
    """What `build_lm` builds. Saved next to the model as `<out>.json`."""

    text_paths: tuple[str, ...]  # plain-text files (or .gz), one sentence per line; () with `arpa`
    out: str  # output prefix: writes <out>.arpa, <out>.bin, <out>.unigrams.txt and <out>.json
    # How many times each file's lines count (one int per file; () = once each): a small in-domain text
    # weighed against a large one, as repeating it would (`make demo LANG=zh`: fortunes-zh x10 + poetry)
    text_weights: tuple[int, ...] = ()
    language: str = "en"  # "en": word LM (normalize_english); "zh": character LM (normalize_mandarin)
    token: str = ""  # "word" or "char" (one LM token per character); "": by `language` (zh: char, en: word)
    order: int = 5  # n-gram order; 5 for the PaddlePaddle DS2 LMs, 3 for the tiny corpus
    prune: tuple[int, ...] = ()  # lmplz --prune count thresholds by order; PaddlePaddle's English LM: (0, 1, 1, 1, 1)
    top_k: int = 0  # keep the K most frequent words, the rest become UNKNOWNWORD (PaddlePaddle: 400000); 0 keeps all
    binary: bool = True  # also write the KenLM binary <out>.bin (trie data structure)
    quantize_bits: int = 0  # build_binary -q/-b: bits for probabilities and backoffs (PaddlePaddle: 8); 0: none
    pointer_bits: int = 0  # build_binary -a: pointer compression (PaddlePaddle: 22); 0: build_binary's default
    keep_arpa: bool = True  # keep <out>.arpa after building the binary
    memory: str = "20%"  # lmplz -S sorting memory (its default, 80% of RAM, crowds a shared machine)
    normalize: bool = True  # normalize each line; False when the text is already in the vocabulary's form
    # lower-case each line (or the ARPA's words) as it is read: with `normalize` off, text normalized in capitals
    # (librispeech-lm-norm.txt: 40 M lines, about 100x faster than normalizing them again)
    lowercase: bool = False
    arpa: str = ""  # an existing ARPA model (.arpa or .arpa.gz) to use instead of `text_paths` and lmplz
    kenlm_bin_dir: str | None = None  # where lmplz/build_binary are; None: next to this python, then the PATH

    def __post_init__(self):
        object.__setattr__(self, "text_paths", tuple(str(p) for p in self.text_paths))
        object.__setattr__(self, "prune", tuple(self.prune))
        object.__setattr__(self, "text_weights", tuple(self.text_weights))
        object.__setattr__(self, "out", str(self.out))
        object.__setattr__(self, "arpa", str(self.arpa))
        if bool(self.text_paths) == bool(self.arpa):
            raise ValueError("give text files (`text_paths`) to build an LM from, or an ARPA model (`arpa`), not "
                             f"both; got {list(self.text_paths)} and {self.arpa!r}")
        if not self.out or self.out.endswith(os.sep):
            raise ValueError(f"`out` must be a file prefix such as data/tiny/lm/tiny3, got {self.out!r}")
        if self.text_weights and (len(self.text_weights) != len(self.text_paths) or any(
                isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in self.text_weights)):
            raise ValueError(f"`text_weights` must be one int >= 1 per text file ({len(self.text_paths)}: "
                             f"{list(self.text_paths)}), got {list(self.text_weights)}")
        if self.language not in LANGUAGES:
            raise ValueError(f"`language` must be one of {LANGUAGES}, got {self.language!r}")
        if not self.token:
            object.__setattr__(self, "token", "char" if self.language == "zh" else "word")
        if self.token not in TOKENS:
            raise ValueError(f"`token` must be one of {TOKENS}, got {self.token!r}")
        if (self.token == "char") != (self.language == "zh"):
            # The decoder pairs a word LM with a spaced vocabulary and a character LM with an unspaced one.
            raise ValueError(f"`token` {self.token!r} does not fit `language` {self.language!r}: English takes a "
                             "word LM (token 'word'), Mandarin a character LM (token 'char')")
        if isinstance(self.order, bool) or not isinstance(self.order, int) or not 2 <= self.order <= MAX_ORDER:
            raise ValueError(f"`order` must be an int in [2, {MAX_ORDER}] (the order `make kenlm` compiles "
                             f"for), got {self.order!r}")
        if self.prune:
            if len(self.prune) > self.order or any(isinstance(p, bool) or not isinstance(p, int) or p < 0
                                                   for p in self.prune):
                raise ValueError(f"`prune` must be at most `order` ({self.order}) non-negative ints, "
                                 f"got {self.prune!r}")
            if self.prune[0] != 0:
                raise ValueError(f"`prune` must start with 0: lmplz can't prune unigrams, got {self.prune!r}")
            if list(self.prune) != sorted(self.prune):
                raise ValueError(f"`prune` thresholds must not decrease with the order (lmplz), got {self.prune!r}")
        for name in ("top_k", "quantize_bits", "pointer_bits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"`{name}` must be an int >= 0, got {value!r}")
        if self.quantize_bits > 25:
            raise ValueError(f"`quantize_bits` must be at most 25 (build_binary), got {self.quantize_bits!r}")
        if (self.quantize_bits or self.pointer_bits) and not self.binary:
            raise ValueError("`quantize_bits` and `pointer_bits` apply to the binary; set `binary`")
        if not self.binary and not self.keep_arpa:
            raise ValueError("with `binary` off the ARPA file is the model: `keep_arpa` must stay on")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for name in ("text_paths", "prune", "text_weights"):
            d[name] = list(getattr(self, name))
        return d

    @property
    def prefix(self) -> Path:
        """`out` without a model suffix (`lm.bin` and `lm` both give `lm`)."""
        out = Path(self.out)
        return out.with_suffix("") if out.suffix in (".arpa", ".bin", ".klm", ".binary") else out


@dataclass(frozen=True)
class LMResult:
    """What `build_lm` wrote and counted."""

    model_path: Path  # what to give the decoder: <out>.bin, or <out>.arpa without `binary`
    arpa_path: Path | None  # None when `keep_arpa` is off
    unigrams_path: Path  # the LM's words, most frequent first (decoding a binary LM needs it)
    report_path: Path  # <out>.json: the config and these counts
    lines_read: int  # non-empty input lines
    lines_dropped: int  # lines the normalizer couldn't read confidently (see deepspeech2.text)
    tokens: int  # words (characters for "zh") in the corpus
    vocabulary_size: int  # distinct words in the unigram list
    ngrams: dict[int, int]  # order -> n-gram count, from the ARPA header


def find_kenlm_tool(name: str, bin_dir: str | os.PathLike | None = None) -> Path:
    """The path of KenLM's `name` ("lmplz" or "build_binary").

    Looks in `bin_dir` when given, else next to the running python (the venv's bin/, where `make kenlm`
    installs them), then on the PATH.

    Raises:
        FileNotFoundError: not found; the message says to run `make kenlm`.
    """
    dirs = [Path(bin_dir)] if bin_dir else [Path(sys.executable).parent]
    for d in dirs:
        if (d / name).is_file() and os.access(d / name, os.X_OK):
            return d / name
    found = None if bin_dir else shutil.which(name)
    if found:
        return Path(found)
    where = f"`{bin_dir}`" if bin_dir else f"{dirs[0]} or on the PATH"
    raise FileNotFoundError(f"KenLM's `{name}` is not in {where}; build it with `make kenlm` (about 2 minutes on "
                            "2 cores; it installs lmplz and build_binary into .venv/bin)")


def build_lm(config: LMConfig) -> LMResult:
    """Text files -> a KenLM model, its unigram list and a report; see the module docstring.

    Args:
        config: what to build.

    Returns:
        The paths written and the corpus counts.

    Raises:
        FileNotFoundError: a text file, lmplz or build_binary is missing.
        ValueError: no line survives normalization (an empty corpus).
        RuntimeError: lmplz or build_binary failed (the message ends with its last output lines).
    """
    lmplz = None if config.arpa else find_kenlm_tool("lmplz", config.kenlm_bin_dir)
    build_binary = find_kenlm_tool("build_binary", config.kenlm_bin_dir) if config.binary else None
    for path in config.text_paths or (config.arpa,):
        if not Path(path).is_file():
            raise FileNotFoundError(f"`{'text_paths' if config.text_paths else 'arpa'}`: {path} does not exist")
    prefix = config.prefix
    prefix.parent.mkdir(parents=True, exist_ok=True)
    outputs = {suffix: prefix.with_name(prefix.name + suffix) for suffix in SUFFIXES}
    # Every file is built in a temporary folder beside the outputs (named as fileio's temps, so that one a killed
    # build leaves goes at the next write into the folder), and only a finished build replaces the LM's files: an
    # interrupted one leaves the previous LM whole, never its binary beside a new word list.
    with tempfile.TemporaryDirectory(prefix=temp_prefix(prefix), dir=prefix.parent) as tmp:
        tmp = Path(tmp)
        built = {suffix: tmp / ("lm" + suffix) for suffix in SUFFIXES}
        if config.arpa:
            _copy_arpa(Path(config.arpa), built[".arpa"], config.lowercase)
            counts, read, dropped = collections.Counter(), 0, 0
        else:
            corpus = tmp / "corpus.txt"
            counts, read, dropped = _write_corpus(config, corpus)
            if not counts:
                raise ValueError(f"the corpus is empty: {read} non-empty lines in {list(config.text_paths)}, "
                                 f"{dropped} of them could not be normalized, none left to train an LM on")
            if config.top_k and len(counts) > config.top_k:
                corpus = _limit_vocabulary(corpus, counts, config.top_k, tmp / "corpus.topk.txt")
            cmd = [str(lmplz), "-o", str(config.order), "--text", str(corpus), "--arpa", str(built[".arpa"]),
                   "--discount_fallback", "-S", config.memory, "-T", str(tmp)]
            if config.prune:
                cmd += ["--prune", *map(str, config.prune)]
            _run(cmd)
        words = arpa_unigrams(built[".arpa"])
        ngrams = _arpa_counts(built[".arpa"])
        # Most frequent first: easy to eyeball; pyctcdecode doesn't care about the order.
        words = sorted(words, key=lambda w: (-counts.get(w, 0), w))
        built[".unigrams.txt"].write_text("".join(w + "\n" for w in words), encoding="utf-8")
        if config.binary:
            cmd = [str(build_binary), "-S", config.memory]  # its trie sort, like lmplz's, in `memory`
            if config.quantize_bits:
                cmd += ["-q", str(config.quantize_bits), "-b", str(config.quantize_bits)]
            if config.pointer_bits:
                cmd += ["-a", str(config.pointer_bits)]
            _run(cmd + ["trie", str(built[".arpa"]), str(built[".bin"])])
        model = outputs[".bin"] if config.binary else outputs[".arpa"]
        kept = [suffix for suffix in (".arpa", ".bin", ".unigrams.txt")
                if built[suffix].is_file() and (suffix != ".arpa" or config.keep_arpa)]
        result = LMResult(model_path=model, arpa_path=outputs[".arpa"] if config.keep_arpa else None,
                          unigrams_path=outputs[".unigrams.txt"], report_path=outputs[".json"], lines_read=read,
                          lines_dropped=dropped, tokens=sum(counts.values()), vocabulary_size=len(words),
                          ngrams=ngrams)
        write_json(built[".json"], {
            "config": config.to_dict(), "model_path": str(model), "unigrams_path": str(result.unigrams_path),
            "lines_read": read, "lines_dropped": dropped, "tokens": result.tokens,
            "vocabulary_size": len(words), "ngrams": {str(k): v for k, v in ngrams.items()},
            FILES: {outputs[suffix].name: _file_record(built[suffix]) for suffix in kept}})
        # The report goes last: it names the files this build wrote (`check_lm_pair` compares them), so a crash
        # between these renames leaves files that the report, old or new, doesn't describe, and the decoder refuses
        # them instead of pairing one build's binary with another's word list.
        for suffix in kept + [".json"]:
            durable_replace(built[suffix], outputs[suffix])
        if not config.keep_arpa:
            outputs[".arpa"].unlink(missing_ok=True)  # an earlier build's: not this model's text
    logger.info("%s: %d-gram LM, %d words, ngrams %s (%d of %d lines dropped by the normalizer)", model,
                max(ngrams, default=config.order), len(words), ngrams, dropped, read)
    return result


def _file_record(path: Path) -> dict:
    """What `check_lm_pair` compares: the size, and for the word list (small) its hash too."""
    record = {"bytes": path.stat().st_size}
    if path.name.endswith(".unigrams.txt"):
        record["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return record


def check_lm_pair(lm_path: str | os.PathLike, unigrams_path: str | os.PathLike) -> None:
    """Check that an LM and the word list beside it come from the same ds2-build-lm run, as its report
    (`<prefix>.json`, the LM's `FILES`) records them. An LM without such a report (built elsewhere) passes.

    Raises:
        ValueError: the files differ from what the report records.
    """
    lm_path, unigrams_path = Path(lm_path), Path(unigrams_path)
    report = lm_path.with_suffix(".json")
    try:
        recorded = json.loads(report.read_text(encoding="utf-8")).get(FILES)
    except (OSError, ValueError, AttributeError):
        return
    if not isinstance(recorded, dict):
        return
    for path in (lm_path, unigrams_path):
        want, have = recorded.get(path.name), _file_record(path)
        if want is not None and have != {k: want.get(k) for k in have}:
            raise ValueError(f"`{path}` is not the file `{report}` records for this LM (a ds2-build-lm interrupted "
                             f"while it replaced the LM's files, or a file copied in from another LM): its binary and "
                             f"word list would not match; build the LM again with ds2-build-lm --out "
                             f"{lm_path.with_suffix('')}")


def corpus_line(line: str, language: str, normalize_text: bool = True, token: str = "", lowercase: bool = False) -> str:
    """One line of LM text as lmplz should see it: normalized (or only lower-cased, with `lowercase`), characters
    space-separated for a character LM (`token` "char", the default for "zh").

    Returns "" for a line that can't be normalized confidently (or is empty).
    """
    if lowercase:
        line = line.lower()
    text = normalize(line, language) if normalize_text else " ".join(line.split())
    if (token or ("char" if language == "zh" else "word")) == "char":
        return " ".join(text.replace(" ", ""))
    return text


def _write_corpus(config: LMConfig, out: Path) -> tuple[collections.Counter, int, int]:
    counts = collections.Counter()
    read = dropped = 0
    with open(out, "w", encoding="utf-8") as f:
        for path, weight in zip(config.text_paths, config.text_weights or [1] * len(config.text_paths)):
            with _open_text(path, "read", f"`{path}`") as (lines, tick):
                for line in lines:
                    if not line.strip():
                        continue
                    read += 1
                    if read % PROGRESS_LINES == 0:
                        tick()
                    text = corpus_line(line, config.language, config.normalize, config.token, config.lowercase)
                    if not text:
                        dropped += 1
                        continue
                    tokens = text.split()
                    bad = [t for t in tokens if t in ARPA_SPECIAL]
                    if bad:  # lmplz refuses them in the corpus; only possible with `normalize` off
                        raise ValueError(f"`{path}` has KenLM's reserved token {bad[0]!r} in {line.strip()!r}")
                    counts.update(tokens * weight)
                    f.write((text + "\n") * weight)
    return counts, read, dropped


@contextlib.contextmanager
def _open_text(path: str | os.PathLike, verb: str, name: str):
    """A text file, or a gzipped one (`.gz`), read as UTF-8 (an odd byte never stops a build), with a progress bar
    over its bytes on disk: yields `(text stream, tick)`, `tick()` bringing the bar to what has been read.

    Raises:
        ValueError: a corrupt or cut .gz, the message starting with `name`.
    """
    raw = open(path, "rb")
    stream = gzip.open(raw, "rt", encoding="utf-8", errors="replace") if str(path).endswith(".gz") else \
        io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
    bar = progress_bar(total=os.path.getsize(path), unit="B", unit_scale=True, leave=False,
                       desc=f"{verb} {Path(path).name}")
    try:
        yield stream, lambda: bar.update(raw.tell() - bar.n)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise ValueError(f"{name} could not be read: {e}; download it again") from None
    finally:
        bar.close()
        stream.close()
        raw.close()


def _copy_arpa(src: Path, dst: Path, lowercase: bool) -> None:
    """An ARPA model (maybe gzipped) copied to `dst` as plain text, its words lower-cased with `lowercase` (the
    header, section names and numbers read the same in lower case; the markers <s>, </s>, <unk> are lower case)."""
    with _open_text(src, "convert", f"`arpa`: {src}") as (f, tick), open(dst, "w", encoding="utf-8") as out:
        for _ in range(ARPA_PREAMBLE_LINES):  # blank lines or notes may come before \data\ (SRILM's do)
            line = f.readline()
            out.write(line)
            if line.strip() == "\\data\\" or not line:
                break
        if line.strip() != "\\data\\":
            raise ValueError(f"`arpa`: {src} is not an ARPA model: no \\data\\ line at its start")
        while chunk := f.read(1 << 20):
            out.write(chunk.lower() if lowercase else chunk)
            tick()


def _limit_vocabulary(corpus: Path, counts: collections.Counter, top_k: int, out: Path) -> Path:
    keep = {w for w, _ in counts.most_common(top_k)}
    with open(corpus, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for line in src:
            dst.write(" ".join(w if w in keep else UNKNOWN_WORD for w in line.split()) + "\n")
    for w in list(counts):
        if w not in keep:
            del counts[w]
    return out


def _run(cmd: list[str]) -> None:
    logger.info("running %s", " ".join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-5:])
        raise RuntimeError(f"`{Path(cmd[0]).name}` failed (exit {proc.returncode}): {tail}")


def arpa_unigrams(arpa: Path) -> list[str]:
    """The words of an ARPA file's unigram section, in file order (sentence markers and <unk> left out)."""
    words = []
    with open(arpa, encoding="utf-8") as f:
        in_unigrams = False
        for line in f:
            line = line.strip()
            if line == "\\1-grams:":
                in_unigrams = True
            elif in_unigrams and (line.startswith("\\") or not line):
                break
            elif in_unigrams:
                word = line.split("\t")[1]
                if word not in ARPA_SPECIAL and word != UNKNOWN_WORD:
                    words.append(word)
    return words


def _arpa_counts(arpa: Path) -> dict[int, int]:
    counts = {}
    with open(arpa, encoding="utf-8") as f:
        for line in f:
            if line.startswith("ngram "):
                order, n = line[len("ngram "):].strip().split("=")
                counts[int(order)] = int(n)
            elif line.startswith("\\1-grams:"):
                break
    return counts
