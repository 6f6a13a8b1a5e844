"""The README's and the docs' commands: every ```bash block is marked as run here (slow), run by another test,
checked for syntax only, or skipped with a reason; none names a path no recipe, make target or docs command
writes; the README stays short and links every docs page.

A marker is an HTML comment on the line before the block:

    <!-- test: run -->                  run by test_docs_commands_run_as_written (at tiny size), in page order
    <!-- test: run by tests/X.py -->    run by that test, which reads this page
    <!-- test: syntax -->               `bash -n` only (a corpus, a GPU, root, minutes of training)
    <!-- test: skip: REASON -->         not even parsed by bash, for REASON
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "examples").glob("*/README.md"))]
# The order the slow test runs the `run` blocks in: the tiny corpus trained step by step first, then what uses it.
RUN_ORDER = ["docs/training.md", "docs/data.md", "docs/decoding.md", "README.md", "docs/serving.md",
             "docs/streaming.md"]
# Files the docs name that another branch adds (the LibriSpeech recipe); each must not exist yet, so that this list
# is emptied when they land.
PENDING: set[str] = set()

# Where the recipes and make targets write, each with the text that shows it in its source: a path in a docs block
# must lie under one of them, or under a folder a docs command itself writes (`--workdir`, `--out`, ...).
ROOTS = {
    "data/tiny": ("Makefile", "TINY := $(DATA)/tiny$(DEMO_SUFFIX)"),
    "data/tiny-small": ("Makefile", "DEMO_SUFFIX := -small"),
    "runs/tiny": ("Makefile", "RUN := runs/tiny$(DEMO_SUFFIX)"),
    "runs/tiny-small": ("Makefile", "DEMO_SUFFIX := -small"),
    "results/full": ("Makefile", "RES := results/$(DEMO_SIZE)"),
    "results/small": ("Makefile", "RES := results/$(DEMO_SIZE)"),
    "results/demo.json": ("Makefile", "cp $(RES)/demo.json results/demo.json"),
    "data/downloads": ("Makefile", "DOWNLOADS ?= data/downloads"),
    "runs/telephone": ("Makefile", "TEL_RUN ?= runs/telephone"),
    "results/telephone": ("Makefile", "TEL_RES ?= results/telephone"),
    "data/zh/tiny": ("examples/tiny_zh/demo.mk", "ZH := $(DATA)/zh/tiny$(DEMO_SUFFIX)"),
    "runs/zh/tiny": ("examples/tiny_zh/demo.mk", "ZH_RUN := runs/zh/tiny$(DEMO_SUFFIX)"),
    "results/zh/full": ("examples/tiny_zh/demo.mk", "ZH_RES := results/zh/$(DEMO_SIZE)"),
    "results/demo_zh.json": ("examples/tiny_zh/demo.mk", "cp $(ZH_RES)/demo.json results/demo_zh.json"),
    "data/aishell": ("examples/aishell/run.sh", "DATA=${DATA:-data/aishell}"),
    "runs/aishell": ("examples/aishell/run.sh", "RUN=${RUN:-runs/aishell}"),
    "data/wsj": ("examples/wsj/run.sh", "DATA=${DATA:-data/wsj}"),
    "runs/wsj": ("examples/wsj/run.sh", "RUN=${RUN:-runs/wsj}"),
    "data/chime4": ("examples/chime4/run.sh", "DATA=${DATA:-data/chime4}"),
    "runs/chime4": ("examples/chime4/run.sh", "RUN=${RUN:-runs/chime4}"),
    "data/librispeech": ("examples/librispeech/run.sh", "DATA=${DATA:-data/librispeech}"),
    "runs/librispeech": ("examples/librispeech/run.sh", "RUN=${RUN:-runs/librispeech}"),
    "runs/librispeech-en": ("examples/librispeech/en.flags", "--workdir=runs/librispeech-en"),
    "runs/ablations": ("bench/ablations.py", 'default="runs/ablations"'),
}
OUTPUT_FLAG = re.compile(r"--(?:workdir|out|out_dir|export_dir)[= ]+((?:runs|data|results)/[\w./-]+)")
PATH = re.compile(r"(?<![\w./~-])((?:runs|data|results)/[^\s'\"`;|&()<>:,]*)")
LAB_FOLDER = re.compile(r"^[a-z]\d+$")  # a lab run's folder name (e23, x49, s23): no user has one
MARKER = re.compile(r"<!-- test: (run|run by (\S+)|syntax|skip: (.+?)) -->")
# What a new reader must reach within the README's first 120 lines.
GOALS = ("### Transcribe a file", "## Train on LibriSpeech", "## Serve")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    marker: str | None  # "run", "run by", "syntax", "skip", or None when unmarked
    detail: str  # the test file of "run by", the reason of "skip"
    code: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def bash_blocks(page: Path) -> list[Block]:
    """The page's ```bash blocks, each with the marker on the line before it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```bash":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            m = MARKER.fullmatch(lines[i - 1].strip()) if i else None
            kind = detail = None
            if m:
                kind = "run by" if m.group(2) else "skip" if m.group(3) else m.group(1)
                detail = m.group(2) or m.group(3) or ""
            blocks.append(Block(page, i + 1, kind, detail or "", "\n".join(lines[i + 1:end]) + "\n"))
            i = end
        i += 1
    return blocks


BLOCKS = [b for page in PAGES for b in bash_blocks(page)]


def test_every_bash_block_is_marked():
    unmarked = [str(b) for b in BLOCKS if b.marker is None]
    assert not unmarked, f"```bash blocks without a `<!-- test: run|syntax|skip: why -->` line before them: {unmarked}"
    assert {b.marker for b in BLOCKS} >= {"run", "syntax"}


def test_skipped_blocks_say_why_and_run_by_blocks_name_a_test_that_reads_them():
    for b in BLOCKS:
        if b.marker == "skip":
            assert len(b.detail.split()) >= 3, f"{b}: say why the block is skipped"
        if b.marker == "run by":
            test = REPO / b.detail
            assert test.is_file(), f"{b}: {b.detail} doesn't exist"
            assert str(b.page.relative_to(REPO)) in test.read_text(encoding="utf-8") or b.page.name in \
                test.read_text(encoding="utf-8"), f"{b}: {b.detail} never reads {b.page.relative_to(REPO)}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.marker != "skip"], ids=str)
def test_bash_blocks_parse(block):
    out = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
    assert out.returncode == 0, f"{block}: {out.stderr}"


def test_the_declared_roots_are_what_the_recipes_write():
    for root, (source, evidence) in ROOTS.items():
        assert evidence in (REPO / source).read_text(encoding="utf-8"), (
            f"{source} no longer says `{evidence}`: is `{root}` still where it writes?")


def written_by_docs() -> set[str]:
    """The folders docs commands write themselves (`--workdir runs/tiny-streaming`, ...)."""
    return {m.group(1).rstrip("/") for b in BLOCKS for m in OUTPUT_FLAG.finditer(b.code)}


def test_blocks_name_only_paths_the_recipes_write():
    roots = set(ROOTS) | written_by_docs()
    bad = []
    for b in BLOCKS:
        for m in PATH.finditer(b.code.replace("$PWD/", "")):
            path = m.group(1).rstrip(".")
            parts = path.split("/")
            if any(LAB_FOLDER.match(p) for p in parts[1:3]):
                bad.append(f"{b}: {path} (a lab run's folder)")
            elif not any(path == r or path.startswith(r + "/") for r in roots):
                bad.append(f"{b}: {path}")
    assert not bad, "paths no recipe, make target or docs command writes:\n" + "\n".join(bad)


def test_the_path_check_catches_a_lab_folder_and_an_unknown_root():
    roots = set(ROOTS)
    for path, ok in (("runs/tiny/model", True), ("data/tiny/lm/tiny3.bin", True), ("runs/e23/model", False),
                     ("data/x23/tiny/dev.clean.jsonl", False), ("results/e23/tune.json", False)):
        found = [m.group(1) for m in PATH.finditer(f"ds2-eval --model_dir {path} --x 1")]
        assert found == [path]
        under = any(path == r or path.startswith(r + "/") for r in roots)
        assert under == ok, path


def test_scripts_the_blocks_name_exist():
    named = {m.group(0) for b in BLOCKS for m in re.finditer(
        r"(?<![\w/.-])(?:examples|bench|tools|serving)/[\w/.-]+\.(?:sh|py)", b.code)}
    missing = sorted(p for p in named - PENDING if not (REPO / p).is_file())
    assert not missing, f"the docs name scripts that don't exist: {missing}"


def test_pending_files_have_not_landed():
    landed = sorted(p for p in PENDING if (REPO / p).exists())
    assert not landed, f"{landed} exist now: take them out of PENDING in {Path(__file__).name}"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    text_outside_code = re.sub(r"```.*?```", "", text, flags=re.S)
    found = {slug(h) for h in re.findall(r"^#+ (.+)$", text_outside_code, flags=re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_links_resolve():
    bad = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            rel = os.path.relpath(dest, REPO)
            if rel in PENDING:
                continue
            if not dest.exists():
                bad.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{page.relative_to(REPO)}: {target} (no such anchor)")
    assert not bad, "\n".join(bad)


def test_readme_is_short_and_reaches_the_three_goals_early():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    for goal in GOALS:
        assert goal in lines[:120], f"`{goal}` is not within the README's first 120 lines"


def test_every_docs_page_is_in_the_readme_index():
    text = README.read_text(encoding="utf-8")
    index = text[text.index("## Documentation"):]
    index = index[:index.index("\n## ", 1)]
    missing = [p.name for p in (REPO / "docs").glob("*.md") if f"(docs/{p.name})" not in index]
    assert not missing, f"docs pages missing from the README's index: {missing}"


def test_user_docs_hold_no_lab_notebook():
    """No sittings, dates, load averages or experiment ids where a user reads: those stay in the RESULTS.md files."""
    sittings = re.compile(r"(first|second|third|[0-9]+th|eleventh|twelfth|thirteenth) session|\bE[0-9]+'s", re.I)
    bad = []
    for page in PAGES:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if (sittings.search(line) or re.search(r"(?<![\w.-])20\d\d-\d\d-\d\d\b|load average", line)
                    or re.search(r"\b[EZ]\d{1,2}\b", line)):
                bad.append(f"{page.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------------------------- the run blocks (slow)

# The docs' commands unchanged except how much they do (a tiny corpus, the tiny preset, one epoch, a small grid),
# and a free port for the servers they start.
TINY = {"--hours 6 --train_speakers 2400": "--hours 0.03 --train_speakers 300",
        # the tiny preset built for the docs' log-mel statistics
        "--epochs 5": "--epochs 1 --model tiny --model_overrides "
                      "'{\"feature_kind\": \"logmel\", \"feature_dim\": 80}' --batch_size 4",
        "--num_alphas 5 --num_betas 5": "--num_alphas 2 --num_betas 2 --beam_size 8",
        # an LM search over a model trained for seconds explores many words: tuning grids of 66 and 20 points (and a
        # beam of 200) on hundreds of utterances take most of an hour, 2 x 2 points at beam 8 take seconds
        "--num_batches 4 ": "--num_batches 1 --num_alphas 2 --num_betas 2 --beam_size 8 ",
        "--num_alphas 4 --beta_from 0 --beta_to 4 --num_betas 5": "--num_alphas 2 --beta_from 0 --beta_to 4 "
                                                                  "--num_betas 2 --beam_size 8",
        "--beam_size 200": "--beam_size 8",
        "ds2-serve --model_base_path runs/tiny/export/ds2 &":
            "rm -f serve.port; ds2-serve --model_base_path runs/tiny/export/ds2 --port 0 --port_file serve.port & "
            "until [ -s serve.port ]; do kill -0 $! || exit 1; sleep 0.5; done",
        "--server localhost:8500": "--server localhost:$(cat serve.port)"}


def run_blocks(page: str) -> list[Block]:
    return [b for b in BLOCKS if b.marker == "run" and str(b.page.relative_to(REPO)) == page]


def test_the_run_blocks_are_all_run_and_say_what_tiny_changes():
    pages = {str(b.page.relative_to(REPO)) for b in BLOCKS if b.marker == "run"}
    assert pages <= set(RUN_ORDER), f"pages with run blocks the slow test doesn't run: {pages - set(RUN_ORDER)}"
    script = "\n".join(b.code for page in RUN_ORDER for b in run_blocks(page))
    for old in TINY:
        assert old in script, f"the docs no longer say `{old}`: update TINY"
    assert "source .venv/bin/activate" in run_blocks("docs/training.md")[0].code


@pytest.mark.slow
def test_docs_commands_run_as_written(tmp_path):
    """Every `run` block, in RUN_ORDER, as one script in a fresh folder (variables carry from block to block, as in
    one terminal), then the streaming page's train, export, ds2-demo and ds2-demo-client."""
    script = "\n".join(f"# {b}\n{b.code}" for page in RUN_ORDER if page != "docs/streaming.md"
                       for b in run_blocks(page))
    for old, new in TINY.items():
        script = script.replace(old, new)
    script = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])  # `source .venv/bin/activate`
    (tmp_path / "examples").symlink_to(REPO / "examples")  # the flagfiles' relative paths
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # the commands come from the activated venv, not from ours
    # `recording.wav` is the reader's own file: a test utterance stands in, once the training page made the corpus.
    at = script.index("# docs/data.md")
    script = script[:at] + 'cp "$(find data/tiny/wav/test -name "*.wav" | sort | head -n 1)" recording.wav\n' + \
        script[at:]
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=3000)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    tiny = tmp_path / "data" / "tiny"
    for split in ("train", "dev", "test"):
        assert (tiny / f"{split}.clean.jsonl").read_text().strip()
        assert (tiny / "shards" / split / "index.json").is_file()
    assert (tiny / "mean_std.npz").is_file() and (tiny / "noise" / "rir.jsonl").is_file()
    assert (tmp_path / "runs" / "tiny" / "model" / "model.keras").is_file()
    assert "dev WER" in out.stdout
    assert (tmp_path / "results" / "full" / "tune.png").is_file()
    assert re.search(r"^WER \d", out.stdout, flags=re.M) and "speaker" in out.stdout  # ds2-eval's report
    assert re.search(r"^recording\.wav\t", out.stdout, flags=re.M), "ds2-infer or ds2-client printed no transcript"
    assert (tmp_path / "runs" / "tiny" / "export" / "ds2.dynamic.tflite").is_file()
    assert '"confidence"' in out.stdout  # ds2-infer --words
    streaming_page_runs_as_written(tmp_path, env)


def streaming_page_runs_as_written(root: Path, env: dict) -> None:
    """The streaming page's block: train (under the flagfile's `--mixed_precision auto`: bf16 on a CPU with
    AVX512-BF16), export with the LM, then ds2-demo and ds2-demo-client on a test utterance."""
    block, = run_blocks("docs/streaming.md")
    lines = [line.split("  #")[0].rstrip() for line in block.code.replace("\\\n", " ").splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("#")]
    train, export, demo, client = lines
    overrides = "'{\"bidirectional\": false, \"row_conv_context\": 5, \"utterance_cmn\": false}'"
    assert train.startswith("ds2-train ") and overrides in train, "the streaming page's command changed"
    train = train.replace(overrides, "'{\"bidirectional\": false, \"row_conv_context\": 5, \"utterance_cmn\": false, "
                                     "\"feature_kind\": \"logmel\", \"feature_dim\": 80}' --model tiny --epochs 1 "
                                     "--batch_size 4")
    prefix = "source .venv/bin/activate\n"
    for command in (train, export):
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", prefix + command], cwd=root, env=env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, command + "\n" + out.stdout[-2000:] + out.stderr[-2000:]
    assert demo.startswith("ds2-demo ") and client.startswith("ds2-demo-client data/tiny/wav/test/SOME.wav")
    wav = sorted((root / "data" / "tiny" / "wav" / "test").rglob("*.wav"))[0]
    port_file = root / "demo.port"
    server = subprocess.Popen(["bash", "-c", prefix + f"exec {demo} --port 0 --port_file {port_file}"], cwd=root,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(600):
            if port_file.exists() and port_file.read_text().strip():
                break
            assert server.poll() is None, server.stdout.read()[-3000:]
            time.sleep(0.2)
        port = port_file.read_text().strip()
        command = client.replace("data/tiny/wav/test/SOME.wav", str(wav)) + f" --server 127.0.0.1:{port} --speed 0"
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", prefix + command], cwd=root, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        assert out.stdout.strip(), "ds2-demo-client printed no transcript"
    finally:
        server.terminate()
        server.wait(timeout=60)
