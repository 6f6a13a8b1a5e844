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


def test_temp_files_of_a_killed_writer_go_at_the_next_write(tmp_path):
    """`kill -9` inside atomic_write and atomic_path leaves their temp files; the next write into the folder
    removes them, and leaves those of a writer that is still running."""
    import signal
    import subprocess
    import sys

    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys\n"
        "from deepspeech2.fileio import atomic_path, atomic_write\n"
        "with atomic_write(sys.argv[1] + '/a.json') as f, atomic_path(sys.argv[1] + '/b.tfrecord') as tmp:\n"
        "    f.write('half'); f.flush(); tmp.write_bytes(b'half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"), str(tmp_path)])
    assert killed.returncode == -signal.SIGKILL
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 2 and left[0].startswith(".a.json.") and left[1].startswith(".b.") and left[1].endswith(".tfrecord.tmp")
    live = subprocess.Popen([sys.executable, "-c", (
        "import sys\n"
        "from deepspeech2.fileio import atomic_write\n"
        "with atomic_write(sys.argv[1] + '/c.txt') as f:\n"
        "    f.write('live'); print('writing', flush=True); sys.stdin.readline()\n"), str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout.readline() == "writing\n"
        write_json(tmp_path / "d.json", {})
        names = sorted(p.name for p in tmp_path.iterdir())
        assert len(names) == 2 and names[0].startswith(".c.txt.") and names[1] == "d.json"
    finally:
        live.communicate("\n", timeout=60)
    assert live.returncode == 0 and (tmp_path / "c.txt").read_text() == "live"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt", "d.json"]


def test_errors_name_the_file_being_written(tmp_path):
    """A write that fails without a file name (a full disk: ENOSPC from write()) names the destination; a file
    where a folder should be is ENOTDIR on the destination, not EEXIST on the file."""
    import errno

    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError) as e:
        write_json(tmp_path / "file" / "x.json", {})
    assert e.value.filename == str(tmp_path / "file" / "x.json")
    with pytest.raises(OSError) as e:
        with atomic_write(tmp_path / "full.txt") as f:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert (e.value.errno, e.value.filename) == (errno.ENOSPC, str(tmp_path / "full.txt"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
