"""CHiME-4 (Vincent et al., 2017): WSJ prompts read on a tablet in noise (bus, cafe, pedestrian, street),
real and simulated. We import the single-microphone track for dev/test and one channel of the 6-channel
recordings for training, 16 kHz mono WAV used in place.

Layout as distributed (the CHiME-4 archive unpacks as `CHiME3/data/...`; a `CHiME4/` folder is accepted too):

    CHiME3/data/audio/16kHz/isolated_1ch_track/{dt05,et05}_{bus,caf,ped,str}_{real,simu}/
        <SPK>_<WSJ>_<ENV>.wav                        # one file per utterance, e.g. F01_050C0101_BUS.wav
    CHiME3/data/audio/16kHz/isolated_6ch_track/tr05_{bus,caf,ped,str}_{real,simu}/     (CHiME-3: isolated/)
        <SPK>_<WSJ>_<ENV>.CH{1..6}.wav               # (and .CH0, the close-talk microphone, for real data)
    CHiME3/data/annotations/{tr05,dt05,et05}_{real,simu}.json
        [{"speaker": "F01", "wsj_name": "050C0101", "environment": "BUS", "dot": "...", ...}, ...]
    CHiME3/data/annotations/{dt05,et05}_{real,simu}_1ch_track.list
        dt05_bus_real/F01_050C0101_BUS.CH5.wav       # which channel each 1-channel-track file is
    CHiME3/data/transcriptions/<set>_<kind>.dot_all  # "Transcript words (F01_050C0101_BUS)" per line

Splits are `<set>_<kind>`: dt05_real, dt05_simu, et05_real, et05_simu from the 1-channel track (the channel
named in the `_1ch_track.list`, when there is one, goes into the manifest as `channel`), and tr05_real,
tr05_simu from the 6-channel folder, channel 5 (CH5, the centre of the tablet's front bottom edge, the
channel Kaldi's CHiME-4 recipe extracts for noisy training data). Utterance ids are Kaldi's:
`<SPK>_<WSJ>_<ENV>_<REAL|SIMU>`. Every manifest line carries `environment` (bus/caf/ped/str) so results
can be grouped by it.

Transcripts, in order: the annotation's `dot` field (real data); `transcriptions/<split>.dot_all` (what
Kaldi reads for dt05/et05); for tr05_simu, which is WSJ0 SI-84 audio with noise added, the WSJ0 `.dot`
files (`wsj0_dir`, as Kaldi's simu_noisy_chime4_data_prep.sh does). An utterance with none is skipped and
reported. The text is cleaned as WSJ (`normalize_wsj`).

Not checked against a copy of the corpus (these come from the public Kaldi/ESPnet/asteroid recipes): the
ids inside `.dot_all` (taken to be `<SPK>_<WSJ>_<ENV>`), the `speaker` of tr05_simu annotations, and
whether the simu annotations carry `dot`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from deepspeech2.data.manifest import Utterance
from deepspeech2.prepare.importer import (Entry, Skip, build_split, find_root, no_layout, normalized,
                                          read_text_lines, select_splits)
from deepspeech2.prepare.wsj import normalize_wsj, read_dot_transcripts

CORPUS = "chime4"
SETS = ("tr05", "dt05", "et05")
KINDS = ("real", "simu")
ENVIRONMENTS = ("bus", "caf", "ped", "str")
AUDIO = Path("audio") / "16kHz"
TRACK_1CH = "isolated_1ch_track"
TRACKS_6CH = ("isolated_6ch_track", "isolated")  # CHiME-4's name for the 6-channel folder, then CHiME-3's
TRAIN_CHANNEL = "CH5"  # Kaldi's real_noisy_chime4_data_prep.sh: "extract 5th channel (CH5.wav, ...)"
ROOTS = ("CHiME3", "CHiME4", "CHiME4/CHiME3")  # where `data/` may be below `corpus_dir`
LAYOUT = ("CHiME3/data/audio/16kHz/isolated_1ch_track/{dt05,et05}_{bus,caf,ped,str}_{real,simu}/"
          "<SPK>_<WSJ>_<ENV>.wav and CHiME3/data/annotations/{dt05,et05,tr05}_{real,simu}.json")
_WAV = re.compile(r"^(?P<name>[^.]+)(?:\.(?P<channel>CH\d))?\.wav$", re.IGNORECASE)
_DOT_LINE = re.compile(r"^(?P<text>.*)\((?P<id>[^()\s]+)\)\s*$")


def find_data(corpus_dir: str | os.PathLike) -> Path:
    """The corpus's `data` folder (the one holding `annotations/`) in or below `corpus_dir`.

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: no `annotations` folder in `corpus_dir`, `corpus_dir/data`, `corpus_dir/CHiME3/data`,
            `corpus_dir/CHiME4/data` or `corpus_dir/CHiME4/CHiME3/data`.
    """
    base = find_root(corpus_dir, [], LAYOUT)
    for top in (base, *(base / r for r in ROOTS)):
        for data in (top, top / "data"):
            if (data / "annotations").is_dir():
                return data
    raise no_layout(corpus_dir, LAYOUT)


def _track_dir(data: Path, set_: str) -> Path:
    if set_ != "tr05":
        return data / AUDIO / TRACK_1CH
    dirs = [data / AUDIO / t for t in TRACKS_6CH]
    return next((d for d in dirs if d.is_dir()), dirs[0])


def _audio_dirs(data: Path, split: str) -> list[Path]:
    set_, kind = split.split("_")
    return [_track_dir(data, set_) / f"{set_}_{env}_{kind}" for env in ENVIRONMENTS]


def _read_annotations(path: Path) -> list:
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"annotation file `{path}` is not valid JSON ({e}); re-extract it from the CHiME-4 "
                         "archive") from None
    if not isinstance(items, list):
        raise ValueError(f"annotation file `{path}` should hold a JSON list of utterances, "
                         f"got {type(items).__name__}")
    return items


def _read_channels(path: Path) -> dict[str, str]:
    """{"F01_050C0101_BUS": "CH5"} from a `<split>_1ch_track.list` (empty when there is no such file)."""
    out = {}
    if path.is_file():
        for line in read_text_lines(path):
            if line.strip() and (m := _WAV.match(line.strip().rsplit("/", 1)[-1])) and m["channel"]:
                out[m["name"]] = m["channel"].upper()
    return out


def _read_dot_all(path: Path) -> dict[str, str]:
    """{"F01_050C0101_BUS": raw transcript} from `transcriptions/<split>.dot_all` (empty when missing)."""
    out = {}
    if path.is_file():
        for line in read_text_lines(path):
            if m := _DOT_LINE.match(line.strip()):
                out.setdefault(m["id"], m["text"])
    return out


def scan_split(
    data: Path,
    split: str,
    wsj0: Callable[[], dict[str, tuple[str, Path]]] | None = None,
) -> tuple[list[Entry], list[Skip]]:
    """Entries for one `<set>_<kind>` split from its annotation file and audio folders.

    `wsj0` gives the WSJ0 transcripts ({"011c0201": (raw text, .dot file)}) for tr05_simu, or is None when
    they are not available.
    """
    set_, kind = split.split("_")
    annotations = data / "annotations" / f"{split}.json"
    one_channel = set_ != "tr05"
    audio: dict[str, dict[str | None, Path]] = {}  # {"F01_050C0101_BUS": {channel or None: path}}
    for folder in _audio_dirs(data, split):
        for wav in sorted(folder.glob("*.wav")) if folder.is_dir() else []:
            if m := _WAV.match(wav.name):
                audio.setdefault(m["name"], {})[m["channel"] and m["channel"].upper()] = wav
    channels = _read_channels(data / "annotations" / f"{split}_1ch_track.list") if one_channel else {}
    dot_all = _read_dot_all(data / "transcriptions" / f"{split}.dot_all")
    entries, skipped, seen = [], [], set()
    for n, item in enumerate(_read_annotations(annotations)):
        try:
            speaker, wsj_name, env = (str(item[k]) for k in ("speaker", "wsj_name", "environment"))
        except (KeyError, TypeError):
            skipped.append(Skip(f"{annotations.name}[{n}]", "annotation lacks speaker/wsj_name/environment"))
            continue
        name = f"{speaker}_{wsj_name}_{env.upper()}"
        utt = f"{name}_{kind.upper()}"
        seen.add(name)
        files = audio.get(name, {})
        folder = _track_dir(data, set_) / f"{set_}_{env.lower()}_{kind}"
        if one_channel:  # one file per utterance, named without its channel (accept it with one, too)
            channel = channels.get(name)
            path = files.get(None) or files.get(channel) or next(iter(files.values()), folder / f"{name}.wav")
            channel = channel or next((c for c, p in files.items() if p == path and c), None)
        else:
            channel = TRAIN_CHANNEL
            path = files.get(channel, folder / f"{name}.{channel}.wav")
        if isinstance(item.get("dot"), str):
            text = item["dot"]
        elif name in dot_all:
            text = dot_all[name]
        elif split == "tr05_simu" and wsj0 is not None:
            found = wsj0().get(wsj_name.lower())
            if found is None:
                skipped.append(Skip(utt, f"no `... ({wsj_name.lower()})` line in any .dot file under `wsj0_dir`"))
                continue
            text = found[0]
        else:
            fix = ("pass `wsj0_dir=` (the folder holding the WSJ0 discs: tr05_simu is WSJ0 audio with noise added, "
                   "its transcripts are the WSJ0 .dot files) and re-run" if split == "tr05_simu" else
                   f"re-extract `{annotations.parent.parent / 'transcriptions'}` from the CHiME-4 archive")
            skipped.append(Skip(utt, f"no transcript: the annotation has no `dot` and "
                                     f"`transcriptions/{split}.dot_all` has no line for it; {fix}"))
            continue
        extra = {"environment": env.lower(), **({"channel": channel} if channel else {})}
        text, problem = normalized(normalize_wsj, text)
        entries.append(Entry(utt, path, text, speaker, extra=extra, problem=problem))
    for name in sorted(set(audio) - seen):
        skipped.append(Skip(f"{name}_{kind.upper()}", f"no annotation in `{annotations}`"))
    return entries, skipped


def prepare_chime4(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
    wsj0_dir: str | os.PathLike | None = None,
) -> dict[str, list[Utterance]]:
    """Import CHiME-4 (1-channel track, and CH5 for training): write `output_dir/<set>_<kind>.jsonl`
    (+ `.report.json`).

    Args:
        corpus_dir: the `CHiME3` (or `CHiME4`) folder the archive unpacks to, the folder containing it, or
            its `data` folder.
        output_dir: where manifests and reports go (the WAVs are used in place).
        num_workers: parallel audio checks.
        splits: a subset of dt05_real, dt05_simu, et05_real, et05_simu, tr05_real, tr05_simu; None imports
            those present (annotation file and audio folders both there).
        wsj0_dir: the WSJ0 disc folders (any depth), for tr05_simu's transcripts; default `data/WSJ0` when
            it exists (where Kaldi's CHiME-4 recipe looks). Without it tr05_simu's utterances are skipped
            and reported.

    Returns:
        {split: utterances}, WSJ-cleaned English text, language "en", speaker = "F01"-style id; each line
        also carries `environment` and, where known, `channel`.

    Raises:
        FileNotFoundError: `corpus_dir` or `wsj0_dir` is missing.
        ValueError: no split has both its annotation JSON and its audio folders; an annotation file is not
            a JSON list.
    """
    data = find_data(corpus_dir)
    if wsj0_dir is not None and not Path(wsj0_dir).expanduser().is_dir():
        raise FileNotFoundError(f"`wsj0_dir` {str(wsj0_dir)!r} does not exist or is not a folder; pass the folder "
                                "holding the WSJ0 discs (11-1.1/, ...), whose .dot files hold tr05_simu's text")
    wsj0_root = Path(wsj0_dir).expanduser() if wsj0_dir is not None else data / "WSJ0"
    cache: list[dict[str, tuple[str, Path]]] = []

    def wsj0() -> dict[str, tuple[str, Path]]:  # read on first use: only tr05_simu needs it
        if not cache:
            cache.append(read_dot_transcripts(wsj0_root))
        return cache[0]

    found = [f"{s}_{k}" for s in SETS for k in KINDS
             if (data / "annotations" / f"{s}_{k}.json").is_file()
             and any(d.is_dir() for d in _audio_dirs(data, f"{s}_{k}"))]
    if not found:
        raise no_layout(corpus_dir, LAYOUT)
    out = {}
    for split in select_splits(found, splits, CORPUS):
        entries, skipped = scan_split(data, split, wsj0 if wsj0_root.is_dir() else None)
        out[split] = build_split(CORPUS, split, entries, skipped, corpus_root=data, output_dir=Path(output_dir),
                                 language="en", num_workers=num_workers)
    return out
