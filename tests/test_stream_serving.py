"""Streaming in deployment: the export's stream_step (state in and out as tensors, stock-TF-Serving servable),
ds2-serve's streaming sessions over gRPC with Batch Dispatch across streams, and ds2-demo's HTTP + WebSocket
server with its terminal client. References are the Keras model on the whole utterance (greedy) and the
export's LM beam decoder on those log-probs."""

import ast
import dataclasses
import json
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import prediction_service_pb2_grpc

from deepspeech2.bundle import load_bundle, save_bundle
from deepspeech2.data.stats import compute_mean_std
from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.features import FeatureConfig, featurize
from deepspeech2.model import DS2_STREAMING, build_model
from deepspeech2.testing import make_clip, make_manifest
from deepspeech2.vocab import Vocabulary
from deepspeech2_export import ASSETS_EXTRA, STREAM_STEP
from deepspeech2_export.saved_model import ExportConfig, export_model
from deepspeech2_serving.batching import BatchingConfig
from deepspeech2_serving.client import predict_request
from deepspeech2_serving.servable import RequestError, Servable
from deepspeech2_serving.streaming import SessionStore

VENV_BIN = Path(sys.executable).parent
EN = Vocabulary.english()
RATE = 16000
TIMEOUT = 60
CONFIG = dataclasses.replace(DS2_STREAMING, conv_filters=(4, 4), rnn_layers=2, rnn_units=16)
LM_DECODER = dict(beam_size=8, alpha=0.5, beta=1.0)


@pytest.fixture(scope="module")
def model(tmp_path_factory, hello_world_lm):
    """A small ds2-streaming bundle (untrained, seeded) exported as "ds2" version 1 with an LM beam decoder
    recorded; returns (bundle, bundle folder, version folder, LM decoder config)."""
    d = tmp_path_factory.mktemp("streaming")
    manifest, _ = make_manifest(d, n=3)
    keras.utils.set_random_seed(0)
    bundle_dir = save_bundle(d / "model", build_model(CONFIG), CONFIG, EN,
                             compute_mean_std([manifest], FeatureConfig()))
    decoder = DecoderConfig(lm_path=str(hello_world_lm), **LM_DECODER)
    version = export_model(ExportConfig(str(bundle_dir), str(d / "export"), max_audio_seconds=4.0, decoder=decoder))
    return load_bundle(bundle_dir), bundle_dir, version, decoder


@pytest.fixture(scope="module")
def clips():
    waves = [make_clip(s, seed=i) for i, s in enumerate((1.3, 0.7, 2.1, 1.0, 0.45, 1.7))]
    return [(np.round(w * 32767) / 32768).astype(np.float32) for w in waves]  # as 16-bit PCM holds them


@pytest.fixture(scope="module")
def references(model, clips):
    """Per clip: (offline log-probs, greedy transcript, LM beam transcript)."""
    bundle, _, _, lm = model
    greedy, beam = Decoder(DecoderConfig(kind="greedy"), EN), Decoder(dataclasses.replace(lm, num_workers=1), EN)
    out = []
    for wave in clips:
        features, frames = featurize(wave[None], [len(wave)], bundle.feature_config, bundle.normalizer)
        outputs = bundle.model({"features": features, "feature_lengths": frames}, training=False)
        log_probs = tf.nn.log_softmax(outputs["logits"])[0, :int(outputs["output_lengths"][0])].numpy()
        out.append((log_probs, greedy.decode_utterances([log_probs])[0], beam.decode_utterances([log_probs])[0]))
    return out


def chunks(wave, size=1600):
    return [wave[i:i + size] for i in range(0, len(wave), size)] or [wave]


# ------------------------------------------------------------------------------------------- the signature


def test_stream_step_carries_the_state_as_tensors(model, clips, references):
    _, _, version, _ = model
    info = json.loads((version / ASSETS_EXTRA / "export.json").read_text())
    assert info["signatures"][STREAM_STEP] == {"inputs": ["waveforms", "lengths", "state", "final"],
                                               "outputs": ["log_probs", "output_lengths", "transcripts", "state"]}
    size = info["streaming"]["state_size"]
    assert [s["name"] for s in info["streaming"]["segments"]][:2] == ["audio", "audio_count"]
    step = tf.saved_model.load(str(version)).signatures[STREAM_STEP]
    assert step.structured_input_signature[1]["state"].shape.as_list() == [None, size]
    for wave, (reference, greedy, _) in zip(clips, references):
        state, got, text = np.zeros((1, size), np.float32), [], ""
        pieces = chunks(wave)
        for k, piece in enumerate(pieces):
            out = step(waveforms=tf.constant(piece[None]), lengths=tf.constant([len(piece)], tf.int32),
                       state=tf.constant(state), final=tf.constant([k == len(pieces) - 1]))
            state = out["state"].numpy()
            got.append(out["log_probs"][0, :int(out["output_lengths"][0])].numpy())
            text += out["transcripts"][0].numpy().decode()  # pieces append; spaces are collapsed at the end
        np.testing.assert_allclose(np.concatenate(got), reference, atol=1e-4)
        assert " ".join(text.split()) == greedy


def test_saved_model_cli_runs_stream_step_in_a_fresh_process(model, clips, tmp_path):
    """TF1-style loading, as tensorflow_model_server does: stock TF Serving can serve streaming statelessly."""
    bundle, _, version, _ = model
    size = json.loads((version / ASSETS_EXTRA / "export.json").read_text())["streaming"]["state_size"]
    wave = clips[1]
    np.save(tmp_path / "w.npy", wave[None])
    np.save(tmp_path / "n.npy", np.array([len(wave)], np.int32))
    np.save(tmp_path / "s.npy", np.zeros((1, size), np.float32))
    np.save(tmp_path / "f.npy", np.array([True]))
    out = subprocess.run([str(VENV_BIN / "saved_model_cli"), "run", "--dir", str(version), "--tag_set", "serve",
                          "--signature_def", STREAM_STEP, "--inputs",
                          f"waveforms={tmp_path / 'w.npy'};lengths={tmp_path / 'n.npy'};state={tmp_path / 's.npy'};"
                          f"final={tmp_path / 'f.npy'}"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    printed = re.search(r"Result for output key transcripts:\n(.*)\n", out.stdout).group(1)
    features, frames = featurize(wave[None], [len(wave)], bundle.feature_config, bundle.normalizer)
    logits = bundle.model({"features": features, "feature_lengths": frames}, training=False)["logits"][0].numpy()
    ids = [int(i) for k, i in enumerate(logits.argmax(-1)) if i and (k == 0 or i != logits[k - 1].argmax())]
    assert ast.literal_eval(printed) == [EN.decode(ids).encode()]


def test_bad_stream_inputs_fail_in_the_graph(model, clips):
    _, _, version, _ = model
    step = tf.saved_model.load(str(version)).signatures[STREAM_STEP]
    size = step.structured_input_signature[1]["state"].shape[1]
    good = dict(waveforms=tf.constant(clips[0][None]), lengths=tf.constant([len(clips[0])], tf.int32),
                state=tf.zeros((1, size)), final=tf.constant([False]))
    for change, message in ((dict(lengths=tf.constant([len(clips[0]) + 1], tf.int32)), "must lie in"),
                            (dict(final=tf.constant([False, True])), "one entry per row"),
                            (dict(state=tf.fill((1, size), np.nan)), "NaN or Inf")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            step(**{**good, **change})


# ------------------------------------------------------------------------------------------- ds2-serve sessions


@pytest.fixture(scope="module")
def server(model):
    """ds2-serve in this process on a free port; batches of up to 6 streams that wait 2 s to fill."""
    from deepspeech2_serving.server import ServeConfig, start

    _, _, version, _ = model
    running = start(ServeConfig(str(version.parent), port=0, poll_seconds=0, batching=BatchingConfig(
        max_batch_size=6, batch_timeout_micros=2_000_000, wait_when_idle=True)))
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()
    running.stop(5)


def step_request(piece, final, session=None, state=None):
    inputs = {"waveforms": piece[None], "lengths": np.array([len(piece)], np.int32), "final": np.array([final])}
    if state is not None:
        inputs["state"] = state
    request = predict_request("ds2", STREAM_STEP, inputs)
    if session is not None:
        request.inputs["session_id"].CopyFrom(tf.make_tensor_proto(np.array([session.encode()], dtype=object)))
    return request


def stream_session(stub, wave, session):
    """A stream through a session, one step after the other: (partials, final text, batch sizes, output names)."""
    partials, sizes = [], []
    pieces = chunks(wave)
    for k, piece in enumerate(pieces):
        response, call = stub.Predict.with_call(step_request(piece, k == len(pieces) - 1, session), timeout=TIMEOUT)
        partials.append(tf.make_ndarray(response.outputs["session_transcripts"])[0].decode())
        sizes.append(int(dict(call.trailing_metadata())["ds2-batch-size"]))
    return partials[:-1], partials[-1], sizes, set(response.outputs)


def test_concurrent_sessions_are_batched_and_match_the_offline_model(server, clips, references):
    results = [None] * len(clips)

    def run(i):
        results[i] = stream_session(server, clips[i], f"user-{i}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clips))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for (partials, final, sizes, names), (log_probs, greedy, beam) in zip(results, references):
        assert final == beam  # the final transcript: the export's LM beam decoder over the whole stream
        assert names == {"log_probs", "output_lengths", "transcripts", "session_transcripts"}  # no state: it's kept
        for k, partial in enumerate(partials):  # the greedy transcript so far, growing with the stream
            assert greedy.startswith(partial.rstrip()) or partial == ""
    # Six streams that start together ride in shared forward passes (a batch of 6 as long as all are running).
    assert max(results[0][2]) == 6


def test_stateless_streaming_over_grpc(server, clips, references):
    """As with stock TF Serving: the client finds the state size in the signature, starts from zeros and sends back
    the state each response gives."""
    wave, (_, greedy, _) = clips[2], references[2]
    state, text = np.zeros((1, state_size(server)), np.float32), ""
    pieces = chunks(wave, 4000)
    for k, piece in enumerate(pieces):
        response = server.Predict(step_request(piece, k == len(pieces) - 1, state=state), timeout=TIMEOUT)
        state = tf.make_ndarray(response.outputs["state"])
        text += tf.make_ndarray(response.outputs["transcripts"])[0].decode()
    assert " ".join(text.split()) == greedy


def state_size(stub):
    """The state size from the signature, as a stock TF Serving client would find it (GetModelMetadata)."""
    from deepspeech2_serving.client import signatures

    shape = signatures(stub, "ds2")[STREAM_STEP].inputs["state"].tensor_shape
    return shape.dim[1].size


@pytest.mark.parametrize("name", ["wrong state size", "two rows in a session", "nbest", "bad session id"])
def test_bad_stream_requests_are_invalid_argument(server, clips, name):
    piece = clips[0][:1600]
    if name == "wrong state size":
        request = step_request(piece, False, state=np.zeros((1, 7), np.float32))
    elif name == "two rows in a session":
        request = predict_request("ds2", STREAM_STEP, {"waveforms": np.stack([piece, piece]),
                                                       "lengths": np.array([1600, 1600], np.int32),
                                                       "final": np.array([False, False])})
        request.inputs["session_id"].CopyFrom(tf.make_tensor_proto(np.array([b"x"], dtype=object)))
    elif name == "nbest":
        request = step_request(piece, False, session="y")
        request.inputs["nbest"].CopyFrom(tf.make_tensor_proto(3, dtype=tf.int32))
    else:
        request = step_request(piece, False, session="\x00")
    with pytest.raises(grpc.RpcError) as e:
        server.Predict(request, timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert {"wrong state size": "state", "two rows in a session": "batch 1", "nbest": "unknown input",
            "bad session id": "printable"}[name] in e.value.details()


def test_session_store_limits(model):
    _, _, version, _ = model
    servable = Servable(version, "ds2", DecoderConfig(kind="greedy"))
    store = SessionStore(max_streams=1, idle_seconds=60)
    session = store.acquire("a", servable)
    with pytest.raises(RequestError) as e:  # one step at a time per stream
        store.acquire("a", servable)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(RequestError) as e:  # at most max_streams sessions
        store.acquire("b", servable)
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    store.release(session)
    store.idle_seconds = 0.0  # forgotten once idle: room for another stream
    assert store.acquire("b", servable).id == "b" and len(store) == 1


# ------------------------------------------------------------------------------------------- ds2-demo


@pytest.fixture(scope="module")
def demo(model):
    """ds2-demo in this process on a free port, started from the bundle (exported on the way)."""
    from deepspeech2_serving.demo import DemoConfig, start

    _, bundle_dir, _, lm = model
    running = start(DemoConfig(str(bundle_dir), port=0, decoder=dataclasses.replace(lm, num_workers=1)))
    yield running
    running.stop()


def test_demo_serves_the_page_and_its_scripts(demo):
    with urllib.request.urlopen(demo.url, timeout=TIMEOUT) as r:
        assert r.headers["Content-Type"].startswith("text/html") and b"Hold to talk" in r.read()
    for name, kind in (("app.js", "javascript"), ("pcm-worklet.js", "javascript"), ("style.css", "text/css")):
        with urllib.request.urlopen(demo.url + name, timeout=TIMEOUT) as r:
            assert kind in r.headers["Content-Type"] and len(r.read()) > 100
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(demo.url + "secret.txt", timeout=TIMEOUT)
    assert e.value.code == 404
    worklet = (Path(__file__).parents[1] / "serving" / "web" / "pcm-worklet.js").read_text()
    assert "registerProcessor(\"pcm-downsampler\"" in worklet  # the name app.js asks for


def test_demo_client_streams_a_file_and_gets_partials_and_the_lm_transcript(demo, clips, references, tmp_path):
    from deepspeech2.audio import save_wav
    from deepspeech2_serving.demo_client import DemoClientConfig, stream_file

    wav = tmp_path / "clip.wav"
    save_wav(wav, clips[5])
    result = stream_file(DemoClientConfig(f"127.0.0.1:{demo.port}", str(wav), chunk_ms=100, speed=0))
    _, greedy, beam = references[5]
    assert result.text == beam and result.decoder == "beam + LM"
    assert result.partials and all(greedy.startswith(p.rstrip()) for p in result.partials)
    assert result.audio_seconds == pytest.approx(len(clips[5]) / RATE, abs=1e-3)
    assert result.rtf > 0 and result.latency_ms > 0
    assert len(result.batch_sizes) >= len(result.partials) + 1 and min(result.batch_sizes) >= 1  # a step each


def test_demo_refuses_unsupported_audio_and_bad_protocol(demo):
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{demo.port}/ws") as ws:
        assert json.loads(ws.recv(timeout=TIMEOUT))["type"] == "hello"
        ws.send(b"\x00\x00")  # audio before start
        assert json.loads(ws.recv(timeout=TIMEOUT))["code"] == "protocol"
        ws.send(json.dumps({"type": "start", "sample_rate": 8000, "encoding": "pcm_s16le"}))
        message = json.loads(ws.recv(timeout=TIMEOUT))
        assert message["code"] == "unsupported_audio" and "16000 Hz" in message["message"]
        ws.send(json.dumps({"type": "start", "sample_rate": 16000, "encoding": "pcm_s16le"}))
        assert json.loads(ws.recv(timeout=TIMEOUT))["type"] == "started"
        ws.send(b"\x00\x00\x00")  # not whole 16-bit samples
        assert json.loads(ws.recv(timeout=TIMEOUT))["code"] == "unsupported_audio"
        ws.send("nonsense")
        assert json.loads(ws.recv(timeout=TIMEOUT))["code"] == "protocol"
        ws.send(json.dumps({"type": "stop"}))  # an empty utterance still gets its final message
        timing = {"latency_ms": 0, "decode_ms": 0, "rtf": 0, "compute_seconds": 0}
        assert json.loads(ws.recv(timeout=TIMEOUT)) | timing == {
            "type": "final", "text": "", "greedy": "", "audio_seconds": 0.0, **timing, "decoder": "beam + LM",
            "batch_size": 1}


def test_ds2_demo_client_command(demo, clips, references, tmp_path):
    from deepspeech2.audio import save_wav

    wav = tmp_path / "clip.wav"
    save_wav(wav, clips[3])
    out = subprocess.run([str(VENV_BIN / "ds2-demo-client"), "--server", f"127.0.0.1:{demo.port}", "--speed", "4",
                          str(wav)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"final: {references[3][2]}\n" in out.stdout and "latency" in out.stdout
    bad = subprocess.run([str(VENV_BIN / "ds2-demo-client"), "--server", "127.0.0.1:9", str(wav)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "can't reach ds2-demo" in bad.stderr
