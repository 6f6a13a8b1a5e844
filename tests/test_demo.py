"""`make demo DEMO_SIZE=small`, the main job end to end, run in a copy of the checkout (slow; `.ci/run` runs it).

It checks what a user and a script get: every stage announced, results/demo.json with the documented keys,
its figures the same as an independent jiwer scoring of the per-utterance transcripts, the pictures, the
served transcripts; that a re-run of the finished demo redoes nothing; `make live`, the command the demo ends
by printing (ds2-demo on the demo's export, push to talk with the tuned LM: a test file's transcript against the
library's LM beam search over the model's log-probs), exported again when the export is gone; and
`make demo-heldout` (festival voices reading the dev and test sentences) on the demo's model.
"""

import json
import os
import shutil
import signal
import subprocess
import time

import jiwer
import pytest

LIVE = "make live DEMO_SIZE=small"  # what `make demo DEMO_SIZE=small` says to run next


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
    # stage 4, the LM, ran once, beside training: its log has the LM, the make that went on didn't build it again
    lm_log = (work / "data" / "tiny-small" / "lm" / "beside-training.log").read_text()
    assert "3-gram LM" in lm_log and "ds2-build-lm" not in out.stdout and "ds2-prepare english" not in out.stdout

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
        # dev: its espeak-ng voices, and its sentences again by dev's own neural and voice-bank speakers
        assert set(summary[split]["engines"]) == ({"espeak-ng", "flite"} if split == "test" else
                                                  {"espeak-ng", "hibari", "piper", "mbrola", "rhvoice", "pico"})
    assert summary["train"]["epochs"] == 2 and summary["lm"]["order"] == 3
    for key in ("learning_curve", "error_surface"):
        png = work / summary["paths"][key]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", key
    assert summary["serving"]["transcribed"] == 3 and summary["serving"]["failed"] == 0
    assert "WER + LM" in out.stdout and "test (" in out.stdout  # the printed table
    assert f"==> talk to the model in your browser: {LIVE}\n" in out.stdout

    again = demo()  # a finished demo: no stage runs again, only the summary is printed
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "[1/8]" not in again.stdout and "[3/8]" not in again.stdout and "[7/8]" not in again.stdout
    assert "==> [8/8] summary" in again.stdout
    assert again.stdout.rstrip().endswith("(ds2-demo on runs/tiny-small/export/ds2; then open http://127.0.0.1:8000/)")

    # make live, as printed: the demo's bidirectional model, push to talk, the tuned LM; then without its export.
    from deepspeech2.data.manifest import read_manifest

    wav = read_manifest(work / "data" / "tiny-small" / "test.clean.jsonl")[0].audio_filepath
    reference = lm_transcript(work, wav)
    assert live_transcript(work, env, wav) == reference
    shutil.rmtree(work / "runs" / "tiny-small" / "export")
    assert live_transcript(work, env, wav) == reference
    assert (work / "runs" / "tiny-small" / "export" / "ds2" / "1" / "saved_model.pb").is_file()

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


def lm_transcript(work, wav: str) -> str:
    """The demo's model on `wav` as ds2-demo-client sends it (16-bit PCM), decoded with the demo's LM, the alpha
    and beta tuned on dev and the small demo's beam: what `make live` must answer."""
    import tensorflow as tf

    from deepspeech2.audio import load_audio
    from deepspeech2.bundle import load_bundle
    from deepspeech2.decode import Decoder, DecoderConfig
    from deepspeech2.inference import acoustic_model

    bundle = load_bundle(work / "runs" / "tiny-small" / "model")
    audio = load_audio(wav, sample_rate=16000)
    log_probs, steps = acoustic_model(bundle)(tf.constant(audio[None]), tf.constant([len(audio)], tf.int32))
    tune = json.loads((work / "results" / "small" / "tune.json").read_text())
    decoder = Decoder(DecoderConfig(lm_path=str(work / "data" / "tiny-small" / "lm" / "tiny3.bin"), beam_size=16,
                                    alpha=tune["best_alpha"], beta=tune["best_beta"], num_workers=1), bundle.vocab)
    return decoder.decode_utterances([log_probs[0, :int(steps[0])].numpy()])[0]


def live_transcript(work, env, wav: str) -> str:
    """Run `make live` (as the demo printed it, on a free port), check its mode and decoder, transcribe `wav` through
    it with ds2-demo-client's library, stop it."""
    from websockets.sync.client import connect

    from deepspeech2_serving.demo_client import DemoClientConfig, stream_file

    port_file = work / "live.port"
    port_file.unlink(missing_ok=True)
    live = subprocess.Popen([*LIVE.split(), "-o", ".venv/.installed", "LIVE_PORT=0",
                             f"LIVE_FLAGS=--port_file {port_file}"], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 600  # a limit (an export on a busy machine), not a measurement
        while not (port_file.is_file() and port_file.read_text().strip()):
            assert live.poll() is None and time.monotonic() < deadline, live.communicate(timeout=60)[0][-3000:]
            time.sleep(0.2)
        port = int(port_file.read_text())
        with connect(f"ws://127.0.0.1:{port}/ws") as ws:
            hello = json.loads(ws.recv(timeout=60))
        assert hello["mode"] == "offline" and hello["decoder"] == "beam + LM", hello  # the tiny model: bidirectional
        result = stream_file(DemoClientConfig(f"127.0.0.1:{port}", wav, speed=0))
        assert result.partials == [] and result.decoder == "beam + LM"
        return result.text
    finally:
        os.killpg(live.pid, signal.SIGTERM)  # make and the ds2-demo it runs
        live.wait(timeout=60)


def test_make_live_before_make_demo_says_what_to_run(checkout_copy):
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    out = subprocess.run(["make", "-o", ".venv/.installed", "live"], cwd=checkout_copy, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode != 0
    assert ("make live: runs/tiny/model/model.keras is missing; run make demo first (with the same knobs)\n"
            in out.stderr)
    assert not (checkout_copy / "runs").exists()  # nothing started: no training, no export
