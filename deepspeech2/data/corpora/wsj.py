"""Wall Street Journal read speech: WSJ0 (LDC93S6B) and WSJ1 (LDC94S13B), 16 kHz NIST SPHERE.

Layout as copied from the discs (folder names are matched case-insensitively):

    <disc>/wsj0/si_tr_s/<spk>/<utt>.wv1           # e.g. 11-1.1/wsj0/si_tr_s/011/011c0201.wv1
    <disc>/wsj1/si_dt_20/<spk>/<utt>.wv1
    <disc>/.../<subset>/<spk>/<spk>*.dot            # "Transcript words (011c0201)" per line

Splits follow the Kaldi `wsj/s5` recipe (the names every WSJ result is reported under):

    train_si84      wsj0/si_tr_s                    (7138 utterances, 15 h)
    train_si284     wsj0/si_tr_s + wsj1/si_tr_s     (37k utterances, 81 h)
    test_eval92     wsj0/si_et_20                   (Nov'92 20k, 333 utterances)
    test_eval92_5k  wsj0/si_et_05                   (Nov'92 5k, 330 utterances)
    test_dev93      wsj1/si_dt_20                   (Nov'93 dev 20k, 503 utterances)
    test_dev93_5k   wsj1/si_dt_05                   (Nov'93 dev 5k)

Only the Sennheiser channel (.wv1) is used. Most disc copies store shorten-compressed SPHERE, which
libsndfile can't read: those are decoded with `sph2pipe` when it is on PATH, else skipped and reported
with the fix. Transcripts are cleaned of the WSJ markup (`normalize_wsj`) then English-normalized.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from deepspeech2.data.corpora._common import Entry, Skip, build_split, find_root, no_layout, read_text_lines, \
    select_splits
from deepspeech2.data.manifest import Utterance
from deepspeech2.text import normalize_english

CORPUS = "wsj"
SPLITS = {  # split -> the (disc set, subset folder) pairs it is made of (Kaldi wsj_data_prep.sh)
    "train_si84": (("wsj0", "si_tr_s"),),
    "train_si284": (("wsj0", "si_tr_s"), ("wsj1", "si_tr_s")),
    "test_eval92": (("wsj0", "si_et_20"),),
    "test_eval92_5k": (("wsj0", "si_et_05"),),
    "test_dev93": (("wsj1", "si_dt_20"),),
    "test_dev93_5k": (("wsj1", "si_dt_05"),),
}
LAYOUT = "<disc>/wsj0/si_tr_s/<spk>/<utt>.wv1 (and wsj1/..., si_et_20, si_dt_20, ...) with <spk>*.dot transcripts"
_DISC = re.compile(r"^wsj[01]$")
_SUBSET = re.compile(r"^s[di]_(?:tr|dt|et)_\w+$")
_DOT_LINE = re.compile(r"^(?P<text>.*)\((?P<id>[0-9a-z]{8})\)\s*$", re.IGNORECASE)
_NOISE = re.compile(r"^\[.*\]$")  # [loud_breath], [<door_slam], [door_slam>], [/phone_ring], [phone_ring/]
_DELETED = re.compile(r"^<(.+)>$")  # <word>: a "verbal deletion" the speaker still pronounced (Kaldi keeps it)
# Verbalized punctuation, as read aloud in the VP prompts: ,COMMA .PERIOD "DOUBLE-QUOTE (LEFT-PAREN --DASH
_VERBAL_PUNCT = re.compile(r"^[^\w\s]+(?P<name>[A-Za-z]+(?:-[A-Za-z]+)*)$")


def normalize_wsj(text: str) -> str:
    """Clean a WSJ `.dot` transcript (the conventions of Kaldi's normalize_transcript.pl), then
    `normalize_english`.

    Noise events (`[loud_breath]`, `[<door_slam]`, ...), the truncation mark `~` and the pause mark `.`
    are dropped; `<word>` and `*mispronounced*` words keep the word; backslash quoting (`I\\.`, `isn\\'t`)
    is removed; verbalized punctuation keeps the spoken name (`,COMMA` -> "comma", `"DOUBLE-QUOTE` ->
    "double quote").

    >>> normalize_wsj(r"[loud_breath] I\\. B\\. M\\. ,COMMA isn\\'t *sp*ecial <the> deal . ~")
    "i b m comma isn't special the deal"
    """
    words = []
    for w in text.split():
        w = w.replace("\\", "")
        if _NOISE.match(w) or w in ("~", "."):
            continue
        if m := _DELETED.match(w):
            w = m[1]
        w = w.replace("*", "")
        if m := _VERBAL_PUNCT.match(w):
            w = m["name"]
        words.append(w)
    return normalize_english(" ".join(words))


def _locate(path: Path) -> tuple[str, str] | None:
    """("wsj0", "si_tr_s") for `.../wsj0/si_tr_s/...` or `.../wsj0/transcrp/dots/si_tr_s/...`."""
    parts = [p.lower() for p in path.parts]
    discs = [i for i, p in enumerate(parts) if _DISC.match(p)]
    if not discs:
        return None
    subsets = [p for p in parts[discs[-1] + 1:-1] if _SUBSET.match(p)]
    return (parts[discs[-1]], subsets[0]) if subsets else None


def _scan(root: Path) -> tuple[dict[tuple[str, str], dict[str, Path]], dict[str, tuple[str, Path]]]:
    """Audio by (disc set, subset) -> {utt: .wv1}, and transcripts {utt: (text, .dot file)}."""
    audio: dict[tuple[str, str], dict[str, Path]] = {}
    dots = []
    for dirpath, _, files in os.walk(root, followlinks=True):
        for name in files:
            suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
            if suffix == "wv1":
                path = Path(dirpath) / name
                where = _locate(path.relative_to(root))
                if where is not None:
                    audio.setdefault(where, {}).setdefault(path.stem.lower(), path)
            elif suffix == "dot":
                dots.append(Path(dirpath) / name)
    transcripts: dict[str, tuple[str, Path]] = {}
    for dot in sorted(dots):
        for line in read_text_lines(dot):
            if m := _DOT_LINE.match(line.strip()):
                transcripts.setdefault(m["id"].lower(), (m["text"], dot))
    return audio, transcripts


def prepare_wsj(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
) -> dict[str, list[Utterance]]:
    """Import WSJ0/WSJ1: write `output_dir/<split>.jsonl` (+ `.report.json`) for the Kaldi splits present.

    A split is present when all of its subset folders hold `.wv1` files (train_si284 needs WSJ1 too).

    Args:
        corpus_dir: folder holding the disc folders (`11-1.1/`, `13-34.1/`, ...) of WSJ0 and/or WSJ1.
        output_dir: where manifests, reports and the converted WAVs (`wav/<disc>/...`) go.
        num_workers: parallel audio conversions.
        splits: a subset of `SPLITS`; None imports those present.

    Returns:
        {split: utterances}, WSJ-cleaned English text, language "en", speaker = 3-character speaker id.

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: no `wsj0`/`wsj1` subset folder with `.wv1` files is found.
    """
    root = find_root(corpus_dir, [], LAYOUT)
    audio, transcripts = _scan(root)
    found = [s for s, parts in SPLITS.items() if all(audio.get(p) for p in parts)]
    if not found:
        raise no_layout(corpus_dir, LAYOUT)
    expected: dict[tuple[str, str], set[str]] = {}  # what the .dot files say each subset should hold
    for utt, (_, dot) in transcripts.items():
        if (where := _locate(dot.relative_to(root))) is not None:
            expected.setdefault(where, set()).add(utt)
    out = {}
    for split in select_splits(found, splits, CORPUS):
        entries, skipped = [], []
        for part in SPLITS[split]:
            files = audio[part]
            for utt, wv1 in files.items():
                if utt not in transcripts:
                    skipped.append(Skip(utt, f"no `... ({utt})` line in any .dot file under `{root}`"))
                    continue
                entries.append(Entry(utt, wv1, normalize_wsj(transcripts[utt][0]), utt[:3]))
            for utt in sorted(expected.get(part, set()) - set(files)):
                dot = transcripts[utt][1]  # listed in a .dot file but no .wv1 anywhere: missing audio
                entries.append(Entry(utt, dot.parent / f"{utt}.wv1", normalize_wsj(transcripts[utt][0]), utt[:3]))
        out[split] = build_split(CORPUS, split, entries, skipped, corpus_root=root, output_dir=Path(output_dir),
                                 language="en", num_workers=num_workers)
    return out
