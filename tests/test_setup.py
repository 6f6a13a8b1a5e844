"""The set-up scripts: what a user without root sees when packages are missing."""

import os
import shutil
import subprocess

import pytest


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
