"""deepspeech2.prepare.download and `download_librispeech` against a real HTTP server on 127.0.0.1 (Python's
http.server with Range requests, tests/factories.py): checked downloads, a stopped one resumed from where it
stopped, corrupt ones refused and deleted, archives unpacked whole, and `ds2-prepare download librispeech`."""

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from deepspeech2.prepare.download import Checksum, fetch, file_digests, unpack_tar
from deepspeech2.prepare.librispeech import CHECKSUMS, LibriSpeechDownloadConfig, download_librispeech, read_checksums

import corpus_fixtures
from factories import FileServer

VENV_BIN = Path(sys.executable).parent


def _blob(path: Path, size: int = 300_000, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(np.random.default_rng(seed).bytes(size))
    return path


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def test_digests_and_checksums(tmp_path):
    data = b"LibriSpeech" * 1000
    (tmp_path / "f").write_bytes(data)
    assert file_digests(tmp_path / "f") == {"md5": hashlib.md5(data).hexdigest(),
                                            "sha256": hashlib.sha256(data).hexdigest()}
    with pytest.raises(ValueError, match="`md5` must be 32 lower-case hex"):
        Checksum(md5="42E2234BA48799C1F50F24A7926300A1")
    assert not Checksum() and Checksum(sha256="0" * 64)
    # Every published entry is well formed (Checksum checks it) and the tarballs have both digests.
    assert all(c.md5 for c in CHECKSUMS.values())
    assert all(c.sha256 for name, c in CHECKSUMS.items() if name.endswith(".tar.gz"))
    assert CHECKSUMS["dev-clean.tar.gz"].md5 == "42e2234ba48799c1f50f24a7926300a1"


def test_fetch_checks_the_hash_and_reuses_a_good_copy(tmp_path):
    src = _blob(tmp_path / "src.bin")
    good = Checksum(sha256=hashlib.sha256(src.read_bytes()).hexdigest())
    dest = tmp_path / "cache" / "copy.bin"
    with pytest.raises(ValueError, match=r"copy.bin: SHA-256 [0-9a-f]{64}, expected 0{64}.*deleted"):
        fetch(src.as_uri(), dest, Checksum(sha256="0" * 64), progress=False)
    assert list((tmp_path / "cache").iterdir()) == []  # nothing half-written, the bad copy deleted
    assert fetch(src.as_uri(), dest, good, progress=False) == dest and dest.read_bytes() == src.read_bytes()
    assert fetch((tmp_path / "gone.bin").as_uri(), dest, good, progress=False) == dest  # no download again
    with pytest.raises(RuntimeError, match="could not download .*gone.bin.*by hand and save it as"):
        fetch((tmp_path / "gone.bin").as_uri(), tmp_path / "cache" / "other.bin", good, progress=False)


def test_a_stopped_download_is_resumed_not_fetched_again(tmp_path):
    src = _blob(tmp_path / "www" / "big.bin")
    data = src.read_bytes()
    dest = tmp_path / "dl" / "big.bin"
    dest.parent.mkdir()
    (tmp_path / "dl" / "big.bin.part").write_bytes(data[:100_000])  # what a dropped connection leaves
    with FileServer(tmp_path / "www") as server:
        assert fetch(f"{server.url}/big.bin", dest, Checksum(md5=_md5(data)), progress=False) == dest
        assert dest.read_bytes() == data and not (tmp_path / "dl" / "big.bin.part").exists()
        assert server.requests == [("/big.bin", 100_000, 200_000)]  # only the rest was sent

        # A part that holds the whole file: the server has nothing more (416); it is checked and kept.
        (tmp_path / "dl" / "again.bin.part").write_bytes(data)
        assert fetch(f"{server.url}/big.bin", tmp_path / "dl" / "again.bin", Checksum(md5=_md5(data)),
                     progress=False).read_bytes() == data
        # A part whose beginning is not the file's: the result fails its checksum, is deleted, then fetched whole.
        (tmp_path / "dl" / "bad.bin.part").write_bytes(b"\0" * 1000)
        with pytest.raises(ValueError, match=r"bad.bin: MD5 [0-9a-f]{32}, expected " + _md5(data)):
            fetch(f"{server.url}/big.bin", tmp_path / "dl" / "bad.bin", Checksum(md5=_md5(data)), progress=False)
        assert not (tmp_path / "dl" / "bad.bin.part").exists()
        del server.requests[:]
        fetch(f"{server.url}/big.bin", tmp_path / "dl" / "bad.bin", Checksum(md5=_md5(data)), progress=False)
        assert server.requests == [("/big.bin", 0, len(data))]
        # A server error keeps nothing and says where to get the file.
        with pytest.raises(RuntimeError, match="HTTP Error 404"):
            fetch(f"{server.url}/missing.bin", tmp_path / "dl" / "missing.bin", progress=False)


def test_unpack_merges_whole_folders_and_refuses_unsafe_archives(tmp_path):
    def tarball(path, members):
        with tarfile.open(path, "w:gz") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    into = tmp_path / "into"
    into.mkdir()
    a = tarball(tmp_path / "a.tar.gz", {"Top/README.TXT": b"one", "Top/a/x.txt": b"x"})
    b = tarball(tmp_path / "b.tar.gz", {"Top/README.TXT": b"two", "Top/b/y.txt": b"y"})
    assert unpack_tar(a, into, progress=False) == [into / "Top"]
    unpack_tar(b, into, progress=False)
    assert sorted(str(p.relative_to(into)) for p in into.rglob("*") if p.is_file()) == \
        ["Top/README.TXT", "Top/a/x.txt", "Top/b/y.txt"]
    assert (into / "Top/README.TXT").read_bytes() == b"two"
    evil = tarball(tmp_path / "evil.tar.gz", {"../outside.txt": b"no"})
    with pytest.raises(ValueError, match="evil.tar.gz` could not be unpacked"):
        unpack_tar(evil, into, progress=False)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(b.read_bytes()[:40])
    with pytest.raises(ValueError, match="cut.tar.gz` could not be unpacked"):
        unpack_tar(cut, into, progress=False)
    assert not (tmp_path / "outside.txt").exists() and sorted(p.name for p in into.iterdir()) == ["Top"]


def test_download_librispeech(tmp_path):
    fx = corpus_fixtures.make_librispeech(tmp_path / "corpus")
    shutil.copytree(fx.corpus_dir / "LibriSpeech/test-clean", fx.corpus_dir / "LibriSpeech/dev-other")
    _blob(tmp_path / "corpus" / "librispeech-lm-norm.txt.gz", 5000)
    table = corpus_fixtures.librispeech_tarballs(fx.corpus_dir, tmp_path / "www")
    checksums = {name: Checksum(**digests) for name, digests in table.items()}
    out = tmp_path / "librispeech"
    config = LibriSpeechDownloadConfig(str(out), splits=("dev-clean", "test-clean"),
                                       lm_files=("librispeech-lm-norm.txt.gz",), checksums=checksums, progress=False)
    with FileServer(tmp_path / "www") as server:
        config = replace(config, mirror=server.url)
        done = list(download_librispeech(config))
        assert [(f.name, f.action) for f in done] == [("dev-clean.tar.gz", "unpacked"), ("test-clean.tar.gz", "unpacked"),
                                                      ("librispeech-lm-norm.txt.gz", "downloaded")]
        for split in ("dev-clean", "test-clean"):  # the tree as the corpus has it, the tarballs gone
            want = sorted(p.relative_to(fx.corpus_dir) for p in (fx.corpus_dir / "LibriSpeech" / split).rglob("*"))
            assert sorted(p.relative_to(out) for p in (out / "LibriSpeech" / split).rglob("*")) == want
            assert not (out / f"{split}.tar.gz").exists()
        assert (out / "librispeech-lm-norm.txt.gz").read_bytes() == \
            (tmp_path / "corpus" / "librispeech-lm-norm.txt.gz").read_bytes()
        assert sorted(path for path, _, _ in server.requests) == [
            "/resources/11/librispeech-lm-norm.txt.gz", "/resources/12/dev-clean.tar.gz", "/resources/12/test-clean.tar.gz"]

        # Again: nothing fetched, nothing read again.
        del server.requests[:]
        assert [f.action for f in download_librispeech(config)] == ["there"] * 3 and server.requests == []

        # A checksum that doesn't match: refused in one line naming the file, nothing unpacked.
        bad = {**checksums, "dev-other.tar.gz": Checksum(md5="0" * 32)}
        with pytest.raises(ValueError) as e:
            list(download_librispeech(replace(config, splits=("dev-other",), checksums=bad)))
        assert str(e.value).startswith("dev-other.tar.gz: MD5 ") and "\n" not in str(e.value)
        assert not (out / "LibriSpeech/dev-other").exists() and not (out / "dev-other.tar.gz").exists()

        # No checksum known: refused before any request, unless allowed.
        unknown = {**checksums, "dev-other.tar.gz": Checksum()}
        del server.requests[:]
        with pytest.raises(ValueError, match="no published checksum is known for dev-other.tar.gz.*--allow_unverified"):
            list(download_librispeech(replace(config, splits=("dev-other",), checksums=unknown)))
        assert server.requests == []
        done = list(download_librispeech(replace(config, splits=("dev-other",), checksums=unknown,
                                                 allow_unverified=True)))
        assert [f.action for f in done] == ["unpacked", "there"] and (out / "LibriSpeech/dev-other").is_dir()


def test_download_config_and_table_errors(tmp_path):
    with pytest.raises(ValueError, match="`splits` \\['train-clean-200'\\]"):
        LibriSpeechDownloadConfig(str(tmp_path), splits=("train-clean-200",))
    with pytest.raises(ValueError, match="`lm_files`"):
        LibriSpeechDownloadConfig(str(tmp_path), lm_files=("5-gram.arpa.gz",))
    with pytest.raises(ValueError, match="`mirror`"):
        LibriSpeechDownloadConfig(str(tmp_path), mirror="www.openslr.org")
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"dev-clean.tar.gz": {"md5": "0" * 32}, "x.gz": {}}))
    assert read_checksums(table) == {"dev-clean.tar.gz": Checksum(md5="0" * 32), "x.gz": Checksum()}
    table.write_text(json.dumps({"dev-clean.tar.gz": {"sha1": "0"}}))
    with pytest.raises(ValueError, match="entry 'dev-clean.tar.gz' must be an object with `md5` and/or `sha256`"):
        read_checksums(table)


def test_ds2_prepare_download_refuses_a_bad_checksum_in_one_line(tmp_path):
    fx = corpus_fixtures.make_librispeech(tmp_path / "corpus")
    table = corpus_fixtures.librispeech_tarballs(fx.corpus_dir, tmp_path / "www")
    table["test-clean.tar.gz"]["md5"] = "0" * 32
    (tmp_path / "table.json").write_text(json.dumps(table))
    with FileServer(tmp_path / "www") as server:
        out = subprocess.run([str(VENV_BIN / "ds2-prepare"), "download", "librispeech", "--out", str(tmp_path / "dl"),
                              "--splits", "dev-clean,test-clean", "--mirror", server.url,
                              "--checksums", str(tmp_path / "table.json")],
                             capture_output=True, text=True, timeout=120, env={"DS2_PROGRESS": "0", "PATH": ""})
    assert out.returncode == 1
    assert out.stdout.splitlines() == [f"{tmp_path / 'dl' / 'LibriSpeech' / 'dev-clean'}: unpacked"]
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("ds2-prepare download: error: test-clean.tar.gz: MD5 ") and "expected " + "0" * 32 in line
