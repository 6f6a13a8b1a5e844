"""Atomic file output: a crash never leaves a half-written shard, manifest, checkpoint or export."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator


def _file_mode() -> int:
    """0666 minus the umask: what a plain `open(path, "w")` would give (mkstemp alone gives 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_MODE = _file_mode()


def durable_replace(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Rename `tmp` over `path` so that a power cut leaves one or the other whole: `tmp`'s data is flushed to disk
    before the rename (a file: its bytes; a folder: its files), and the rename is flushed after it (the parent
    folder)."""
    tmp, path = Path(tmp), Path(path)
    for f in (sorted(p for p in tmp.rglob("*") if p.is_file()) if tmp.is_dir() else [tmp]):
        _fsync(f, os.O_RDONLY)
    if tmp.is_dir():
        _fsync(tmp, os.O_RDONLY | os.O_DIRECTORY)
    os.replace(tmp, path)
    _fsync(path.parent, os.O_RDONLY | os.O_DIRECTORY)


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temp file next to `path`; rename it over `path` only if the block finishes.

    Args:
        path: final destination. Its parent directory is created if needed.
        mode: "w" (text) or "wb" (binary).
        encoding: text encoding for mode "w".
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.chmod(tmp, _MODE)
    try:
        with os.fdopen(fd, mode, encoding=encoding if "b" not in mode else None) as f:
            yield f
        durable_replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path for writers that want a filename (e.g. TFRecordWriter, soundfile); like `atomic_write`,
    it is renamed over `path`, flushed to disk, only if the block finishes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f"{path.suffix}.tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, _MODE)
    try:
        yield Path(tmp)
        durable_replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike, obj) -> None:
    """Write `obj` as indented JSON, atomically."""
    with atomic_write(path) as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


@contextlib.contextmanager
def exclusive_lock(folder: str | os.PathLike, what: str = "this job") -> Iterator[Path]:
    """Hold an exclusive lock on `folder` (its `.lock` file, which records our PID) for the block.

    The lock is the kernel's (`flock`), so it goes away with the process, even after `kill -9`: a stale
    `.lock` file never blocks anyone.

    Raises:
        ValueError: `folder` is a file, or another process holds the lock (the message names its PID).
    """
    import fcntl

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"`{folder}` is a file, not a folder; give {what} a folder of its own")
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / ".lock"
    with open(lock, "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            pid = f.read().strip() or "unknown"
            raise ValueError(f"`{folder}` is in use by PID {pid} ({what} there is still running); wait for it to "
                             "finish, or use another folder") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        try:
            yield lock
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
