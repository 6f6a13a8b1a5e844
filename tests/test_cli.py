"""The installed ds2-* commands: --help (and docs/cli.md, made of it), error messages, TensorFlow's start-up noise."""

import ast
import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent  # the console scripts sit next to the interpreter running the tests
CLI_DOC = REPO / "docs" / "cli.md"  # every command's --help, written by tools/cli_doc.py

# What TensorFlow prints on its own when it loads or first lists devices (C++ log prefix I0000/W0000/E0000).
TF_NOISE = re.compile(r"[IWEF]0000 |absl::InitializeLog|oneDNN|cuda|cpu_feature_guard|rebuild TensorFlow",
                      re.IGNORECASE)


def _console_scripts() -> dict[str, str]:
    """{"ds2-prepare": "deepspeech2_cli.ds2_prepare", ...} from setup.cfg's console_scripts, each of which names
    its launcher in deepspeech2_cli (`deepspeech2_cli:ds2_prepare`), a function named after the command's module."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    scripts = {}
    for line in cfg["options.entry_points"]["console_scripts"].strip().splitlines():
        name, target = (s.strip() for s in line.split("="))
        package, launcher = target.split(":")
        assert package == "deepspeech2_cli" and launcher == name.replace("-", "_"), line
        scripts[name] = f"{package}.{launcher}"
    return scripts


SCRIPTS = _console_scripts()


def _source(module: str) -> ast.Module:
    """The parsed source of a deepspeech2_cli module (the package is the bin/ folder)."""
    package, name = module.split(".")
    assert package == "deepspeech2_cli", module
    return ast.parse((REPO / "bin" / f"{name}.py").read_text())


def _own_flags(tree: ast.Module) -> list[str]:
    """Names of the flags a module defines itself: every flags.DEFINE_*("name", ...) call in its source."""
    names = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith("DEFINE_") and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "flags" and node.args and isinstance(node.args[0], ast.Constant)):
            names.append(node.args[0].value)
    return names


def _env(**extra) -> dict:
    """The user's environment: no TF_CPP_MIN_LOG_LEVEL (conftest sets one), DS2_TF_LOGS or DS2_PROGRESS, unless
    given."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "DS2_TF_LOGS", "DS2_PROGRESS")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def _run(argv, cwd=None, **env) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=_env(**env), cwd=cwd, timeout=600)


def _script(name: str) -> Path:
    path = VENV_BIN / name
    assert path.is_file(), f"{name} is not installed in {VENV_BIN}; run `make deps`"
    return path


def _noise(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if TF_NOISE.search(line)]


def test_console_scripts_are_listed():
    assert set(SCRIPTS) >= {"ds2-prepare", "ds2-build-vocab", "ds2-make-shards", "ds2-compute-stats", "ds2-train"}


def _prepare_commands() -> list[tuple[str, str, str]]:
    """ds2-prepare's COMMANDS, read from its source: (name, the function defining its flags, the function)."""
    tree = _source(SCRIPTS["ds2-prepare"])
    node = next(n for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "COMMANDS" for t in n.targets))
    return [(e.elts[0].value, e.elts[1].id, e.elts[2].id) for e in node.value.elts]


def _prepare_flags(define: str) -> set[str]:
    """The flags ds2-prepare's function `define` defines, itself or through the helpers it calls."""
    functions = {n.name: n for n in _source(SCRIPTS["ds2-prepare"]).body if isinstance(n, ast.FunctionDef)}
    found = set(_own_flags(functions[define]))
    for node in ast.walk(functions[define]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            found |= _prepare_flags(node.func.id)
    return found


@pytest.mark.parametrize("name", sorted(set(SCRIPTS) - {"ds2-prepare"}))  # its commands: the tests below
def test_help_shows_docstring_and_own_flags(name):
    tree = _source(SCRIPTS[name])
    first_line = ast.get_docstring(tree).splitlines()[0]
    own = _own_flags(tree)
    assert own, f"found no flags.DEFINE_* calls in {SCRIPTS[name]}"

    out = _run([_script(name), "--help"])
    assert out.returncode == 0, out.stderr
    assert first_line in out.stdout
    for flag in own:
        assert re.search(rf"^\s+--(\[no\])?{flag}: ", out.stdout, re.MULTILINE), f"--{flag} missing:\n{out.stdout}"
    assert "(default: " in out.stdout
    assert "DS2_TF_LOGS" in out.stdout
    assert "Try --helpfull" not in out.stdout  # absl's own short help, which showed none of this
    assert not _noise(out.stderr), out.stderr
    # docs/cli.md holds this very text (tools/cli_doc.py writes it from the same --help)
    assert f"\n## {name}\n\n```text\n{out.stdout.rstrip()}\n```\n" in CLI_DOC.read_text(encoding="utf-8"), (
        f"docs/cli.md's {name} is stale: run .venv/bin/python tools/cli_doc.py")


def test_cli_doc_has_a_section_per_command_in_order():
    sections = re.findall(r"^## (\S+)$", CLI_DOC.read_text(encoding="utf-8"), flags=re.M)
    assert sections == list(SCRIPTS), "docs/cli.md's commands differ from setup.cfg's: run tools/cli_doc.py"


def test_prepare_help_lists_every_command():
    out = _run([_script("ds2-prepare"), "--help"])
    assert out.returncode == 0, out.stderr
    for command, _, _ in _prepare_commands():  # a line each: the command name, then what it does
        assert re.search(rf"^  {command}\s+\w", out.stdout, re.MULTILINE), f"{command} not listed:\n{out.stdout}"
    assert "(default: " not in out.stdout  # no command's flags: each command shows its own
    assert f"\n## ds2-prepare\n\n```text\n{out.stdout.rstrip()}\n```\n" in CLI_DOC.read_text(encoding="utf-8")
    for argv, got in ((["tinny", "--out", "x"], "['tinny']"), ([], "[]")):  # a misspelt command; none
        wrong = _run([_script("ds2-prepare"), *argv])
        lines = wrong.stderr.strip().splitlines()
        assert wrong.returncode == 1 and len(lines) == 1, wrong.stderr
        assert lines[0].startswith("ds2-prepare: error: expected a command, one of tiny, heldout, "), lines[0]
        assert lines[0].endswith(f"; got {got} (see ds2-prepare --help)"), lines[0]


@pytest.mark.parametrize("command, define, function", _prepare_commands())
def test_prepare_command_help_shows_its_own_flags_only(command, define, function):
    functions = {n.name: n for n in _source(SCRIPTS["ds2-prepare"]).body if isinstance(n, ast.FunctionDef)}
    out = _run([_script("ds2-prepare"), command, "--help"])
    assert out.returncode == 0, out.stderr
    assert ast.get_docstring(functions[function]).splitlines()[0] in out.stdout
    shown = set(re.findall(r"^\s+--(?:\[no\])?(\w+): ", out.stdout, re.MULTILINE)) - {"flagfile", "helpfull"}
    assert shown == _prepare_flags(define), out.stdout
    assert not _noise(out.stderr), out.stderr
    assert f"\n### ds2-prepare {command}\n\n```text\n{out.stdout.rstrip()}\n```\n" in CLI_DOC.read_text(
        encoding="utf-8"), "docs/cli.md is stale: run .venv/bin/python tools/cli_doc.py"


def test_helpfull_and_script_mode():
    full = _run([_script("ds2-build-vocab"), "--helpfull"])
    assert full.returncode == 0, full.stderr
    assert full.stdout.startswith("Build the character vocabulary") and "only_check_args" in full.stdout

    short = _run([_script("ds2-build-vocab"), "--help"])
    as_script = _run([sys.executable, str(REPO / "bin" / "ds2_build_vocab.py"), "--help"])
    assert as_script.returncode == 0, as_script.stderr
    assert as_script.stdout == short.stdout


def test_runtime_error_is_one_line(tmp_path):
    out = _run([_script("ds2-build-vocab"), "--manifest_paths", str(tmp_path / "nonexistent.jsonl"),
                "--out", str(tmp_path / "vocab.txt")])
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [
        f"ds2-build-vocab: error: manifest `{tmp_path / 'nonexistent.jsonl'}` does not exist"]
    assert not (tmp_path / "vocab.txt").exists()


def test_os_errors_are_one_line_naming_the_path(tmp_path):
    """A file where a folder should be, and a write the disk refuses (RLIMIT_FSIZE fails writes past 20 kB with
    EFBIG, for root too, as a full disk fails them with ENOSPC): one line naming the path, exit 1, no traceback
    and no temp files."""
    import resource

    import numpy as np
    import soundfile as sf

    (tmp_path / "file").write_text("not a folder")
    lines = []
    for i in range(3):
        sf.write(tmp_path / f"{i}.wav", np.random.default_rng(i).uniform(-0.1, 0.1, 16000), 16000)
        lines.append(f'{{"audio_filepath": "{i}.wav", "duration": 1.0, "text": "a b"}}')
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    out = _run([_script("ds2-build-vocab"), "--manifest_paths", str(tmp_path / "m.jsonl"),
                "--out", str(tmp_path / "file" / "vocab.txt")])
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"ds2-build-vocab: error: cannot access {tmp_path / 'file' / 'vocab.txt'}: Not a directory"]
    from deepspeech2.vocab import Vocabulary

    Vocabulary.from_texts(["a b"]).save(tmp_path / "vocab.txt")

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    out = subprocess.run([_script("ds2-make-shards"), "--manifest", tmp_path / "m.jsonl", "--vocab",
                          tmp_path / "vocab.txt", "--out", tmp_path / "s", "--num_shards", "1"],
                         capture_output=True, text=True, env=_env(), timeout=600, preexec_fn=small_files)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"ds2-make-shards: error: cannot write {tmp_path / 's' / 'shard-00000-of-00001.tfrecord'}: File too large")
    assert [p.name for p in (tmp_path / "s").iterdir()] == [".lock"]  # no temp shard, no index: the lock alone


def test_bad_flag_is_one_line_without_tf_noise(tmp_path):
    # ds2-compute-stats imports TensorFlow before it parses flags.
    out = _run([_script("ds2-compute-stats"), "--num_samples", "many", "--out", str(tmp_path / "x.npz")])
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ds2-compute-stats: error: flag --num_samples=many"), out.stderr
    assert "see ds2-compute-stats --help" in lines[0]


def test_tf_logs_come_back_with_ds2_tf_logs():
    quiet = _run([_script("ds2-compute-stats"), "--help"])
    loud = _run([_script("ds2-compute-stats"), "--help"], DS2_TF_LOGS="1")
    assert quiet.returncode == loud.returncode == 0
    assert not _noise(quiet.stderr), quiet.stderr
    assert _noise(loud.stderr), loud.stderr
    assert loud.stdout == quiet.stdout


def test_failed_tensorflow_import_is_still_shown(tmp_path):
    # A broken `tensorflow` that prints and raises: the quiet import must put stderr back and show the error.
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text(
        "import os\nos.write(2, b'C++ noise\\n')\nraise ImportError('libtensorflow_framework.so.2: cannot open')\n")
    code = ("import sys\nfrom deepspeech2_cli._quiet import quiet_tensorflow\nquiet_tensorflow()\n"
            "print('before', file=sys.stderr, flush=True)\nimport tensorflow\n")
    out = _run([sys.executable, "-c", code], PYTHONPATH=str(tmp_path))
    assert out.returncode == 1
    assert out.stderr.startswith("before\n")
    assert "C++ noise" not in out.stderr
    assert "ImportError: libtensorflow_framework.so.2: cannot open" in out.stderr
    # Asked for: nothing is hidden.
    loud = _run([sys.executable, "-c", code], PYTHONPATH=str(tmp_path), DS2_TF_LOGS="1")
    assert "C++ noise" in loud.stderr and "ImportError" in loud.stderr


def test_importing_the_commands_package_changes_nothing():
    # The quieting is a call (the launchers make it), not a side effect of importing deepspeech2_cli.
    code = ("import os, sys\nimport deepspeech2_cli\nprint('tensorflow' in sys.modules, "
            "os.environ.get('TF_CPP_MIN_LOG_LEVEL'), [type(f).__name__ for f in sys.meta_path if 'Quiet' in "
            "type(f).__name__])\n")
    out = _run([sys.executable, "-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "None", "[]"]
    quieted = _run([sys.executable, "-c", code.replace("import deepspeech2_cli\n", "import deepspeech2_cli\n"
                                                       "deepspeech2_cli.quiet_tensorflow()\n")])
    assert quieted.stdout.split() == ["False", "3", "['_QuietTensorFlowFinder']"], quieted.stderr


def test_progress_in_a_log_file_is_one_line_per_refresh(tmp_path):
    import numpy as np
    import soundfile as sf

    lines = []
    for i in range(3):
        sf.write(tmp_path / f"{i}.wav", np.random.default_rng(i).uniform(-0.1, 0.1, 8000), 16000)
        lines.append(f'{{"audio_filepath": "{i}.wav", "duration": 0.5, "text": "a"}}')
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    out = _run([_script("ds2-compute-stats"), "--manifest_paths", str(tmp_path / "m.jsonl"), "--out",
                str(tmp_path / "s.npz")])  # stderr is a pipe, as in `make demo > log 2>&1`
    assert out.returncode == 0, out.stderr
    assert "\r" not in out.stderr
    bars = [line for line in out.stderr.splitlines() if line.startswith("mean/std")]
    assert bars and "3/3" in bars[-1], out.stderr


def test_progress_switched_off_prints_no_bar(tmp_path):
    from factories import make_manifest

    manifest, _ = make_manifest(tmp_path, n=3, max_seconds=1.0)
    argv = [_script("ds2-compute-stats"), "--manifest_paths", str(manifest), "--out", str(tmp_path / "s.npz")]
    shown = _run(argv)
    assert shown.returncode == 0 and "mean/std" in shown.stderr, shown.stderr
    off = _run(argv, DS2_PROGRESS="0")
    assert off.returncode == 0, off.stderr
    assert off.stderr == ""


@pytest.mark.parametrize("name, shared", [("ds2-demo", "lm"), ("ds2-serve", "beam_size"), ("ds2-client", "manifest"),
                                          ("ds2-infer", "num_samples")])
def test_help_shows_shared_flags(name, shared):
    out = _run([_script(name), "--help"])
    assert out.returncode == 0, out.stderr
    assert re.search(rf"^\s+--{shared}: ", out.stdout, re.MULTILINE), out.stdout


def test_bench_starts_as_quietly_as_the_commands():
    out = _run([sys.executable, str(REPO / "bench" / "train.py"), "--help"])  # imports TensorFlow
    assert out.returncode == 0, out.stderr
    assert not _noise(out.stderr), out.stderr


def test_log_lines_turns_refreshes_into_lines():
    import io

    from tqdm import tqdm

    sys.path.insert(0, str(REPO / "bin"))
    from _app import LogLines

    buf = io.StringIO()
    stream = LogLines(buf)
    stream.write("before\n")
    for _ in tqdm(range(3), desc="work", file=stream, mininterval=0, miniters=1):
        pass
    for _ in tqdm(range(2), desc="gone", file=stream, mininterval=0, miniters=1, leave=False):
        pass
    stream.write("after\n")
    text = buf.getvalue()
    assert "\r" not in text
    rows = text.splitlines()
    assert rows[0] == "before" and rows[-1] == "after"
    names = [r.split(":")[0] for r in rows[1:-1]]  # a line per refresh, the cleared bar's included
    work, gone = names.count("work"), names.count("gone")
    assert names == ["work"] * work + ["gone"] * gone and work >= 3 and gone >= 2, rows
    assert "3/3" in rows[work] and all(r.strip() for r in rows)


def test_configs_are_built_from_flags_by_field_name():
    import dataclasses

    from absl import flags

    from deepspeech2_cli._flags import default, from_flags

    @dataclasses.dataclass(frozen=True)
    class Inner:
        size: int = 3

    @dataclasses.dataclass(frozen=True)
    class Outer:
        out: str
        paths: tuple[str, ...] = ()
        rate: float = 0.5
        inner: Inner = dataclasses.field(default_factory=Inner)

    assert (default(Outer, "out"), default(Outer, "paths"), default(Outer, "rate")) == (None, [], 0.5)
    with pytest.raises(AttributeError, match=r"Outer has no field `ratio` to define a flag for; its fields: out, "):
        default(Outer, "ratio")  # a flag meant for a field that isn't there, or left behind by a rename
    values = flags.FlagValues()
    flags.DEFINE_string("out", default(Outer, "out"), "", flag_values=values)
    flags.DEFINE_list("paths", default(Outer, "paths"), "", flag_values=values)
    flags.DEFINE_float("rate", default(Outer, "rate"), "", flag_values=values)
    flags.DEFINE_integer("inner_size", default(Inner, "size"), "", flag_values=values)
    flags.DEFINE_string("inner", "", "", flag_values=values)  # a flag named after the nested config's field
    values(["x", "--out=o", "--paths=a,b", "--inner_size=7"])
    built = from_flags(Outer, values=values, inner=from_flags(Inner, "inner_", values=values))
    assert built == Outer(out="o", paths=("a", "b"), rate=0.5, inner=Inner(7))
    with pytest.raises(TypeError, match=r"Outer has no field `speed`"):
        from_flags(Outer, values=values, inner=Inner(), speed=2)
    with pytest.raises(TypeError, match=r"Outer.inner is a config of its own: build it and give it"):
        from_flags(Outer, values=values)

