"""ds2-demo's offline mode (push to talk) over its WebSocket, for an export without stream_step (a bidirectional
model, as `make demo` trains one): `hello` names the mode and the longest utterance taken, the utterance is
transcribed whole at `stop` (serving_default, then the server's LM beam search) with no partials on the way, its
words timed (issue 39), and the streaming mode's bounds and errors hold. References: the Keras model on the whole
utterance (greedy) and the recorded LM beam decoder on its log-probs (the transcript, and `decode_words`' words).
The page in real Chromium: tests/test_demo_page.py."""

import dataclasses
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from deepspeech2.audio import save_wav, speech_like_clip
from deepspeech2.bundle import load_bundle, save_bundle
from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.decode.words import FrameClock, decode_words
from deepspeech2.features import FeatureConfig
from deepspeech2.model import build_model
from deepspeech2.model_config import TINY
from deepspeech2.prepare.stats import compute_mean_std
from deepspeech2.vocab import Vocabulary
from deepspeech2_export import STREAM_STEP
from deepspeech2_export.saved_model import ExportConfig, export_model
from deepspeech2_serving.demo import MAX_MESSAGE_BYTES, DemoConfig, start
from deepspeech2_serving.demo_client import DemoClientConfig, DemoError, format_words, stream_file
from deepspeech2_serving.demo_session import OFFLINE
from deepspeech2_serving.servable import signature_defs

from factories import bundle_log_probs, make_manifest

VENV_BIN = Path(sys.executable).parent
EN = Vocabulary.english()
RATE = 16000
TIMEOUT = 30  # seconds any one answer may take on a busy 2-core machine (a limit, not a measurement)
EXPORT_SECONDS = 4.0  # the export's max_audio_seconds
LM_DECODER = dict(beam_size=8, alpha=0.5, beta=1.0)
FINAL_KEYS = {"type", "text", "greedy", "audio_seconds", "latency_ms", "decode_ms", "compute_seconds", "rtf",
              "decoder", "batch_size", "words"}  # the streaming mode's final message (tests/test_stream_serving.py)
WORD_KEYS = {"word", "start", "end", "confidence"}  # Word.to_dict()
# The served log-probs (serving_default's, or a stream's) are the Keras model's within 1e-4 (README "Streaming and
# the live demo"): the same words at the same steps, the confidences within 1e-4; the message rounds them to 4
# decimals (up to 5e-5 more).
CONFIDENCE_TOLERANCE = 1e-4 + 5e-5
IDLE_CLOSE_CODE = 4408
MESSAGE_TOO_BIG = 1009  # RFC 6455 §7.4.1


@pytest.fixture(scope="module")
def model(tmp_path_factory, hello_world_lm):
    """The tiny preset (bidirectional GRUs, untrained, seeded) exported with an LM beam decoder recorded; returns
    (bundle, version folder, LM decoder config)."""
    d = tmp_path_factory.mktemp("offline")
    manifest, _ = make_manifest(d, n=2)
    keras.utils.set_random_seed(0)
    bundle_dir = save_bundle(d / "model", build_model(TINY), TINY, EN, compute_mean_std([manifest], FeatureConfig()))
    decoder = DecoderConfig(lm_path=str(hello_world_lm), **LM_DECODER)
    version = export_model(ExportConfig(str(bundle_dir), str(d / "export"), max_audio_seconds=EXPORT_SECONDS,
                                        decoder=decoder))
    assert STREAM_STEP not in signature_defs(version)  # a bidirectional model can't stream
    return load_bundle(bundle_dir), version, decoder


@pytest.fixture(scope="module")
def clips():
    waves = [speech_like_clip(s, seed=i) for i, s in enumerate((1.3, 2.1, 0.7))]
    return [(np.round(w * 32767) / 32768).astype(np.float32) for w in waves]  # as 16-bit PCM holds them


@pytest.fixture(scope="module")
def references(model, clips):
    """Per clip: (greedy transcript, LM beam transcript, its words) of the Keras model on the whole clip; the words
    are `decode_words`' with the model's clock (and no word config, as the export has none)."""
    bundle, _, lm = model
    greedy, beam = Decoder(DecoderConfig(kind="greedy"), EN), Decoder(dataclasses.replace(lm, num_workers=1), EN)
    clock = FrameClock.of(bundle.model_config, bundle.feature_config)
    out = []
    for wave in clips:
        log_probs = bundle_log_probs(bundle, wave)
        text, words = decode_words(beam.search, log_probs, clock, duration=len(wave) / RATE)
        assert text == beam.decode_utterances([log_probs])[0]
        out.append((greedy.decode_utterances([log_probs])[0], text, words))
    assert len({b for _, b, _ in out}) > 1  # the clips' transcripts differ: a mixed-up answer can't pass
    assert sum(len(w) for _, _, w in out) >= 4  # the untrained model's noise reads as words: a real comparison
    return out


def assert_words(got: list[dict], expected: list) -> None:
    """A final message's `words` are `expected` (`decode_words`' on the Keras log-probs): the same words, times
    within 1e-6 s of their milliseconds (`Word.to_dict`), confidences within CONFIDENCE_TOLERANCE."""
    assert [w["word"] for w in got] == [w.word for w in expected], (got, expected)
    for word, reference in zip(got, expected):
        assert set(word) == WORD_KEYS, word
        want = reference.to_dict()
        assert word["start"] == pytest.approx(want["start"], abs=1e-6), (word, reference)
        assert word["end"] == pytest.approx(want["end"], abs=1e-6), (word, reference)
        assert word["confidence"] == pytest.approx(reference.confidence, abs=CONFIDENCE_TOLERANCE), (word, reference)


@pytest.fixture(scope="module")
def demo(model):
    """ds2-demo on the export with the flag's limit above the export's: the export's 4 s holds."""
    running = start(DemoConfig(str(model[1]), port=0, max_seconds=30.0))
    yield running
    running.stop()


def open_ws(port: int, **kwargs):
    return connect(f"ws://127.0.0.1:{port}/ws", open_timeout=TIMEOUT, close_timeout=TIMEOUT, **kwargs)


def receive(ws) -> dict:
    return json.loads(ws.recv(timeout=TIMEOUT))


def pcm(wave: np.ndarray) -> bytes:
    return np.round(np.clip(wave, -1, 1) * 32768).clip(-32768, 32767).astype("<i2").tobytes()


def start_utterance(ws) -> None:
    ws.send(json.dumps({"type": "start", "sample_rate": RATE, "encoding": "pcm_s16le", "source": "mic"}))
    assert receive(ws) == {"type": "started"}


def test_hello_names_the_offline_mode_and_the_exports_limit(demo, model):
    assert demo.mode == OFFLINE
    with open_ws(demo.port) as ws:
        assert receive(ws) == {"type": "hello", "model": "ds2", "version": 1, "sample_rate": RATE,
                               "encoding": "pcm_s16le", "decoder": "beam + LM", "max_seconds": EXPORT_SECONDS,
                               "mode": "offline", "words": True}
    lower = start(DemoConfig(str(model[1]), port=0, max_seconds=1.5))  # the flag below the export's limit
    try:
        with open_ws(lower.port) as ws:
            assert receive(ws)["max_seconds"] == 1.5
    finally:
        lower.stop()


def test_an_utterance_is_transcribed_whole_with_the_lm_and_its_words_when_it_stops(demo, clips, references):
    with open_ws(demo.port) as ws:
        assert receive(ws)["type"] == "hello"
        for i, chunk_samples in ((0, 1600), (1, len(clips[1]))):  # 100 ms messages; the whole clip in one
            start_utterance(ws)
            data = pcm(clips[i])
            for k in range(0, len(data), 2 * chunk_samples):
                ws.send(data[k:k + 2 * chunk_samples])
            ws.send(json.dumps({"type": "stop"}))
            final = receive(ws)  # the next message: no partials in this mode
            greedy, beam, words = references[i]
            assert set(final) == FINAL_KEYS and final["type"] == "final", final
            assert final["text"] == beam and final["greedy"] == greedy and final["decoder"] == "beam + LM"
            assert_words(final["words"], words)  # Servable.final_words: decode_words over the utterance
            assert final["audio_seconds"] == pytest.approx(len(clips[i]) / RATE, abs=1e-9)
            assert final["batch_size"] == 1 and final["compute_seconds"] > 0 and final["rtf"] > 0
            assert final["latency_ms"] >= final["decode_ms"] >= 0


def test_one_users_final_does_not_hold_the_others(model, hello_world_lm):
    """Push to talk: a long utterance's final search (seconds at a wide beam) runs beside a short one's, not before
    it under a lock every user waits for."""
    wide = DecoderConfig(lm_path=str(hello_world_lm), beam_size=256, alpha=0.5, beta=1.0, num_workers=1)
    running = start(DemoConfig(str(model[1]), port=0, decoder=wide))
    try:
        with open_ws(running.port) as long, open_ws(running.port) as short:
            for ws, seconds in ((long, EXPORT_SECONDS - 0.1), (short, 0.3)):
                assert receive(ws)["type"] == "hello"
                start_utterance(ws)
                ws.send(pcm(speech_like_clip(seconds, seed=11)))
            long.send(json.dumps({"type": "stop"}))
            time.sleep(2.0)  # its final search is under way
            short.send(json.dumps({"type": "stop"}))
            assert receive(short)["type"] == "final"
            with pytest.raises(TimeoutError):
                long.recv(timeout=0)  # still searching
    finally:
        running.stop()


def test_greedy_finals_without_an_lm_have_no_words(model, clips, references, tmp_path):
    running = start(DemoConfig(str(model[1]), port=0, decoder=DecoderConfig(kind="greedy")))
    try:
        with open_ws(running.port) as ws:
            hello = receive(ws)
            assert hello["decoder"] == "greedy" and hello["words"] is False  # no search to time words with
            start_utterance(ws)
            ws.send(pcm(clips[0]))
            ws.send(json.dumps({"type": "stop"}))
            final = receive(ws)
            assert set(final) == FINAL_KEYS and final["words"] == []
            assert final["text"] == final["greedy"] == references[0][0] and final["decoder"] == "greedy"
        wav = tmp_path / "clip.wav"
        save_wav(wav, clips[0])
        result = stream_file(DemoClientConfig(f"127.0.0.1:{running.port}", str(wav), speed=0))
        assert result.text == references[0][0] and not result.words_served and result.words == []
        assert format_words(result).startswith("words: none")
    finally:
        running.stop()


def test_demo_client_gets_the_final_transcript_its_words_and_no_partials(demo, clips, references, tmp_path):
    wav = tmp_path / "clip.wav"
    save_wav(wav, clips[1])
    result = stream_file(DemoClientConfig(f"127.0.0.1:{demo.port}", str(wav), chunk_ms=100, speed=0))
    assert result.mode == "offline" and result.partials == []
    assert result.text == references[1][1] and result.decoder == "beam + LM"
    assert result.words_served and result.words  # the 16-bit file reaches the server sample for sample
    assert_words(result.words, references[1][2])
    header, *lines = format_words(result).split("\n")  # what ds2-demo-client --words prints
    assert header == "start\tend\tconfidence\tword" and len(lines) == len(result.words)
    for line, word in zip(lines, result.words):
        start, end, confidence, text = line.split("\t")
        assert (float(start), float(end), float(confidence), text) == (word["start"], word["end"],
                                                                      word["confidence"], word["word"])
    assert result.audio_seconds == pytest.approx(len(clips[1]) / RATE, abs=1e-3)
    too_long = tmp_path / "long.wav"
    save_wav(too_long, speech_like_clip(EXPORT_SECONDS + 0.5))
    with pytest.raises(DemoError) as e:
        stream_file(DemoClientConfig(f"127.0.0.1:{demo.port}", str(too_long), speed=0))
    assert e.value.code == "too_long" and "4 s" in e.value.message


def test_too_long_utterance_is_dropped_and_the_connection_goes_on(demo, clips, references):
    with open_ws(demo.port) as ws:
        assert receive(ws)["type"] == "hello"
        start_utterance(ws)
        ws.send(pcm(np.zeros(int(EXPORT_SECONDS * RATE), np.float32)))  # exactly the limit: taken
        ws.send(pcm(np.zeros(1, np.float32)))  # one sample more: dropped
        error = receive(ws)
        assert error["type"] == "error" and error["code"] == "too_long"
        assert error["message"] == "the utterance is over the 4 s this demo takes; it was dropped"
        ws.send(pcm(clips[0]))  # the dropped utterance takes no more audio ...
        assert receive(ws)["code"] == "protocol"
        ws.send(json.dumps({"type": "stop"}))  # ... and has no end
        assert receive(ws)["code"] == "protocol"
        start_utterance(ws)  # the next utterance is served
        ws.send(pcm(clips[2]))
        ws.send(json.dumps({"type": "stop"}))
        assert receive(ws)["text"] == references[2][1]


def test_malformed_messages_get_clear_errors(demo, clips, references):
    def error(ws, message) -> dict:
        ws.send(message)
        answer = receive(ws)
        assert answer["type"] == "error", answer
        return answer

    with open_ws(demo.port) as ws:
        assert receive(ws)["type"] == "hello"
        assert error(ws, b"\x00\x00") == {"type": "error", "code": "protocol", "message":
                                          "audio before a start message; send {\"type\": \"start\", ...} first"}
        bad_rate = error(ws, json.dumps({"type": "start", "sample_rate": 8000, "encoding": "pcm_s16le"}))
        assert bad_rate["code"] == "unsupported_audio" and "pcm_s16le at 8000 Hz" in bad_rate["message"] \
            and "16000 Hz" in bad_rate["message"]
        assert error(ws, json.dumps({"type": "start", "sample_rate": RATE, "encoding": "opus"}))["code"] == \
            "unsupported_audio"
        for text in ("nonsense", "[1, 2]", json.dumps({"kind": "start"})):
            answer = error(ws, text)
            assert answer["code"] == "protocol" and "not a JSON message with a \"type\"" in answer["message"]
        assert error(ws, json.dumps({"type": "rewind"})) == {"type": "error", "code": "protocol",
                                                             "message": "unknown message type 'rewind'"}
        assert error(ws, json.dumps({"type": "stop"}))["message"] == "stop without a start"
        start_utterance(ws)
        assert error(ws, b"\x00\x00\x00") == {"type": "error", "code": "unsupported_audio", "message":
                                              "an audio message of 3 bytes: pcm_s16le needs an even number"}
        assert "start while an utterance is running" in error(ws, json.dumps({"type": "start", "sample_rate": RATE}))[
            "message"]
        ws.send(pcm(clips[2]))  # the refused messages left the utterance as it was
        ws.send(json.dumps({"type": "stop"}))
        final = receive(ws)
        assert final["text"] == references[2][1]
        assert final["audio_seconds"] == pytest.approx(len(clips[2]) / RATE, abs=1e-9)
        for samples in (0, 100):  # nothing, and less than one output step: nothing to recognize, no forward pass
            start_utterance(ws)
            if samples:
                ws.send(pcm(clips[0][:samples]))
            ws.send(json.dumps({"type": "stop"}))
            final = receive(ws)
            assert set(final) == FINAL_KEYS and final["text"] == final["greedy"] == "" and final["batch_size"] == 0
            assert final["words"] == []
            assert final["audio_seconds"] == samples / RATE
        ws.send(b"\x00" * (MAX_MESSAGE_BYTES + 2))  # a message over the size limit closes the connection
        with pytest.raises(ConnectionClosed) as closed:
            receive(ws)
        assert closed.value.rcvd.code == MESSAGE_TOO_BIG


def test_idle_connections_close_and_other_origins_are_refused(model):
    running = start(DemoConfig(str(model[1]), port=0, idle_seconds=1.0))
    try:
        with pytest.raises(InvalidStatus) as refused:
            open_ws(running.port, origin="http://evil.example").close()
        assert refused.value.response.status_code == 403
        with open_ws(running.port, origin=f"http://127.0.0.1:{running.port}") as ws:  # the page's own origin
            assert receive(ws)["mode"] == "offline"
            start_utterance(ws)  # an utterance left hanging does not keep the connection open
            with pytest.raises(ConnectionClosed) as closed:
                receive(ws)
            assert closed.value.rcvd.code == IDLE_CLOSE_CODE and "nothing received for 1 s" in closed.value.rcvd.reason
    finally:
        running.stop()


def test_ds2_demo_command_serves_an_offline_export(model, clips, references, tmp_path):
    wav = tmp_path / "clip.wav"
    save_wav(wav, clips[0])
    port_file = tmp_path / "port"
    server = subprocess.Popen([str(VENV_BIN / "ds2-demo"), "--model_dir", str(model[1].parent), "--port", "0",
                               "--port_file", str(port_file)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        seen = []
        for line in server.stdout:  # the line ds2-demo prints once serving (after writing the port file)
            seen.append(line)
            if line.startswith("ds2-demo: model"):
                break
        else:
            pytest.fail(f"ds2-demo exited with status {server.wait()}: {''.join(seen)[-3000:]}")
        assert "push to talk" in line and "beam + LM with word times" in line and "at most 4 s" in line, line
        port = port_file.read_text().strip()
        out = subprocess.run([str(VENV_BIN / "ds2-demo-client"), "--server", f"127.0.0.1:{port}", "--speed", "0",
                              str(wav)], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.startswith(f"final: {references[0][1]}\n") and "decoder beam + LM" in out.stdout
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_ds2_demo_command_exports_a_bundle_first(model, tmp_path):
    """The demo serves exports only (it loads no model code); its command exports a bundle into a temporary folder
    first, and removes the folder when it stops."""
    bundle_dir = str(model[0].path)
    with pytest.raises(FileNotFoundError, match="is a model bundle; export it first"):
        start(DemoConfig(bundle_dir, port=0))
    server = subprocess.Popen([str(VENV_BIN / "ds2-demo"), "--model_dir", bundle_dir, "--port", "0",
                               "--port_file", str(tmp_path / "port")], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        for line in server.stdout:
            seen.append(line)
            if line.startswith("ds2-demo: model"):
                break
        else:
            pytest.fail(f"ds2-demo exited with status {server.wait()}: {''.join(seen)[-3000:]}")
        served = Path(re.search(r" \((.+?)\), ", line).group(1))  # the version folder of the export it made
        assert (served / "saved_model.pb").is_file() and "push to talk" in line and "greedy" in line, line
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert server.returncode == 0 and not served.exists()
