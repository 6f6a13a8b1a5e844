"""`make demo DEMO_SIZE=small`, the main job end to end, run in a copy of the checkout (slow; `.ci/run` runs it).

It checks what a user and a script get: every stage announced, results/demo.json with the documented keys,
its figures the same as an independent jiwer scoring of the per-utterance transcripts, the pictures, the
served transcripts; that a re-run of the finished demo redoes nothing; and `make demo-heldout` (festival
voices reading the dev and test sentences) on the demo's model.
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
            # ... and per synthesizer: the manifest says which engine read each line
            engines = summary[split]["engines"]
            assert sum(e["utterances"] for e in engines.values()) == len(utts)
            for engine, e in engines.items():
                mine = [u for u in utts if u["engine"] == engine]
                assert e[f"wer_{kind}"] == pytest.approx(
                    jiwer.wer([u["reference"] for u in mine], [u["hypothesis"] for u in mine]), abs=1e-9)
        assert set(summary[split]["engines"]) == ({"espeak-ng", "flite"} if split == "test" else {"espeak-ng"})
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

    # Speech from an engine training never hears: festival voices read the dev and test sentences.
    out = subprocess.run(["make", "-o", ".venv/.installed", "demo-heldout", "DEMO_SIZE=small"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "[3/8]" not in out.stdout  # the demo's model, not a new one
    summary = json.loads((work / "results" / "demo.json").read_text())
    voices = {"festival-ked_diphone", "festival-kal_diphone", "festival-cmu_us_slt_arctic_hts"}
    for name, split in (("heldout_dev", "dev"), ("heldout", "test")):
        sentences = {json.loads(line)["text"] for line in (work / "data" / "tiny-small" / f"{split}.clean.jsonl")
                     .read_text().splitlines()}
        clean = (work / "data" / "tiny-small" / f"{name}.clean.jsonl").read_text().splitlines()
        dropped = (work / "data" / "tiny-small" / f"{name}.clean.jsonl.dropped.jsonl").read_text().splitlines()
        assert len(clean) + len(dropped) == 3 * len(sentences)  # each voice reads each sentence once
        assert summary[name]["utterances"] == len(clean) > len(dropped)
        assert set(summary[name]["voices"]) == voices
        report = json.loads((work / "results" / "small" / f"{name}_lm.json").read_text())
        refs, hyps = [u["reference"] for u in report["utterances"]], [u["hypothesis"] for u in report["utterances"]]
        assert set(refs) <= sentences
        assert summary[name]["cer_lm"] == pytest.approx(jiwer.cer(refs, hyps), abs=1e-9)
    assert "heldout (" in out.stdout and "ked_diphone" in out.stdout  # the printed rows
