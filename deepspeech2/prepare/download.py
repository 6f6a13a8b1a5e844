"""Files the preparation stage downloads: fetched over HTTP(S) (or file://), resumed where an interrupted download
stopped, checked against a published checksum before they get their name, and archives unpacked so that each of
their folders appears whole or not at all.

    fetch(url, dest, Checksum(md5="42e2...")) -> dest    # dest.part grows, is checked, then renamed to dest
    unpack_tar(archive, into)                             # into/.unpack-<archive>/ -> moved into `into`

A download that stops (a dropped connection, Ctrl-C, a full disk) leaves `<dest>.part`; the next `fetch` asks the
server for the rest with an HTTP Range request and appends it. A server that ignores Range (or a file:// URL) sends
the whole file again, which then replaces the part. A file whose checksum is wrong is deleted, so a run after a
corrupt download fetches it anew instead of failing on it forever.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import tarfile
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path

from deepspeech2.fileio import durable_replace, make_parent
from deepspeech2.progress import progress_bar

CHUNK = 1 << 20  # bytes read and written at a time
TIMEOUT_SECONDS = 60  # per socket operation, not per file: a 30 GB tarball takes as long as it takes
PART_SUFFIX = ".part"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


@dataclass(frozen=True)
class Checksum:
    """A file's published digests (hex, lower case); the ones that are known are checked, "" is unknown."""

    md5: str = ""
    sha256: str = ""

    def __post_init__(self):
        for name, length in (("md5", 32), ("sha256", 64)):
            value = getattr(self, name)
            if value and not re.fullmatch(f"[0-9a-f]{{{length}}}", value):
                raise ValueError(f"`{name}` must be {length} lower-case hex digits or empty, got {value!r}")

    def __bool__(self) -> bool:
        return bool(self.md5 or self.sha256)

    def mismatch(self, path: str | os.PathLike, progress: bool = True) -> str:
        """"" when `path` has every known digest; else what differs ("MD5 <got>, expected <want>")."""
        got = file_digests(path, progress)
        wrong = [f"{label} {got[name]}, expected {want}" for name, label in (("md5", "MD5"), ("sha256", "SHA-256"))
                 if (want := getattr(self, name)) and got[name] != want]
        return "; ".join(wrong)


def file_digests(path: str | os.PathLike, progress: bool = False) -> dict[str, str]:
    """`{"md5": ..., "sha256": ...}` of a file, both from one read of it."""
    path = Path(path)
    md5, sha256 = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    with open(path, "rb") as f, progress_bar(total=path.stat().st_size, unit="B", unit_scale=True, leave=False,
                                             show=progress and path.stat().st_size > 64 * CHUNK,
                                             desc=f"check {path.name}") as bar:
        while chunk := f.read(CHUNK):
            md5.update(chunk)
            sha256.update(chunk)
            bar.update(len(chunk))
    return {"md5": md5.hexdigest(), "sha256": sha256.hexdigest()}


def sha256_of(path: str | os.PathLike) -> str:
    return file_digests(path)["sha256"]


def fetch(url: str, dest: str | os.PathLike, checksum: Checksum = Checksum(), progress: bool = True,
          by_hand: str = "") -> Path:
    """`url` downloaded to `dest`, unless `dest` is there with `checksum` already; see the module docstring.

    Args:
        checksum: the digests the file must have; an empty one accepts any file.
        by_hand: how a user provides the file when the download fails (the message says "download it by hand
            and <by_hand>"; default: "save it as <dest>").

    Returns:
        `dest`, whose digests are `checksum`'s.

    Raises:
        RuntimeError: the download failed or stopped (what arrived stays in `<dest>.part`; the next call resumes).
        ValueError: the file's checksum is wrong (it is deleted, so the next call downloads it anew).
    """
    dest = Path(dest)
    by_hand = by_hand or f"save it as {dest}"
    if dest.is_file():
        if not checksum or not checksum.mismatch(dest, progress):
            return dest
        dest.unlink()  # a wrong copy (another version, a corrupt earlier download): fetched again below
    part = dest.with_name(dest.name + PART_SUFFIX)
    make_parent(part)
    try:
        _download(url, part, progress)
    except OSError as e:  # URLError, HTTPError, timeouts, a full disk
        kept = f"; the {part.stat().st_size} bytes that arrived are kept in {part}, the next run resumes there" \
            if part.is_file() and part.stat().st_size else ""
        raise RuntimeError(f"could not download {url}: {e}{kept}; or download it by hand and {by_hand}") from e
    wrong = checksum.mismatch(part, progress) if checksum else ""
    if wrong:
        part.unlink()
        raise ValueError(f"{dest.name}: {wrong}: the download from {url} is corrupt or not the published file "
                         "(deleted; run again to download it anew, or try another mirror)")
    durable_replace(part, dest)
    return dest


def _download(url: str, part: Path, progress: bool) -> None:
    """Bring `part` to the whole of `url`: the rest of it when it holds a beginning already (HTTP Range)."""
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing left after `have` bytes: the part is whole (the checksum will tell)
            return
        raise
    with response:
        start, total = 0, int(response.headers.get("Content-Length") or 0) or None
        if have and getattr(response, "status", None) == 206:
            match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
            if match and int(match[1]) == have:
                start = have
                total = int(match[3]) if match[3] != "*" else None
        if total is not None:
            free = shutil.disk_usage(part.parent).free
            if free < total - start:
                raise OSError(f"{total - start} more bytes don't fit in {part.parent} ({free} bytes free)")
        with open(part, "ab" if start else "wb") as f, progress_bar(
                total=total, initial=start, unit="B", unit_scale=True, show=progress,
                desc=("resume " if start else "download ") + part.name[:-len(PART_SUFFIX)]) as bar:
            while chunk := response.read(CHUNK):
                f.write(chunk)
                bar.update(len(chunk))


def unpack_tar(archive: str | os.PathLike, into: str | os.PathLike, progress: bool = True) -> list[Path]:
    """Unpack a tar archive (any compression tarfile reads) into `into`, merging with what is there.

    The archive goes into `into/.unpack-<name>/` first (tarfile's "data" filter: no absolute paths, links out of
    the folder or device files); then each of its entries that `into` lacks is moved in whole (a folder appears
    with all of its files, or not at all), entries of a folder `into` has are merged into it, and files `into`
    has are replaced (LibriSpeech's tarballs each carry the same SPEAKERS.TXT).

    Returns:
        the paths the archive's top-level entries have in `into`.

    Raises:
        ValueError: the archive is not a readable tar file, or `into` lacks the free space it needs.
    """
    archive, into = Path(archive), Path(into)
    staging = into / f".unpack-{archive.name}"
    if staging.exists():  # left by an interrupted unpack: start it over
        shutil.rmtree(staging)
    free = shutil.disk_usage(into if into.exists() else into.parent).free
    # The corpus' tarballs hold FLAC, which gzip can't shrink: unpacked, they are about as large as packed.
    if free < archive.stat().st_size:
        raise ValueError(f"unpacking {archive} needs about {archive.stat().st_size / 1e9:.1f} GB free in {into}; "
                         f"it has {free / 1e9:.1f} GB: free some space, or download into another folder")
    staging.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tar, progress_bar(unit="file", show=progress, leave=False,
                                                        desc=f"unpack {archive.name}") as bar:
            for member in tar:
                tar.extract(member, staging, filter="data")
                bar.update()
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(e, (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile)):  # a corrupt or cut archive
            raise ValueError(f"`{archive}` could not be unpacked: {e}; delete it and download it again") from None
        raise
    top = sorted(staging.iterdir())
    _merge(staging, into)
    shutil.rmtree(staging)
    return [into / p.name for p in top]


def _merge(src: Path, dst: Path) -> None:
    for entry in sorted(src.iterdir()):
        target = dst / entry.name
        if entry.is_dir() and target.is_dir():
            _merge(entry, target)
        else:
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(entry, target)
