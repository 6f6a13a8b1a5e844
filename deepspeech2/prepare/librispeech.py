"""LibriSpeech (Panayotov et al., 2015; openslr.org/12): 1000 h of read English audiobooks, 16 kHz FLAC.

Layout as unpacked from the openslr tarballs:

    LibriSpeech/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac
    LibriSpeech/<split>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt   # "<ID> TRANSCRIPT" per line

`<split>` is whatever was unpacked: train-clean-100, train-clean-360, train-other-500, dev-clean,
dev-other, test-clean, test-other. FLAC is converted to WAV (tf.audio.decode_wav reads WAV only).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from deepspeech2.data.manifest import Utterance
from deepspeech2.prepare.importer import (Entry, Skip, build_split, find_root, no_layout, normalized,
                                          read_text_lines, select_splits)
from deepspeech2.text import normalize_english

CORPUS = "librispeech"
LAYOUT = "LibriSpeech/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac plus <speaker>-<chapter>.trans.txt"


def _find_splits(root: Path) -> list[str]:
    return sorted(d.name for d in root.iterdir() if d.is_dir() and next(d.glob("*/*/*.trans.txt"), None))


def scan_split(split_dir: Path) -> tuple[list[Entry], list[Skip]]:
    """Entries from every `*.trans.txt` of one split, plus FLACs that have no transcript line."""
    entries, skipped, seen = [], [], set()
    for trans in sorted(split_dir.glob("*/*/*.trans.txt")):
        speaker = trans.parent.parent.name
        for n, line in enumerate(read_text_lines(trans), start=1):
            if not line.strip():
                continue
            utt_id, _, text = line.strip().partition(" ")
            seen.add(utt_id)
            text, problem = normalized(normalize_english, text)
            entries.append(Entry(utt_id, trans.parent / f"{utt_id}.flac", text, speaker, problem=problem))
    for flac in sorted(split_dir.glob("*/*/*.flac")):
        if flac.stem not in seen:
            skipped.append(Skip(flac.stem, f"no transcript line in `{flac.parent}/*.trans.txt`"))
    return entries, skipped


def prepare_librispeech(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
) -> dict[str, list[Utterance]]:
    """Import LibriSpeech: write `output_dir/<split>.jsonl` (+ `.report.json`) for each split found.

    Args:
        corpus_dir: the `LibriSpeech` folder, or the folder containing it.
        output_dir: where manifests, reports and converted WAVs (`wav/<split>/...`) go.
        num_workers: parallel audio conversions.
        splits: only these split folders (e.g. ["dev-clean"]); None imports every split present.

    Returns:
        {split: utterances} with English-normalized text, language "en", speaker = LibriSpeech speaker id.

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: no split folder with transcripts is found, or an unknown split is requested.
    """
    root = find_root(corpus_dir, ["LibriSpeech"], LAYOUT)
    found = _find_splits(root)
    if not found:
        raise no_layout(corpus_dir, LAYOUT)
    out = {}
    for split in select_splits(found, splits, CORPUS):
        entries, skipped = scan_split(root / split)
        out[split] = build_split(CORPUS, split, entries, skipped, corpus_root=root, output_dir=Path(output_dir),
                                 language="en", num_workers=num_workers)
    return out
