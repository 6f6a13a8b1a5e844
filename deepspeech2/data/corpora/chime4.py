"""CHiME-4 (Vincent et al., 2017): WSJ prompts read on a tablet in noise (bus, cafe, pedestrian, street),
real and simulated. We import the single-microphone track, 16 kHz mono WAV used in place.

Layout as distributed:

    CHiME4/data/audio/16kHz/isolated_1ch_track/{dt05,et05}_{bus,caf,ped,str}_{real,simu}/
        <spk>_<wsj_name>_<ENV>.CH<n>.wav               # one channel per utterance, chosen by the organizers
    CHiME4/data/audio/16kHz/isolated/tr05_{bus,caf,ped,str}_{real,simu}/
        <spk>_<wsj_name>_<ENV>.CH{1..6}.wav            # training data only exists in the 6-channel folder
    CHiME4/data/annotations/{tr05,dt05,et05}_{real,simu}.json
        [{"speaker": "F01", "wsj_name": "22GC010A", "environment": "BUS", "dot": "...", "prompt": "...", ...}]

Splits are `<set>_<kind>`: dt05_real, dt05_simu, et05_real, et05_simu (1-channel track), and tr05_real,
tr05_simu from the 6-channel folder, one channel per utterance (the annotation's `ref_mic`, else CH5, the
front-facing reference microphone). Text is the "dot" transcript, cleaned as WSJ (`normalize_wsj`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from deepspeech2.data.corpora._common import Entry, Skip, build_split, find_root, no_layout, select_splits
from deepspeech2.data.corpora.wsj import normalize_wsj
from deepspeech2.data.manifest import Utterance

CORPUS = "chime4"
SETS = ("tr05", "dt05", "et05")
KINDS = ("real", "simu")
ENVIRONMENTS = ("bus", "caf", "ped", "str")
TRACK_1CH = Path("audio") / "16kHz" / "isolated_1ch_track"
TRACK_6CH = Path("audio") / "16kHz" / "isolated"
REFERENCE_MIC = "CH5"  # CHiME-4's reference channel: the front-facing centre microphone
LAYOUT = ("CHiME4/data/audio/16kHz/isolated_1ch_track/{dt05,et05}_{bus,caf,ped,str}_{real,simu}/"
          "<spk>_<wsj_name>_<ENV>.CH<n>.wav and CHiME4/data/annotations/{dt05,et05,tr05}_{real,simu}.json")


def _audio_dirs(data: Path, split: str) -> list[Path]:
    track = TRACK_6CH if split.startswith("tr05") else TRACK_1CH
    set_, kind = split.split("_")
    return [data / track / f"{set_}_{env}_{kind}" for env in ENVIRONMENTS]


def _read_annotations(path: Path) -> list[dict]:
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"annotation file `{path}` is not valid JSON ({e}); re-extract it from the CHiME-4 "
                         "archive") from None
    if not isinstance(items, list):
        raise ValueError(f"annotation file `{path}` should hold a JSON list of utterances, "
                         f"got {type(items).__name__}")
    return items


def scan_split(data: Path, split: str) -> tuple[list[Entry], list[Skip]]:
    """Entries for one `<set>_<kind>` split from its annotation file and audio folders."""
    annotations = data / "annotations" / f"{split}.json"
    six_channel = split.startswith("tr05")
    track = TRACK_6CH if six_channel else TRACK_1CH
    set_, kind = split.split("_")
    # {utt id: {channel: path}}, utt id = "<spk>_<wsj_name>_<ENV>"
    audio: dict[str, dict[str, Path]] = {}
    for d in _audio_dirs(data, split):
        for wav in d.glob("*.wav"):
            utt, _, channel = wav.name[: -len(".wav")].rpartition(".")
            audio.setdefault(utt, {})[channel] = wav
    entries, skipped, seen = [], [], set()
    for n, item in enumerate(_read_annotations(annotations)):
        try:
            speaker, wsj_name, env, dot = (str(item[k]) for k in ("speaker", "wsj_name", "environment", "dot"))
        except (KeyError, TypeError):
            skipped.append(Skip(f"{annotations.name}[{n}]", "annotation lacks speaker/wsj_name/environment/dot"))
            continue
        utt = f"{speaker}_{wsj_name}_{env.upper()}"
        seen.add(utt)
        channels = audio.get(utt, {})
        folder = data / track / f"{set_}_{env.lower()}_{kind}"
        if six_channel:
            mic = str(item.get("ref_mic", REFERENCE_MIC))
            path = channels.get(mic, folder / f"{utt}.{mic}.wav")
        else:  # the 1-channel track holds exactly one channel per utterance
            path = channels[min(channels)] if channels else folder / f"{utt}.{REFERENCE_MIC}.wav"
        entries.append(Entry(utt, path, normalize_wsj(dot), speaker))
    for utt in sorted(set(audio) - seen):
        skipped.append(Skip(utt, f"no annotation in `{annotations}`"))
    return entries, skipped


def prepare_chime4(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
) -> dict[str, list[Utterance]]:
    """Import CHiME-4 (1-channel track): write `output_dir/<set>_<kind>.jsonl` (+ `.report.json`).

    Args:
        corpus_dir: the `CHiME4` folder, the folder containing it, or `CHiME4/data`.
        output_dir: where manifests and reports go (the WAVs are used in place).
        num_workers: parallel audio checks.
        splits: a subset of dt05_real, dt05_simu, et05_real, et05_simu, tr05_real, tr05_simu; None imports
            those present (annotation file and audio folders both there).

    Returns:
        {split: utterances}, WSJ-cleaned English text, language "en", speaker = "F01"-style id.

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: no split has both its annotation JSON and its audio folders; an annotation file is not
            a JSON list.
    """
    root = find_root(corpus_dir, ["CHiME4"], LAYOUT)
    data = root / "data" if (root / "data").is_dir() else root
    found = [f"{s}_{k}" for s in SETS for k in KINDS
             if (data / "annotations" / f"{s}_{k}.json").is_file()
             and any(d.is_dir() for d in _audio_dirs(data, f"{s}_{k}"))]
    if not found:
        raise no_layout(corpus_dir, LAYOUT)
    out = {}
    for split in select_splits(found, splits, CORPUS):
        entries, skipped = scan_split(data, split)
        out[split] = build_split(CORPUS, split, entries, skipped, corpus_root=data, output_dir=Path(output_dir),
                                 language="en", num_workers=num_workers)
    return out
