"""The ds2-* command-line tools, installed as the package `deepspeech2_cli`.

Each console script (setup.cfg) starts at its launcher below, which quiets TensorFlow (`_quiet.quiet_tensorflow`:
no start-up banner, oneDNN, CUDA or CPU-feature lines; DS2_TF_LOGS=1 shows them) and only then imports its
command: a command module imports the library, and with it TensorFlow, at its top, so the quieting can't be
done from inside it. Importing this package does nothing else.
"""

import importlib

from ._quiet import quiet_tensorflow


def _launch(command: str) -> None:
    quiet_tensorflow()
    importlib.import_module(f"{__name__}.{command}").run()


def ds2_prepare():
    _launch("ds2_prepare")


def ds2_build_vocab():
    _launch("ds2_build_vocab")


def ds2_make_shards():
    _launch("ds2_make_shards")


def ds2_compute_stats():
    _launch("ds2_compute_stats")


def ds2_train():
    _launch("ds2_train")


def ds2_build_lm():
    _launch("ds2_build_lm")


def ds2_tune():
    _launch("ds2_tune")


def ds2_eval():
    _launch("ds2_eval")


def ds2_infer():
    _launch("ds2_infer")


def ds2_export():
    _launch("ds2_export")


def ds2_serve():
    _launch("ds2_serve")


def ds2_client():
    _launch("ds2_client")


def ds2_demo():
    _launch("ds2_demo")


def ds2_demo_client():
    _launch("ds2_demo_client")
