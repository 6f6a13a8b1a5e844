"""bench/ablations.py: the variant flagfiles (one changed line each, parsed by ds2-train's flags), the resume
rule, and the report of finished runs."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FLAGS_DIR = REPO / "examples" / "ablations"


def _bench():
    spec = importlib.util.spec_from_file_location("ablations", REPO / "bench" / "ablations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ablations = _bench()


def test_each_variant_is_its_parent_and_one_line():
    stems = {p.stem for p in FLAGS_DIR.glob("*.flags")}
    assert stems == set(ablations.VARIANTS)  # every flagfile is in a comparison, and every variant has one
    base = ablations.flag_lines(FLAGS_DIR / "base.flags")
    assert base[0] == "--flagfile=examples/tiny/tiny.flags" and "--max_train_minutes=4" in base
    for stem in stems - {"base"}:
        lines = ablations.flag_lines(FLAGS_DIR / f"{stem}.flags")
        assert len(lines) == 2 and lines[0].startswith("--flagfile=examples/ablations/"), (stem, lines)
        assert (REPO / lines[0].split("=", 1)[1]).is_file()
    # ds2-train's own flags parse every flagfile (includes followed), and each changes one flag of its parent.
    out = subprocess.run([sys.executable, str(REPO / "bench" / "ablations.py"), "--list"], capture_output=True,
                         text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    described = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(described) == stems and described["base"]["parent"] is None
    for stem in stems - {"base"}:
        assert len(described[stem]["changed"]) == 1, (stem, described[stem])
    assert described["noaug"]["changed"] == {"augmentation": ""}
    assert described["nobn-nosortagrad"] == {"parent": "nobn", "lines": 2, "changed": {"sortagrad": False}}


def test_run_state_resumes(tmp_path):
    settings = {"minutes": 5.0, "data": "data/tiny"}
    run = tmp_path / "base-s0"
    assert ablations.run_state(run, settings) == "train"  # nothing yet
    run.mkdir()
    (run / "checkpoints").mkdir()
    assert ablations.run_state(run, settings) == "train"  # interrupted: trained again from scratch
    (run / "trained.json").write_text(json.dumps({"settings": settings}))
    assert ablations.run_state(run, settings) == "score"
    (run / "results.json").write_text(json.dumps({"settings": settings}))
    assert ablations.run_state(run, settings) == "done"
    with pytest.raises(ValueError, match="another --out"):
        ablations.run_state(run, {**settings, "minutes": 1.0})


def test_epochs_done_and_seconds_per_epoch():
    epochs = [{"step": 10, "seconds": 80}, {"step": 20, "seconds": 60}, {"step": 30, "seconds": 62},
              {"step": 35, "seconds": 30, "partial": True}]
    assert ablations.epochs_done(epochs) == 3.5  # the cut epoch counts for its share of steps
    assert ablations.epochs_done(epochs[:2]) == 2
    assert ablations.seconds_per_epoch(epochs) == 61.0  # the first (tracing) and the partial one left out
    assert ablations.seconds_per_epoch(epochs[:1]) == 80.0
    cut = [{"step": 3, "seconds": 9, "partial": True}]
    assert ablations.epochs_done(cut) is None and ablations.seconds_per_epoch(cut) is None


def test_a_finished_run_is_not_rerun(tmp_path):
    data = tmp_path / "data"  # only the layout: a run that trained would fail on these empty files
    for p in ("shards/train/index.json", "shards/dev/index.json", "dev.clean.jsonl", "vocab.txt", "mean_std.npz",
              "augmentation.json", "noise/noise.jsonl"):
        (data / p).parent.mkdir(parents=True, exist_ok=True)
        (data / p).write_text("")
    out = tmp_path / "out"
    (out / "noisy_dev").mkdir(parents=True)
    (out / "noisy_dev" / "dev.clean.jsonl").write_text("")
    settings = {"minutes": 4.0, "data": str(data), "lm": None, "alpha": 0.5, "beta": 2.0, "beam_size": 50,
                "train_flags": []}
    result = {"variant": "base", "seed": 0, "settings": settings, "params": 5516029, "steps": 300, "epochs": 2.5,
              "seconds_per_epoch": 110.0, "train_loss": 80.0, "dev_greedy": {"wer": 0.6, "cer": 0.234},
              "noisy_dev_greedy": {"wer": 0.9, "cer": 0.5}, "cer_curve": [[1.8, 0.5], [3.7, 0.3], [4.6, 0.234]],
              "loss_curve": [[0.1, 300.0], [4.6, 80.0]]}
    (out / "base-s0").mkdir()
    (out / "base-s0" / "results.json").write_text(json.dumps(result))
    cmd = [sys.executable, str(REPO / "bench" / "ablations.py"), f"--data={data}", f"--out={out}", "--seeds=1",
           "--only=base,noaug", "--alpha=0.5", "--beta=2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert "[base s0] finished earlier" in proc.stdout
    assert "[noaug s0] ds2-train failed" in proc.stdout and proc.returncode == 1  # only noaug trained
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["runs"] == 1 and summary["failed"] == ["noaug-s0"]
    assert summary["dev_cer_greedy"]["base"] == [0.234]
    tables = (out / "tables.md").read_text()
    assert "| base | 5.52 M | 2.5 | 110 | 80.0 | 23.4 | 60.0 | — | — | 50.0 | 90.0 | — |" in tables
    assert (out / "ablations.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "noaug-s0" / "trained.json").exists()


def test_smooth_is_tensorboards_debiased_moving_average():
    assert ablations.smooth([5.0, 5.0, 5.0]) == pytest.approx([5.0, 5.0, 5.0])  # no pull towards 0 at the start
    w = 0.85
    got = ablations.smooth([1.0, 3.0, 2.0], w)
    ema = [(1 - w) * 1.0, w * (1 - w) * 1.0 + (1 - w) * 3.0]
    ema.append(w * ema[1] + (1 - w) * 2.0)
    assert got == pytest.approx([e / (1 - w ** (i + 1)) for i, e in enumerate(ema)])
