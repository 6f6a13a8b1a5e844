"""Text for the tiny corpus and the LM: Debian's fortunes (English) and fortunes-zh (Mandarin) split into
sentences, cleaned of what a reader would not say as written, and normalized (deepspeech2/text.py); and the LM
lines less every dev or test sentence.

English: a fortune's paragraphs (attributions cut), split at sentence ends (not after "Mr." or an initial),
kept only with plain characters (no code, URLs, acronyms or tables), abbreviations written out as they are read.
Mandarin: a fortune's lines (titles, headings and authors left out), split at sentence ends and, when long, at
clauses; kept only in Simplified characters (GB2312) without Latin or code. `english_text` and `poetry` clean
their own sources with the same rules.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from deepspeech2.text import normalize_english, normalize_mandarin

FORTUNES_DIR = "/usr/share/games/fortunes"  # Debian packages `fortunes` and `fortunes-zh`
ZH_FORTUNE_FILES = ("chinese", "tang300", "song100")  # fortunes-zh (UTF-8, mostly Simplified)
# Pictures and code, not sentences; and fortune-anarchism's and fortunes-bofh-excuses' files (`tools/apt-deps.sh
# lmtext`, english_text.py's sources), which would change the tiny corpus' sentences wherever they are installed.
EN_FORTUNE_SKIP = ("ascii-art", "perl", "anarchism", "bofh-excuses") + ZH_FORTUNE_FILES
APT_HINT = "install it with `apt-get install espeak-ng flite fortunes fortunes-zh` (or `tools/apt-deps.sh base`)"
ZH_CLAUSE_SPLIT_CHARS = 20  # zh: a sentence longer than this is split into its clauses
LM_MAX_WORDS = 40  # lm_text also keeps sentences longer than `max_words` (but not whole paragraphs)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OVERSTRIKE = re.compile(r".\x08")  # nroff-style bold/underline: "_\bw" -> "w"
_BOX = re.compile(r"[\u2500-\u257f]")  # box-drawing characters (Debian reference card fortunes)

# English: characters a clean sentence may have. No ':' (dialogue labels, times), no brackets, slashes,
# '@', '_', '#', '=', '*', '<>': those mean code, URLs, e-mail, markup or editorial notes.
_EN_CLEAN = re.compile(r"^[A-Za-z0-9 ,;'\"!?.\-()$%&]+$")
_EN_SENTENCE_END = re.compile(r"[.!?]+[\"')]*(?=\s|$)")
_EN_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr vs etc prof gen col capt lt sgt mt inc ltd co rev hon gov sen rep ft ave".split())
# Abbreviations are written out as they are read (espeak-ng says "mister" for "mr", LibriSpeech writes
# MISTER); a sentence with any other abbreviation ("St." is saint or street) is dropped.
_EN_EXPANSIONS = {"mr": "mister", "mrs": "missus", "dr": "doctor", "vs": "versus", "etc": "et cetera",
                  "prof": "professor", "jr": "junior", "sr": "senior"}
_EN_ABBREVIATION = re.compile(r"\b([A-Za-z]+)\.(?=\s+\S)")
_EN_ACRONYM = re.compile(r"[A-Z]{2,}|\w\.\w")  # "NASA", "U.S.": spoken letter by letter, not as words
_EN_URLISH = re.compile(r"www|http|\.com|\.org", re.IGNORECASE)
_EN_ATTRIBUTION = re.compile(r"^\s*(--|-\s|~~|\u2014)")
_EN_MAX_SYMBOL_FRACTION = 0.1  # more punctuation than this is a table, a list or a joke in symbols

_ZH_CLAUSE = re.compile(r"[，、：,:]")


def read_fortunes(path: Path) -> Iterator[str]:
    """The fortunes of one fortunes file (separated by `%` lines), without terminal escapes and overstrikes."""
    text = path.read_text(encoding="utf-8", errors="replace")
    text = _OVERSTRIKE.sub("", _ANSI.sub("", text)).replace("\r", "")
    for fortune in re.split(r"^%\s*$", text, flags=re.MULTILINE):
        if fortune.strip():
            yield fortune


def en_paragraphs(fortune: str) -> Iterator[str]:
    """An English fortune's paragraphs, each on one line, without its attribution ("-- Mark Twain")."""
    for para in re.split(r"\n\s*\n", fortune):
        lines = []
        for line in para.split("\n"):
            if _EN_ATTRIBUTION.match(line):
                break  # "-- Mark Twain" and its continuation lines
            lines.append(line.strip())
        para = " ".join(lines).strip()
        if para:
            yield re.sub(r"\s+", " ", para)


def en_split(para: str) -> Iterator[str]:
    """An English paragraph's sentences, split at sentence ends but not after an abbreviation or an initial."""
    start = 0
    for m in _EN_SENTENCE_END.finditer(para):
        before = para[start:m.start()].rsplit(" ", 1)[-1].lstrip("\"'(")
        if m.group(0) == "." and (before.lower() in _EN_ABBREVIATIONS or re.fullmatch(r"[A-Z]", before)):
            continue  # "Mr. Smith", "J. R. R. Tolkien"
        yield para[start:m.end()].strip()
        start = m.end()
    if para[start:].strip():
        yield para[start:].strip()


def en_clean(sentence: str) -> str | None:
    """The normalized sentence, or None when it has oddities that a reader would not say as written."""
    s = sentence.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    if not _EN_CLEAN.match(s) or _EN_URLISH.search(s) or _EN_ACRONYM.search(s):
        return None
    first = re.search(r"[A-Za-z0-9]", s)
    if first is None or s[first.start()].islower() or re.match(r"\W*\d+[.)]", s):
        return None  # a fragment of a sentence split in the wrong place, or a list item ("8) Use ...")
    symbols = sum(1 for c in s if not (c.isalnum() or c.isspace()))
    if symbols > _EN_MAX_SYMBOL_FRACTION * len(s) + 2:
        return None
    for m in _EN_ABBREVIATION.finditer(s):
        if m.group(1).lower() in _EN_ABBREVIATIONS and m.group(1).lower() not in _EN_EXPANSIONS:
            return None
    s = _EN_ABBREVIATION.sub(lambda m: _EN_EXPANSIONS.get(m.group(1).lower(), m.group(0)), s)
    s = re.sub(r"\b(\w+)\.?$", lambda m: _EN_EXPANSIONS.get(m.group(1).lower(), m.group(0)), s)
    return normalize_english(s) or None


def _zh_lines(fortune: str) -> Iterator[str]:
    for para in re.split(r"\n\s*\n", fortune):
        kept = []
        for line in para.split("\n"):
            line = _BOX.sub("", line).strip()
            if not line or line.startswith(("--", "——", "题目")) or "作者" in line:
                continue  # an attribution, a title ("题目:《塞上》") or an author
            if re.fullmatch(r"[《〈][^，。！？；]*", line) or (len(line) <= 5 and not re.search(r"[，。！？；]", line)):
                continue  # a title ("《感遇・其一》") or a heading ("其一")
            kept.append(line)
        if kept:
            yield "".join(kept)  # Chinese wraps lines mid-sentence: join without a space


# Text of Han characters and Chinese punctuation only (the bulk of poetry) normalizes to its Han characters: the
# fast path `_zh_plain` skips normalize_mandarin's readings there, 5x faster on the 16 M characters of
# deepspeech2_synthetic.poetry (tests/test_tiny.py checks it against normalize_mandarin).
_ZH_PLAIN = re.compile(r"[\u4e00-\u9fff\s，。、！？；：“”‘’《》〈〉「」『』（）…—·]*")
_ZH_NOT_HAN = re.compile(r"[^\u4e00-\u9fff]+")


def _zh_plain(piece: str) -> str | None:
    """`normalize_mandarin(piece)` for Han characters and Chinese punctuation only; None for anything else."""
    return _ZH_NOT_HAN.sub("", piece) if _ZH_PLAIN.fullmatch(piece) else None


def _zh_normalize(piece: str) -> str:
    if (plain := _zh_plain(piece)) is not None:
        return plain
    # normalize_mandarin reads digits as numerals; serial numbers and huge values are not sentences.
    return "" if re.search(r"[0-9０-９]{9,}", piece) else normalize_mandarin(piece)


def _zh_clean(piece: str) -> str | None:
    if re.search(r"[A-Za-z\\/@_#=<>|{}\[\]*~^$%&]", piece):
        return None  # Latin (commands, names) or code: espeak-ng would read it as English
    text = _zh_normalize(piece)
    if not text:
        return None
    try:
        text.encode("gb2312")  # GB2312 has Simplified characters only (and no rare ones espeak-ng lacks)
    except UnicodeEncodeError:
        return None
    return text


def _zh_length(sentence: str) -> int:
    # The length as read, Latin letters kept: a sentence that can't be normalized as a whole (Latin, an
    # ambiguous number) is still split, so its good clauses survive and only the doubtful one is dropped.
    if (plain := _zh_plain(sentence)) is not None:
        return len(plain or sentence)
    return len(normalize_mandarin(sentence, keep_latin=True) or sentence)


def _zh_split(para: str, max_chars: int) -> Iterator[str]:
    for m in re.finditer(r"[^。！？；!?;…]+(?:[。！？；!?;…]+[”’」』）)]*)?", para):
        sentence = m.group(0)
        if _zh_length(sentence) > max_chars:
            yield from _ZH_CLAUSE.split(sentence)  # long sentences: their clauses
        else:
            yield sentence


def zh_sentences(paragraph: str, max_len: int | None = None) -> Iterator[str]:
    """A paragraph of Chinese text as normalized sentences of 2+ characters, split at clauses when longer than
    `max_len` (default ZH_CLAUSE_SPLIT_CHARS); sentences with Latin, code or a character outside GB2312
    (Traditional or rare) are dropped."""
    for piece in _zh_split(paragraph, max_len or ZH_CLAUSE_SPLIT_CHARS):
        text = _zh_clean(piece)
        if text and len(text) >= 2:
            yield text


def load_sentences(language: str, fortunes_dir: str | os.PathLike = FORTUNES_DIR,
                   max_len: int | None = None) -> list[str]:
    """Normalized, deduplicated fortunes sentences in file order.

    Args:
        language: "en" (every fortunes file but pictures, code and Chinese) or "zh" (fortunes-zh, sentences
            in Simplified characters only, split at clauses when longer than `max_len` characters).
        fortunes_dir: folder of the fortunes files.
        max_len: en: longest sentence kept, words (default LM_MAX_WORDS); zh: clause-split threshold.

    Raises:
        FileNotFoundError: the fortunes files are not installed.
    """
    root = Path(fortunes_dir)
    if language == "en":
        files = sorted(p for p in root.glob("*") if p.is_file() and "." not in p.name
                       and p.name not in EN_FORTUNE_SKIP) if root.is_dir() else []
        package = "fortunes"
    else:
        files = [root / name for name in ZH_FORTUNE_FILES if (root / name).is_file()]
        package = "fortunes-zh"
    if not files:
        raise FileNotFoundError(f"no {package} files in `fortunes_dir` {str(root)!r}; {APT_HINT}")
    seen, out = set(), []
    for path in files:
        for fortune in read_fortunes(path):
            if language == "en":
                candidates = (en_clean(s) for para in en_paragraphs(fortune) for s in en_split(para))
                limit = max_len or LM_MAX_WORDS
                texts = (t for t in candidates if t and len(t.split()) <= limit)
            else:
                texts = (t for para in _zh_lines(fortune) for t in zh_sentences(para, max_len))
            for text in texts:
                if text not in seen:
                    seen.add(text)
                    out.append(text)
    return out


def exclude_held_out(lines: Sequence[str], held_out: Iterable[str], language: str) -> list[str]:
    """The LM lines that contain no held-out sentence, so the LM never saw a dev or test transcript.

    A held-out sentence can sit inside a longer line ("i will fight no more" in "... i will fight no more
    forever"), so dropping exact matches is not enough: a line goes if any held-out sentence occurs in it,
    on word boundaries for English ("he ran" is not in "she ran") and anywhere for Mandarin (no spaces).
    Both sides must be normalized the same way (they are: both come from `load_sentences`).

    Args:
        lines: normalized LM sentences, one per item (no newlines).
        held_out: normalized dev and test transcripts.
        language: "en" (words separated by single spaces) or "zh" (characters).

    Returns:
        `lines` in order, less those containing a held-out sentence.
    """
    pad = " " if language == "en" else ""
    # One joined text and str.find per held-out sentence: C-speed scans, not lines x sentences Python loops.
    # The newlines keep a match inside one line (no needle contains one).
    joined = "\n".join(f"{pad}{line}{pad}" for line in lines)
    starts = list(itertools.accumulate((len(line) + 2 * len(pad) + 1 for line in lines[:-1]), initial=0))
    leaking = set()
    for sentence in set(held_out):
        if not sentence:
            continue
        needle = f"{pad}{sentence}{pad}"
        i = joined.find(needle)
        while i != -1:
            leaking.add(bisect.bisect_right(starts, i) - 1)
            i = joined.find(needle, i + 1)
    return [line for k, line in enumerate(lines) if k not in leaking]
