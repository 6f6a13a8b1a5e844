"""Wall Street Journal read speech: WSJ0 (LDC93S6B) and WSJ1 (LDC94S13B), 16 kHz NIST SPHERE.

Layout as copied from the discs, at any depth below `corpus_dir` (names are matched case-insensitively:
some copies, e.g. of disc 13-16.1, are upper-cased):

    11-1.1/wsj0/si_tr_s/011/011c0201.wv1                  # <disc>/<wsj0|wsj1>/<subset>/<spk>/<utt>.wv1
    11-1.1/wsj0/si_tr_s/011/011c0200.dot                  # "Transcript words (011c0201)" per line
    11-4.1/wsj0/transcrp/dots/si_tr_s/012/012c0200.dot    # (some .dot files sit on another disc)
    11-13.1/wsj0/doc/indices/train/tr_s_wv1.ndx           # the index files that define the splits
    13-34.1/wsj1/doc/indices/{si_tr_s,h1_p0,h2_p0}.ndx

The splits are those of Kaldi's `wsj/s5` recipe (local/wsj_data_prep.sh), the names every WSJ result is
reported under. They are read from the index files, not from the folders: `si_dt_05` holds 913
utterances, the 5k dev set is the 513 of h2_p0.ndx.

    split           index file(s) (disc)                                        utterances
    train_si84      wsj0/doc/indices/train/tr_s_wv1.ndx (11-13.1), less spk 401     7138
    train_si284     + wsj1/doc/indices/si_tr_s.ndx (13-34.1)                       37416
    test_eval92     wsj0/doc/indices/test/nvp/si_et_20.ndx (11-13.1)   Nov'92 20k    333
    test_eval92_5k  wsj0/doc/indices/test/nvp/si_et_05.ndx (11-13.1)   Nov'92 5k     330
    test_dev93      wsj1/doc/indices/h1_p0.ndx (13-34.1)               Nov'93 dev    503
    test_dev93_5k   wsj1/doc/indices/h2_p0.ndx (13-34.1)               dev 5k        513
    test_eval93     wsj1/doc/indices/wsj1/eval/h1_p0.ndx (13-32.1)     Nov'93 20k    213
    test_eval93_5k  wsj1/doc/indices/wsj1/eval/h2_p0.ndx (13-32.1)     Nov'93 5k

An index line is `<disc id>:<path on that disc>` (`11_1_1:wsj0/si_tr_s/011/011c0201.wv1`; the Nov'92 test
indices leave out `.wv1`), `;` starts a comment. The audio is looked up by that path below any disc folder,
case-insensitively, so the disc id is not needed (and Kaldi's fix of the Nov'93 indices' wrong disc id,
13_32_1 for 13_33_1, is moot). Speaker 401 is listed in tr_s_wv1.ndx but Kaldi leaves it out of both
training sets; its utterances are counted under `excluded` in the report.

WSJ1's disc 13-32.1 also holds the LM training text of Kaldi's and ESPnet's recipes,
`wsj1/doc/lng_modl/lm_train/np_data/{87,88,89}/*.z` (Wall Street Journal text of 1987-89, non-verbalized
punctuation, `compress`ed, `<...>` markup lines): `prepare_wsj_lm_text` cleans it as the transcripts are
(`normalize_wsj`), one sentence a line, for `ds2-build-lm`.

Only the Sennheiser channel (.wv1) is used. Most disc copies store shorten-compressed SPHERE, which
libsndfile can't read: those are decoded with `sph2pipe` when it is on PATH, else skipped and reported
with the fix. Transcripts are cleaned of the WSJ markup (`normalize_wsj`) then English-normalized.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from deepspeech2.data.manifest import Utterance
from deepspeech2.fileio import atomic_write, write_json
from deepspeech2.prepare.importer import (Entry, Skip, build_split, find_root, no_layout, normalized,
                                          read_text_lines, select_splits)
from deepspeech2.progress import progress_bar
from deepspeech2.text import normalize_english

log = logging.getLogger(__name__)

CORPUS = "wsj"
_WSJ0_TRAIN = ("11-13.1", "wsj0/doc/indices/train/tr_s_wv1.ndx")
_WSJ1_TRAIN = ("13-34.1", "wsj1/doc/indices/si_tr_s.ndx")
# split -> its index files: (the disc Kaldi reads it from, its path below that disc, lower case)
SPLITS: dict[str, tuple[tuple[str, str], ...]] = {
    "train_si84": (_WSJ0_TRAIN,),
    "train_si284": (_WSJ0_TRAIN, _WSJ1_TRAIN),
    "test_eval92": (("11-13.1", "wsj0/doc/indices/test/nvp/si_et_20.ndx"),),
    "test_eval92_5k": (("11-13.1", "wsj0/doc/indices/test/nvp/si_et_05.ndx"),),
    "test_dev93": (("13-34.1", "wsj1/doc/indices/h1_p0.ndx"),),
    "test_dev93_5k": (("13-34.1", "wsj1/doc/indices/h2_p0.ndx"),),
    "test_eval93": (("13-32.1", "wsj1/doc/indices/wsj1/eval/h1_p0.ndx"),),
    "test_eval93_5k": (("13-32.1", "wsj1/doc/indices/wsj1/eval/h2_p0.ndx"),),
}
# The sizes Kaldi's wsj_data_prep.sh expects (test_eval93_5k is left unchecked: its size isn't documented
# there). A different count means the wrong or a damaged index file: it is logged, not fatal.
STANDARD_SIZES = {"train_si84": 7138, "train_si284": 37416, "test_eval92": 333, "test_eval92_5k": 330,
                  "test_dev93": 503, "test_dev93_5k": 513, "test_eval93": 213}
EXCLUDED_SPEAKER = "wsj0/si_tr_s/401/"  # Kaldi: `grep -v 11-2.1/wsj0/si_tr_s/401` for si84 and si284
EXCLUDED_REASON = "speaker 401, left out of SI-84 and SI-284 as in Kaldi's wsj_data_prep.sh"
LAYOUT = ("the WSJ0/WSJ1 disc folders (11-1.1/, ..., 13-34.1/): <disc>/wsj0/si_tr_s/<spk>/<utt>.wv1 with .dot "
          "transcripts, and the index files 11-13.1/wsj0/doc/indices/... and 13-34.1/wsj1/doc/indices/...")
_DISC_DIR = re.compile(r"^(\d+)[-_](\d+)[._](\d+)$")  # "11-1.1" (or "11_1_1") -> disc id "11_1_1"
_NDX_LINE = re.compile(r"^(?P<disc>\d+_\d+_\d+)\s*:\s*/?(?P<path>\S+)\s*$")
_DOT_LINE = re.compile(r"^(?P<text>.*)\((?P<id>[0-9a-z]{8})\)\s*$", re.IGNORECASE)
_NOISE = re.compile(r"^\[.*\]$")  # [loud_breath], [<door_slam], [door_slam>], [/phone_ring], [phone_ring/]
_DELETED = re.compile(r"^<(.+)>$")  # <word>: a "verbal deletion" the speaker still pronounced (Kaldi keeps it)
# Verbalized punctuation, as read aloud in the VP prompts: ,COMMA .PERIOD "DOUBLE-QUOTE (LEFT-PAREN --DASH
_VERBAL_PUNCT = re.compile(r"^[^\w\s]+(?P<name>[A-Za-z]+(?:-[A-Za-z]+)*)$")
# Abbreviations the readers said in full. Kaldi keeps "MR." as a word and lets the CMU dictionary give it
# the pronunciation "mister"; a character model needs the spoken word in the label instead. Only forms
# written with their period (`Mr\.` in the .dot files) and with one reading are expanded: "St." (saint or
# street), "Co." (company or "co"), "No.", "Ft." and "Ms." are left as written.
ABBREVIATIONS = {
    "mr.": "mister", "mrs.": "missus", "dr.": "doctor", "jr.": "junior", "messrs.": "messieurs",
    "sen.": "senator", "rep.": "representative", "gov.": "governor", "gen.": "general", "lt.": "lieutenant",
    "col.": "colonel", "sgt.": "sergeant", "capt.": "captain", "prof.": "professor", "rev.": "reverend",
    "corp.": "corporation", "inc.": "incorporated", "ltd.": "limited", "bros.": "brothers", "vs.": "versus",
    "mt.": "mount", "dept.": "department",
}


def normalize_wsj(text: str, *, strict: bool = False) -> str:
    """Clean a WSJ `.dot` transcript (the conventions of Kaldi's normalize_transcript.pl), then
    `normalize_english`.

    Noise events (`[loud_breath]`, `[<door_slam]`, ...), the truncation mark `~` and the pause mark `.`
    are dropped; `<word>` and `*mispronounced*` words keep the word, and a lengthened `word:` loses the
    colon; backslash quoting (`I\\.`, `isn\\'t`) is removed; verbalized punctuation keeps the spoken name
    (`,COMMA` -> "comma", `"DOUBLE-QUOTE` -> "double quote"); titles and company suffixes are said in full
    (`Mr\\.` -> "mister", `Corp\\.` -> "corporation": `ABBREVIATIONS`).

    >>> normalize_wsj(r"[loud_breath] Mr\\. I\\. B\\. M\\. ,COMMA isn\\'t *sp*ecial <the> deal . ~")
    "mister i b m comma isn't special the deal"
    """
    words = []
    for w in text.split():
        w = w.replace("\\", "")
        if _NOISE.match(w) or w in ("~", "."):
            continue
        if m := _DELETED.match(w):
            w = m[1]
        if m := _VERBAL_PUNCT.match(w):
            w = m["name"]
        else:
            w = w.replace("*", "").replace("~", "").replace(":", "")
            w = ABBREVIATIONS.get(w.lower(), w)
        words.append(w)
    return normalize_english(" ".join(words), strict=strict)


# ------------------------------------------------------------------------------------- finding the files


@dataclass
class _Files:
    """What a walk of the corpus found, by lower-case path below the corpus root."""

    root: Path
    wv1: dict[str, list[Path]] = field(default_factory=dict)  # lower-case file name -> files
    dots: list[Path] = field(default_factory=list)
    ndx: list[Path] = field(default_factory=list)
    discs: dict[str, Path] = field(default_factory=dict)  # disc id "11_1_1" -> its folder

    def rel(self, path: Path) -> str:
        return "/".join(p.lower() for p in path.relative_to(self.root).parts)

    def find(self, candidates: Iterable[Path], rel: str, prefer_disc: str | None = None) -> Path | None:
        """The candidate whose path ends with `rel` (lower case), on `prefer_disc` if there is one there."""
        hits = [p for p in candidates if ("/" + self.rel(p)).endswith("/" + rel)]
        if prefer_disc is not None:
            preferred = self.discs.get(_disc_id(prefer_disc))
            hits.sort(key=lambda p: preferred is None or not p.is_relative_to(preferred))
        return hits[0] if hits else None


def _disc_id(name: str) -> str | None:
    m = _DISC_DIR.match(name)
    return "_".join(m.groups()) if m else None


def _walk(root: Path) -> _Files:
    files = _Files(root)
    for dirpath, dirnames, names in os.walk(root, followlinks=True):
        dirnames.sort()
        here = Path(dirpath)
        for d in dirnames:
            if (disc := _disc_id(d)) is not None:
                files.discs.setdefault(disc, here / d)
        for name in sorted(names):
            suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
            if suffix == "wv1":
                files.wv1.setdefault(name.lower(), []).append(here / name)
            elif suffix == "dot":
                files.dots.append(here / name)
            elif suffix == "ndx":
                files.ndx.append(here / name)
    return files


def read_dot_files(paths: Iterable[Path]) -> dict[str, tuple[str, Path]]:
    """{utterance id (lower case): (raw transcript, .dot file)} from `.dot` files; the first one wins."""
    transcripts: dict[str, tuple[str, Path]] = {}
    for dot in paths:
        for line in read_text_lines(dot):
            if m := _DOT_LINE.match(line.strip()):
                transcripts.setdefault(m["id"].lower(), (m["text"], dot))
    return transcripts


def read_dot_transcripts(folder: Path) -> dict[str, tuple[str, Path]]:
    """Every `.dot` transcript below `folder` (any depth, any case): {utt: (raw text, .dot file)}."""
    return read_dot_files(_walk(Path(folder)).dots)


def read_index(path: Path) -> tuple[list[tuple[str, str]], list[Skip]]:
    """The entries of a WSJ `.ndx` index file: [(disc id, lower-case path on that disc)], plus its
    unreadable lines. A path without an extension (the Nov'92 test indices) gets `.wv1`."""
    entries, bad = [], []
    for n, line in enumerate(read_text_lines(path), start=1):
        line = line.strip()
        if not line or line.startswith(";"):
            continue
        m = _NDX_LINE.match(line)
        if m is None:
            bad.append(Skip(f"{path}:{n}", f"not an index line `<disc id>:<path>`: {line!r}", is_path=True))
            continue
        rel = m["path"].lower()
        if "." not in rel.rsplit("/", 1)[-1]:
            rel += ".wv1"
        entries.append((m["disc"], rel))
    return entries, bad


@dataclass(frozen=True)
class SplitIndex:
    """What the index files say one split holds."""

    entries: list[tuple[str, str]]  # (disc id, lower-case path on the disc), in index order
    bad_lines: list[Skip]  # index lines that could not be read
    excluded: int  # entries left out by the split's definition (speaker 401)
    index_files: list[Path]


def read_splits(root: Path, files: _Files | None = None) -> dict[str, SplitIndex]:
    """The Kaldi splits whose index files are all present below `root`, as the index files define them."""
    files = files if files is not None else _walk(Path(root))
    out = {}
    for split, indices in SPLITS.items():
        paths = [files.find(files.ndx, rel, disc) for disc, rel in indices]
        if not all(paths):
            continue
        entries, bad = [], []
        for path in paths:
            e, b = read_index(path)
            entries += e
            bad += b
        excluded = 0
        if split.startswith("train_"):
            kept = [e for e in entries if not e[1].startswith(EXCLUDED_SPEAKER)]
            excluded, entries = len(entries) - len(kept), kept
        if split in STANDARD_SIZES and len(entries) != STANDARD_SIZES[split]:
            log.warning("wsj %s: the index file(s) %s list %d utterances, the standard set has %d; check that "
                        "they are the files from the LDC discs", split, [str(p) for p in paths], len(entries),
                        STANDARD_SIZES[split])
        out[split] = SplitIndex(entries, bad, excluded, paths)
    return out


def prepare_wsj(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
) -> dict[str, list[Utterance]]:
    """Import WSJ0/WSJ1: write `output_dir/<split>.jsonl` (+ `.report.json`) for the Kaldi splits present.

    A split is present when its index files are found and at least one file they list is (train_si284
    needs both WSJ0 and WSJ1).

    Args:
        corpus_dir: folder holding the disc folders (`11-1.1/`, `13-34.1/`, ...) of WSJ0 and/or WSJ1.
        output_dir: where manifests, reports and the converted WAVs (`wav/<disc>/...`) go.
        num_workers: parallel audio conversions.
        splits: a subset of `SPLITS`; None imports those present.

    Returns:
        {split: utterances}, WSJ-cleaned English text, language "en", speaker = 3-character speaker id.

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: no index file with audio is found (the message says which index files are needed).
    """
    root = find_root(corpus_dir, [], LAYOUT)
    files = _walk(root)
    indexed = read_splits(root, files)

    def audio(rel: str) -> Path | None:
        return files.find(files.wv1.get(rel.rsplit("/", 1)[-1], []), rel)

    found = [s for s, ix in indexed.items() if any(audio(rel) for _, rel in ix.entries)]
    if not found:
        if files.wv1:
            needed = sorted({f"{disc}/{rel}" for parts in SPLITS.values() for disc, rel in parts})
            raise ValueError(f"`corpus_dir` {str(corpus_dir)!r} holds WSJ audio but no index file that lists it; "
                             f"the splits are defined by the discs' index files: copy the `doc` folders of discs "
                             f"11-13.1 (WSJ0) and 13-34.1, 13-32.1 (WSJ1) as well, so that these exist: {needed}")
        raise no_layout(corpus_dir, LAYOUT)
    transcripts = read_dot_files(files.dots)
    out = {}
    for split in select_splits(found, splits, CORPUS):
        ix = indexed[split]
        entries, skipped = [], list(ix.bad_lines)
        for disc, rel in ix.entries:
            utt = rel.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            if utt not in transcripts:
                skipped.append(Skip(utt, f"no `... ({utt})` line in any .dot file under `{root}`"))
                continue
            # Listed but not on disc: the path it would have, reported as missing audio.
            wv1 = audio(rel) or files.discs.get(disc, root / disc.replace("_", "-", 1).replace("_", ".")) / rel
            text, problem = normalized(normalize_wsj, transcripts[utt][0])
            entries.append(Entry(utt, wv1, text, utt[:3], problem=problem))
        out[split] = build_split(CORPUS, split, entries, skipped, corpus_root=root, output_dir=Path(output_dir),
                                 language="en", num_workers=num_workers,
                                 excluded={EXCLUDED_REASON: ix.excluded})
    return out


# ------------------------------------------------------------------------------------------ LM text

LM_TEXT = "wsj1/doc/lng_modl/lm_train/np_data"  # below disc 13-32.1; folders 87, 88, 89 of .z files
_COMPRESSED = (".z", ".gz")  # `compress` (LZW) or gzip: `gzip -d` reads both


def lm_text_files(corpus_dir: str | os.PathLike) -> list[Path]:
    """The LM training text files below `corpus_dir` (`.../wsj1/doc/lng_modl/lm_train/np_data/**`, any case),
    sorted; [] when the corpus copy has none."""
    root = find_root(corpus_dir, [], LAYOUT)
    found = []
    for dirpath, dirnames, names in os.walk(root, followlinks=True):
        dirnames.sort()
        if f"/{LM_TEXT}/" in "/" + "/".join(p.lower() for p in Path(dirpath).relative_to(root).parts) + "/":
            found += [Path(dirpath) / n for n in sorted(names)
                      if Path(n).suffix.lower() in _COMPRESSED or not Path(n).suffix]  # compressed, or unpacked
    return found


def _lines(path: Path) -> Iterator[str]:
    """The lines of one LM text file, decompressed by `gzip -dc` (Python reads gzip but not `compress`'s LZW).

    Raises:
        ValueError: gzip could not decompress it.
    """
    if Path(path).suffix.lower() not in _COMPRESSED:
        yield from read_text_lines(path)
        return
    proc = subprocess.Popen(["gzip", "-dc", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    yield from (line.decode("latin-1").rstrip("\r\n") for line in proc.stdout)
    stderr = proc.stderr.read().decode("utf-8", "replace").strip()
    if proc.wait() != 0:
        raise ValueError(f"`{path}` could not be decompressed: {stderr or f'gzip exited {proc.returncode}'}")


def prepare_wsj_lm_text(corpus_dir: str | os.PathLike, out: str | os.PathLike) -> dict:
    """Write WSJ's LM training text to `out`, one sentence a line, cleaned as the transcripts are, and its
    report to `<out>.json`.

    Markup lines (`<art...>`, `<p>`, `<s>`) are dropped, as Kaldi's and ESPnet's recipes drop them; a line
    `normalize_wsj` can't read confidently is left out and counted; a file gzip can't decompress is
    reported and skipped. A second run with the same files finds `out` and its report and returns the report.

    Returns:
        The report: `files`, `sentences`, `words`, `dropped` (lines left out), `unreadable` ([{path,
        reason}]) and `sources` (each file's path below the corpus root, size and mtime).

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: no LM text below `corpus_dir`.
    """
    files = lm_text_files(corpus_dir)
    if not files:
        raise ValueError(f"no WSJ LM training text below `corpus_dir` {str(corpus_dir)!r}: expected WSJ1 disc "
                         f"13-32.1's {LM_TEXT}/{{87,88,89}}/*.z; without it, build the LM from the training transcripts")
    out = Path(out)
    report_path = out.with_name(out.name + ".json")
    root = find_root(corpus_dir, [], LAYOUT)
    sources = [[f.relative_to(root).as_posix(), f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    if out.is_file() and report_path.is_file():
        done = json.loads(report_path.read_text(encoding="utf-8"))
        if done.get("sources") == sources:
            return done
    sentences = words = dropped = 0
    unreadable = []
    bar = progress_bar(total=len(files), unit="file", desc="wsj lm text", leave=False)
    with atomic_write(out) as f:
        for path in files:
            try:
                for line in _lines(path):
                    if not line.strip() or line.lstrip().startswith("<"):
                        continue
                    text, problem = normalized(normalize_wsj, line)
                    if problem or not text:
                        dropped += 1
                        continue
                    f.write(text + "\n")
                    sentences += 1
                    words += text.count(" ") + 1
            except ValueError as e:  # one bad file never stops the rest; what it gave before failing is kept
                unreadable.append({"path": str(path), "reason": str(e)})
            bar.update()
    bar.close()
    report = {"out": str(out), "files": len(files), "sentences": sentences, "words": words, "dropped": dropped,
              "unreadable": unreadable, "sources": sources}
    write_json(report_path, report)
    if unreadable:
        log.warning("wsj lm text: %d file(s) could not be read; listed in %s", len(unreadable), report_path)
    return report
