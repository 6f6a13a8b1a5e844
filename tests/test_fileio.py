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


def test_both_writers_flush_the_data_and_the_rename_to_disk(tmp_path, monkeypatch):
    """fsync on the file's data before the rename and on the folder after it, for atomic_write and atomic_path
    alike (a power cut then leaves the old file or the new one, never an empty one)."""
    import stat

    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        events.append((f"fsync {kind}", os.fstat(fd).st_size if kind == "file" else None))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", None))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    with atomic_write(tmp_path / "a.txt") as f:
        f.write("12345")
    assert events == [("fsync file", 5), ("replace", None), ("fsync dir", None)]
    events.clear()
    with atomic_path(tmp_path / "b.bin") as tmp:
        tmp.write_bytes(b"123")
    assert events == [("fsync file", 3), ("replace", None), ("fsync dir", None)]
    assert (tmp_path / "a.txt").read_text() == "12345" and (tmp_path / "b.bin").read_bytes() == b"123"
