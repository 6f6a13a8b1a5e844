import os
import shutil
import sys
from pathlib import Path

import pytest

# CPU only and quiet TF logs for every test process (and the subprocesses they start).
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The tests run make as a user's shell does. Under `make test-slow` they inherit the outer make's MAKELEVEL and
# MAKEFLAGS, and a make they start would then be a sub-make: it prints "Entering directory" lines around its output
# (and would try to share a jobserver whose pipe it does not have).
for name in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS"):
    os.environ.pop(name, None)


HELLO_WORLD_ARPA = """\\data\\
ngram 1=6
ngram 2=2

\\1-grams:
-2.0\t<unk>\t0
0\t<s>\t-0.3
-1.0\t</s>\t0
-1.0\thello\t-0.3
-1.0\tworld\t-0.3
-1.3\tspeech\t-0.3

\\2-grams:
-0.1\t<s> hello
-0.2\thello world

\\end\\
"""


@pytest.fixture(scope="session")
def hello_world_lm(tmp_path_factory):
    """A 2-gram ARPA LM over "hello", "world" and "speech" (the export, serving and streaming tests' LM)."""
    path = tmp_path_factory.mktemp("lm") / "hello_world.arpa"
    path.write_text(HELLO_WORLD_ARPA)
    return path


@pytest.fixture
def checkout_copy(tmp_path):
    """A copy of this checkout (without git, data, runs and results) sharing this venv, for running `make demo`
    end to end; copy2 keeps the mtimes. Run make there with `-o .venv/.installed`: a reinstall from the copy would
    point the shared venv's editable install at it."""
    repo = Path(__file__).resolve().parents[1]
    work = tmp_path / "repo"
    skip = (".git", ".venv", ".kenlm-build", "data", "runs", "results", "__pycache__", ".pytest_cache", "*.egg-info")
    shutil.copytree(repo, work, ignore=shutil.ignore_patterns(*skip))
    (work / ".venv").symlink_to(Path(sys.executable).parents[1])
    return work
