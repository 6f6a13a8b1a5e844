"""VoxForge (voxforge.org): crowd-sourced read English, one tarball per recording session.

Layout of the unpacked tarballs (any depth below `corpus_dir`):

    <user>-<yyyymmdd>-<id>/etc/PROMPTS      # "<user>-<yyyymmdd>-<id>/mfc/<utt> TRANSCRIPT" per line
    <user>-<yyyymmdd>-<id>/wav/<utt>.wav    # 8/16/44.1/48 kHz, sometimes stereo or 8-bit
    <user>-<yyyymmdd>-<id>/flac/<utt>.flac  # older sessions ship FLAC instead

Sessions without `etc/PROMPTS` fall back to `etc/prompts-original` ("<utt> Transcript" per line).
Everything goes to one split, "train" (VoxForge has no official dev/test).

The speaker is the user part of the session name. Not every session is `<user>-<yyyymmdd>-<id>`
("Aaron-20080320", "Kevin-2009041514a-xyz_2"): the name is parsed with the pattern of Kaldi's
voxforge_data_prep.sh, `<user>-[0-9]{8,10}[a-z]*([_-].*)?`. A name that doesn't match it, and the shared
"anonymous" account, keep the session name as the speaker rather than merging strangers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from deepspeech2.data.manifest import Utterance
from deepspeech2.prepare.importer import (Entry, Skip, build_split, find_root, no_layout, normalized,
                                          read_text_lines, select_splits)
from deepspeech2.text import normalize_english

CORPUS = "voxforge"
SPLIT = "train"
LAYOUT = "<user>-<yyyymmdd>-<id>/etc/PROMPTS with audio in <user>-<yyyymmdd>-<id>/wav/<utt>.wav or flac/<utt>.flac"
_SESSION = re.compile(r"^(?P<user>.+)-[0-9]{8,10}[a-z]*(?:[_-].*)?$")  # Kaldi's voxforge_data_prep.sh
_AUDIO = (("wav", ".wav"), ("flac", ".flac"))


def _speaker(session: str) -> str:
    # "anonymous" is a shared account: keep those sessions apart rather than merge strangers.
    m = _SESSION.match(session)
    if m is None or m["user"].lower() == "anonymous":
        return session
    return m["user"]


def _sessions(root: Path) -> list[Path]:
    found = {p.parent.parent for name in ("PROMPTS", "prompts-original") for p in root.rglob(f"etc/{name}")}
    return sorted(found)


def scan_session(session: Path) -> tuple[list[Entry], list[Skip]]:
    """Entries of one session folder; utterance ids are `<session>/<utt>` (unique across sessions)."""
    prompts = session / "etc" / "PROMPTS"
    if not prompts.is_file():
        prompts = session / "etc" / "prompts-original"
    audio = {}
    for sub, ext in _AUDIO:
        for f in (session / sub).glob(f"*{ext}"):
            audio.setdefault(f.stem, f)
    speaker = _speaker(session.name)
    entries, skipped, seen = [], [], set()
    for line in read_text_lines(prompts):
        if not line.strip():
            continue
        key, _, text = line.strip().partition(" ")
        utt = key.rstrip("/").rsplit("/", 1)[-1]
        utt_id = f"{session.name}/{utt}"
        seen.add(utt)
        path = audio.get(utt, session / "wav" / f"{utt}.wav")
        text, problem = normalized(normalize_english, text)
        entries.append(Entry(utt_id, path, text, speaker, problem=problem))
    for utt in sorted(set(audio) - seen):
        skipped.append(Skip(f"{session.name}/{utt}", f"no transcript line in `{prompts}`"))
    return entries, skipped


def prepare_voxforge(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
) -> dict[str, list[Utterance]]:
    """Import VoxForge into one split, "train": `output_dir/train.jsonl` (+ `.report.json`).

    Args:
        corpus_dir: folder holding the unpacked session folders (at any depth).
        output_dir: where the manifest, report and converted WAVs (`wav/<session>/...`) go.
        num_workers: parallel audio conversions (most sessions are 48 kHz and get resampled).
        splits: None or ["train"].

    Returns:
        {"train": utterances}, English-normalized, language "en", speaker = the user name (the session
        name for "anonymous").

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: no session folder with `etc/PROMPTS` is found.
    """
    root = find_root(corpus_dir, [], LAYOUT)
    sessions = _sessions(root)
    if not sessions:
        raise no_layout(corpus_dir, LAYOUT)
    entries, skipped = [], []
    for session in sessions:
        e, s = scan_session(session)
        entries += e
        skipped += s
    out = {}
    for split in select_splits([SPLIT], splits, CORPUS):
        out[split] = build_split(CORPUS, split, entries, skipped, corpus_root=root, output_dir=Path(output_dir),
                                 language="en", num_workers=num_workers)
    return out
