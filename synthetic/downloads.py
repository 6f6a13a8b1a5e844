"""Pinned release files of PyPI and npm packages, kept in a cache folder: the LM text's wheels and tarballs
(english_text.py) and Kokoro's English voices (neural.py, npm's kokoro-js).

    pinned_file(Pinned("npm", "idioms", "0.0.2", "idioms-0.0.2.tgz", "084f..."), "data/downloads") -> the file

The download itself, its resumption and its checksum are the library's (`deepspeech2.prepare.download`: `fetch`,
`sha256_of`); what this adds is the pin (a package's name, version, file name and SHA-256) and the two ways a
registry's file arrives: npm's tarball by its registry URL, PyPI's wheel through `pip download`, so that pip's own
index configuration applies.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from deepspeech2.prepare.download import Checksum, fetch, sha256_of

PIP_PYTHON = "3.11"  # `pip download --python-version`: only gensim's wheel depends on it (and on the platform)
PIP_PLATFORM = "manylinux_2_28_x86_64"  # so the pinned gensim wheel is the one chosen on any machine


@dataclass(frozen=True)
class Pinned:
    """One release file of a PyPI or npm package, checked against its SHA-256."""
    registry: str  # "pypi" or "npm"
    name: str
    version: str
    filename: str  # as the registry names it (and as it is kept in the cache)
    sha256: str

    @property
    def url(self) -> str:  # npm's tarball URL (PyPI files come through `pip download`)
        return f"https://registry.npmjs.org/{self.name}/-/{self.filename}"

    def pip_args(self, dest: str | os.PathLike) -> list[str]:
        platform = ["--platform", PIP_PLATFORM] if "manylinux" in self.filename else []
        return ["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", PIP_PYTHON,
                *platform, "-d", str(dest), f"{self.name}=={self.version}"]


def pinned_file(pin: Pinned, cache_dir: str | os.PathLike, progress: bool = True) -> Path:
    """`pin`'s file in `cache_dir`, downloaded there first if missing (npm: the registry URL; PyPI: `pip download`
    in a subprocess, so pip's index configuration applies), and SHA-256 checked.

    Raises:
        RuntimeError: the download failed (the message gives the command to get the file by hand).
        ValueError: the file's SHA-256 is not the pinned one.
    """
    dest = Path(cache_dir) / pin.filename
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        if pin.registry == "npm":
            fetch(pin.url, dest, Checksum(sha256=pin.sha256), progress)
        else:
            _pip_download(pin, dest)
    got = sha256_of(dest)
    if got != pin.sha256:
        raise ValueError(f"{dest}: SHA-256 {got}, expected {pin.sha256} ({pin.registry} {pin.name} {pin.version}); "
                         "the file is corrupt or not the pinned release: delete it and run again to download it")
    return dest


def _pip_download(pin: Pinned, dest: Path) -> None:
    # Into a temporary folder next to `dest`, then renamed: an interrupted download leaves nothing behind.
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".pip-") as tmp:
        command = [sys.executable, *pin.pip_args(tmp)]
        done = subprocess.run(command, capture_output=True, text=True)
        got = Path(tmp) / pin.filename
        if done.returncode != 0 or not got.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"could not download PyPI {pin.name}=={pin.version} ({pin.filename}): "
                               f"{' / '.join(tail) or 'pip saved another file'}; get it by hand with "
                               f"`python {' '.join(pin.pip_args(dest.parent))}`")
        os.replace(got, dest)
