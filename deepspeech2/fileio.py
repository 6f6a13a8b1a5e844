"""Atomic file output: a crash never leaves a half-written shard, manifest, checkpoint or export.

Temp files and folders are named `.<name>.<pid>@<where>.<random>[<suffix>].tmp` next to their destination,
`<where>` being the host and its PID namespace. `kill -9` leaves them behind; the first write of a later process
into that folder removes the ones whose process is gone (same host and namespace, PID not running), and never
those of a writer still at work, nor of one whose PIDs it can't see (another machine or container on a shared
folder).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import IO, Iterator

logger = logging.getLogger(__name__)


def _file_mode() -> int:
    """0666 minus the umask: what a plain `open(path, "w")` would give (mkstemp alone gives 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_MODE = _file_mode()


def _pid_space() -> str:
    """Where our PIDs mean something: the host name and the PID namespace (containers on one host may share a
    host name and a folder, not their PIDs)."""
    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "localhost"
    try:
        return f"{host}-{os.stat('/proc/self/ns/pid').st_ino:x}"
    except OSError:  # not Linux
        return host


_WHERE = _pid_space()
# `temp_prefix`'s names, with mkstemp/mkdtemp's 8 random characters and the suffix after them.
_TEMP_NAME = re.compile(r"\..+\.(?P<pid>\d+)@(?P<where>[A-Za-z0-9-]+)\.[a-z0-9_]{8}(\..+)?")
_cleaned: set[str] = set()  # folders this process has already cleaned (`remove_stale_temps`)


def temp_prefix(path: str | os.PathLike) -> str:
    """The prefix of the temp files and folders written on the way to `path`: `.<name>.<pid>@<where>.`."""
    return f".{Path(path).name}.{os.getpid()}@{_WHERE}."


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temps(folder: str | os.PathLike, once: bool = False) -> list[Path]:
    """Remove the temp files and folders (`temp_prefix`) a killed process left in `folder`: those made on this
    host and PID namespace by a PID that is no longer running. Returns what it removed.

    Args:
        folder: the folder to clean (nothing happens if it doesn't exist).
        once: clean `folder` only the first time this process asks (for writers called many times per folder).
    """
    folder = Path(folder)
    key = os.path.abspath(folder)
    if once and key in _cleaned:
        return []
    _cleaned.add(key)
    removed = []
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    for entry in entries:
        m = _TEMP_NAME.fullmatch(entry.name)
        if not m or m["where"] != _WHERE or _running(int(m["pid"])):
            continue
        with contextlib.suppress(FileNotFoundError):  # another process cleaning the same folder
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
    if removed:
        logger.info("removed %d temp files left in `%s` by interrupted runs", len(removed), folder)
    return removed


def make_parent(path: Path) -> None:
    """Create the folder `path` goes into. A file where a folder should be is ENOTDIR on `path`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path)) from None


def _named(e: BaseException, path: Path, tmp: str | None) -> BaseException:
    """An OSError that names no file (write() on a full disk) or our temp file, as one naming `path`; any other
    exception as it is."""
    if isinstance(e, OSError) and e.errno is not None and e.filename in (None, tmp):
        return OSError(e.errno, e.strerror, str(path))  # OSError(errno, ...) is the errno's subclass
    return e


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
    make_parent(path)
    remove_stale_temps(path.parent, once=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
    except OSError as e:  # it names a random temp file: name the destination
        raise OSError(e.errno, e.strerror, str(path)) from e
    try:
        os.chmod(tmp, _MODE)
        with os.fdopen(fd, mode, encoding=encoding if "b" not in mode else None) as f:
            yield f
        durable_replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        named = _named(e, path, tmp)
        if named is e:
            raise
        raise named from e


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path for writers that want a filename (e.g. TFRecordWriter, soundfile); like `atomic_write`,
    it is renamed over `path`, flushed to disk, only if the block finishes."""
    path = Path(path)
    make_parent(path)
    remove_stale_temps(path.parent, once=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.with_name(path.stem)), suffix=f"{path.suffix}.tmp",
                                   dir=path.parent)
    except OSError as e:  # it names a random temp file: name the destination
        raise OSError(e.errno, e.strerror, str(path)) from e
    try:
        os.close(fd)
        os.chmod(tmp, _MODE)
        yield Path(tmp)
        durable_replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        named = _named(e, path, tmp)
        if named is e:
            raise
        raise named from e


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
