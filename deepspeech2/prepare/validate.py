"""`ds2-prepare validate`: check every manifest line before a long job trips over it.

It judges a line as the other tools use it, so they agree: what `ds2-make-shards` and `ds2-compute-stats`
convert on the fly (another sample rate, several channels) is a warning, not a problem, unless `strict`;
offset/duration follow `deepspeech2.data.manifest.duration_mismatch` (one `DURATION_TOLERANCE` everywhere);
CTC feasibility is `deepspeech2.geometry.ctc_feasible`'s rule on the audio make-shards would store.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from deepspeech2.audio import MAX_DURATION, SAMPLE_RATE, audio_info
from deepspeech2.data.manifest import (Utterance, audio_span, duration_mismatch, open_manifest, parse_line,
                                       write_dropped, write_manifest)
from deepspeech2.feature_config import FeatureConfig
from deepspeech2.geometry import ctc_label_steps, output_steps
from deepspeech2.model_config import DS2_SMALL, ModelConfig, model_name
from deepspeech2.progress import progress_bar
from deepspeech2.vocab import Vocabulary


DECODE_BLOCK = 1 << 20  # frames decoded at a time (about a minute at 16 kHz)


@dataclass(frozen=True)
class ValidationConfig:
    """What `validate_manifest` checks."""

    vocab: Vocabulary | None = None  # text must be within it; None skips the check
    sample_rate: int = SAMPLE_RATE  # the rate make-shards stores; other rates are resampled (a warning)
    strict: bool = False  # a file that would be resampled or downmixed is a problem, not a warning
    model: ModelConfig | None = DS2_SMALL  # CTC feasibility is judged with this model's exact output steps
    # (`deepspeech2.geometry.output_steps`, as training does); None skips the check
    feature_config: FeatureConfig = FeatureConfig()  # the features the model sees: their window, hop and
    # sample rate (the audio is counted as make-shards resamples it) give the frames
    decode: bool = True  # decode every file fully (slower; catches truncated/corrupt data)
    max_duration: float | None = MAX_DURATION  # longer lines are a warning: make-shards, compute-stats and
    # training skip them (evaluation takes them); None: no warning
    num_workers: int = 4  # threads (soundfile releases the GIL)


def samples_used(u: Utterance, file_rate: int, file_frames: int, sample_rate: int) -> int:
    """The samples of `u` that `make_shards` stores, at `sample_rate`: its `audio_span` (a segment is cut
    at the file's end), resampled. So a line whose audio is shorter than its manifest duration is judged on
    the audio it really has."""
    start, stop = audio_span(u, file_rate, file_frames)
    used = stop - start
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
    good: list[tuple[int, Utterance]] = field(default_factory=list)  # usable lines, warnings or not
    problems: list[Problem] = field(default_factory=list)  # each drops its line
    warnings: list[Problem] = field(default_factory=list)  # the line stays: the pipeline converts it

    @property
    def ok(self) -> bool:
        return not self.problems

    def bad_lines(self) -> list[int]:
        return sorted({p.line for p in self.problems})

    def warned_lines(self) -> list[int]:
        """Usable lines with a warning."""
        return sorted({p.line for p in self.warnings} - {p.line for p in self.problems})


def _check(line_no: int, raw: str, base: Path, cfg: ValidationConfig
           ) -> tuple[Utterance | None, list[Problem], list[Problem]]:
    """`(utterance or None if dropped, problems, warnings)` for one line."""
    try:
        u = parse_line(raw, base, where=f"line {line_no}")
    except ValueError as e:
        msg = str(e).split(": ", 1)[-1]
        return None, [Problem(line_no, "json", msg, "fix the line so it is a JSON object with "
                              "audio_filepath, duration (s) and text")], []
    problems, warnings = [], []
    add = lambda f, m, fix: problems.append(Problem(line_no, f, m, fix))  # noqa: E731

    def converted(f, m, fix):  # what make-shards and compute-stats convert on the fly
        if cfg.strict:
            add(f, m, fix + "; without strict checking this is a warning only")
        else:
            warnings.append(Problem(line_no, f, m, fix))

    if not u.text.strip():
        add("text", "empty transcript", "remove the line or add its transcript")
    elif cfg.vocab is not None and (oov := cfg.vocab.oov(u.text)):
        add("text", f"characters outside the vocabulary: {''.join(sorted(oov))!r}",
            "normalize the transcripts (ds2-prepare normalize MANIFEST --language en|zh --out OUT) or "
            "rebuild the vocabulary")
    try:
        sr, ch, frames = audio_info(u.audio_filepath)
    except FileNotFoundError:
        add("audio_filepath", f"file not found: {u.audio_filepath}", "fix the path (relative paths resolve "
            "against the manifest's folder) or remove the line")
        return None, problems, warnings
    except ValueError as e:
        add("audio_filepath", f"unreadable audio: {u.audio_filepath} ({str(e).split(': ')[-1]})",
            "re-convert the file to 16-bit WAV/FLAC or remove the line")
        return None, problems, warnings
    if sr != cfg.sample_rate:
        # make-shards and compute-stats resample it (deepspeech2.audio.load_audio); upsampled audio lacks
        # the band above the file's Nyquist frequency, which the model otherwise hears.
        empty = f"; the band above {sr // 2} Hz stays empty" if sr < cfg.sample_rate else ""
        converted("audio_filepath", f"sample rate {sr} Hz, resampled to {cfg.sample_rate} Hz when used{empty}",
                  f"resample once to save the work (sox in.wav -r {cfg.sample_rate} out.wav)")
    if ch != 1:  # the model hears mono: load_audio averages the channels
        converted("audio_filepath", f"{ch} channels, downmixed to mono when used (their mean)",
                  "downmix once to save the work (sox in.wav -c 1 out.wav)")
    mismatch = duration_mismatch(u, sr, frames)
    if mismatch:
        add("duration", mismatch, "fix the segment's offset/duration" if u.is_segment else
            f"set duration to {frames / sr:.3f}, or, if the line is a part of the file, give its `offset` "
            "(0 for the start)")
    start, stop = audio_span(u, sr, frames)
    if cfg.max_duration is not None and (stop - start) / sr > cfg.max_duration and not mismatch:
        warnings.append(Problem(line_no, "duration", f"{(stop - start) / sr:.1f} s, over the {cfg.max_duration:g} s "
                                "make-shards, compute-stats and training take (they skip it)",
                                "cut the recording into utterances, or keep the line for evaluation only"))
    if cfg.decode and not problems and (problem := _decoding_problem(u.audio_filepath, start, stop)):
        add("audio_filepath", *problem)
    if cfg.model is not None and u.text.strip() and (problem := _infeasible(u, sr, frames, cfg)):
        add("text", *problem)
    return (u if not problems else None), problems, warnings


def _decoding_problem(path: str, start: int, stop: int) -> tuple[str, str] | None:
    """`(message, fix)` when the samples `start`:`stop` of `path` don't decode or are all zeros, else None."""
    try:
        decoded = audible = 0
        with sf.SoundFile(path) as f:
            f.seek(start)
            while decoded < stop - start:  # in blocks: an hour-long file isn't held in memory whole
                data = f.read(min(DECODE_BLOCK, stop - start - decoded), dtype="int16")
                if not len(data):
                    break
                decoded += len(data)
                audible = audible or bool(np.any(data))
        if decoded == 0:
            return "no samples decoded", "re-convert the file"
        if not audible:
            return "audio is all zeros (silence)", "check the recording or remove the line"
    except Exception as e:  # noqa: BLE001 - any decoder failure is a bad line, not a crash
        return f"decoding failed: {e}", "re-convert the file or remove the line"
    return None


def _infeasible(u: Utterance, sr: int, frames: int, cfg: ValidationConfig) -> tuple[str, str] | None:
    """`(message, fix)` when `cfg.model` has fewer output steps for the line's audio than CTC needs for its
    transcript, else None (also for a transcript outside `cfg.vocab`, already a problem of its own)."""
    if cfg.vocab is not None and cfg.vocab.oov(u.text):
        return None
    # Count label ids, as training does; without a vocabulary each character is one label.
    vocab = cfg.vocab or Vocabulary.from_texts([u.text])
    need = ctc_label_steps(vocab.encode(u.text))
    num_samples = samples_used(u, sr, frames, cfg.feature_config.sample_rate)
    steps = output_steps(cfg.model, cfg.feature_config, num_samples)
    if steps < need:
        return (f"CTC-infeasible: model {model_name(cfg.model)} has {steps} output steps for "
                f"{num_samples / cfg.feature_config.sample_rate:.3f}s of audio but the labels need {need}",
                "drop the line, or use a model with a smaller time stride")
    return None


def validate_manifest(path: str | os.PathLike, config: ValidationConfig = ValidationConfig(),
                      progress: bool = True) -> ValidationReport:
    """Check every line of a manifest.

    Returns:
        the report: the usable utterances, one Problem per issue that drops a line, and one warning per
        conversion the pipeline makes on the fly (sample rate, channels; problems too with `strict`).

    Raises:
        FileNotFoundError: the manifest doesn't exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"manifest `{path}` does not exist")
    base = path.parent.resolve()
    with open_manifest(path) as f:
        lines = [(n, line) for n, line in enumerate(f, start=1) if line.strip()]
    report = ValidationReport(path=path, total=len(lines))
    with concurrent.futures.ThreadPoolExecutor(config.num_workers) as pool:
        results = progress_bar(pool.map(lambda nl: _check(nl[0], nl[1], base, config), lines), total=len(lines),
                               unit="utt", desc=f"validate {path.name}", show=progress)
        for (n, _), (utt, problems, warnings) in zip(lines, results):
            report.problems.extend(problems)
            report.warnings.extend(warnings)
            if utt is not None:
                report.good.append((n, utt))
    return report


def write_clean(report: ValidationReport, out: str | os.PathLike) -> Path:
    """Write the good lines to `out` and the dropped ones (with reasons) to `<out>.dropped.jsonl`.

    Returns:
        the path of the dropped-lines file.

    Raises:
        ValueError: no line is usable: the dropped-lines file is written, `out` is not (an empty manifest
            would only fail later, in make-shards or training, further from the reason).
    """
    out = Path(out)
    dropped = out.with_name(out.name + ".dropped.jsonl")
    by_line: dict[int, list[str]] = {}
    for p in report.problems:
        by_line.setdefault(p.line, []).append(f"{p.field}: {p.message}")
    write_dropped(dropped, report.path, by_line)
    if not report.good:
        fields = collections.Counter(p.field for p in report.problems).most_common(3)
        example = {p.field: p.message for p in reversed(report.problems)}  # each field's first message
        why = "; ".join(f"{n} with `{f}` problems (e.g. {example[f]})" for f, n in fields) or "it has no lines"
        raise ValueError(f"none of the {report.total} lines of `{report.path}` is usable, so `{out}` was not "
                         f"written; most common: {why}; every line's reasons are in `{dropped}`")
    write_manifest(out, (u for _, u in report.good))
    return dropped
