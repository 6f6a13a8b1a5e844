"""The package's imports follow the flow of docs/architecture.md (tools/architecture.py): none against it in the
repository, the decoders and the servers never reach the model, the library never reaches the synthetic corpus'
wing, and each kind of violation is caught in a tree built to break it. Likewise importing a bin/ module defines its
flags and does nothing else, and no module or function is too long to read in one sitting."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import architecture  # noqa: E402


def test_the_repository_imports_along_the_flow():
    assert architecture.violations() == []
    names = architecture.modules()
    assert all(architecture.stage(m) is not None for m in names)  # every module belongs to a stage
    assert "deepspeech2.data.shards" in names and "deepspeech2_export.saved_model" in names
    assert [architecture.STAGES[architecture.stage(m)][0] for m in
            ("deepspeech2.data.augment.config", "deepspeech2.prepare.noise", "deepspeech2.train.trainer",
             "deepspeech2_synthetic.tiny")] == ["data", "prepare", "train", "synthetic"]


@pytest.mark.parametrize("path,source,expected", [
    ("deepspeech2/data/bad.py", "from deepspeech2.model.deepspeech2 import build_model\n",
     "deepspeech2.data.bad (data) imports deepspeech2.model.deepspeech2 (model"),
    ("deepspeech2/data/bad.py", "import deepspeech2.geometry\ndef f():\n    from deepspeech2 import train\n",
     "deepspeech2.data.bad (data) imports deepspeech2.train (train"),
    ("deepspeech2/data/bad.py", "from deepspeech2.prepare.validate import model_name\n",
     "deepspeech2.data.bad (data) imports deepspeech2.prepare.validate (prepare"),
    ("deepspeech2/prepare/bad.py", "from deepspeech2.train.ctc import sparse_ctc_loss\n",
     "deepspeech2.prepare.bad (prepare) imports deepspeech2.train.ctc (train"),
    ("export/bad.py", "from deepspeech2_serving.client import wav_bytes\n",
     "deepspeech2_export.bad (export) imports deepspeech2_serving.client (serving"),
    ("deepspeech2/decode/bad.py", "from deepspeech2.model import build_model\n",
     "deepspeech2.decode.bad (decode) imports deepspeech2.model (model"),
    ("deepspeech2/data/bad.py", "from deepspeech2 import load_bundle\n",  # the package's public face
     "deepspeech2.data.bad (data) imports deepspeech2 (api"),
    ("deepspeech2/bad.py", "from absl import flags\n", "deepspeech2.bad imports absl: only bin/ may"),
    ("deepspeech2/bad.py", "from deepspeech2_cli import _app\n", "deepspeech2.bad (base) imports deepspeech2_cli"),
])
def test_each_kind_of_violation_is_caught(tmp_path, path, source, expected):
    for folder in architecture.FOLDERS:
        (tmp_path / folder).mkdir()
    for module in ("deepspeech2/fileio.py", "deepspeech2/geometry.py", "deepspeech2/model/__init__.py",
                   "deepspeech2/train/__init__.py"):
        (tmp_path / module).parent.mkdir(exist_ok=True)
        (tmp_path / module).write_text("")
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text(source)
    found = architecture.violations(tmp_path)
    assert any(expected in line for line in found), found
    assert len(found) == 1 + path.startswith("deepspeech2/decode/"), found  # decode -> model: the flow, and NEVER
    (tmp_path / path).write_text("from deepspeech2 import fileio\n")  # the base stage: allowed everywhere
    assert architecture.violations(tmp_path) == []


def test_importing_a_command_only_defines_its_flags():
    assert architecture.side_effects() == []


ALLOWED_AT_THE_TOP = '''"""A command."""
import sys

from absl import flags

try:
    from . import _decoding
except ImportError:
    import _decoding

NAMES = ("a", "b")
D = sys.maxsize
flags.DEFINE_string("out", None, "Output.")
SEED = flags.DEFINE_integer("seed", 0, "Seed.")
_decoding.define_flags(kind="beam")
flags.mark_flags_as_required(["out"])


def main(argv):
    print(argv)


if __name__ == "__main__":
    main(sys.argv)
'''


@pytest.mark.parametrize("source, expected", [
    ("from ._quiet import quiet_tensorflow\nquiet_tensorflow()\n", ":2: a call at import: quiet_tensorflow()"),
    ("import os\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n", ":2: an assignment to something else than a name"),
    ("from deepspeech2.data.pipeline import PipelineConfig\np = PipelineConfig()\n",
     ":2: an assignment that calls a function at import: p = PipelineConfig()"),
    ("import sys\nif sys.argv[1:]:\n    X = 1\n", ":2: a statement (If) at import"),
    ("try:\n    import numpy\nexcept ImportError:\n    numpy = None\n", ":1: a statement (Try) at import"),
])
def test_each_kind_of_side_effect_is_caught(tmp_path, source, expected):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ds2_x.py").write_text(ALLOWED_AT_THE_TOP)
    assert architecture.side_effects(tmp_path) == []
    (tmp_path / "bin" / "ds2_y.py").write_text(source)
    found = architecture.side_effects(tmp_path)
    assert len(found) == 1 and found[0].startswith(f"bin/ds2_y.py{expected}"), found


@pytest.mark.parametrize("path,source,expected", [
    ("serving/bad.py", "from deepspeech2.model.layers import RowConv\n",
     "deepspeech2_serving.bad imports deepspeech2.model.layers: deepspeech2_serving never imports deepspeech2.model"),
    ("serving/bad.py", "def f():\n    from deepspeech2_export.saved_model import export_model\n",
     "deepspeech2_serving.bad imports deepspeech2.model (through deepspeech2_export.saved_model, deepspeech2.bundle): "
     "deepspeech2_serving never imports deepspeech2.model"),
    ("deepspeech2/decode/bad.py", "from deepspeech2.bundle import load_bundle\n",
     "deepspeech2.decode.bad imports deepspeech2.model (through deepspeech2.bundle): deepspeech2.decode never"),
])
def test_the_decoders_and_the_servers_never_reach_the_model(tmp_path, path, source, expected):
    """The flow lets serving import the model, and the modules that import it (the bundle, the exporter): `NEVER`
    refuses both, at any depth. (decode importing the bundle is against the flow too: a second line.)"""
    for folder in architecture.FOLDERS:
        (tmp_path / folder).mkdir()
    for module, text in (("deepspeech2/model/__init__.py", ""), ("deepspeech2/model/layers.py", ""),
                         ("deepspeech2/bundle.py", "from deepspeech2.model import build_model\n"),
                         ("export/saved_model.py", "from deepspeech2.bundle import load_bundle\n")):
        (tmp_path / module).parent.mkdir(exist_ok=True)
        (tmp_path / module).write_text(text)
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text(source)
    found = architecture.violations(tmp_path)
    assert any(expected in line for line in found), found
    assert len(found) == 1 + path.startswith("deepspeech2/decode/"), found
    (tmp_path / path).write_text("import numpy\n" if path.startswith("deepspeech2/") else
                                 "from deepspeech2_export import requests\n")  # the contract, not the exporter
    assert architecture.violations(tmp_path) == []


def test_no_module_or_function_is_too_long():
    assert architecture.sizes() == []


def _lines(n: int, indent: str = "    ") -> str:
    return "".join(f"{indent}x = {i}\n" for i in range(n))


def test_each_kind_of_size_violation_is_caught(tmp_path):
    """A module over the line limit, a function, a method and a nested function over theirs, in every folder of
    `FOLDERS`; a function of exactly the limit passes, and `SIZE_EXCEPTIONS` lets a named one through."""
    limit = architecture.MAX_FUNCTION_LINES
    for folder in architecture.FOLDERS:
        (tmp_path / folder).mkdir()
    (tmp_path / "deepspeech2" / "ok.py").write_text("def f():\n" + _lines(limit - 1))  # exactly the limit
    (tmp_path / "deepspeech2" / "long.py").write_text("x = 0\n" * (architecture.MAX_MODULE_LINES + 1))
    (tmp_path / "bin" / "ds2_x.py").write_text("def main():\n" + _lines(limit))
    (tmp_path / "export" / "e.py").write_text("class C:\n    def m(self):\n" + _lines(limit, " " * 8))
    (tmp_path / "serving" / "s.py").write_text("def outer():\n    def inner():\n" + _lines(limit, " " * 8)
                                               + "    return inner\n")
    found = architecture.sizes(tmp_path)
    expected = [f"deepspeech2/long.py: {architecture.MAX_MODULE_LINES + 1} lines",
                f"bin/ds2_x.py:1: deepspeech2_cli.ds2_x.main is {limit + 1} lines",
                f"export/e.py:2: deepspeech2_export.e.C.m is {limit + 1} lines",
                f"serving/s.py:1: deepspeech2_serving.s.outer is {limit + 3} lines",
                f"serving/s.py:2: deepspeech2_serving.s.outer.inner is {limit + 1} lines"]
    assert len(found) == len(expected) and all(any(line.startswith(e) for line in found) for e in expected), found
    excepted = (("deepspeech2_cli.ds2_x.main", "a reason"), ("deepspeech2.long", "a reason"))
    assert len(architecture.sizes(tmp_path, excepted)) == len(expected) - 2


@pytest.mark.parametrize("path,source,expected,lines", [
    ("deepspeech2/prepare/bad.py", "from deepspeech2_synthetic.tiny import prepare_tiny\n",
     "deepspeech2.prepare.bad imports deepspeech2_synthetic.tiny: deepspeech2 never imports deepspeech2_synthetic", 2),
    ("export/bad.py", "def f():\n    from deepspeech2_synthetic import voices\n",
     "deepspeech2_export.bad imports deepspeech2_synthetic.voices: deepspeech2_export never imports "
     "deepspeech2_synthetic", 1),
    ("serving/bad.py", "from deepspeech2.prepare.helper import x\n",
     "deepspeech2_serving.bad imports deepspeech2_synthetic.voices (through deepspeech2.prepare.helper): "
     "deepspeech2_serving never imports deepspeech2_synthetic", 3),
])
def test_the_library_never_reaches_the_synthetic_wing(tmp_path, path, source, expected, lines):
    """The wing stands above the library, export and serving sit past it in the flow: `NEVER` keeps all three off it,
    at any depth. (The library's own import of the wing is against the flow too; the helper's two lines are its.)"""
    for folder in architecture.FOLDERS:
        (tmp_path / folder).mkdir()
    for module, text in (("synthetic/__init__.py", ""), ("synthetic/voices.py", "from deepspeech2 import fileio\n"),
                         ("synthetic/tiny.py", "from deepspeech2_synthetic import voices\n"),
                         ("deepspeech2/fileio.py", ""), ("deepspeech2/prepare/__init__.py", ""),
                         ("deepspeech2/prepare/helper.py", "import numpy\n"),
                         ("bin/ds2_x.py", "from deepspeech2_synthetic.tiny import prepare_tiny\n")):
        (tmp_path / module).parent.mkdir(exist_ok=True)
        (tmp_path / module).write_text(text)
    assert architecture.violations(tmp_path) == []  # the wing imports the library, bin/ imports the wing
    (tmp_path / path).write_text(source)
    if path.startswith("serving/"):  # the wing reached through a library module
        (tmp_path / "deepspeech2/prepare/helper.py").write_text("from deepspeech2_synthetic import voices\n")
    found = architecture.violations(tmp_path)
    assert any(expected in line for line in found), found
    assert len(found) == lines, found
