"""The README's first-run commands, run as written (at tiny size) in a fresh folder."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SECTION = "## Your first run, step by step"
# Tiny size: the README's commands unchanged except how much they do.
TINY = {"--hours 6 --train_speakers 2400": "--hours 0.03 --train_speakers 300",
        # the tiny preset built for the README's log-mel statistics
        "--epochs 4": "--epochs 1 --model tiny --model_overrides "
                       "'{\"feature_kind\": \"logmel\", \"feature_dim\": 80}' --batch_size 4",
        "--num_alphas 5 --num_betas 5": "--num_alphas 2 --num_betas 2 --beam_size 8"}


def readme_blocks(section: str = SECTION) -> list[str]:
    """The ```bash blocks of one README section, in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(section)
    end = text.find("\n## ", start + len(section))
    return re.findall(r"```bash\n(.*?)```", text[start:end if end > 0 else None], flags=re.S)


def test_first_run_section_has_its_blocks():
    blocks = readme_blocks()
    assert len(blocks) == 4 and "source .venv/bin/activate" in blocks[0] and "ds2-train" in blocks[2]
    assert "ds2-eval" in blocks[3]
    script = "\n".join(blocks)
    for old in TINY:
        assert old in script, f"the README no longer says `{old}`: update TINY"


@pytest.mark.slow
def test_first_run_commands_run_as_written(tmp_path):
    script = "\n".join(readme_blocks())
    for old, new in TINY.items():
        script = script.replace(old, new)
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])  # `source .venv/bin/activate`
    (tmp_path / "examples").symlink_to(REPO / "examples")  # the flagfiles' relative paths
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # the commands come from the activated venv, not from ours
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    tiny = tmp_path / "data" / "tiny"
    for split in ("train", "dev", "test"):
        assert (tiny / f"{split}.clean.jsonl").read_text().strip()
        assert (tiny / "shards" / split / "index.json").is_file()
    assert (tiny / "mean_std.npz").is_file() and (tiny / "noise" / "rir.jsonl").is_file()
    assert (tmp_path / "runs" / "tiny" / "model" / "model.keras").is_file()
    assert "dev WER" in out.stdout
    assert (tmp_path / "runs" / "tiny" / "tune.png").is_file()
    assert re.search(r"^WER \d", out.stdout, flags=re.M) and "speaker" in out.stdout  # ds2-eval's report
    streaming_section_runs_as_written(tmp_path, env)


STREAMING = "## Streaming and the live demo"


def streaming_section_runs_as_written(root: Path, env: dict) -> None:
    """The streaming block after the first run: train (under the flagfile's `--mixed_precision auto`: bf16 on a
    CPU with AVX512-BF16, the case that once broke stream_step), export with the LM, then ds2-demo and
    ds2-demo-client on a test utterance."""
    block = readme_blocks(STREAMING)[0]  # the section's first block; the latency bench's comes later
    lines = [line.split("  #")[0].rstrip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("#")]
    train, export, demo, client = lines
    overrides = "'{\"bidirectional\": false, \"row_conv_context\": 5, \"utterance_cmn\": false}'"
    assert train.startswith("ds2-train ") and overrides in train, "the README's streaming command changed"
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
