import os

import pytest

from deepspeech2.fileio import atomic_path, atomic_write, write_json


def test_atomic_write_replaces_only_on_success(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(path) as f:
            f.write("half")
            raise RuntimeError("crash")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]
    with atomic_write(path) as f:
        f.write("new")
    assert path.read_text() == "new"


def test_atomic_path_and_permissions(tmp_path):
    with atomic_path(tmp_path / "sub" / "x.bin") as tmp:
        tmp.write_bytes(b"1")
    write_json(tmp_path / "j.json", {"a": "é"})
    umask = os.umask(0)
    os.umask(umask)
    for p in (tmp_path / "sub" / "x.bin", tmp_path / "j.json"):
        assert p.stat().st_mode & 0o777 == 0o666 & ~umask  # readable like a normal file, not 0600
