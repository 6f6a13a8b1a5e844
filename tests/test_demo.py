"""`make demo DEMO_SIZE=small`, the main job end to end, run in a copy of the checkout (slow; `.ci/run` runs it).

It checks what a user and a script get: every stage announced, results/demo.json with the documented keys,
its figures the same as an independent jiwer scoring of the per-utterance transcripts, the pictures, the
served transcripts; and that a re-run of the finished demo redoes nothing.
"""

import json
import os
import subprocess

import jiwer
import pytest


@pytest.mark.slow
def test_make_demo_small_end_to_end(checkout_copy):
    work = checkout_copy
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}

    def demo():
        return subprocess.run(["make", "-o", ".venv/.installed", "demo", "DEMO_SIZE=small"], cwd=work, env=env,
                              capture_output=True, text=True, timeout=1800)

    out = demo()
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    for stage in range(1, 9):
        assert f"==> [{stage}/8]" in out.stdout, f"stage {stage} not announced"

    summary = json.loads((work / "results" / "demo.json").read_text())
    assert summary == json.loads((work / "results" / "small" / "demo.json").read_text())
    for split in ("dev", "test"):
        for kind in ("greedy", "lm"):
            report = json.loads((work / "results" / "small" / f"{split}_{kind}.json").read_text())
            utts = report["utterances"]
            assert len(utts) == summary[split]["utterances"] > 50
            refs, hyps = [u["reference"] for u in utts], [u["hypothesis"] for u in utts]
            assert summary[split][f"wer_{kind}"] == pytest.approx(jiwer.wer(refs, hyps), abs=1e-9)
            assert summary[split][f"cer_{kind}"] == pytest.approx(jiwer.cer(refs, hyps), abs=1e-9)
    assert summary["train"]["epochs"] == 2 and summary["lm"]["order"] == 3
    for key in ("learning_curve", "error_surface"):
        png = work / summary["paths"][key]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", key
    assert summary["serving"]["transcribed"] == 3 and summary["serving"]["failed"] == 0
    assert "WER + LM" in out.stdout and "test (" in out.stdout  # the printed table

    again = demo()  # a finished demo: no stage runs again, only the summary is printed
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "[1/8]" not in again.stdout and "[3/8]" not in again.stdout and "[7/8]" not in again.stdout
    assert "==> [8/8] summary" in again.stdout
