"""`ds2-prepare validate`: check every manifest line before a long job trips over it."""

from __future__ import annotations

import concurrent.futures
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf
from tqdm import tqdm

from deepspeech2.audio import SAMPLE_RATE, audio_info
from deepspeech2.data.manifest import Utterance, parse_line, write_manifest
from deepspeech2.features import FeatureConfig, num_frames
from deepspeech2.fileio import atomic_write
from deepspeech2.vocab import Vocabulary

def ctc_frames(duration: float, time_stride: int, feature_config: FeatureConfig = FeatureConfig()) -> int:
    """Model output steps for `duration` seconds: feature frames, then the front end's time stride."""
    frames = num_frames(int(round(duration * feature_config.sample_rate)), feature_config)
    return math.ceil(frames / time_stride)


def ctc_min_steps(labels: str) -> int:
    """The fewest CTC output steps that can emit `labels`: one per label, plus a blank between repeats."""
    return len(labels) + sum(a == b for a, b in zip(labels, labels[1:]))


@dataclass(frozen=True)
class ValidationConfig:
    """What `validate_manifest` checks."""

    vocab: Vocabulary | None = None  # text must be within it; None skips the check
    sample_rate: int = SAMPLE_RATE  # expected sample rate of every file
    channels: int = 1  # expected channel count
    duration_tolerance: float = 0.05  # seconds the manifest's duration may differ from the audio's
    time_stride: int = 2  # the model front end's total time stride (ds2-small: 4 with 2 stride-2 convs)
    decode: bool = True  # decode every file fully (slower; catches truncated/corrupt data)
    num_workers: int = 4  # threads (soundfile releases the GIL)
    frames_for: Callable[[float], int] | None = None  # override: duration -> model output steps

    def __post_init__(self):
        if self.time_stride < 1:
            raise ValueError(f"`time_stride` must be >= 1, got {self.time_stride}")
        if self.duration_tolerance < 0:
            raise ValueError(f"`duration_tolerance` must be >= 0, got {self.duration_tolerance}")


@dataclass(frozen=True)
class Problem:
    line: int
    field: str
    message: str
    fix: str

    def __str__(self):
        return f"line {self.line}: {self.field}: {self.message} -> {self.fix}"


@dataclass
class ValidationReport:
    path: Path
    total: int = 0
    good: list[tuple[int, Utterance]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def bad_lines(self) -> list[int]:
        return sorted({p.line for p in self.problems})


def _check(line_no: int, raw: str, base: Path, cfg: ValidationConfig) -> tuple[Utterance | None, list[Problem]]:
    try:
        u = parse_line(raw, base, where=f"line {line_no}")
    except ValueError as e:
        msg = str(e).split(": ", 1)[-1]
        return None, [Problem(line_no, "json", msg, "fix the line so it is a JSON object with "
                              "audio_filepath, duration (s) and text")]
    problems = []
    add = lambda f, m, fix: problems.append(Problem(line_no, f, m, fix))  # noqa: E731
    if not u.text.strip():
        add("text", "empty transcript", "remove the line or add its transcript")
    elif cfg.vocab is not None and (oov := cfg.vocab.oov(u.text)):
        add("text", f"characters outside the vocabulary: {''.join(sorted(oov))!r}",
            "normalize the text (deepspeech2.text.normalize) or rebuild the vocabulary")
    try:
        sr, ch, frames = audio_info(u.audio_filepath)
    except FileNotFoundError:
        add("audio_filepath", f"file not found: {u.audio_filepath}", "fix the path (relative paths resolve "
            "against the manifest's folder) or remove the line")
        return None, problems
    except ValueError as e:
        add("audio_filepath", f"unreadable audio: {u.audio_filepath} ({str(e).split(': ')[-1]})",
            "re-convert the file to 16-bit WAV/FLAC or remove the line")
        return None, problems
    if sr != cfg.sample_rate:
        add("audio_filepath", f"sample rate {sr} Hz, expected {cfg.sample_rate}",
            f"resample to {cfg.sample_rate} Hz (sox in.wav -r {cfg.sample_rate} out.wav)")
    if ch != cfg.channels:
        add("audio_filepath", f"{ch} channels, expected {cfg.channels}", "downmix to mono (sox in.wav -c 1 out.wav)")
    file_seconds = frames / sr
    if "offset" in json.loads(raw):  # a segment of a longer file (TED-LIUM): it must lie inside the file
        if u.offset + u.duration > file_seconds + cfg.duration_tolerance:
            add("duration", f"segment {u.offset:.3f}s + {u.duration:.3f}s runs past the end of the audio "
                f"({file_seconds:.3f}s)", "fix the segment's offset/duration")
    elif abs(file_seconds - u.duration) > cfg.duration_tolerance:
        add("duration", f"manifest says {u.duration:.3f}s but the audio has {file_seconds:.3f}s",
            f"set duration to {file_seconds:.3f}")
    if cfg.decode and not problems:
        try:
            with sf.SoundFile(u.audio_filepath) as f:
                f.seek(int(u.offset * sr))
                data = f.read(int(round(u.duration * sr)), dtype="int16")
            if len(data) == 0:
                add("audio_filepath", "no samples decoded", "re-convert the file")
            elif not np.any(data):
                add("audio_filepath", "audio is all zeros (silence)", "check the recording or remove the line")
        except Exception as e:  # noqa: BLE001 - any decoder failure is a bad line, not a crash
            add("audio_filepath", f"decoding failed: {e}", "re-convert the file or remove the line")
    if u.text.strip():
        steps = cfg.frames_for(u.duration) if cfg.frames_for else ctc_frames(u.duration, cfg.time_stride)
        need = ctc_min_steps(u.text)
        if steps < need:
            add("text", f"CTC-infeasible: {steps} output steps after the front end's stride of "
                f"{cfg.time_stride} but the labels need {need}", "drop the line, or use a smaller time stride")
    return (u if not problems else None), problems


def validate_manifest(path: str | os.PathLike, config: ValidationConfig = ValidationConfig(),
                      progress: bool = True) -> ValidationReport:
    """Check every line of a manifest; returns the good utterances and one Problem per issue found."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"manifest `{path}` does not exist")
    base = path.parent.resolve()
    with open(path, encoding="utf-8") as f:
        lines = [(n, line) for n, line in enumerate(f, start=1) if line.strip()]
    report = ValidationReport(path=path, total=len(lines))
    with concurrent.futures.ThreadPoolExecutor(config.num_workers) as pool:
        results = pool.map(lambda nl: _check(nl[0], nl[1], base, config), lines)
        for (n, _), (utt, problems) in zip(lines, tqdm(results, total=len(lines), desc=f"validate {path.name}",
                                                       unit="utt", disable=not progress)):
            report.problems.extend(problems)
            if utt is not None:
                report.good.append((n, utt))
    return report


def write_clean(report: ValidationReport, out: str | os.PathLike) -> Path:
    """Write the good lines to `out` and the dropped ones (with reasons) to `<out>.dropped.jsonl`."""
    out = Path(out)
    write_manifest(out, (u for _, u in report.good))
    dropped = out.with_name(out.name + ".dropped.jsonl")
    by_line: dict[int, list[str]] = {}
    for p in report.problems:
        by_line.setdefault(p.line, []).append(f"{p.field}: {p.message}")
    with open(report.path, encoding="utf-8") as f:
        raw = dict(enumerate(f, start=1))
    with atomic_write(dropped) as f:
        for line, reasons in sorted(by_line.items()):
            f.write(json.dumps({"line": line, "reasons": reasons, "entry": raw[line].rstrip("\n")},
                               ensure_ascii=False) + "\n")
    return dropped
