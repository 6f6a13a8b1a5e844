"""Machinery shared by the corpus importers: find audio, convert what must be converted to 16 kHz WAV in
parallel, write manifests and skip reports.

Every importer scans its corpus into `Entry`s (one per utterance, text already normalized) plus the
`Skip`s it found while scanning (an utterance without a transcript, ...) and counts of what the split's
definition leaves out (TED-LIUM's non-speech segments, WSJ's speaker 401), then calls `build_split`. That
resolves each distinct audio file once, in a thread pool: a 16 kHz mono 16-bit WAV or FLAC is used in place
(every reader of a manifest decodes with libsndfile; LibriSpeech's 960 h need no second, WAV copy); anything
else (48 kHz, stereo, 24-bit, NIST SPHERE) is converted to `output_dir/wav/<path in the corpus>.wav`.
A conversion whose output exists is skipped (outputs are atomic, so existing means finished), and the
manifest and report are only rewritten when their contents change, so running twice is a no-op.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from deepspeech2.audio import SAMPLE_RATE, load_audio, save_wav
from deepspeech2.data.manifest import Utterance
from deepspeech2.fileio import atomic_write
from deepspeech2.progress import progress_bar
from deepspeech2.text import UnnormalizableError

log = logging.getLogger(__name__)

_SPHERE_MAGIC = b"NIST_1A"
_SPHERE_HEADER_MAX = 1 << 16  # bytes; real headers are 1024, the size is stated on line 2
_DURATION_DECIMALS = 4  # the manifest stores seconds to 0.1 ms (manifest.Utterance.to_json)
SPH2PIPE_HINT = ("install sph2pipe (Debian/Ubuntu: `apt-get install sph2pipe`, or build it from "
                 "kaldi/tools) so it is on PATH, then re-run")


@dataclass(frozen=True)
class Entry:
    """One utterance found while scanning a corpus, before its audio is checked."""

    id: str  # corpus utterance id, unique within the split; the manifest is sorted by it
    audio: Path  # source audio file (may be missing or corrupt: that is checked later)
    text: str  # normalized transcript (empty is reported as a skip)
    speaker: str | None = None
    offset: float = 0.0  # seconds into `audio` where the utterance starts (TED-LIUM segments)
    end: float | None = None  # seconds into `audio` where it ends; None means the end of the file
    extra: Mapping[str, str] = field(default_factory=dict, compare=False)  # more manifest keys ("environment")
    problem: str = ""  # why the transcript couldn't be normalized confidently (then `text` is empty)


def normalized(normalize: Callable[..., str], raw: str, **kwargs) -> tuple[str, str]:
    """`(normalize(raw, strict=True, **kwargs), "")`, or `("", reason)` when the normalizer can't read the
    transcript confidently (`deepspeech2.text.UnnormalizableError`): the Entry's `problem`, which drops and
    reports the utterance."""
    try:
        return normalize(raw, strict=True, **kwargs), ""
    except UnnormalizableError as e:
        return "", str(e)


@dataclass(frozen=True)
class Skip:
    """An utterance or file left out, with the reason (it goes into `<split>.report.json`)."""

    what: str  # an utterance id, or a file path
    reason: str
    is_path: bool = False

    def to_json(self) -> dict:
        return {("path" if self.is_path else "id"): self.what, "reason": self.reason}


def find_root(corpus_dir: str | os.PathLike, names: Sequence[str], expected: str) -> Path:
    """Return `corpus_dir` itself, or its child named one of `names` (the folder the archive unpacks to).

    Raises:
        FileNotFoundError: `corpus_dir` doesn't exist; the message shows the `expected` layout.
    """
    path = Path(corpus_dir).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"`corpus_dir` {str(path)!r} does not exist or is not a folder; "
                                f"expected the corpus as distributed: {expected}")
    for name in names:
        if (path / name).is_dir():
            return (path / name).resolve()
    return path.resolve()


def no_layout(corpus_dir: str | os.PathLike, expected: str) -> ValueError:
    return ValueError(f"`corpus_dir` {str(corpus_dir)!r} does not look like the corpus: expected {expected}")


def select_splits(found: Sequence[str], splits: Iterable[str] | None, corpus: str) -> list[str]:
    """Check the requested `splits` against those `found` in the corpus (None means all of them)."""
    if splits is None:
        return list(found)
    splits = list(splits)
    unknown = [s for s in splits if s not in found]
    if unknown:
        raise ValueError(f"`splits` {unknown} not found in the {corpus} corpus; available: {sorted(found)}")
    return splits


def read_text_lines(path: Path) -> list[str]:
    """Lines of a transcript file: UTF-8, or Latin-1 when it isn't (old VoxForge prompts), so an odd byte
    never aborts an import."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.splitlines()


# ---------------------------------------------------------------------------------------------- audio


def sphere_header(path: Path) -> dict[str, str] | None:
    """Fields of a NIST SPHERE header (`{"sample_coding": "pcm,embedded-shorten-v2.00", ...}`), or None
    when the file is not SPHERE."""
    with open(path, "rb") as f:
        head = f.read(1024)
        if not head.startswith(_SPHERE_MAGIC):
            return None
        lines = head.split(b"\n")
        try:
            size = int(lines[1])
        except (IndexError, ValueError):
            return None
        if 1024 < size <= _SPHERE_HEADER_MAX:
            head += f.read(size - 1024)
    fields = {}
    for line in head[:size].split(b"\n")[2:]:
        parts = line.decode("ascii", "replace").split(None, 2)
        if not parts or parts[0] == "end_head":
            break
        if len(parts) == 3:
            fields[parts[0]] = parts[2].strip()
    return fields


def _decode_shorten(src: Path) -> np.ndarray:
    """Shorten-compressed SPHERE (most WSJ discs): libsndfile can't read it, sph2pipe can."""
    exe = shutil.which("sph2pipe")
    if exe is None:
        raise ValueError(f"`{src}` is shorten-compressed NIST SPHERE, which libsndfile can't decode; {SPH2PIPE_HINT}")
    with tempfile.TemporaryDirectory(prefix="ds2-sph2pipe-") as tmp:
        wav = Path(tmp) / "decoded.wav"
        # -f wav: RIFF output; -p: force 16-bit PCM (ulaw/alaw are expanded).
        proc = subprocess.run([exe, "-f", "wav", "-p", str(src), str(wav)], capture_output=True, text=True)
        if proc.returncode != 0 or not wav.exists():
            raise ValueError(f"sph2pipe could not decode `{src}`: {proc.stderr.strip() or proc.returncode}")
        return load_audio(wav, sample_rate=SAMPLE_RATE)


# Formats used in place: lossless 16-bit PCM, which make-shards stores as it is (int16), read by libsndfile as
# every manifest reader does (deepspeech2.audio). FLAC keeps LibriSpeech at about half the size of its WAVs.
IN_PLACE_FORMATS = ("WAV", "FLAC")


def _usable_in_place(info) -> bool:
    return (info.format in IN_PLACE_FORMATS and info.subtype == "PCM_16" and info.samplerate == SAMPLE_RATE
            and info.channels == 1)


def resolve_audio(src: Path, dst: Path) -> tuple[Path, float]:
    """Make `src` available as 16 kHz mono 16-bit audio: itself if it is a WAV or FLAC of that kind, else a WAV.

    Returns:
        `(audio_path, duration_seconds)`: `src` itself when it is usable in place, else `dst`
        (written now, or reused if it exists). The duration is frames / sample rate of that file.

    Raises:
        ValueError: the audio is corrupt, empty, or needs a tool that isn't installed.
        FileNotFoundError: `src` is missing.
    """
    if not src.is_file():
        raise FileNotFoundError(f"audio file `{src}` is missing")
    if dst.exists():
        info = sf.info(str(dst))
        return dst, info.frames / info.samplerate
    header = sphere_header(src)
    if header is not None and "shorten" in header.get("sample_coding", ""):
        wav = _decode_shorten(src)
    else:
        try:
            info = sf.info(str(src))
        except Exception as e:  # LibsndfileError / RuntimeError on garbage bytes
            # LibsndfileError.error_string is the reason without the path repeated ("Format not recognised.")
            raise ValueError(f"audio file `{src}` could not be read: {getattr(e, 'error_string', e)}") from None
        if info.frames == 0:
            raise ValueError(f"audio file `{src}` has no samples")
        if _usable_in_place(info):
            return src, info.frames / info.samplerate
        wav = load_audio(src, sample_rate=SAMPLE_RATE)
    if wav.size == 0:
        raise ValueError(f"audio file `{src}` has no samples")
    save_wav(dst, wav, SAMPLE_RATE)
    return dst, wav.size / SAMPLE_RATE


def converted_path(src: Path, corpus_root: Path, output_dir: Path) -> Path:
    """Where the converted copy of `src` goes: `output_dir/wav/<path under the corpus root>.wav`."""
    try:
        rel = src.relative_to(corpus_root)
    except ValueError:
        rel = Path(src.name)
    return output_dir / "wav" / rel.with_suffix(".wav")


# ------------------------------------------------------------------------------------------- manifests


def _map_bounded(fn, jobs: Iterable[tuple[Path, Path]], workers: int):
    """Yield `(job[0], fn(*job) or the exception it raised)` in completion order, with at most
    `4 * workers` jobs in flight (a 281k-file LibriSpeech never holds 281k futures)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        pending: dict[concurrent.futures.Future, Path] = {}
        jobs = iter(jobs)
        while True:
            for job in itertools.islice(jobs, 4 * workers - len(pending)):
                pending[pool.submit(fn, *job)] = job[0]
            if not pending:
                return
            done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for fut in done:
                src = pending.pop(fut)
                yield src, (fut.exception() or fut.result())


def _write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    with atomic_write(path) as f:
        f.write(text)
    return True


def build_split(
    corpus: str,
    split: str,
    entries: Sequence[Entry],
    skipped: Sequence[Skip],
    *,
    corpus_root: Path,
    output_dir: Path,
    language: str,
    num_workers: int,
    excluded: Mapping[str, int] | None = None,
) -> list[Utterance]:
    """Resolve the audio of `entries`, then write `output_dir/<split>.jsonl` and `<split>.report.json`.

    Utterances whose audio is missing or unreadable, whose text is empty, or whose segment lies outside
    the audio are left out and listed in the report together with `skipped`. `excluded` ({reason: count})
    is what the split leaves out by definition, not by fault; the report carries it as counts.

    Returns:
        the kept utterances, sorted by id, exactly as `read_manifest` will read them back.
    """
    if num_workers < 1:
        raise ValueError(f"`num_workers` must be >= 1, got {num_workers}")
    output_dir = Path(output_dir).resolve()
    skipped = list(skipped)
    todo = _usable(entries, skipped)
    resolved, failed = _resolve_sources(todo, corpus, split, corpus_root, output_dir, num_workers)
    utts = _utterances(todo, resolved, failed, skipped, language)

    manifest = output_dir / f"{split}.jsonl"
    _write_if_changed(manifest, "".join(u.to_json(relative_to=manifest.parent) + "\n" for u in utts))
    report = {
        "corpus": corpus,
        "split": split,
        "kept": len(utts),
        "skipped": [s.to_json() for s in sorted(skipped, key=lambda s: (s.what, s.reason))],
        "excluded": {reason: n for reason, n in sorted((excluded or {}).items()) if n},
        "hours": round(sum(u.duration for u in utts) / 3600, 4),
    }
    report_path = output_dir / f"{split}.report.json"
    _write_if_changed(report_path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    if skipped:
        log.warning("%s %s: skipped %d (kept %d); reasons in %s", corpus, split, len(skipped), len(utts),
                    report_path)
    return utts


def _usable(entries: Sequence[Entry], skipped: list[Skip]) -> list[Entry]:
    """The entries worth resolving: not a second copy of an id, and with a confidently normalized, non-empty
    transcript; the others go to `skipped`, each with its reason."""
    ids: set[str] = set()
    todo: list[Entry] = []
    for e in entries:
        if e.id in ids:
            skipped.append(Skip(e.id, f"duplicate utterance id (second copy from `{e.audio}`)"))
        elif e.problem:
            skipped.append(Skip(e.id, f"transcript can't be normalized confidently ({e.problem}); left out "
                                      "rather than trained on a wrong label"))
        elif not e.text:
            skipped.append(Skip(e.id, "transcript is empty after normalization"))
        else:
            ids.add(e.id)
            todo.append(e)
    return todo


def _resolve_sources(todo: Sequence[Entry], corpus: str, split: str, corpus_root: Path, output_dir: Path,
                     num_workers: int) -> tuple[dict[Path, tuple[Path, float]], dict[Path, str]]:
    """Each audio file `todo` names, resolved (`resolve_audio`: converted where needed) in `num_workers` threads:
    `(resolved {source: (path, seconds)}, failed {source: reason})`."""
    sources = sorted({e.audio for e in todo})
    resolved: dict[Path, tuple[Path, float]] = {}
    failed: dict[Path, str] = {}
    # Threads, not processes: libsndfile (via cffi) and scipy's polyphase filter release the GIL, and
    # threads are safe in a parent that has already imported TensorFlow.
    jobs = ((src, converted_path(src, corpus_root, output_dir)) for src in sources)
    bar = progress_bar(total=len(sources), unit="file", desc=f"{corpus} {split}", leave=False)
    for src, result in _map_bounded(resolve_audio, jobs, num_workers):
        bar.update()
        if isinstance(result, Exception):  # one bad file never aborts the import: report it and go on
            failed[src] = str(result) if isinstance(result, (ValueError, OSError)) else \
                f"{type(result).__name__}: {result}"
        else:
            resolved[src] = result
    bar.close()
    return resolved, failed


def _utterances(todo: Sequence[Entry], resolved: dict[Path, tuple[Path, float]], failed: dict[Path, str],
                skipped: list[Skip], language: str) -> list[Utterance]:
    """The entries whose audio resolved and whose segment lies inside it, as utterances sorted by id; the others
    go to `skipped`."""
    reported_files: set[Path] = set()
    segments = collections.Counter(e.audio for e in todo if e.end is not None)
    utts = []
    for e in sorted(todo, key=lambda e: e.id):
        if e.audio in failed:
            # One report line per utterance for whole-file corpora; a long file shared by many segments
            # (TED-LIUM) is reported once, by path, with the count.
            if e.end is None:
                skipped.append(Skip(e.id, failed[e.audio]))
            elif e.audio not in reported_files:
                reported_files.add(e.audio)
                skipped.append(Skip(str(e.audio), f"{failed[e.audio]} ({segments[e.audio]} segment(s) skipped)",
                                    is_path=True))
            continue
        path, file_duration = resolved[e.audio]
        end = file_duration if e.end is None else min(e.end, file_duration)
        duration = round(end - e.offset, _DURATION_DECIMALS)
        if duration <= 0:
            skipped.append(Skip(e.id, f"segment {e.offset:.2f}-{e.end}s lies outside `{e.audio}` "
                                      f"({file_duration:.2f}s long)"))
            continue
        utts.append(Utterance(audio_filepath=str(path), duration=duration, text=e.text,
                              # a segment (TED-LIUM) keeps its offset, even 0; a whole file has none
                              offset=round(e.offset, _DURATION_DECIMALS) if e.end is not None else None,
                              speaker=e.speaker,
                              language=language, extra={"id": e.id, **e.extra}))
    return utts
