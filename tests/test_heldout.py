"""Speech from festival voices (synthetic/heldout.py, `ds2-prepare heldout`): layout, audio, reuse, errors."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from deepspeech2.data.manifest import read_manifest
from deepspeech2_synthetic import heldout
from deepspeech2_synthetic.heldout import HeldoutConfig, prepare_heldout

VOICES = tuple(v for v, _ in heldout.FESTIVAL_VOICES)
pytestmark = pytest.mark.skipif(
    not (shutil.which("text2wave") and set(VOICES) <= heldout.festival_voices_installed()),
    reason="needs festival and its three English voices (tools/apt-deps.sh heldout)")

SENTENCES = ("no one has a head", "i suppose that in a few hours i will sober up and see it all again")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    sf.write(d / "a.wav", np.zeros(1600, np.float32), 16000)
    lines = [{"audio_filepath": "a.wav", "duration": 0.1, "text": t, "speaker": "x"} for t in SENTENCES]
    lines.append(dict(lines[0]))  # a repeated sentence is read once per voice
    (d / "test.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return d / "test.jsonl"


@pytest.fixture(scope="module")
def made(source, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    return out, prepare_heldout(HeldoutConfig(manifest=str(source), out_dir=str(out), progress=False))


def test_every_voice_reads_every_sentence_once(made):
    out, utts = made
    assert sorted((u.speaker, u.text) for u in utts) == sorted(
        (f"festival-{v}", t) for v in VOICES for t in SENTENCES)
    assert [(u.speaker, u.text, u.duration) for u in read_manifest(out / "heldout.jsonl")] == [
        (u.speaker, u.text, u.duration) for u in utts]
    line = json.loads((out / "heldout.jsonl").read_text().splitlines()[0])
    assert line["audio_filepath"].startswith("heldout/wav/festival-")  # relative to the manifest
    assert line["language"] == "en" and line["engine"] == "festival"  # ds2-eval --group_by engine


def test_audio_is_16k_mono_trimmed_padded_and_normalised(made):
    _, utts = made
    pad = round(heldout.PAD_SECONDS * 16000)
    for u in utts:
        wav, sr = sf.read(u.audio_filepath, dtype="float32")
        assert sr == 16000 and wav.ndim == 1
        assert u.duration == pytest.approx(len(wav) / 16000, abs=1e-4)
        assert not wav[:pad].any() and not wav[-pad:].any()  # the padding is silence...
        assert np.abs(wav[pad:pad + 160]).max() > 0  # ...and the speech starts right after it (trimmed)
        assert 20 * np.log10(np.abs(wav).max()) == pytest.approx(heldout.PEAK_DBFS, abs=0.01)


def test_longer_sentences_take_longer_and_voices_differ(made):
    _, utts = made
    by = {(u.speaker, u.text): u for u in utts}
    for v in VOICES:
        assert by[(f"festival-{v}", SENTENCES[1])].duration > 2 * by[(f"festival-{v}", SENTENCES[0])].duration
    durations = {by[(f"festival-{v}", SENTENCES[1])].duration for v in VOICES}
    assert len(durations) == len(VOICES)


def test_a_rerun_reuses_the_audio(made, source):
    out, utts = made
    before = {u.audio_filepath: os.stat(u.audio_filepath).st_mtime_ns for u in utts}
    again = prepare_heldout(HeldoutConfig(manifest=str(source), out_dir=str(out), progress=False))
    assert [u.audio_filepath for u in again] == [u.audio_filepath for u in utts]
    assert {p: os.stat(p).st_mtime_ns for p in before} == before


def test_name_voices_and_max_sentences(source, tmp_path):
    utts = prepare_heldout(HeldoutConfig(manifest=str(source), out_dir=str(tmp_path), name="heldout_dev",
                                         voices=("ked_diphone",), max_sentences=1, progress=False))
    assert [(u.speaker, u.text) for u in utts] == [("festival-ked_diphone", SENTENCES[0])]
    assert (tmp_path / "heldout_dev.jsonl").is_file() and (tmp_path / "heldout_dev" / "wav").is_dir()


def test_bad_input_is_a_clear_error(source, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown festival voices.*'nope'"):
        prepare_heldout(HeldoutConfig(manifest=str(source), out_dir=str(tmp_path), voices=("nope",)))
    with pytest.raises(ValueError, match="plain file name"):
        prepare_heldout(HeldoutConfig(manifest=str(source), out_dir=str(tmp_path), name="../x"))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="no sentences"):
        prepare_heldout(HeldoutConfig(manifest=str(empty), out_dir=str(tmp_path)))
    monkeypatch.setenv("PATH", str(tmp_path))  # no text2wave
    with pytest.raises(FileNotFoundError, match="apt-get install festival festvox-kdlpc16k"):
        prepare_heldout(HeldoutConfig(manifest=str(source), out_dir=str(tmp_path)))


def test_cli(source, tmp_path):
    exe = Path(sys.executable).parent / "ds2-prepare"
    proc = subprocess.run([exe, "heldout", str(source), "--out", str(tmp_path), "--name", "h"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"{tmp_path}/h.jsonl: 6 utterances" in proc.stdout
    proc = subprocess.run([exe, "heldout", "--out", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "ds2-prepare heldout: error: usage: ds2-prepare heldout MANIFEST --out DIR [--name heldout] "
        "(writes DIR/NAME.jsonl)"]


def _report(wer, cer, voices=None):
    groups = {"speaker": {v: {"utterances": 3, "wer": w, "cer": c} for v, (w, c) in (voices or {}).items()}}
    return {"totals": {"scored": 3 * max(len(voices or {}), 1), "skipped": 0, "wer": wer, "cer": cer},
            "groups": groups, "language_spaced": True,
            "timing": {"rtf_acoustic": 0.01, "rtf_decode": 0.02, "rtf_total": 0.03}}


def test_demo_report_adds_the_heldout_rows(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import demo_report

    run, res = tmp_path / "run", tmp_path / "res"
    run.mkdir(), res.mkdir()
    (run / "epochs.json").write_text(json.dumps([{"seconds": 60, "train_loss": 9.0, "dev_wer": 0.5, "dev_cer": 0.2}]))
    (res / "tune.json").write_text(json.dumps({"best_alpha": 0.75, "best_beta": 0.0, "metric": "wer",
                                               "best_error": 0.25}))
    for split in ("dev", "test"):
        for kind in ("greedy", "lm"):
            (res / f"{split}_{kind}.json").write_text(json.dumps(_report(0.5, 0.2)))
    s = demo_report.summarize(run, res, tmp_path, "full")
    assert "heldout" not in s and "heldout" not in demo_report.format_table(s)
    voices = {"greedy": {"festival-ked_diphone": (0.9, 0.5), "festival-kal_diphone": (0.8, 0.4)},
              "lm": {"festival-ked_diphone": (0.7, 0.45), "festival-kal_diphone": (0.6, 0.35)}}
    for kind, (w, c) in (("greedy", (0.85, 0.45)), ("lm", (0.65, 0.4))):
        (res / f"heldout_{kind}.json").write_text(json.dumps(_report(w, c, voices[kind])))
    s = demo_report.summarize(run, res, tmp_path, "full")
    assert "heldout_dev" not in s  # only what was made
    assert s["heldout"]["wer_lm"] == 0.65 and s["heldout"]["cer_greedy"] == 0.45
    assert s["heldout"]["voices"]["festival-kal_diphone"] == {
        "utterances": 3, "wer_greedy": 0.8, "cer_greedy": 0.4, "wer_lm": 0.6, "cer_lm": 0.35}
    rows = {line.split()[0]: line.split()[-4:] for line in demo_report.format_table(s).splitlines() if line.strip()}
    assert rows["heldout"] == ["85.00%", "45.00%", "65.00%", "40.00%"]
    assert rows["kal_diphone"] == ["80.00%", "40.00%", "60.00%", "35.00%"]


def test_demo_report_breaks_test_down_by_engine(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import demo_report

    greedy, lm = _report(0.5, 0.2), _report(0.3, 0.1)
    greedy["groups"]["engine"] = {"espeak-ng": {"utterances": 79, "wer": 0.4, "cer": 0.15},
                                  "flite": {"utterances": 11, "wer": 0.9, "cer": 0.5}}
    lm["groups"]["engine"] = {"espeak-ng": {"utterances": 79, "wer": 0.2, "cer": 0.05},
                              "flite": {"utterances": 11, "wer": 0.8, "cer": 0.45}}
    s = demo_report._split_summary(greedy, lm)
    assert s["engines"]["flite"] == {"utterances": 11, "wer_greedy": 0.9, "cer_greedy": 0.5, "wer_lm": 0.8,
                                     "cer_lm": 0.45}
    assert "engines" not in demo_report._split_summary(_report(0.5, 0.2), _report(0.3, 0.1))  # not grouped
    summary = {"dev": demo_report._split_summary(greedy, lm), "test": s, "lm": {"alpha": 1, "beta": 1},
               "train": {"epochs": 1, "seconds": 60, "mean_epoch_seconds": 60},
               "rtf": {"acoustic": 0, "decoder_lm": 0, "total_lm": 0},
               "paths": {k: "x" for k in ("tensorboard", "learning_curve", "error_surface", "test_report")}}
    summary["dev"]["engines"].pop("flite")
    rows = [line.split() for line in demo_report.format_table(summary).splitlines()]
    engine_rows = [r[0] for r in rows if r and r[0] in ("dev", "test", "espeak-ng", "flite")]
    assert engine_rows == ["dev", "espeak-ng", "test", "espeak-ng", "flite"]  # each split's under it
    assert rows[[r[0] if r else "" for r in rows].index("flite")] == ["flite", "(11)", "90.00%", "50.00%", "80.00%",
                                                                      "45.00%"]
    summary["machine"] = {"cpu": "a CPU", "cores": 2, "matmul_gflops": {"float32": 218.4, "bfloat16": 400.2}}
    text = demo_report.format_table(summary)
    assert "training: 1 epochs in 1.0 min (an epoch: 60 s)" in text
    assert "machine: a CPU, 2 cores, matmul peak 218 GFLOP/s fp32, 400 bf16 (2048^2)" in text
