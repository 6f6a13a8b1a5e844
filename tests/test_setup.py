"""The set-up paths: what a user without root sees when packages are missing, and `pip install .` without make."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop to another user")
def test_apt_deps_without_root_prints_the_install_line():
    env = dict(os.environ, DS2_APT_EXTRA="ds2-no-such-package")
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "tools/apt-deps.sh",
                          "base"], capture_output=True, text=True, env=env)
    assert out.returncode == 1
    assert "sudo apt-get install -y --no-install-recommends ds2-no-such-package" in out.stderr


def test_apt_deps_with_everything_installed_is_silent():
    out = subprocess.run(["tools/apt-deps.sh", "base"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == ""


def test_apt_deps_rejects_unknown_sets():
    out = subprocess.run(["tools/apt-deps.sh", "nope"], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown package set 'nope'" in out.stderr


def test_the_wheel_installs_and_runs_without_make(tmp_path):
    """`pip install .` as docs/install.md gives it: the wheel built from the sources setup.cfg names, installed into a
    fresh virtual environment with no access to this checkout. Its dependencies come from this venv's site-packages
    (a .pth file) so nothing is downloaded; the package itself must come from the wheel."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):  # README.md is the long description
        shutil.copy2(REPO / name, src / name)
    for folder in ("deepspeech2", "bin", "export", "serving", "synthetic"):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(dist), str(src)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    wheel, = dist.glob("deepspeech2-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                              "--no-index", str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]

    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([venv / "bin" / "ds2-infer", "--help"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("Transcribe audio files") and "--model_dir" in out.stdout
    where = subprocess.run([python, "-c", "import deepspeech2, deepspeech2_serving, deepspeech2_synthetic.tiny, os; "
                            "print(deepspeech2.__file__); "
                            "print(os.path.isfile(os.path.join(os.path.dirname(deepspeech2_serving.__file__), "
                            "'web', 'index.html')))"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert where.returncode == 0, where.stderr[-2000:]
    package, page = where.stdout.split()
    assert Path(package).is_relative_to(venv), f"deepspeech2 came from {package}, not the wheel"
    assert page == "True", "the ds2-demo page (serving/web) is missing from the wheel"


def test_the_fused_cpu_gru_failing_to_build_leaves_a_working_install(tmp_path):
    """`make deps` where the op library can't be built (here a compiler that does not exist): one line says so, make
    succeeds, no library is left, and the venv trains with the time loop."""
    lib, stamp = tmp_path / "_fused_cpu.so", tmp_path / "stamp"
    out = subprocess.run(["make", "--no-print-directory", str(stamp), f"FUSED_STAMP={stamp}", f"FUSED_LIB={lib}",
                          f"FUSED_LOG={tmp_path / 'build.log'}", "CXX=/nonexistent/g++", "-o", ".venv/.installed"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith("fused CPU GRU not built (/nonexistent/g++")
    assert "training uses the time loop" in out.stdout and stamp.exists() and not lib.exists()
    code = ("import sys, tensorflow as tf; from deepspeech2.model import BatchNormRNN, fused_cpu, rnn; "
            "fused_cpu.LIBRARY = fused_cpu.LIBRARY.with_name(sys.argv[1]); "
            "assert not rnn.cpu_kernel_available('gru', 'float32'); "
            "y = BatchNormRNN(4)(tf.ones((2, 3, 5)), tf.constant([3, 1]), training=True); print(y.shape)")
    ran = subprocess.run([sys.executable, "-c", code, lib.name + ".missing"], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip() == "(2, 3, 4)", ran.stderr[-2000:]
