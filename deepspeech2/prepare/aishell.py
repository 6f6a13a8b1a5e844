"""Aishell-1 (Bu et al., 2017; openslr.org/33): 178 h of read Mandarin, 400 speakers, 16 kHz WAV.

Layout once the per-speaker tarballs in `data_aishell/wav/` are unpacked:

    data_aishell/wav/{train,dev,test}/<speaker>/<utt>.wav       # e.g. train/S0002/BAC009S0002W0122.wav
    data_aishell/transcript/aishell_transcript_v0.8.txt           # "<utt> 而 对 楼市 成交 ..." (words spaced)

The WAVs are already 16 kHz mono 16-bit, so the manifests point at them in place. Text is Mandarin
normalized (characters, DS2 §6.2), language "zh". A few transcripts spell Latin letters, mostly full-width
("ａ股", A-shares; "ｋ线"): the reader said the letter, so it stays as a token, upper-cased ("A股"), as
lhotse's and WeNet's Aishell recipes keep it. Some WAVs have no transcript line, and a line whose speaker
folder lacks its WAV is missing audio: both are reported as skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from deepspeech2.data.manifest import Utterance
from deepspeech2.prepare.importer import (Entry, Skip, build_split, find_root, no_layout, normalized,
                                          read_text_lines, select_splits)
from deepspeech2.text import normalize_mandarin

CORPUS = "aishell"
SPLITS = ("train", "dev", "test")
TRANSCRIPT = Path("transcript") / "aishell_transcript_v0.8.txt"
_SPEAKER = re.compile(r"S\d{4}")  # "BAC009S0002W0122": speaker S0002, utterance W0122
LAYOUT = ("data_aishell/wav/{train,dev,test}/<speaker>/<utt>.wav and "
          "data_aishell/transcript/aishell_transcript_v0.8.txt")


def normalize_aishell(text: str, *, strict: bool = False) -> str:
    """Mandarin-normalize an Aishell transcript, keeping its Latin letters as upper-case tokens.

    >>> normalize_aishell("ａ股 市场 的 ｋ 线")
    'A股市场的K线'
    """
    return normalize_mandarin(text, strict=strict, keep_latin=True)


def read_transcripts(path: Path) -> dict[str, str]:
    """{utt: raw transcript} from `aishell_transcript_v0.8.txt`."""
    out = {}
    for line in read_text_lines(path):
        utt, _, text = line.strip().partition(" ")
        if utt:
            out[utt] = text
    return out


def prepare_aishell(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
) -> dict[str, list[Utterance]]:
    """Import Aishell-1: write `output_dir/{train,dev,test}.jsonl` (+ `.report.json`).

    Args:
        corpus_dir: the `data_aishell` folder, or the folder containing it.
        output_dir: where manifests and reports go (the WAVs are used in place).
        num_workers: parallel audio checks (and conversions, for any WAV that isn't 16 kHz mono).
        splits: a subset of ("train", "dev", "test"); None imports those present.

    Returns:
        {split: utterances}, Mandarin-normalized text (Latin letters kept, upper-cased), language "zh",
        speaker = "S0002"-style id.

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: the transcript file or the unpacked `wav/<split>` folders are missing.
    """
    root = find_root(corpus_dir, ["data_aishell"], LAYOUT)
    transcript_path = root / TRANSCRIPT
    found = [s for s in SPLITS if (root / "wav" / s).is_dir()]
    if not found and next((root / "wav").glob("*.tar.gz"), None):
        raise ValueError(f"`{root / 'wav'}` holds the per-speaker tarballs, not the audio: unpack them first "
                         f"(cd {root / 'wav'} && for f in *.tar.gz; do tar xzf \"$f\"; done), then re-run")
    if not found or not transcript_path.is_file():
        raise no_layout(corpus_dir, LAYOUT)
    transcripts = read_transcripts(transcript_path)
    out = {}
    for split in select_splits(found, splits, CORPUS):
        entries, skipped = [], []
        wavs = {wav.stem: wav for wav in (root / "wav" / split).glob("*/*.wav")}
        speakers = {p.name for p in (root / "wav" / split).iterdir() if p.is_dir()}
        for utt, text in transcripts.items():
            m = _SPEAKER.search(utt)
            if utt in wavs or (m is not None and m[0] in speakers):
                # A transcript line of this split's speaker without its WAV is reported as missing audio.
                wav = wavs[utt] if utt in wavs else root / "wav" / split / m[0] / f"{utt}.wav"
                text, problem = normalized(normalize_aishell, text)
                entries.append(Entry(utt, wav, text, wav.parent.name, problem=problem))
        for utt in sorted(set(wavs) - set(transcripts)):
            skipped.append(Skip(utt, f"no line in `{transcript_path}`"))
        out[split] = build_split(CORPUS, split, entries, skipped, corpus_root=root, output_dir=Path(output_dir),
                                 language="zh", num_workers=num_workers)
    return out
