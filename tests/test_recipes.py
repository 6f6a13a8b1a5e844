"""The WSJ and CHiME-4 recipes (examples/wsj/run.sh, examples/chime4/run.sh) run as written on their miniature
corpora (tests/corpus_fixtures.py), with a tiny model and one epoch; and examples/results_table.py, which makes
their results tables. The CHiME-4 recipe scores the model the WSJ recipe trained, as a user would."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jiwer
import pytest

import corpus_fixtures

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
HAVE_LMPLZ = (VENV_BIN / "lmplz").exists()
# The tiny model for one epoch, through the recipes' own override; a small grid and beam.
TINY = {"BIN": str(VENV_BIN), "MODEL": "tiny", "BEAM": "8", "LM_ORDER": "2", "LM_FLAGS": "", "NUM_SHARDS": "2",
        "GRID": "--alpha_from 0 --alpha_to 1 --num_alphas 2 --beta_from 0 --beta_to 1 --num_betas 2",
        "TRAIN_FLAGS": "--model=tiny --model_overrides={} --epochs=1 --batch_frames=0 --batch_size=2 --warmup_steps=1 "
                       "--augmentation= --checkpoint_every_steps=10"}


def _run(script: str, *args, **env) -> subprocess.CompletedProcess:
    out = subprocess.run(["bash", script, *map(str, args)], cwd=REPO, env={**os.environ, **TINY, **env},
                         capture_output=True, text=True, timeout=1500)
    return out


def _report(path: Path) -> dict:
    report = json.loads(path.read_text(encoding="utf-8"))
    refs, hyps = [u["reference"] for u in report["utterances"]], [u["hypothesis"] for u in report["utterances"]]
    assert report["totals"]["wer"] == pytest.approx(jiwer.wer(refs, hyps))
    assert report["totals"]["cer"] == pytest.approx(jiwer.cer(refs, hyps))
    return report


def _stamps(*folders: Path) -> dict[str, int]:
    """Every file's mtime but what each ds2-train start writes even with nothing to do: new TensorBoard event files,
    and the workdir's lock."""
    return {str(p): p.stat().st_mtime_ns for folder in folders for p in sorted(folder.rglob("*"))
            if p.is_file() and "tensorboard" not in p.parts and p.name != ".lock"}


def _rows(table: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]


@pytest.fixture(scope="module")
def wsj_run(tmp_path_factory):
    """examples/wsj/run.sh on the miniature WSJ (clips of 4 s: long enough for their text at the tiny model's
    stride), run once for this module: (fixture, data folder, run folder, the run's output)."""
    root = tmp_path_factory.mktemp("wsj")
    fx = corpus_fixtures.make_wsj(root / "corpus", min_seconds=4.0)
    data, run = root / "data", root / "run"
    out = _run("examples/wsj/run.sh", fx.corpus_dir, DATA=data, RUN=run)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return fx, data, run, out


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LMPLZ, reason="needs `make kenlm` (lmplz)")
def test_wsj_recipe(wsj_run):
    """Every stage announced and its output there; the LM text is WSJ1's own; the reports agree with jiwer and the
    results table with the reports; a second run changes nothing."""
    fx, data, run, out = wsj_run
    for stage in range(1, 9):
        assert f"==> [{stage}/8]" in out.stdout
    assert "from WSJ1's LM training text" in out.stdout
    want = [text for lines in corpus_fixtures.WSJ_LM_TEXT.values() for _, text in lines if text]
    assert (data / "lm_text.txt").read_text().splitlines() == want
    for path in (data / "vocab.txt", data / "shards/train_si284/index.json", data / "shards/test_dev93/index.json",
                 data / "mean_std.npz", data / "lm/words2.bin", run / "model/model.keras", run / "tune.json"):
        assert path.is_file(), path
    assert [p.name for p in (run / "export/ds2").iterdir()] == ["1"]
    assert (run / "export/ds2/1/saved_model.pb").is_file()
    assert [u["id"] for u in map(json.loads, (data / "train_si284.clean.jsonl").read_text().splitlines())] == \
        sorted(fx.expected["train_si284"])

    tune = json.loads((run / "tune.json").read_text())
    rows = _rows((run / "results.md").read_text())
    assert [r[:2] for r in rows] == [["test_dev93", "greedy"], ["test_dev93", f"beam 8, words2.bin α {tune['best_alpha']:g} "
                                     f"β {tune['best_beta']:g}"], ["test_eval92", "greedy"],
                                    ["test_eval92", f"beam 8, words2.bin α {tune['best_alpha']:g} β {tune['best_beta']:g}"]]
    for row, (split, kind) in zip(rows, [(s, k) for s in ("test_dev93", "test_eval92") for k in ("greedy", "lm")]):
        report = _report(run / f"{split}_{kind}.json")
        assert sorted(u["reference"] for u in report["utterances"]) == sorted(e.text for e in fx.expected[split].values())
        assert list(report["groups"]["speaker"]) == sorted({e.speaker for e in fx.expected[split].values()})
        assert row[2:] == [str(report["totals"]["scored"]), f"{report['totals']['wer']:.2%}",
                           f"{report['totals']['cer']:.2%}"]
    assert (run / "results.md").read_text() in out.stdout

    before = _stamps(data, run)
    again = _run("examples/wsj/run.sh", fx.corpus_dir, DATA=data, RUN=run)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert _stamps(data, run) == before
    assert "nothing to do" in again.stdout


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LMPLZ, reason="needs `make kenlm` (lmplz)")
def test_chime4_recipe(wsj_run, tmp_path):
    """The WSJ model and LM on the miniature CHiME-4: dt05/et05, real and simulated, per environment, agreeing with
    jiwer on each environment's utterances; a second run changes nothing; without an LM, greedy only."""
    _, wsj_data, wsj_run_dir, _ = wsj_run
    fx = corpus_fixtures.make_chime4(tmp_path / "corpus", min_seconds=4.0)
    data, run, model = tmp_path / "data", tmp_path / "run", wsj_run_dir / "model"
    out = _run("examples/chime4/run.sh", fx.corpus_dir, model, DATA=data, RUN=run, LM=wsj_data / "lm/words2.bin")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for stage in range(1, 5):
        assert f"==> [{stage}/4]" in out.stdout
    sets = ("dt05_real", "dt05_simu", "et05_real", "et05_simu")
    rows = _rows((run / "results.md").read_text())
    header = [c.strip() for c in (run / "results.md").read_text().splitlines()[0].strip("|").split("|")]
    assert header == ["set", "decoding", "BUS", "CAF", "PED", "STR", "all (WER)"]
    assert [r[0] for r in rows] == [s for s in sets for _ in range(2)]
    for row, (split, kind) in zip(rows, [(s, k) for s in sets for k in ("greedy", "lm")]):
        report = _report(run / f"{split}_{kind}.json")
        expected = fx.expected[split]
        assert sorted(u["reference"] for u in report["utterances"]) == sorted(e.text for e in expected.values())
        by_env = report["groups"]["environment"]
        for env in ("bus", "caf", "ped", "str"):
            utts = [u for u in report["utterances"] if u["environment"] == env]
            if not utts:
                assert env not in by_env and row[header.index(env.upper())] == "-"
                continue
            wer = jiwer.wer([u["reference"] for u in utts], [u["hypothesis"] for u in utts])
            assert by_env[env]["wer"] == pytest.approx(wer)
            assert row[header.index(env.upper())] == f"{wer:.2%}"
        assert row[-1] == f"{report['totals']['wer']:.2%}"
        assert (kind == "lm") == (report["decoder"]["kind"] == "beam")
    assert set(json.loads((run / "et05_real_greedy.json").read_text())["groups"]["environment"]) == \
        {"bus", "caf", "ped", "str"}

    before = _stamps(data, run)
    again = _run("examples/chime4/run.sh", fx.corpus_dir, model, DATA=data, RUN=run, LM=wsj_data / "lm/words2.bin")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert _stamps(data, run) == before

    greedy = _run("examples/chime4/run.sh", fx.corpus_dir, model, DATA=data, RUN=tmp_path / "greedy",
                  EVAL_SETS="et05_real")
    assert greedy.returncode == 0, greedy.stdout[-3000:] + greedy.stderr[-3000:]
    assert [r[:2] for r in _rows((tmp_path / "greedy/results.md").read_text())] == [["et05_real", "greedy"]]
    assert not (tmp_path / "greedy/tune.json").exists()


@pytest.mark.slow
def test_recipes_stop_at_the_failing_step_with_its_message(wsj_run, tmp_path):
    """A split the corpus lacks stops the WSJ recipe in its first stage, naming the manifest and the report; a
    model folder that isn't one, and a missing LM, stop the CHiME-4 recipe before it starts."""
    fx, *_ = wsj_run
    out = _run("examples/wsj/run.sh", fx.corpus_dir, DATA=tmp_path / "data", RUN=tmp_path / "run",
               EVAL_SETS="test_eval93")
    assert out.returncode == 1 and "==> [2/8]" not in out.stdout
    assert out.stderr.strip().splitlines()[-1] == (
        f"examples/wsj/run.sh: {tmp_path}/data/test_eval93.jsonl is missing or empty: {fx.corpus_dir} lacks its index "
        f"files or audio (what was skipped and why: {tmp_path}/data/test_eval93.report.json; the splits and the discs "
        "they need: ds2-prepare wsj --help)")

    out = _run("examples/chime4/run.sh", tmp_path, tmp_path / "nomodel")
    assert out.returncode == 1 and "==> [1/4]" not in out.stdout
    assert f"{tmp_path}/nomodel is not a model bundle (no model.keras)" in out.stderr
    out = _run("examples/chime4/run.sh", tmp_path, wsj_run[2] / "model", LM=tmp_path / "none.bin")
    assert out.returncode == 1 and f"LM={tmp_path}/none.bin does not exist" in out.stderr


def _fake_report(decoder: dict, utts: list[tuple[str, str, str]]) -> dict:
    """A ds2-eval report's fields the table reads, for (reference, hypothesis, environment) triples."""
    def rates(items):
        refs, hyps = [r for r, _, _ in items], [h for _, h, _ in items]
        return {"wer": jiwer.wer(refs, hyps), "cer": jiwer.cer(refs, hyps), "utterances": len(items)}
    envs = sorted({e for _, _, e in utts})
    return {"decoder": decoder, "headline_metric": "wer", "totals": {**rates(utts), "scored": len(utts)},
            "groups": {"environment": {e: rates([u for u in utts if u[2] == e]) for e in envs}}}


def test_results_table(tmp_path):
    greedy = _fake_report({"kind": "greedy"}, [("the cat sat", "the cat sat", "bus"), ("a dog ran", "a dog", "caf")])
    lm = _fake_report({"kind": "beam", "beam_size": 500, "lm_path": "/x/words4.bin", "alpha": 0.75, "beta": 1.5},
                      [("the cat sat", "the hat sat", "bus")])
    for name, report in (("et05_real_greedy", greedy), ("et05_real_lm", lm)):
        (tmp_path / f"{name}.json").write_text(json.dumps(report))
    script = [sys.executable, str(REPO / "examples/results_table.py"), str(tmp_path / "et05_real_greedy.json"),
              str(tmp_path / "et05_real_lm.json")]
    out = subprocess.run([*script, "--out", str(tmp_path / "results.md")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (tmp_path / "results.md").read_text() == (
        "| set | decoding | utterances | WER | CER |\n|---|---|---|---|---|\n"
        "| et05_real | greedy | 2 | 16.67% | 20.00% |\n"
        "| et05_real | beam 500, words4.bin α 0.75 β 1.5 | 1 | 33.33% | 9.09% |\n")
    stamp = (tmp_path / "results.md").stat().st_mtime_ns
    subprocess.run([*script, "--out", str(tmp_path / "results.md")], check=True, capture_output=True)
    assert (tmp_path / "results.md").stat().st_mtime_ns == stamp  # unchanged: not rewritten

    out = subprocess.run([*script, "--group_by", "environment"], capture_output=True, text=True)
    assert out.stdout.splitlines() == [
        "| set | decoding | BUS | CAF | all (WER) |", "|---|---|---|---|---|",
        "| et05_real | greedy | 0.00% | 33.33% | 16.67% |",
        "| et05_real | beam 500, words4.bin α 0.75 β 1.5 | 33.33% | - | 33.33% |"]
    out = subprocess.run([*script, "--group_by", "speaker"], capture_output=True, text=True)
    assert out.returncode == 1 and re.fullmatch(
        r"results_table.py: error: reports \['et05_real_greedy', 'et05_real_lm'\] are not grouped by 'speaker': run "
        r"ds2-eval with --group_by speaker\n", out.stderr)
