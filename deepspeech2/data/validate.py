"""`ds2-prepare validate`: check every manifest line before a long job trips over it."""

from __future__ import annotations

import concurrent.futures
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf
from tqdm import tqdm

from deepspeech2.audio import SAMPLE_RATE, audio_info
from deepspeech2.data.manifest import Utterance, parse_line, write_manifest
from deepspeech2.features import FeatureConfig
from deepspeech2.fileio import atomic_write
from deepspeech2.model.config import DS2_SMALL, PRESETS, ModelConfig
from deepspeech2.model.deepspeech2 import ctc_label_steps, output_steps
from deepspeech2.vocab import Vocabulary


@dataclass(frozen=True)
class ValidationConfig:
    """What `validate_manifest` checks."""

    vocab: Vocabulary | None = None  # text must be within it; None skips the check
    sample_rate: int = SAMPLE_RATE  # expected sample rate of every file
    channels: int = 1  # expected channel count
    duration_tolerance: float = 0.05  # seconds the manifest's duration may differ from the audio's
    model: ModelConfig | None = DS2_SMALL  # CTC feasibility is judged with this model's exact output steps
    # (`deepspeech2.model.output_steps`, as training does); None skips the check
    feature_config: FeatureConfig = FeatureConfig()  # the features the model sees: their window, hop and
    # sample rate (the audio is counted as make-shards resamples it) give the frames
    decode: bool = True  # decode every file fully (slower; catches truncated/corrupt data)
    num_workers: int = 4  # threads (soundfile releases the GIL)

    def __post_init__(self):
        if self.duration_tolerance < 0:
            raise ValueError(f"`duration_tolerance` must be >= 0, got {self.duration_tolerance}")


def model_name(model: ModelConfig) -> str:
    """The preset name of `model`, or a description of its front end for messages."""
    name = next((k for k, v in PRESETS.items() if v == model), None)
    return name or f"custom (time stride {model.time_stride})"


def samples_used(u: Utterance, file_rate: int, file_frames: int, sample_rate: int) -> int:
    """The samples of `u` that `make_shards` stores, at `sample_rate`: the whole file, or the segment
    (`offset` > 0) cut at the file's end. So a line whose audio is shorter than its manifest duration is
    judged on the audio it really has."""
    if u.offset:
        start = int(round(u.offset * file_rate))
        used = max(0, min(start + int(round(u.duration * file_rate)), file_frames) - start)
    else:
        used = file_frames
    return used if file_rate == sample_rate else -(-used * sample_rate // file_rate)  # resample: ceil


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
    known = cfg.vocab is None or not cfg.vocab.oov(u.text)
    if cfg.model is not None and u.text.strip() and known:
        # Count label ids, as training does; without a vocabulary each character is one label.
        vocab = cfg.vocab or Vocabulary.from_texts([u.text])
        need = ctc_label_steps(vocab.encode(u.text))
        num_samples = samples_used(u, sr, frames, cfg.feature_config.sample_rate)
        steps = output_steps(cfg.model, cfg.feature_config, num_samples)
        if steps < need:
            add("text", f"CTC-infeasible: model {model_name(cfg.model)} has {steps} output steps for "
                f"{num_samples / cfg.feature_config.sample_rate:.3f}s of audio but the labels need {need}",
                "drop the line, or use a model with a smaller time stride")
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
