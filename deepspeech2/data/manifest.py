"""JSON-lines manifests: one utterance per line.

Required keys: `audio_filepath`, `duration` (seconds), `text`. Optional: `offset` (seconds into the
file), `speaker`, `language`. Any other key is kept in `extra` and written back unchanged, so
PaddleSpeech and NeMo manifests load and round-trip as they are. Relative audio paths are resolved
against the manifest's own directory (so a corpus folder can be moved as a whole).

What audio a line stands for, in every tool (validate, make-shards, compute-stats):
  - a line WITH an `offset` key, even `"offset": 0`, is a segment: `[offset, offset + duration)` of the file
    (TED-LIUM, NeMo segmented manifests). It may run past the file's end by `DURATION_TOLERANCE`, and is
    cut there.
  - a line WITHOUT one is the whole file, and `duration` must be its length within `DURATION_TOLERANCE`.
`audio_span` and `duration_mismatch` are that rule; `load_utterance` decodes by it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

from deepspeech2.audio import DURATION_TOLERANCE, SAMPLE_RATE, audio_info, read_frames
from deepspeech2.fileio import atomic_write
from deepspeech2.text import UnnormalizableError, normalize

_REQUIRED = ("audio_filepath", "duration", "text")
_OPTIONAL = ("offset", "speaker", "language")


@dataclass(frozen=True)
class Utterance:
    """One manifest line."""

    audio_filepath: str  # absolute after reading (relative paths resolve against the manifest's dir)
    duration: float  # seconds: the segment's length, or the whole file's (checked against the audio)
    text: str  # normalized transcript
    offset: float | None = None  # set (even 0.0): a segment starting this many seconds into the file
    # (TED-LIUM); None: the whole file. A segment at 0 is not the whole file: its duration bounds it.
    speaker: str | None = None
    language: str | None = None  # "en", "zh", ...
    extra: dict = field(default_factory=dict, compare=False)  # unknown keys, kept for round trips

    @property
    def is_segment(self) -> bool:
        """True when the utterance is `[offset, offset + duration)` of its file rather than all of it."""
        return self.offset is not None

    def to_json(self, relative_to: Path | None = None) -> str:
        path = self.audio_filepath
        if relative_to is not None and os.path.isabs(path):
            path = _relative_path(path, relative_to)
        obj = {"audio_filepath": path, "duration": round(self.duration, 4), "text": self.text}
        if self.offset is not None:  # kept at 0.0 too: it makes the line a segment
            obj["offset"] = round(self.offset, 4)
        for key in ("speaker", "language"):
            if getattr(self, key) is not None:
                obj[key] = getattr(self, key)
        obj.update(self.extra)
        return json.dumps(obj, ensure_ascii=False)


def _relative_path(path: str, folder: Path) -> str:
    """`path` relative to `folder` when the file lies under it, else `path` as it is.

    Relative to the folder as given or, failing that, as resolved (a manifest read through a symlinked
    `data/` holds resolved paths). The file's own name is never resolved, and the result must reach the same
    file from the folder `iter_manifest` will resolve, so no `..` climbs back across a symlink.
    """
    real, base = os.path.realpath(path), os.path.realpath(folder)
    for start in (folder, base):
        try:
            rel = os.path.relpath(path, start)
        except ValueError:  # another drive (Windows)
            continue
        if Path(rel).parts[0] != os.pardir and os.path.realpath(os.path.join(base, rel)) == real:
            return rel
    return path


def open_manifest(path: str | os.PathLike) -> TextIO:
    """Open a manifest to read line by line, as every tool does. A byte that isn't UTF-8 doesn't stop the
    reading: it comes through escaped (as U+DC80..U+DCFF, `surrogateescape`), and `parse_line` rejects its
    line alone, naming it."""
    return open(path, encoding="utf-8", errors="surrogateescape")


def parse_line(line: str, base_dir: Path | None = None, where: str = "") -> Utterance:
    """Parse one manifest line (as `open_manifest` reads it). Raises ValueError with `where` (e.g.
    "train.jsonl:12") in the message."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as e:  # an escaped byte from `open_manifest`
        byte = line[e.start].encode("utf-8", "surrogateescape")
        raise ValueError(f"{where}: not valid UTF-8 (byte 0x{byte.hex()} at column {e.start + 1}); re-encode the "
                         "manifest as UTF-8 (e.g. `iconv -f latin1 -t utf-8 IN > OUT`)") from None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e.msg} at column {e.colno}); "
                         "each line must be one JSON object") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    missing = [k for k in _REQUIRED if k not in obj]
    if missing:
        raise ValueError(f"{where}: missing required field(s) {missing}; "
                         "every line needs audio_filepath, duration and text")
    path = obj.pop("audio_filepath")
    if not isinstance(path, str) or not path:
        raise ValueError(f"{where}: `audio_filepath` must be a non-empty string, got {path!r}")
    if base_dir is not None and not os.path.isabs(path):
        path = str(base_dir / path)
    text = obj.pop("text")
    if not isinstance(text, str):
        raise ValueError(f"{where}: `text` must be a string, got {text!r}")
    nums = {}
    for key in ("duration", "offset"):
        value = obj.pop(key, None)
        if value is None and key == "offset":  # absent (or null): the whole file
            continue
        # json.loads also gives NaN (which fails every comparison), inf (`Infinity`, 1e999) and ints too big
        # for a float; the bounds keep all three out.
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= sys.float_info.max:
            raise ValueError(f"{where}: `{key}` must be a non-negative, finite number of seconds, got {value!r}")
        nums[key] = float(value)
    opt = {k: obj.pop(k) for k in ("speaker", "language") if k in obj}
    if "speaker" in opt and opt["speaker"] is not None:
        opt["speaker"] = str(opt["speaker"])
    return Utterance(audio_filepath=path, text=text, **nums, **opt, extra=obj)


def audio_span(u: Utterance, file_rate: int, file_frames: int) -> tuple[int, int]:
    """The frames `[start, stop)` of its file that `u` stands for: the segment cut at the file's end, or
    the whole file. Never raises; `duration_mismatch` says whether the manifest and the audio agree.

    Args:
        u: the utterance.
        file_rate, file_frames: the file's sample rate and length in frames (`audio_info`).
    Returns:
        `(start, stop)`, 0 <= start <= stop <= file_frames.
    """
    if not u.is_segment:
        return 0, file_frames
    start = min(int(round(u.offset * file_rate)), file_frames)
    return start, min(start + int(round(u.duration * file_rate)), file_frames)


def duration_mismatch(u: Utterance, file_rate: int, file_frames: int) -> str | None:
    """Why `u`'s offset/duration disagree with its audio by more than `DURATION_TOLERANCE`, or None.

    A segment must start inside the file and end at most the tolerance past its end; a whole-file line's
    `duration` must be the file's length within the tolerance.
    """
    seconds = file_frames / file_rate
    if u.is_segment:
        if u.offset >= seconds:
            return f"segment starts at {u.offset:.3f}s, at or after the end of the audio ({seconds:.3f}s)"
        if u.offset + u.duration > seconds + DURATION_TOLERANCE:
            return (f"segment {u.offset:.3f}s + {u.duration:.3f}s runs past the end of the audio ({seconds:.3f}s) "
                    f"by more than {DURATION_TOLERANCE}s")
        return None
    if abs(seconds - u.duration) > DURATION_TOLERANCE:
        return (f"manifest says {u.duration:.3f}s but the audio has {seconds:.3f}s (more than {DURATION_TOLERANCE}s "
                "apart; a line without `offset` is the whole file)")
    return None


class TooLongError(ValueError):
    """The audio of an utterance is longer than the caller takes (`load_utterance`'s `max_seconds`)."""

    def __init__(self, path: str, seconds: float, limit: float):
        super().__init__(f"`{path}`: {seconds:.1f} s of audio, over the {limit:g} s limit")
        self.path, self.seconds, self.limit = path, seconds, limit


def load_utterance(u: Utterance, sample_rate: int | None = SAMPLE_RATE, max_seconds: float | None = None
                   ) -> np.ndarray:
    """Decode the audio `u` stands for (`audio_span`), downmixed to mono and resampled to `sample_rate`.

    Args:
        u: the utterance.
        sample_rate: resample to this rate; None keeps the file's.
        max_seconds: refuse longer audio, judged by the file's header before any of it is decoded.

    Returns:
        float32 (samples,), in [-1, 1].

    Raises:
        FileNotFoundError: the audio file doesn't exist.
        TooLongError: more than `max_seconds` of audio.
        ValueError: unreadable audio, or offset/duration that disagree with it (`duration_mismatch`).
    """
    rate, _, frames = audio_info(u.audio_filepath)
    problem = duration_mismatch(u, rate, frames)
    if problem:
        raise ValueError(f"`{u.audio_filepath}`: {problem}")
    start, stop = audio_span(u, rate, frames)
    if max_seconds is not None and (stop - start) / rate > max_seconds:
        raise TooLongError(u.audio_filepath, (stop - start) / rate, max_seconds)
    return read_frames(u.audio_filepath, start, stop, sample_rate=sample_rate)


def iter_manifest(path: str | os.PathLike) -> Iterator[tuple[int, Utterance]]:
    """Yield `(line_number, utterance)`; blank lines are skipped. Raises ValueError at a bad line."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"manifest `{path}` does not exist")
    base = path.parent.resolve()
    with open_manifest(path) as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                yield n, parse_line(line, base, where=f"{path}:{n}")


def read_manifest(path: str | os.PathLike) -> list[Utterance]:
    """Read a whole manifest."""
    return [u for _, u in iter_manifest(path)]


def sample_utterances(utterances: list[Utterance], num_samples: int, seed: int = 0) -> list[Utterance]:
    """A random `num_samples` of `utterances` (seeded by `seed`: short and long alike, unlike the first lines),
    in their order; all of them when `num_samples` is 0 or more than there are."""
    if not 0 < num_samples < len(utterances):
        return list(utterances)
    keep = np.sort(np.random.default_rng(seed).choice(len(utterances), num_samples, replace=False))
    return [utterances[i] for i in keep]


def read_manifests(paths: Iterable[str | os.PathLike]) -> list[Utterance]:
    """Read and concatenate several manifests (merge)."""
    return [u for p in paths for u in read_manifest(p)]


def write_manifest(path: str | os.PathLike, utterances: Iterable[Utterance]) -> int:
    """Write atomically; audio paths under the manifest's directory are stored relative to it.

    Returns:
        the number of lines written.
    """
    path = Path(path)
    n = 0
    with atomic_write(path) as f:
        for u in utterances:
            f.write(u.to_json(relative_to=path.parent) + "\n")
            n += 1
    return n


def write_dropped(path: str | os.PathLike, manifest: str | os.PathLike, reasons: dict[int, list[str]]) -> None:
    """Write the lines of `manifest` that were left out to `path`: one `{"line", "reasons", "entry"}` per
    line, in line order, `entry` being the line as it is (a byte that isn't UTF-8 shown as `\\xe9`)."""
    with open_manifest(manifest) as f:
        raw = {n: line for n, line in enumerate(f, start=1) if n in reasons}
    with atomic_write(path) as f:
        for n in sorted(reasons):
            entry = raw[n].rstrip("\n").encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            f.write(json.dumps({"line": n, "reasons": reasons[n], "entry": entry}, ensure_ascii=False) + "\n")


@dataclass(frozen=True)
class NormalizeReport:
    """What `normalize_manifest` did."""

    written: int  # lines written to the output manifest
    changed: int  # of those, lines whose transcript normalization changed
    dropped: tuple[tuple[int, str], ...]  # (line number, reason) of the lines left out
    dropped_path: Path | None  # where the dropped lines are listed (None when there are none)


def normalize_manifest(path: str | os.PathLike, out: str | os.PathLike, language: str) -> NormalizeReport:
    """Write `path` to `out` with every transcript normalized (`deepspeech2.text.normalize`), as the
    corpus importers do; other keys are kept.

    A transcript that can't be normalized confidently (`UnnormalizableError`: "3-2", "9/11", a stray
    script) or is empty afterwards is left out rather than guessed: a wrong label is worse than none.
    Those lines go to `<out>.dropped.jsonl` with the reason.

    Args:
        path: the manifest to read.
        out: the manifest to write (may not be `path`).
        language: "en" or "zh".

    Returns:
        a NormalizeReport.

    Raises:
        FileNotFoundError: `path` doesn't exist.
        ValueError: a malformed line, a bad `language`, `out` is `path`, or no line is left to write.
    """
    path, out = Path(path), Path(out)
    if language not in ("en", "zh"):
        raise ValueError(f"`language` must be 'en' or 'zh', got {language!r}")
    if out.resolve() == path.resolve():
        raise ValueError(f"`out` must differ from the manifest read, got `{out}` for both")
    kept, dropped, changed = [], [], 0
    for n, u in iter_manifest(path):
        try:
            text = normalize(u.text, language, strict=True)
        except UnnormalizableError as e:
            dropped.append((n, f"can't be normalized confidently: {e}"))
            continue
        if not text:
            dropped.append((n, "transcript is empty after normalization"))
            continue
        changed += text != u.text
        kept.append(replace(u, text=text))
    dropped_path = None
    if dropped:
        dropped_path = out.with_name(out.name + ".dropped.jsonl")
        write_dropped(dropped_path, path, {n: [reason] for n, reason in dropped})
    if not kept:
        where = f"; the reasons are in `{dropped_path}`" if dropped else ""
        raise ValueError(f"no line of `{path}` is left to write to `{out}` ({len(dropped)} dropped){where}")
    write_manifest(out, kept)
    return NormalizeReport(len(kept), changed, tuple(dropped), dropped_path)


def filter_utterances(
    utterances: Iterable[Utterance],
    min_duration: float = 0.0,
    max_duration: float = float("inf"),
    charset: set[str] | None = None,
) -> list[Utterance]:
    """Keep utterances with `min_duration <= duration <= max_duration` and (if given) text within `charset`."""
    if min_duration > max_duration:
        raise ValueError(f"`min_duration` ({min_duration}) must not exceed `max_duration` ({max_duration})")
    return [u for u in utterances
            if min_duration <= u.duration <= max_duration and (charset is None or set(u.text) <= charset)]


def total_duration(utterances: Iterable[Utterance]) -> float:
    return sum(u.duration for u in utterances)


def replace(u: Utterance, **changes) -> Utterance:
    return dataclasses.replace(u, **changes)
