"""Classical Chinese LM text: the chinese-poetry collection, less every document near a held-out sentence.

fortunes-zh, the tiny Mandarin corpus' text, is half classical: Tang and Song poems, Song ci, the Analects, the
Book of Songs. Its LM text is 17 k lines (200 k characters), too little for a character 3-gram to choose among
the homophones espeak-ng's Mandarin leaves to it (examples/tiny_zh/RESULTS.md#poetry). The chinese-poetry
collection (npm package `chinese-poetry` 2.0.1, MIT: about 55,000 Tang and 250,000 Song poems, 21,000 Song ci,
Yuan qu, the Analects, the Book of Songs, the Chu ci; 19 M characters) is that domain a hundred times over:

    tarball (the npm registry, SHA-256 checked, cached) -> its JSON documents (poems, chapters)
    -> Simplified characters (OpenCC t2s; the Tang and Song poems are in Traditional ones)
    -> every document near a held-out sentence dropped -> normalized sentences, one a line (`zh_sentences`)

Honest by construction, as LibriSpeech's LM text leaves out the books its dev and test sentences come from: a
document goes whole when it holds a held-out (dev or test) sentence or shares any run of `ngram` characters
with one (7: a line of regulated verse), so neither the sentence nor the poem it was taken from reaches the LM.
Exact duplicate documents (the collection repeats some) are kept once; `yudingquantangshi`, a second edition
of the complete Tang poems, and the metadata folders (rankings, tone patterns, author notes, errata) are left
out. A JSON file that doesn't parse is skipped, counted and logged.

    ds2-prepare poetry --out data/zh/tiny/poetry.txt --held_out data/zh/tiny/dev.jsonl,data/zh/tiny/test.jsonl
    ds2-build-lm --text_paths data/zh/tiny/lm_text.txt,data/zh/tiny/poetry.txt --text_weights 10,1 ...
"""

from __future__ import annotations

import json
import logging
import os
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from deepspeech2.data.manifest import read_manifest
from deepspeech2.fileio import atomic_write, write_json
from deepspeech2.prepare.download import Checksum, fetch
from deepspeech2.progress import progress_bar
from deepspeech2_synthetic.sentences import zh_sentences

log = logging.getLogger(__name__)

POETRY_URL = "https://registry.npmjs.org/chinese-poetry/-/chinese-poetry-2.0.1.tgz"
POETRY_SHA256 = "25b549e46919c3a0569db6b68ddc96956b04a484ea4518ad2bbd4f137e307e86"
TEXT_KEYS = ("paragraphs", "content", "para")  # where a document keeps its text (the rest: titles, notes)
# Path parts left out: a second edition of the Tang poems, rankings, tone patterns, errata, author notes.
SKIP_PARTS = ("yudingquantangshi", "rank", "strains", "error")
_NOT_HAN = re.compile(r"[^\u3400-\u9fff\U00020000-\U0002ffff]")
_HASH_BASE = np.uint64(0x100000001B3)


@dataclass(frozen=True)
class PoetryTextConfig:
    out: str  # the text file to write (one sentence a line); a report goes to <out>.json
    held_out: tuple[str, ...] = ()  # manifests whose sentences must not reach the LM (dev, test)
    tarball: str = ""  # the chinese-poetry npm tarball; "": downloaded into `cache_dir` (and reused)
    cache_dir: str = "data/downloads"
    ngram: int = 7  # a document sharing a run of this many characters with a held-out sentence is dropped
    url: str = POETRY_URL
    sha256: str = POETRY_SHA256  # of the tarball ("" skips the check, for a local copy of another version)
    progress: bool = True

    def __post_init__(self):
        object.__setattr__(self, "held_out", tuple(str(p) for p in self.held_out))
        if not self.out:
            raise ValueError("`out` is empty; give the text file to write, e.g. data/zh/tiny/poetry.txt")
        if isinstance(self.ngram, bool) or not isinstance(self.ngram, int) or self.ngram < 2:
            raise ValueError(f"`ngram` must be an int >= 2, got {self.ngram!r}")


@dataclass
class PoetryTextReport:
    out: str
    tarball: str
    files: int = 0  # JSON files read
    malformed: list[str] = field(default_factory=list)  # JSON files that did not parse
    documents: int = 0  # distinct documents with text
    duplicates: int = 0  # documents identical to an earlier one
    held_out_sentences: int = 0
    near_held_out: int = 0  # documents dropped for a held-out sentence or a shared n-gram
    sentences: int = 0  # lines written
    characters: int = 0


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def documents(data) -> list[str]:
    """The texts in one chinese-poetry JSON value: a document (a dict with `paragraphs`, `content` or `para`)
    or a list of them; each document's text strings joined into one. Other values (author lists, tables)
    give none."""
    items = data if isinstance(data, list) else [data]
    out = []
    for item in items:
        if isinstance(item, dict) and any(k in item for k in TEXT_KEYS):
            text = "".join(s for k in TEXT_KEYS if k in item for s in _strings(item[k]))
            if text.strip():
                out.append(text)
    return out


def read_tarball(tarball: str | os.PathLike, report: PoetryTextReport | None = None,
                 progress: bool = False) -> Iterator[str]:
    """Every document of the chinese-poetry tarball (its `dist/**.json`, less SKIP_PARTS and `authors.*`),
    as written (Traditional or Simplified)."""
    with tarfile.open(tarball, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".json") and "/dist/" in m.name
                   and not any(p in SKIP_PARTS for p in Path(m.name).parts)
                   and not Path(m.name).name.startswith("author")]
        if not members:
            raise ValueError(f"{tarball}: no dist/**/*.json documents; is it the chinese-poetry npm tarball?")
        for member in progress_bar(members, desc="chinese-poetry", unit="file", show=progress):
            try:
                data = json.load(tar.extractfile(member))
            except (ValueError, UnicodeDecodeError) as e:
                log.warning("%s: %s: not JSON (%s); skipped", tarball, member.name, e)
                if report is not None:
                    report.malformed.append(member.name)
                continue
            if report is not None:
                report.files += 1
            yield from documents(data)


def near_held_out(docs: Sequence[str], held_out: Iterable[str], ngram: int = 7) -> set[int]:
    """The indices of `docs` that contain a held-out sentence shorter than `ngram` characters or share a run of
    `ngram` characters with a longer one. Only Han characters count on both sides (punctuation, spaces and
    Latin are ignored), so "床前明月光，疑是地上霜" holds "明月光疑是地上".

    A rolling hash over all documents at once finds the candidates (numpy, a few seconds for 20 M characters);
    each is then checked against the text, so a hash collision never drops a document.
    """
    needles: dict[int, set[str]] = {}
    for sentence in held_out:
        s = _NOT_HAN.sub("", sentence)
        if not s:
            continue
        if len(s) <= ngram:
            needles.setdefault(len(s), set()).add(s)
        else:
            needles.setdefault(ngram, set()).update(s[i:i + ngram] for i in range(len(s) - ngram + 1))
    flats = [_NOT_HAN.sub("", d) for d in docs]
    joined = "\n".join(flats)  # "\n" is in no needle: a match never spans two documents
    if not needles or not joined:
        return set()
    starts = np.cumsum([0] + [len(f) + 1 for f in flats[:-1]])
    codes = _codes(joined)
    hits = set()
    for length, grams in needles.items():
        if length > len(codes):
            continue
        wanted = np.array([_hash(_codes(g), length)[0] for g in grams], dtype=np.uint64)
        for pos in np.flatnonzero(np.isin(_hash(codes, length), wanted)):
            if joined[pos:pos + length] in grams:
                hits.add(int(np.searchsorted(starts, pos, side="right") - 1))
    return hits


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)


def _hash(codes: np.ndarray, length: int) -> np.ndarray:
    """A polynomial hash (mod 2**64) of every window of `length` codes."""
    n = len(codes) - length + 1
    h = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(length):
            h = h * _HASH_BASE + codes[k:k + n]
    return h


def prepare_poetry(config: PoetryTextConfig) -> PoetryTextReport:
    """Writes `config.out` (one normalized sentence a line) and `<out>.json` (the report); see the module
    docstring.

    Raises:
        ValueError: a held-out manifest is malformed, or the tarball has no documents.
        FileNotFoundError: a held-out manifest or the given tarball is missing.
        RuntimeError: the download failed, or OpenCC (PyPI `opencc`) is not installed.
    """
    try:
        import opencc
    except ImportError as e:
        raise RuntimeError("the Traditional->Simplified conversion needs OpenCC: pip install opencc") from e
    held = [u.text for path in config.held_out for u in read_manifest(path)]
    if config.tarball:
        tarball = Path(config.tarball)
        if not tarball.is_file():
            raise FileNotFoundError(f"`tarball` {tarball} does not exist")
    else:
        tarball = fetch(config.url, Path(config.cache_dir) / config.url.rsplit("/", 1)[-1],
                        Checksum(sha256=config.sha256), config.progress,
                        by_hand="pass it with --tarball (`tarball` in PoetryTextConfig)")
    report = PoetryTextReport(out=config.out, tarball=str(tarball), held_out_sentences=len(set(held)))
    converter = opencc.OpenCC("t2s")
    seen, docs = set(), []
    for doc in read_tarball(tarball, report, config.progress):
        doc = converter.convert(doc)
        if doc in seen:
            report.duplicates += 1
            continue
        seen.add(doc)
        docs.append(doc)
    report.documents = len(docs)
    drop = near_held_out(docs, held, config.ngram)
    report.near_held_out = len(drop)
    with atomic_write(config.out) as f:
        for i, doc in enumerate(docs):
            if i in drop:
                continue
            for sentence in zh_sentences(doc):
                f.write(sentence + "\n")
                report.sentences += 1
                report.characters += len(sentence)
    write_json(f"{config.out}.json", vars(report) | {"config": vars(config)})
    log.info("%s: %d sentences, %d characters from %d documents (%d near a held-out sentence dropped, %d "
             "duplicates, %d malformed files)", config.out, report.sentences, report.characters, report.documents,
             report.near_held_out, report.duplicates, len(report.malformed))
    return report

