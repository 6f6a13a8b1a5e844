"""TED-LIUM (Hernandez et al., 2018; openslr.org/51): TED talks, one 16 kHz NIST SPHERE file per talk,
segmented by STM transcripts. Release 3 layout:

    TEDLIUM_release-3/data/{sph,stm}/<talk>.{sph,stm}                 # the full 452 h training set
    TEDLIUM_release-3/legacy/{train,dev,test}/{sph,stm}/<talk>.{sph,stm}   # the release-2 split

Releases 1 and 2 have `{train,dev,test}/{sph,stm}` at the top. STM lines are
`<talk> <channel> <speaker> <start> <end> <label> <transcript>`; the label (`<o,f0,male>`, `<F0_M>`,
`<NA>`) is always dropped, as Kaldi, ESPnet and lhotse do.

Splits: "train" (from `data/` when present, else `legacy/train`), "dev" and "test". Each talk is
converted once to `output_dir/wav/.../<talk>.wav`; each STM segment becomes one manifest line with
`offset` and `duration` into it.

Left out: `inter_segment_gap` and `ignore_time_segment_in_scoring` segments are not speech to learn from
(counted under `excluded` in the report). Release 3's training transcripts are automatic alignments: a
`<unk>` there is a spoken word without a label, so a training segment with `<unk>` is skipped and listed
in the report (dev/test are manual; a `<unk>` there is dropped from the text). A trailing `(<talk>-<n>)`,
which some training lines end with, is not speech and is removed. `{NOISE}`-style tokens are dropped and
the tokenized contractions are joined back ("it 's" -> "it's").
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

CORPUS = "tedlium"
IGNORE = "ignore_time_segment_in_scoring"
GAP = "inter_segment_gap"
NOT_SPEECH = "inter_segment_gap or ignore_time_segment_in_scoring segment (not speech to learn from)"
UNK = "<unk>"
LAYOUT = ("TEDLIUM_release-3/legacy/{train,dev,test}/{sph,stm}/<talk>.{sph,stm} "
          "and/or TEDLIUM_release-3/data/{sph,stm}/<talk>.{sph,stm}")
_DROP = re.compile(r"^(?:<[^>]*>|\{[^}]*\}|\[[^\]]*\])$")  # <unk>, {NOISE}, {SMACK}, [noise]
_VARIANT = re.compile(r"\(\d+\)$")  # "read(2)": the second pronunciation in the dictionary
_CONTRACTION = re.compile(r" '(?=[a-z])")  # "it 's" / "we 're" / "don 't": rejoin the tokenized clitic
_TALK_TAG = re.compile(r"^\([^()\s]+-\d+\)$")  # a line's trailing "(JaneDoe_2012-1)": the talk and a counter


def normalize_tedlium(text: str, *, strict: bool = False) -> str:
    """Drop `<unk>`/`{NOISE}` tokens and pronunciation variants, rejoin " 's" clitics, English-normalize.

    >>> normalize_tedlium("so it 's <unk> like 100 years {NOISE} read(2)")
    "so it's like one hundred years read"
    """
    words = [_VARIANT.sub("", w) for w in text.split() if not _DROP.match(w)]
    return normalize_english(_CONTRACTION.sub("'", " ".join(words)), strict=strict)


def _split_dirs(root: Path) -> dict[str, Path]:
    def ok(d: Path) -> bool:
        return (d / "stm").is_dir() and (d / "sph").is_dir()

    dirs = {}
    for base in (root / "legacy", root):  # release 3's legacy/ split, or release 1/2 at the top
        for split in ("train", "dev", "test"):
            if split not in dirs and ok(base / split):
                dirs[split] = base / split
    if ok(root / "data"):
        dirs["train"] = root / "data"  # release 3's full training set supersedes legacy/train
    return {s: dirs[s] for s in ("train", "dev", "test") if s in dirs}


def scan_split(split_dir: Path, drop_unk: bool = False) -> tuple[list[Entry], list[Skip], int]:
    """One Entry per scored STM segment of every talk in `split_dir/{stm,sph}`.

    Returns:
        (entries, skipped, the number of non-speech segments left out). With `drop_unk`, a segment whose
        transcript has `<unk>` is skipped (and reported) rather than imported without that word.
    """
    entries, skipped, not_speech = [], [], 0
    stms = sorted((split_dir / "stm").glob("*.stm"))
    for stm in stms:
        sph = split_dir / "sph" / f"{stm.stem}.sph"
        for n, line in enumerate(read_text_lines(stm), start=1):
            fields = line.split()
            if not fields or line.startswith(";;"):
                continue
            if len(fields) < 5:
                skipped.append(Skip(f"{stm}:{n}", "STM line has fewer than 5 fields "
                                    "(talk channel speaker start end [<label>] transcript)", is_path=True))
                continue
            talk, _, speaker, start, end, *words = fields
            words = words[1:]  # field 6 is the label (<o,f0,male>, <F0_M>, <NA>), never words
            if speaker == GAP or IGNORE in words:
                not_speech += 1
                continue
            if words and _TALK_TAG.match(words[-1]):
                words = words[:-1]
            try:
                t0, t1 = float(start), float(end)
            except ValueError:
                skipped.append(Skip(f"{stm}:{n}", f"start/end {start!r}/{end!r} are not numbers", is_path=True))
                continue
            if t1 <= t0:
                skipped.append(Skip(f"{stm}:{n}", f"segment end {t1} is not after start {t0}", is_path=True))
                continue
            utt = f"{talk}-{round(t0 * 100):07d}-{round(t1 * 100):07d}"
            if drop_unk and any(w.lower() == UNK for w in words):
                skipped.append(Skip(utt, f"transcript has {UNK}, a spoken word the automatic transcript could not "
                                         "label (training segments with it are left out)"))
                continue
            text, problem = normalized(normalize_tedlium, " ".join(words))
            entries.append(Entry(utt, sph, text, speaker, offset=t0, end=t1, problem=problem))
    with_stm = {s.stem for s in stms}
    for sph in sorted((split_dir / "sph").glob("*.sph")):
        if sph.stem not in with_stm:
            skipped.append(Skip(str(sph), f"no transcript `{split_dir / 'stm' / (sph.stem + '.stm')}`",
                                is_path=True))
    return entries, skipped, not_speech


def prepare_tedlium(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
) -> dict[str, list[Utterance]]:
    """Import TED-LIUM (release 3, or 1/2): write `output_dir/{train,dev,test}.jsonl` (+ `.report.json`).

    Args:
        corpus_dir: `TEDLIUM_release-3` (or `TEDLIUM_release2`, ...), or the folder containing it.
        output_dir: where manifests, reports and the per-talk WAVs (`wav/<data|legacy/...>/sph/<talk>.wav`) go.
        num_workers: parallel talk conversions.
        splits: a subset of ("train", "dev", "test"); None imports those present.

    Returns:
        {split: utterances} with `offset`/`duration` into the talk's WAV, English-normalized text,
        language "en", speaker from the STM.

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: no `{sph,stm}` folder pair is found.
    """
    root = find_root(corpus_dir, ["TEDLIUM_release-3", "TEDLIUM_release-3.0", "TEDLIUM_release2",
                                  "TEDLIUM_release1"], LAYOUT)
    dirs = _split_dirs(root)
    if not dirs:
        raise no_layout(corpus_dir, LAYOUT)
    out = {}
    for split in select_splits(list(dirs), splits, CORPUS):
        entries, skipped, not_speech = scan_split(dirs[split], drop_unk=split == "train")
        out[split] = build_split(CORPUS, split, entries, skipped, corpus_root=root, output_dir=Path(output_dir),
                                 language="en", num_workers=num_workers, excluded={NOT_SPEECH: not_speech})
    return out
