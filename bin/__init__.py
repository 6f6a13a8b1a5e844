"""The ds2-* command-line tools, installed as the package `deepspeech2_cli`.

Importing this package (which Python does before any ds2-* module, so before TensorFlow) hides TensorFlow's
start-up noise: the "All log messages before absl::InitializeLog()" banner, the oneDNN, CUDA-driver and
CPU-feature lines printed while TensorFlow loads, and its C++ log lines afterwards (`TF_CPP_MIN_LOG_LEVEL=3`
unless you set it). Set DS2_TF_LOGS=1 to see all of them again.

TensorFlow writes the load-time lines straight to file descriptor 2 whatever TF_CPP_MIN_LOG_LEVEL says, so
the first `import tensorflow` (wherever it happens: a ds2-* module, keras, a lazy import in a subcommand) runs
with descriptor 2 on /dev/null and restored right after, also when the import fails, so a real ImportError
and its traceback are still shown. Commands that never import TensorFlow don't load it. Python warnings and
errors of our own are untouched.
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


def _quiet_tensorflow() -> None:
    if tf_logs_wanted():
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" not in sys.modules and not any(isinstance(f, _QuietTensorFlowFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowFinder())


_quiet_tensorflow()
