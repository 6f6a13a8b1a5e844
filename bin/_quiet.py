"""`quiet_tensorflow()`: hides TensorFlow's start-up noise, for the ds2-* commands and the bench scripts.

TensorFlow prints the "All log messages before absl::InitializeLog()" banner, and oneDNN, CUDA-driver and
CPU-feature lines, while it loads, and C++ log lines afterwards. `quiet_tensorflow()`, called before the first
`import tensorflow`, hides them all: the C++ log lines with `TF_CPP_MIN_LOG_LEVEL=3` (unless you set it), and the
load-time ones, which TensorFlow writes straight to file descriptor 2 whatever TF_CPP_MIN_LOG_LEVEL says, by
running that first import (wherever it happens: a ds2-* module, keras, a lazy import in a subcommand) with
descriptor 2 on /dev/null, restored right after, also when the import fails, so a real ImportError and its
traceback are still shown. It loads nothing itself: a command that never imports TensorFlow doesn't load it.
Python warnings and errors of our own are untouched. DS2_TF_LOGS=1 shows everything again.
"""

import contextlib
import importlib.abc
import importlib.util
import os
import sys
import threading

TF_LOGS_ENV = "DS2_TF_LOGS"


def tf_logs_wanted() -> bool:
    """True if the user asked for TensorFlow's logs (DS2_TF_LOGS set to anything but '', 0, false, no)."""
    return os.environ.get(TF_LOGS_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def quiet_tensorflow() -> None:
    """Hide TensorFlow's start-up and C++ log lines from here on (unless DS2_TF_LOGS asks for them).

    Call it before the first `import tensorflow` (a console script's launcher calls it before it imports its
    command); calling it again, or after TensorFlow is loaded, only sets TF_CPP_MIN_LOG_LEVEL.
    """
    if tf_logs_wanted():
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" not in sys.modules and not any(isinstance(f, _QuietTensorFlowFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowFinder())


@contextlib.contextmanager
def _stderr_to_devnull():
    """Points file descriptor 2 (C/C++ code's stderr as well as Python's) at /dev/null for the block."""
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        try:
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class _QuietLoader(importlib.abc.Loader):
    """Runs the real loader of `tensorflow` with stderr on /dev/null, then steps out of the way."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # Leave no trace of this wrapper on the module.
        module.__loader__ = module.__spec__.loader = self._loader
        with _stderr_to_devnull():
            self._loader.exec_module(module)


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as usual (once) and wraps its loader in _QuietLoader."""

    def find_spec(self, name, path=None, target=None):
        # Only the main thread: redirecting descriptor 2 while another thread prints would swallow its output.
        if name != "tensorflow" or threading.current_thread() is not threading.main_thread():
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _QuietLoader(spec.loader)
        return spec
