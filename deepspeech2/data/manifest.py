"""JSON-lines manifests: one utterance per line.

Required keys: `audio_filepath`, `duration` (seconds), `text`. Optional: `offset` (seconds into the
file), `speaker`, `language`. Any other key is kept in `extra` and written back unchanged, so
PaddleSpeech and NeMo manifests load and round-trip as they are. Relative audio paths are resolved
against the manifest's own directory (so a corpus folder can be moved as a whole).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from deepspeech2.fileio import atomic_write

_REQUIRED = ("audio_filepath", "duration", "text")
_OPTIONAL = ("offset", "speaker", "language")


@dataclass(frozen=True)
class Utterance:
    """One manifest line."""

    audio_filepath: str  # absolute after reading (relative paths resolve against the manifest's dir)
    duration: float  # seconds of audio used, starting at `offset`
    text: str  # normalized transcript
    offset: float = 0.0  # seconds into the file where the utterance starts (TED-LIUM segments)
    speaker: str | None = None
    language: str | None = None  # "en", "zh", ...
    extra: dict = field(default_factory=dict, compare=False)  # unknown keys, kept for round trips

    def to_json(self, relative_to: Path | None = None) -> str:
        path = self.audio_filepath
        if relative_to is not None:
            try:
                path = os.path.relpath(path, relative_to) if Path(path).is_absolute() and \
                    Path(path).resolve().is_relative_to(relative_to.resolve()) else path
            except ValueError:
                pass
        obj = {"audio_filepath": path, "duration": round(self.duration, 4), "text": self.text}
        if self.offset:
            obj["offset"] = round(self.offset, 4)
        for key in ("speaker", "language"):
            if getattr(self, key) is not None:
                obj[key] = getattr(self, key)
        obj.update(self.extra)
        return json.dumps(obj, ensure_ascii=False)


def parse_line(line: str, base_dir: Path | None = None, where: str = "") -> Utterance:
    """Parse one manifest line. Raises ValueError with `where` (e.g. "train.jsonl:12") in the message."""
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
        value = obj.pop(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{where}: `{key}` must be a non-negative number of seconds, got {value!r}")
        nums[key] = float(value)
    opt = {k: obj.pop(k) for k in ("speaker", "language") if k in obj}
    if "speaker" in opt and opt["speaker"] is not None:
        opt["speaker"] = str(opt["speaker"])
    return Utterance(audio_filepath=path, text=text, **nums, **opt, extra=obj)


def iter_manifest(path: str | os.PathLike) -> Iterator[tuple[int, Utterance]]:
    """Yield `(line_number, utterance)`; blank lines are skipped. Raises ValueError at a bad line."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"manifest `{path}` does not exist")
    base = path.parent.resolve()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                yield n, parse_line(line, base, where=f"{path}:{n}")


def read_manifest(path: str | os.PathLike) -> list[Utterance]:
    """Read a whole manifest."""
    return [u for _, u in iter_manifest(path)]


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
