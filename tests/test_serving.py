"""ds2-serve over real gRPC on loopback, with the standard TF Serving stubs: metadata then Predict, results equal
to the Keras model, every bad input refused with INVALID_ARGUMENT while the server keeps serving, message
size and queue limits, the n-best with the export's LM, Batch Dispatch, hot reload, SIGTERM, ds2-client and
the load test. Servers are ds2-serve subprocesses on free ports, started and stopped here."""

import contextlib
import dataclasses
import gc
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import keras
import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_service_pb2_grpc,
                                     prediction_service_pb2_grpc)

from deepspeech2.audio import speech_like_clip, to_pcm16
from deepspeech2.bundle import load_bundle, save_bundle
from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.decode.beam import BeamSearch
from deepspeech2.decode.words import FrameClock, WordConfig, decode_words
from deepspeech2.features import FeatureConfig, featurize
from deepspeech2.model import build_model
from deepspeech2.model_config import TINY
from deepspeech2.prepare.stats import compute_mean_std
from deepspeech2.vocab import Vocabulary
from deepspeech2_export import ASSETS_EXTRA
from deepspeech2_export.requests import as_wav_bytes, predict_request, wav_bytes
from deepspeech2_export.saved_model import ExportConfig, export_model
from deepspeech2_serving.batching import BatchingConfig
from deepspeech2_serving.client import wav_request
from deepspeech2_serving.loadtest import LoadTestConfig, load_test

from factories import make_manifest, modules_loaded_by

VENV_BIN = Path(sys.executable).parent
EN = Vocabulary.english()
RATE = 16000
TIMEOUT = 60  # seconds for any one RPC (they take milliseconds)
LM_DECODER = dict(beam_size=8, alpha=0.5, beta=1.0)


@pytest.fixture(scope="module")
def model(tmp_path_factory, hello_world_lm):
    """A tiny bundle (untrained, seeded) exported as model "ds2" version 1 (at most 4 s of audio, a beam decoder
    with an LM recorded); returns (bundle, base path)."""
    d = tmp_path_factory.mktemp("serving")
    manifest, _ = make_manifest(d, n=4)
    keras.utils.set_random_seed(0)
    bundle_dir = save_bundle(d / "model", build_model(TINY), TINY, EN, compute_mean_std([manifest], FeatureConfig()))
    decoder = DecoderConfig(lm_path=str(hello_world_lm), **LM_DECODER)
    export_model(ExportConfig(str(bundle_dir), str(d / "export"), max_audio_seconds=4.0, decoder=decoder))
    return load_bundle(bundle_dir), d / "export" / "ds2"


@pytest.fixture(scope="module")
def clips():
    waves = [speech_like_clip(s, seed=i) for i, s in enumerate((1.3, 0.6, 2.1, 0.9))]
    return [(np.round(w * 32767) / 32768).astype(np.float32) for w in waves]  # as 16-bit WAV files hold them


@pytest.fixture(scope="module")
def references(model, clips):
    """Per clip, the Keras model alone: (log_probs of the valid steps, greedy transcript)."""
    bundle, _ = model
    out = []
    for wave in clips:
        features, frames = featurize(wave[None], [len(wave)], bundle.feature_config, bundle.normalizer)
        outputs = bundle.model({"features": features, "feature_lengths": frames}, training=False)
        log_probs = tf.nn.log_softmax(outputs["logits"])[0, :int(outputs["output_lengths"][0])].numpy()
        out.append((log_probs, Decoder(DecoderConfig(kind="greedy"), EN).decode_utterances([log_probs])[0]))
    return out


class Server:
    """A ds2-serve subprocess on a free loopback port."""

    def __init__(self, base: Path, folder: Path, *flags: str):
        folder.mkdir(parents=True, exist_ok=True)
        port_file = folder / "port"
        port_file.unlink(missing_ok=True)
        self.stdout, self.stderr = folder / "stdout.txt", folder / "stderr.txt"
        with open(self.stdout, "w") as out, open(self.stderr, "w") as err:
            self.proc = subprocess.Popen([str(VENV_BIN / "ds2-serve"), "--model_base_path", str(base), "--port", "0",
                                          "--port_file", str(port_file), *flags], stdout=out, stderr=err)
        deadline = time.monotonic() + 180
        while not port_file.exists():
            assert self.proc.poll() is None, f"ds2-serve exited {self.proc.returncode}: {self.stderr.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "ds2-serve did not start in 180 s"
            time.sleep(0.1)
        self.address = f"127.0.0.1:{int(port_file.read_text())}"
        self.channel = grpc.insecure_channel(self.address, options=[("grpc.max_send_message_length", 64 << 20)])
        self.predict = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.models = model_service_pb2_grpc.ModelServiceStub(self.channel)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.channel.close()
        return self.proc.wait(120)


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    _, base = model
    s = Server(base, tmp_path_factory.mktemp("server"), "--max_message_bytes", "1000000",
               "--file_system_poll_wait_seconds", "0.2")
    yield s
    assert s.stop() == 0, s.stderr.read_text()[-3000:]


def waveform_request(waves, model_name="ds2", dtype=np.float32, version=None):
    """serving_default on `waves`, zero-padded to the longest."""
    lengths = np.array([len(w) for w in waves], np.int32)
    batch = np.zeros((len(waves), max(lengths, default=0)), dtype)
    for i, w in enumerate(waves):
        batch[i, :len(w)] = w
    request = predict_request(model_name, "serving_default", {"waveforms": batch, "lengths": lengths})
    if version is not None:
        request.model_spec.version.value = version
    return request


def outputs(response, key):
    return tf.make_ndarray(response.outputs[key])


def test_a_tf_serving_client_discovers_the_signatures_then_predicts(server, clips, references):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "ds2"
    metadata = server.predict.GetModelMetadata(request, timeout=TIMEOUT)
    defs = get_model_metadata_pb2.SignatureDefMap()
    metadata.metadata["signature_def"].Unpack(defs)
    assert sorted(defs.signature_def) == ["serving_default", "transcribe_wav"]
    assert sorted(defs.signature_def["serving_default"].inputs) == ["lengths", "waveforms"]
    assert sorted(defs.signature_def["transcribe_wav"].outputs) == ["log_probs", "output_lengths", "transcripts"]
    assert metadata.model_spec.version.value == 1

    by_waveforms = server.predict.Predict(waveform_request(clips[:3]), timeout=TIMEOUT)
    by_wav = server.predict.Predict(predict_request("ds2", "transcribe_wav", {
        "wav": np.array([wav_bytes(w, RATE) for w in clips[:3]], object)}), timeout=TIMEOUT)
    assert (by_wav.model_spec.name, by_wav.model_spec.version.value, by_wav.model_spec.signature_name) == \
        ("ds2", 1, "transcribe_wav")
    for response in (by_waveforms, by_wav):
        log_probs = outputs(response, "log_probs")
        assert log_probs.shape[1] == max(len(lp) for lp, _ in references[:3])  # padded to the longest, no more
        for i, (reference, text) in enumerate(references[:3]):
            assert outputs(response, "output_lengths")[i] == len(reference)
            np.testing.assert_allclose(log_probs[i, :len(reference)], reference, atol=1e-4)
            assert outputs(response, "transcripts")[i].decode() == text
    filtered = waveform_request(clips[:1])
    filtered.output_filter.append("transcripts")
    assert list(server.predict.Predict(filtered, timeout=TIMEOUT).outputs) == ["transcripts"]


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket table")
def test_it_listens_on_loopback_only(server):
    port = f"{int(server.address.rsplit(':', 1)[1]):04X}"
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if Path(table).exists():
            for line in Path(table).read_text().splitlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                if state == "0A" and local.endswith(f":{port}"):  # 0A: LISTEN
                    listening.append(local.rsplit(":", 1)[0])
    # 127.0.0.1, as IPv4 or IPv4-mapped IPv6 (the kernel writes the address bytes little-endian per word)
    assert listening and all(a in ("0100007F", "0000000000000000FFFF00000100007F") for a in listening), listening


def test_model_status(server):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "ds2"
    [status] = server.models.GetModelStatus(request, timeout=TIMEOUT).model_version_status
    assert (status.version, status.state) == (1, get_model_status_pb2.ModelVersionStatus.AVAILABLE)
    request.model_spec.name = "other"
    with pytest.raises(grpc.RpcError) as e:
        server.models.GetModelStatus(request, timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "unknown model 'other'" in e.value.details()


def _bad_requests(clip):
    """(name, request, what the message must say) for every kind of bad input."""
    wav = wav_bytes(clip, RATE)

    def wav_request_(*datas):
        return predict_request("ds2", "transcribe_wav", {"wav": np.array(list(datas), object)})

    def with_filter(request, key):
        request.output_filter.append(key)
        return request

    def with_input(request, key, value):
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
        return request

    nan, inf = clip.copy(), clip.copy()
    nan[100], inf[200] = np.nan, -np.inf
    return [
        ("wrong dtype", waveform_request([clip], dtype=np.float64), "`waveforms` must be DT_FLOAT, got DT_DOUBLE"),
        ("wrong rank", with_input(waveform_request([clip]), "waveforms", clip), "`waveforms` must have rank 2"),
        ("wrong rank of lengths", with_input(waveform_request([clip]), "lengths", np.array([[len(clip)]], np.int32)),
         "`lengths` must have rank 1"),
        ("NaN", waveform_request([nan]), "NaN or Inf"),
        ("Inf", waveform_request([inf]), "NaN or Inf"),
        ("empty audio", waveform_request([np.zeros(0, np.float32)]), r"`lengths`\[0\]: the audio is empty"),
        ("too short", waveform_request([clip[:100]]), "shorter than the"),
        ("over the max duration", waveform_request([speech_like_clip(4.5)]), "4.50 s long, over the 4 s limit"),
        ("lengths per row", with_input(waveform_request([clip]), "lengths", np.array([5, 5], np.int32)),
         "2 entries for 1 rows"),
        ("length past the samples", with_input(waveform_request([clip]), "lengths", np.array([len(clip) + 1], np.int32)),
         "exceeds the"),
        ("no audio at all", with_input(with_input(waveform_request([clip]), "waveforms", np.zeros((0, 10), np.float32)),
                                       "lengths", np.zeros(0, np.int32)), "holds no audio"),
        ("undecodable WAV bytes", wav_request_(b"this is not a wav file"), r"`wav`\[0\] is not a WAV file"),
        ("corrupt WAV", wav_request_(wav, wav[:60]), r"`wav`\[1\]: "),
        ("wrong sample rate", wav_request_(wav_bytes(clip, 8000)), "must be 16000 Hz .*got 8000 Hz"),
        ("empty WAV", wav_request_(wav_bytes(np.zeros(0), RATE)), r"`wav`\[0\]: the audio is empty"),
        ("unknown signature", predict_request("ds2", "classify", {"wav": np.array([wav], object)}),
         "unknown signature 'classify'"),
        ("unknown model", waveform_request([clip], model_name="ds3"), "unknown model 'ds3'"),
        ("unknown version", waveform_request([clip], version=7), "version 7 of model 'ds2' is not loaded"),
        ("unknown input", with_input(wav_request_(wav), "audio", np.array([1.0], np.float32)),
         r"unknown input\(s\) \['audio'\]"),
        ("missing input", predict_request("ds2", "serving_default", {"waveforms": clip[None]}),
         r"needs the input\(s\) \['lengths'\]"),
        ("bad nbest", wav_request("ds2", wav, nbest=9),
         r"`nbest` must be one integer in \[1, 8\]"),
        ("unknown output", with_filter(wav_request_(wav), "logits"), r"unknown output\(s\) \['logits'\]"),
    ]


BAD_NAMES = [name for name, _, _ in _bad_requests(np.zeros(1000, np.float32))]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_requests_are_invalid_argument_with_the_reason(server, clips, name):
    _, request, message = next(case for case in _bad_requests(clips[0]) if case[0] == name)
    with pytest.raises(grpc.RpcError) as e:
        server.predict.Predict(request, timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert re.search(message, e.value.details()), e.value.details()


def test_after_bad_requests_and_oversized_messages_a_good_request_works(server, clips, references):
    with pytest.raises(grpc.RpcError) as e:  # 1.2 MB of audio, over this server's 1 MB message limit
        server.predict.Predict(waveform_request([np.zeros(300_000, np.float32)]), timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    response = server.predict.Predict(wav_request("ds2", wav_bytes(clips[1], RATE)), timeout=TIMEOUT)
    assert outputs(response, "transcripts")[0].decode() == references[1][1]


def test_nbest_from_the_beam_decoder_and_lm_the_export_recorded(server, model, clips, references, hello_world_lm):
    _, base = model
    response = server.predict.Predict(wav_request("ds2", wav_bytes(clips[2], RATE), nbest=3), timeout=TIMEOUT)
    texts, scores = outputs(response, "nbest_transcripts"), outputs(response, "nbest_scores")
    assert texts.shape == scores.shape == (1, 3)
    assert np.all(np.diff(scores[0][np.isfinite(scores[0])]) <= 0)  # best first
    assert outputs(response, "transcripts")[0].decode() == references[2][1]  # the greedy output is still there
    extra = base / "1" / ASSETS_EXTRA
    config = DecoderConfig(lm_path=str(hello_world_lm), unigrams_path=str(extra / "unigrams.txt"),
                           num_workers=1, **LM_DECODER)
    assert texts[0, 0].decode() == Decoder(config, EN).decode_utterances([references[2][0]])[0]


def test_ds2_client(server, clips, references, tmp_path):
    files = []
    for i in (0, 1):
        files.append(tmp_path / f"clip{i}.wav")
        files[-1].write_bytes(wav_bytes(clips[i], RATE))
    out = subprocess.run([str(VENV_BIN / "ds2-client"), "--server", server.address, "--json", str(tmp_path / "r.json"),
                          str(files[0]), str(tmp_path / "missing.wav"), str(files[1])],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr[-2000:]  # one input failed, the others were transcribed
    lines = out.stdout.splitlines()
    assert lines[0] == f"{files[0]}\t{references[0][1]}" and lines[2] == f"{files[1]}\t{references[1][1]}"
    assert lines[1].startswith(f"{tmp_path / 'missing.wav'}\terror: ")
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["transcribed"], report["failed"], report["model_versions"]) == (2, 1, [1])

    utts = [Utterance(str(f), len(c) / RATE, "hello world") for f, c in zip(files, clips)]
    write_manifest(tmp_path / "m.jsonl", utts)
    out = subprocess.run([str(VENV_BIN / "ds2-client"), "--server", server.address, "--manifest",
                          str(tmp_path / "m.jsonl"), "--num_samples", "1", "--nbest", "2"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 4 and lines[1].startswith("  #1\t") and lines[3] == "  (reference: hello world)"

    bad = subprocess.run([str(VENV_BIN / "ds2-client"), "--server", server.address, "--model_name", "nope",
                          str(files[0])], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("ds2-client: error: ") and "unknown model 'nope'" in line


def test_the_client_sends_a_flac_as_wav(server, clips, references, tmp_path):
    """transcribe_wav reads WAV only (tf.audio.decode_wav); a FLAC, such as LibriSpeech's that the importer uses in
    place, goes out as the WAV of its samples, from a file list and from a manifest."""
    from deepspeech2_serving.client import ClientConfig, transcribe

    flac = tmp_path / "clip.flac"
    sf.write(flac, to_pcm16(clips[1]), RATE, subtype="PCM_16", format="FLAC")
    assert as_wav_bytes(flac.read_bytes()) == wav_bytes(clips[1], RATE)
    assert as_wav_bytes(wav_bytes(clips[1], RATE)) == wav_bytes(clips[1], RATE)  # a 16-bit WAV goes as it is
    assert as_wav_bytes(b"not audio") == b"not audio"  # the server says what is wrong with it
    write_manifest(tmp_path / "m.jsonl", [Utterance(str(flac), len(clips[1]) / RATE, "hello world")])
    for config in (ClientConfig(server.address, files=(str(flac),)),
                   ClientConfig(server.address, manifest=str(tmp_path / "m.jsonl"))):
        [result] = list(transcribe(config))
        assert (result.error, result.transcript) == (None, references[1][1])


def test_load_test(server, clips):
    utterances = [wav_bytes(c, RATE) for c in clips]
    seconds = [len(c) / RATE for c in clips]
    for interval in (0.0, 0.05):
        report = load_test(LoadTestConfig(server.address, streams=4, requests=12, interval_seconds=interval),
                           utterances, seconds)
        assert report["ok"] == report["requests"] == 12 and not report["errors"]
        assert sum(report["batch_sizes"].values()) == 12
        lat = report["latency_ms"]
        assert 0 < lat["p50"] <= lat["p98"] <= lat["p99"] <= lat["max"]


def test_the_server_imports_no_model_code(model):
    _, base = model
    code = ("from deepspeech2_serving.server import ServeConfig, start\n"
            f"running = start(ServeConfig({str(base)!r}, port=0))\n"
            "running.stop(0)\n")
    # (Keras itself is loaded by `import tensorflow` in TF 2.21, whoever imports it.) "deepspeech2.model." is the
    # model package's modules (its __init__ imports them), not the TF-free deepspeech2.model_config.
    assert modules_loaded_by(code, ("deepspeech2.model.", "deepspeech2.train", "deepspeech2.bundle",
                                    "deepspeech2.inference", "deepspeech2.streaming",
                                    "deepspeech2_export.saved_model")) == []


def test_a_new_version_is_picked_up_while_serving(server, model, clips, references):
    _, base = model
    (base / "9").mkdir()  # a numbered folder without a SavedModel (yet): not a version
    tmp = base / ".2.tmp"
    shutil.copytree(base / "1", tmp)
    tmp.rename(base / "2")  # what ds2-export does: write hidden, rename into place
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "ds2"
    State = get_model_status_pb2.ModelVersionStatus
    deadline = time.monotonic() + 120
    while True:
        statuses = {s.version: s.state for s in server.models.GetModelStatus(request, timeout=TIMEOUT).model_version_status}
        if statuses.get(2) == State.AVAILABLE:
            break
        assert time.monotonic() < deadline, f"version 2 not loaded: {statuses}"
        time.sleep(0.2)
    assert statuses == {1: State.END, 2: State.AVAILABLE}
    response = server.predict.Predict(wav_request("ds2", wav_bytes(clips[0], RATE)), timeout=TIMEOUT)
    assert response.model_spec.version.value == 2
    assert outputs(response, "transcripts")[0].decode() == references[0][1]
    with pytest.raises(grpc.RpcError) as e:
        server.predict.Predict(waveform_request(clips[:1], version=1), timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "has version 2" in e.value.details()
    assert "now serving version 2" in server.stdout.read_text()


def _wait_for_status(server, version, state, timeout=120):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "ds2"
    deadline = time.monotonic() + timeout
    while True:
        response = server.models.GetModelStatus(request, timeout=TIMEOUT)
        statuses = {s.version: s.state for s in response.model_version_status}
        if statuses.get(version) == state:
            return statuses
        assert time.monotonic() < deadline, f"version {version} not in state {state}: {statuses}"
        time.sleep(0.2)


def test_a_version_that_failed_to_load_is_retried_until_it_loads(model, clips, references, tmp_path):
    """Issue 36, item 6: a version copied in with `cp -r` shows saved_model.pb before variables/; it fails to load
    (logged once, the old version keeps serving) and is loaded once its files are all there. A folder named by a
    non-ASCII digit ("²".isdigit() is true) breaks neither the server nor ds2-export."""
    bundle, base = model
    served = tmp_path / "export" / "ds2"
    shutil.copytree(base / "1", served / "1")
    shutil.copytree(base / "1", served / "\u00b2")  # a SavedModel, but not a version
    s = Server(served, tmp_path / "server", "--file_system_poll_wait_seconds", "0.2")
    try:
        (served / "2").mkdir()
        for item in sorted((served / "1").iterdir()):  # everything but the weights, as a copy in progress shows it
            if item.name != "variables":
                (shutil.copytree if item.is_dir() else shutil.copy2)(item, served / "2" / item.name)
        deadline = time.monotonic() + 120
        while "version 2 of ds2 failed to load" not in s.stderr.read_text():
            assert time.monotonic() < deadline, s.stderr.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(1.0)  # five more polls
        response = s.predict.Predict(wav_request("ds2", wav_bytes(clips[0], RATE)), timeout=TIMEOUT)
        assert response.model_spec.version.value == 1  # the old version keeps serving
        shutil.copytree(served / "1" / "variables", served / "2" / "variables")
        State = get_model_status_pb2.ModelVersionStatus
        assert _wait_for_status(s, 2, State.AVAILABLE) == {1: State.END, 2: State.AVAILABLE}
        response = s.predict.Predict(wav_request("ds2", wav_bytes(clips[0], RATE)), timeout=TIMEOUT)
        assert response.model_spec.version.value == 2
        assert outputs(response, "transcripts")[0].decode() == references[0][1]
        assert s.stderr.read_text().count("failed to load") == 1  # logged once, however many polls retried it
        # ds2-export next to the "\u00b2" folder: the next version is 3, and the server picks it up.
        assert export_model(ExportConfig(str(bundle.path), str(served.parent), max_audio_seconds=4.0)) == served / "3"
        _wait_for_status(s, 3, State.AVAILABLE)
    finally:
        assert s.stop() == 0, s.stderr.read_text()[-3000:]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a named pipe")
def test_the_client_reads_each_file_when_it_sends_it(server, clips, references, tmp_path):
    """Issue 36, item 14: ds2-client reads a file when it sends it, not every file first. The second input is a
    named pipe nobody writes to yet: the first file must be answered before the client opens it."""
    from deepspeech2_serving.client import ClientConfig, transcribe

    files = [tmp_path / "first.wav", tmp_path / "pipe.wav", tmp_path / "last.wav"]
    files[0].write_bytes(wav_bytes(clips[0], RATE))
    files[2].write_bytes(wav_bytes(clips[2], RATE))
    os.mkfifo(files[1])
    claim, stuck = threading.Lock(), threading.Event()

    def write_pipe():
        with open(files[1], "wb") as f:  # blocks until the client opens the pipe
            f.write(wav_bytes(clips[1], RATE))

    def unstick():  # only if the client waits on the pipe before sending the first file (it would hang)
        if claim.acquire(blocking=False):
            stuck.set()
            write_pipe()

    watchdog = threading.Timer(30, unstick)
    watchdog.start()
    try:
        results = iter(transcribe(ClientConfig(server.address, files=tuple(map(str, files)), max_in_flight=1)))
        first = next(results)
        if claim.acquire(blocking=False):
            writer = threading.Thread(target=write_pipe)
            writer.start()
        rest = list(results)
    finally:
        watchdog.cancel()
    assert not stuck.is_set(), "the client read the pipe before it sent the first file"
    writer.join(TIMEOUT)
    assert [r.transcript for r in [first, *rest]] == [references[i][1] for i in range(3)]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="makes its certificate with openssl")
def test_tls_and_client_certificates_from_an_ssl_config_file(model, tmp_path):
    """Issue 36, item 3: the port has no authentication by itself; --ssl_config_file (TF Serving's SSLConfig) serves
    TLS, and with client_verify only a client with a certificate from custom_ca gets in."""
    _, base = model
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "key.pem"),
                    "-out", str(tmp_path / "cert.pem"), "-days", "1", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    key, cert = (tmp_path / "key.pem").read_text(), (tmp_path / "cert.pem").read_text()
    # A self-signed certificate is its own CA: the server's and the client's here.
    (tmp_path / "ssl.config").write_text(f"server_key: {json.dumps(key)}\nserver_cert: {json.dumps(cert)}\n"
                                         f"custom_ca: {json.dumps(cert)}\nclient_verify: true\n")
    s = Server(base, tmp_path / "server", "--ssl_config_file", str(tmp_path / "ssl.config"),
               "--file_system_poll_wait_seconds", "0")
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "ds2"
    codes = {}
    clients = {"plain": None, "TLS, no client certificate": grpc.ssl_channel_credentials(cert.encode()),
               "mutual TLS": grpc.ssl_channel_credentials(cert.encode(), key.encode(), cert.encode())}
    try:
        for name, credentials in clients.items():
            with grpc.secure_channel(s.address, credentials) if credentials else grpc.insecure_channel(s.address) as ch:
                try:
                    model_service_pb2_grpc.ModelServiceStub(ch).GetModelStatus(request, timeout=TIMEOUT)
                    codes[name] = "OK"
                except grpc.RpcError as e:
                    codes[name] = e.code().name
    finally:
        assert s.stop() == 0, s.stderr.read_text()[-3000:]
    assert codes == {"plain": "UNAVAILABLE", "TLS, no client certificate": "UNAVAILABLE", "mutual TLS": "OK"}
    assert ", TLS)" in s.stdout.read_text()


# ------------------------------------------------------------------------------- batching, overload, SIGTERM

@pytest.fixture(scope="module")
def batching_server(model, tmp_path_factory):
    """Batches of at most 4 utterances that wait up to 3 s to fill (even when the server is idle, TF Serving's
    rule), and room for one batch in the queue."""
    _, base = model
    folder = tmp_path_factory.mktemp("batching")
    (folder / "batching.txt").write_text("max_batch_size { value: 4 }\nbatch_timeout_micros { value: 3000000 }\n"
                                         "max_enqueued_batches { value: 1 }\npad_variable_length_inputs: true\n")
    s = Server(base, folder, "--batching_parameters_file", str(folder / "batching.txt"), "--batch_wait_when_idle",
               "--file_system_poll_wait_seconds", "0")
    yield s
    s.stop()


def _batch_size(call):
    return dict(call.trailing_metadata())["ds2-batch-size"]


def test_concurrent_requests_share_one_forward_pass(batching_server, clips, references):
    # Four requests fill a batch of 4: it runs at once, padded to the longest, and each gets its own outputs.
    futures = [batching_server.predict.Predict.future(waveform_request([c]), timeout=TIMEOUT) for c in clips]
    for future, (reference, text) in zip(futures, references):
        response = future.result()
        assert _batch_size(future) == "4"
        assert outputs(response, "log_probs").shape == (1, len(reference), EN.size)
        np.testing.assert_allclose(outputs(response, "log_probs")[0], reference, atol=1e-4)
        assert outputs(response, "transcripts")[0].decode() == text


def test_overload_is_refused_at_once(batching_server, clips):
    # 3 utterances wait (up to 3 s) for a 4th; 2 more don't fit the queue of one batch: refused at once.
    first_done = threading.Event()
    futures = [batching_server.predict.Predict.future(waveform_request(clips[:3]), timeout=TIMEOUT)]
    time.sleep(0.5)
    futures.append(batching_server.predict.Predict.future(waveform_request(clips[:2]), timeout=TIMEOUT))
    for f in futures:
        f.add_done_callback(lambda _: first_done.set())
    assert first_done.wait(TIMEOUT)
    refused = [f for f in futures if f.done()]
    assert len(refused) == 1  # the other is still queued: nobody waited for room
    assert refused[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "queue is full" in refused[0].details()
    [queued] = [f for f in futures if f is not refused[0]]
    queued.result()
    assert _batch_size(queued) in ("2", "3")  # ran after the timeout, alone


def test_sigterm_finishes_the_requests_in_flight(batching_server, clips):
    futures = [batching_server.predict.Predict.future(waveform_request([c]), timeout=TIMEOUT) for c in clips[:2]]
    time.sleep(0.5)  # both are queued, waiting up to 3 s for a full batch
    batching_server.proc.send_signal(signal.SIGTERM)
    for f in futures:
        assert len(outputs(f.result(), "transcripts")) == 1
    assert batching_server.proc.wait(120) == 0
    assert "finishing the requests in flight" in batching_server.stdout.read_text()
    with pytest.raises(grpc.RpcError) as e:
        batching_server.predict.Predict(waveform_request(clips[:1]), timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_stock_tf_serving_config_files():
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    from deepspeech2_serving.batching import BatchingConfig

    repo = Path(__file__).resolve().parents[1]
    config = text_format.Parse((repo / "serving" / "models.config").read_text(),
                               model_server_config_pb2.ModelServerConfig())
    [model] = config.model_config_list.config
    assert (model.name, model.base_path, model.model_platform) == ("ds2", "/models/ds2", "tensorflow")
    text = (repo / "serving" / "batching_parameters.txt").read_text()
    assert "pad_variable_length_inputs: true" in text  # waveforms of different lengths share a batch
    assert BatchingConfig.from_text(text) == BatchingConfig(batch_timeout_micros=0)


# ------------------------------------------------------------------------------------------- word times and confidence

WORD_CONFIG = WordConfig(start_shift=-0.016, end_shift=0.019, posterior_weight=0.6, frame_weight=0.7, intercept=-0.4)


@pytest.fixture(scope="module")
def words_server(model, tmp_path_factory, hello_world_lm):
    """The tiny bundle exported by the ds2-export command with --words_config (and the LM), served by ds2-serve in
    this process (batching on); yields (stub, version folder)."""
    from deepspeech2_serving.server import ServeConfig, start

    bundle, _ = model
    d = tmp_path_factory.mktemp("words")
    WORD_CONFIG.save(d / "words.json")
    out = subprocess.run([str(VENV_BIN / "ds2-export"), "--model_dir", str(bundle.path), "--export_dir",
                          str(d / "export"), "--max_audio_seconds", "4", "--lm", str(hello_world_lm), "--beam_size",
                          "8", "--alpha", "0.5", "--beta", "1", "--words_config", str(d / "words.json")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    version = Path(out.stdout.strip())
    running = start(ServeConfig(str(version.parent), port=0, poll_seconds=0))
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel), version
    channel.close()
    running.stop(5)


def _with(request, **inputs):
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    return request


def _assert_served_words(response, row, expected):
    """Row `row` of a response's word outputs holds the `Word`s `expected`, then "" and -1 padding."""
    texts, starts, ends = (outputs(response, k)[row] for k in ("word_texts", "word_starts", "word_ends"))
    confidences = outputs(response, "word_confidences")[row]
    n = len(expected)
    assert [t.decode() for t in texts[:n]] == [w.word for w in expected] and set(texts[n:]) <= {b""}
    for got, field in ((starts, "start"), (ends, "end"), (confidences, "confidence")):
        np.testing.assert_allclose(got[:n], [getattr(w, field) for w in expected], rtol=0, atol=1e-6, err_msg=field)
        assert np.all(got[n:] == -1), field


def test_served_words_equal_decode_words_on_the_served_log_probs(words_server, model, clips, hello_world_lm):
    """Issue 39: `words` = 1 gives each utterance's words, timed by the clock export.json records and calibrated by
    the --words_config it copied: what ds2-infer --words computes (`decode_words`) on the same log-probs, rows of
    different lengths padded."""
    stub, version = words_server
    bundle, _ = model
    clock = FrameClock.of(bundle.model_config, bundle.feature_config)  # from the model's code, which ds2-serve lacks
    extra = version / ASSETS_EXTRA
    assert json.loads((extra / "export.json").read_text())["frame_clock"] == dataclasses.asdict(clock)
    assert WordConfig.load(extra / "words.json") == WORD_CONFIG
    search = BeamSearch(DecoderConfig(lm_path=str(hello_world_lm), num_workers=1, **LM_DECODER), EN)
    response = stub.Predict(_with(waveform_request(clips), words=np.int32(1)), timeout=TIMEOUT)
    assert {"word_texts", "word_starts", "word_ends", "word_confidences", "transcripts"} <= set(response.outputs)
    log_probs, lengths = outputs(response, "log_probs"), outputs(response, "output_lengths")
    counts = []
    for b, clip in enumerate(clips):
        _, expected = decode_words(search, log_probs[b, :lengths[b]], clock, WORD_CONFIG, duration=len(clip) / RATE)
        _assert_served_words(response, b, expected)
        counts.append(len(expected))
    assert outputs(response, "word_texts").shape == (len(clips), max(counts))
    assert len(set(counts)) > 1 and min(counts) > 0, counts  # rows of different lengths: padding was needed

    # transcribe_wav, with the request's hotwords: they bias the words' search as they do the n-best's.
    request = _with(wav_request("ds2", wav_bytes(clips[2], RATE), nbest=2), words=np.int64(1),
                    hotwords=np.array([b"speech"], object))
    response = stub.Predict(request, timeout=TIMEOUT)
    log_probs = outputs(response, "log_probs")[0, :outputs(response, "output_lengths")[0]]
    _, expected = decode_words(search, log_probs, clock, WORD_CONFIG, search.hotwords_with(["speech"]),
                               duration=len(clips[2]) / RATE)
    _assert_served_words(response, 0, expected)
    assert [w.word for w in expected] != [w.word for w in decode_words(search, log_probs, clock, WORD_CONFIG)[1]]
    assert outputs(response, "nbest_transcripts").shape == (1, 2)


def test_an_export_without_a_word_config_gives_the_raw_posterior(server, model, clips, hello_world_lm):
    bundle, _ = model
    response = server.predict.Predict(_with(wav_request("ds2", wav_bytes(clips[0], RATE)), words=np.int32(1)),
                                      timeout=TIMEOUT)
    log_probs = outputs(response, "log_probs")[0, :outputs(response, "output_lengths")[0]]
    search = BeamSearch(DecoderConfig(lm_path=str(hello_world_lm), num_workers=1, **LM_DECODER), EN)
    _, expected = decode_words(search, log_probs, FrameClock.of(bundle.model_config, bundle.feature_config),
                               WordConfig(), duration=len(clips[0]) / RATE)
    assert expected
    _assert_served_words(response, 0, expected)


@pytest.mark.parametrize("value, message", [
    (np.int32(2), r"`words` must be one integer, 1 .* or 0 .*, got \[2\]"),
    (np.array([1, 1], np.int32), r"`words` must be one integer.*got \[1, 1\]"),
    (np.float32(1), "input `words` must be DT_INT32 or DT_INT64, got DT_FLOAT"),
    (np.array([b"1"], object), "input `words` must be DT_INT32 or DT_INT64, got DT_STRING"),
])
def test_bad_words_are_invalid_argument_naming_the_input(words_server, clips, value, message):
    stub, _ = words_server
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(_with(wav_request("ds2", wav_bytes(clips[1], RATE)), words=value), timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert re.search(message, e.value.details()), e.value.details()


def test_words_on_a_greedy_server_or_an_export_without_a_clock_are_a_failed_precondition(model, clips, tmp_path):
    from deepspeech2_serving.checks import RequestError
    from deepspeech2_serving.predictor import Predictor
    from deepspeech2_serving.servable import Servable
    from deepspeech2_serving.server import ServeConfig, start

    _, base = model
    running = start(ServeConfig(str(base), port=0, poll_seconds=0, batching=None,
                                decoder=DecoderConfig(kind="greedy")))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            request = _with(wav_request("ds2", wav_bytes(clips[1], RATE)), words=np.int32(1))
            with pytest.raises(grpc.RpcError) as e:
                stub.Predict(request, timeout=TIMEOUT)
            assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION, e.value.details()
            assert "`words`" in e.value.details() and "--decoder greedy" in e.value.details()
            # words = 0 asks for none: the greedy server answers it
            stub.Predict(_with(wav_request("ds2", wav_bytes(clips[1], RATE)), words=np.int32(0)), timeout=TIMEOUT)
    finally:
        running.stop(5)
    old = tmp_path / "ds2" / "1"  # an export made before the clock was recorded
    shutil.copytree(base / "1", old)
    info = json.loads((old / ASSETS_EXTRA / "export.json").read_text())
    del info["frame_clock"]
    (old / ASSETS_EXTRA / "export.json").write_text(json.dumps(info))
    with pytest.raises(RequestError) as e:
        Predictor(None).predict(request, Servable(old, "ds2"), direct=True)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and "export it again" in e.value.message


def test_push_to_talk_words_are_the_final_transcripts(words_server, clips, hello_world_lm):
    """What ds2-demo's push to talk would call: `Servable.final_words`, the transcript `final_transcript` gives and
    its words; without an LM (greedy final transcripts) it is a FAILED_PRECONDITION."""
    from deepspeech2_serving.checks import RequestError
    from deepspeech2_serving.servable import Servable

    _, version = words_server
    servable = Servable(version, "ds2")
    log_probs = servable.run(clips[2][None], np.array([len(clips[2])], np.int32))["log_probs"][0]
    text, timed = servable.final_words(log_probs, len(clips[2]))
    assert text == servable.final_transcript(log_probs, "greedy") == " ".join(w.word for w in timed) != ""
    search = BeamSearch(DecoderConfig(lm_path=str(hello_world_lm), num_workers=1, **LM_DECODER), EN)
    assert timed == decode_words(search, log_probs, servable.clock, WORD_CONFIG, duration=len(clips[2]) / RATE)[1]
    with pytest.raises(RequestError) as e:
        Servable(version, "ds2", DecoderConfig(num_workers=1)).final_words(log_probs, len(clips[2]))
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and "no LM" in e.value.message


def test_a_burst_of_stop_signals_ends_the_wait():
    """ds2-serve and ds2-demo wait in the main thread for SIGTERM/SIGINT (`server.stop_signals`). Their handlers used to
    set a threading.Event the main thread was waiting on; a signal arriving inside that wait deadlocked on the Event's
    lock (a SIGTERMed `make live` hung; the race is too narrow to reproduce on demand). Here 200 SIGTERM/SIGINT in a
    burst: the wait returns, the handlers only record, the process ends normally."""
    script = ("import os, signal, threading\n"
              "from deepspeech2_serving.server import stop_signals\n"
              "with stop_signals() as wait:\n"
              "    def burst():\n"
              "        for k in range(200):\n"
              "            os.kill(os.getpid(), signal.SIGTERM if k % 2 else signal.SIGINT)\n"
              "    threading.Timer(0.2, burst).start()\n"
              "    wait()\n"
              "print('stopped')\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "stopped", out.stderr[-2000:]


# ------------------------------------------- what one request, one client or one connection can make the server hold

HEAVY_BEAM = 256  # an untrained model's every token is a candidate at every frame: seconds of search per second


@contextlib.contextmanager
def serving(base, **config):
    """ds2-serve in this process on a free loopback port; yields (RunningServer, PredictionService, ModelService)."""
    from deepspeech2_serving.server import ServeConfig, start

    config.setdefault("poll_seconds", 0)
    running = start(ServeConfig(str(base), port=0, **config))
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        yield (running, prediction_service_pb2_grpc.PredictionServiceStub(channel),
               model_service_pb2_grpc.ModelServiceStub(channel))
    finally:
        channel.close()
        running.stop(5)


def _status_request():
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "ds2"
    return request


def _filled(dtype, dims, **values):
    """A hand-built TensorProto: `dims` filled from the values given (TensorFlow repeats the last one)."""
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2

    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims])
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, **values)


def _refused(call, request, code=grpc.StatusCode.INVALID_ARGUMENT, **kwargs) -> str:
    with pytest.raises(grpc.RpcError) as e:
        call(request, timeout=TIMEOUT, **kwargs)
    assert e.value.code() == code, (e.value.code(), e.value.details()[:300])
    return e.value.details()


def test_a_shape_filled_from_one_value_counts_in_full(server, clips, references):
    """A 600-byte request can declare [16] WAVs from one (16 copies decoded) or [2000]: the request is counted as it
    will be read, and refused with a short message before anything is decoded."""
    from tensorflow.core.framework import types_pb2

    wav = wav_bytes(clips[2], RATE)  # 2.1 s: 67 KB; 16 of them are over this server's 1 MB
    for rows, what in ((16, r"the request's inputs take \d+ bytes .*input `wav`.* over the 1000000 bytes a request "
                            r"may take \(--max_message_bytes\)"),
                       (2000, r"input `wav` has 2000 rows, over the 16 utterances one request may carry")):
        request = predict_request("ds2", "transcribe_wav", {"wav": np.array([wav], object)})
        request.inputs["wav"].CopyFrom(_filled(types_pb2.DT_STRING, [rows], string_val=[wav]))
        details = _refused(server.predict.Predict, request)
        assert re.search(what, details) and len(details) < 400, details[:400]
    # Options too: a shape of 200000 from one value is refused unread, in one short line.
    for key, proto in (("nbest", _filled(types_pb2.DT_INT32, [200_000], int_val=[1])),
                       ("words", _filled(types_pb2.DT_INT32, [200_000], int_val=[1])),
                       ("hotwords", _filled(types_pb2.DT_STRING, [100_000], string_val=[b"hello"]))):
        request = wav_request("ds2", wav_bytes(clips[0], RATE), nbest=1)
        request.inputs[key].CopyFrom(proto)
        details = _refused(server.predict.Predict, request)
        assert f"`{key}`" in details and len(details) < 400, details[:400]
    response = server.predict.Predict(wav_request("ds2", wav_bytes(clips[1], RATE)), timeout=TIMEOUT)
    assert outputs(response, "transcripts")[0].decode() == references[1][1]


def test_rows_per_request_are_capped_at_a_batch(server, clips):
    """TF Serving's rule: a request carries at most --max_batch_size utterances."""
    details = _refused(server.predict.Predict, waveform_request([clips[1]] * 17))
    assert "17 rows, over the 16 utterances one request may carry (--max_batch_size)" in details
    assert len(server.predict.Predict(waveform_request([clips[1]] * 16), timeout=TIMEOUT).outputs["transcripts"]
               .string_val) == 16


def test_hotwords_are_counted_as_the_words_they_normalize_to(server, clips):
    """100 characters of digits are one hotword as sent and about 100 words once spelled out: each a regex
    alternative matched on every new hypothesis."""
    digits = " ".join(["1234567"] * 12)  # 95 characters, 132 words: "one million two hundred thirty four thousand..."
    request = wav_request("ds2", wav_bytes(clips[0], RATE), nbest=1)
    details = _refused(server.predict.Predict, _with(request, hotwords=np.array([digits.encode()], object)))
    assert re.search(r"`hotwords` make \d+ words once normalized .*over the 64 a request may add", details), details
    response = server.predict.Predict(_with(request, hotwords=np.array([b"12", b"hello world"], object)),
                                      timeout=TIMEOUT)
    assert outputs(response, "nbest_transcripts").shape == (1, 1)


@pytest.fixture(scope="module")
def heavy(model, hello_world_lm):
    """ds2-serve in this process with a wide beam (each search of a few seconds of audio takes seconds) and two
    Predict slots; yields (RunningServer, PredictionService, ModelService)."""
    _, base = model
    decoder = DecoderConfig(lm_path=str(hello_world_lm), beam_size=HEAVY_BEAM, alpha=0.5, beta=1.0)
    with serving(base, decoder=decoder, max_concurrent_requests=2, batching=None) as s:
        yield s


def _heavy_request():
    return wav_request("ds2", wav_bytes(speech_like_clip(3.9, seed=7), RATE), nbest=1)


def _until(condition, seconds=120):
    """Wait for `condition()` (a bound on a hang, not a measurement)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_one_requests_search_does_not_hold_the_others(heavy):
    """No search runs under a lock every other request waits for: a short n-best is answered while a long one is
    still searching."""
    running, stub, _ = heavy
    long = stub.Predict.future(_heavy_request(), timeout=TIMEOUT)
    time.sleep(2.0)  # the long one is in its search
    short = stub.Predict(wav_request("ds2", wav_bytes(speech_like_clip(0.3, seed=5), RATE), nbest=1),
                         timeout=TIMEOUT)
    assert outputs(short, "nbest_transcripts").shape == (1, 1)
    assert not long.done()
    long.cancel()
    _until(lambda: running.servicer.in_flight == 0)


def test_status_answers_while_every_predict_slot_is_busy(heavy, clips):
    running, stub, models = heavy
    busy = [stub.Predict.future(_heavy_request(), timeout=TIMEOUT) for _ in range(2)]
    time.sleep(2.0)  # both in their searches
    [status] = models.GetModelStatus(_status_request(), timeout=TIMEOUT).model_version_status
    assert status.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    details = _refused(stub.Predict, waveform_request(clips[:1]), grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert "(--max_concurrent_requests)" in details
    for future in busy:
        future.cancel()
    _until(lambda: running.servicer.in_flight == 0)


def test_a_search_whose_deadline_passed_stops(heavy, caplog):
    """The deadline is checked after the forward pass and between the search's frames: a client that gave up holds
    no thread."""
    running, stub, _ = heavy
    caplog.set_level(logging.INFO, logger="deepspeech2_serving.predictor")
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(_heavy_request(), timeout=1.0)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    _until(lambda: "stopped the beam search" in caplog.text, 60)  # a search left running would take much longer
    [stopped] = [r.getMessage() for r in caplog.records if "stopped the beam search" in r.getMessage()]
    assert "(DEADLINE_EXCEEDED)" in stopped, stopped
    assert float(stopped.split(" after ")[1].split(" s of CPU")[0]) < time.monotonic() - started


def test_a_requests_searches_are_capped_in_cpu_seconds(model, hello_world_lm):
    _, base = model
    decoder = DecoderConfig(lm_path=str(hello_world_lm), beam_size=HEAVY_BEAM, alpha=0.5, beta=1.0)
    with serving(base, decoder=decoder, max_search_seconds=0.5) as (running, stub, _):
        details = _refused(stub.Predict, _heavy_request(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert "took over 0.5 s of CPU, the most one request may take (--max_search_seconds)" in details
        assert running.servicer.in_flight == 0


@pytest.mark.slow
def test_sigterm_stops_the_searches_in_flight_and_exits(model, hello_world_lm, tmp_path):
    """After --grace_seconds the searches of the requests still in flight end at their next frame: the process exits
    instead of searching on for minutes."""
    _, base = model
    s = Server(base, tmp_path, "--grace_seconds", "1", "--lm", str(hello_world_lm), "--beam_size", "1024",
               "--noenable_batching")
    try:
        long = [s.predict.Predict.future(_heavy_request(), timeout=600) for _ in range(4)]
        time.sleep(3.0)  # in their searches, which would take minutes
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(120) == 0, s.stderr.read_text()[-3000:]
        for future in long:
            assert future.exception() is not None  # cut off, not answered
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
        s.channel.close()


def test_a_replaced_version_and_failed_loads_free_their_lm(model, tmp_path):
    """pyctcdecode keeps every LM in a class-level table: a version swapped out, or one that failed to load (a copy in
    progress, tried again on each change), must take its KenLM model with it."""
    from pyctcdecode.decoder import BeamSearchDecoderCTC

    _, exported = model
    base = tmp_path / "ds2"
    shutil.copytree(exported / "1", base / "1")
    with serving(base, poll_seconds=0.2) as (running, _, models):
        first = running.manager.servable.decoder.search.ctc._model_key
        gc.collect()  # what earlier tests let go
        held = len(BeamSearchDecoderCTC.model_container)
        shutil.copytree(exported / "1", base / ".2.tmp")
        (base / ".2.tmp").rename(base / "2")
        _until(lambda: running.manager.servable.version == 2)
        gc.collect()
        assert first not in BeamSearchDecoderCTC.model_container
        assert len(BeamSearchDecoderCTC.model_container) == held
        # Version 3 as a slow copy leaves it: saved_model.pb and the LM's files, no variables yet; each change of
        # its files is another try.
        (base / "3" / ASSETS_EXTRA).mkdir(parents=True)
        shutil.copy(exported / "1" / "saved_model.pb", base / "3" / "saved_model.pb")
        shutil.copytree(exported / "1" / ASSETS_EXTRA, base / "3" / ASSETS_EXTRA, dirs_exist_ok=True)
        for attempt in range(3):
            (base / "3" / f"partial-{attempt}").write_text("x")
            _until(lambda: f"partial-{attempt}" in [p[0] for p in running.manager._failed.get(3, ((),))[0] or ()])
        gc.collect()
        assert len(BeamSearchDecoderCTC.model_container) == held
        [status] = models.GetModelStatus(_status_request(), timeout=TIMEOUT).model_version_status[-1:]
        assert (status.version, status.state) == (3, get_model_status_pb2.ModelVersionStatus.END)


def test_connections_are_capped_and_idle_ones_closed(model):
    """Connections are file descriptors and buffers: at most --max_connections at once, and one with no request in
    flight is closed after --connection_idle_seconds."""
    _, base = model
    with serving(base, max_connections=2, connection_idle_seconds=1.0) as (running, _, _):
        channels = [grpc.insecure_channel(f"127.0.0.1:{running.port}", options=[("grpc.use_local_subchannel_pool", 1)])
                    for _ in range(3)]
        try:
            for channel in channels[:2]:
                model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(_status_request(), timeout=TIMEOUT)
            with pytest.raises(grpc.RpcError) as e:  # a third connection at once is closed
                model_service_pb2_grpc.ModelServiceStub(channels[2]).GetModelStatus(_status_request(), timeout=5)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
            ready = grpc.ChannelConnectivity.READY.value[0]
            # The two idle ones are closed by the server (the client's channel goes back to IDLE).
            _until(lambda: all(c._channel.check_connectivity_state(False) != ready for c in channels[:2]), 60)
            channels.append(grpc.insecure_channel(f"127.0.0.1:{running.port}"))  # room again
            model_service_pb2_grpc.ModelServiceStub(channels[3]).GetModelStatus(_status_request(), timeout=TIMEOUT)
        finally:
            for channel in channels:
                channel.close()


def test_a_long_request_does_not_pad_the_short_ones_it_is_batched_with(model, clips):
    """Head-of-line: 15 rows of 0.6 s queued beside one of 3.9 s run as their own batch, not padded to 3.9 s."""
    _, base = model
    batching = BatchingConfig(max_batch_size=16, batch_timeout_micros=3_000_000, num_batch_threads=1,
                              wait_when_idle=True)
    with serving(base, batching=batching) as (_, stub, _):
        long = stub.Predict.future(waveform_request([speech_like_clip(3.9, seed=3)]), timeout=TIMEOUT)
        short = stub.Predict.future(waveform_request([clips[1]] * 15), timeout=TIMEOUT)
        long.result(), short.result()
        assert (_batch_size(long), _batch_size(short)) == ("1", "15")


def test_a_request_over_the_forward_pass_limit_runs_in_pieces_with_the_same_outputs(model, clips, references):
    """A forward pass's memory grows with its padded size: a request over --max_batch_samples runs as several passes,
    and each row still gets what the model gives it alone."""
    _, base = model
    with serving(base, max_batch_samples=40_000, batching=None) as (_, stub, _):  # 2.5 s: [2.1], [1.3], [0.9, 0.6]
        response, call = stub.Predict.with_call(waveform_request(clips), timeout=TIMEOUT)
    assert _batch_size(call) == "2"  # the largest piece
    for i, (reference, text) in enumerate(references):
        assert outputs(response, "output_lengths")[i] == len(reference)
        np.testing.assert_allclose(outputs(response, "log_probs")[i, :len(reference)], reference, atol=1e-4)
        assert outputs(response, "transcripts")[i].decode() == text


def test_internal_errors_send_a_request_id_not_the_exception(model, clips, caplog, monkeypatch):
    """An exception's text can hold paths and tensor contents: the client gets an id to quote, the log the rest."""
    _, base = model
    with serving(base, batching=None) as (running, stub, _):
        def fails(*args, **kwargs):
            raise RuntimeError("secret: /srv/models/ds2/1/variables is odd")

        monkeypatch.setattr(running.manager.servable, "run", fails)
        details = _refused(stub.Predict, waveform_request(clips[:1]), grpc.StatusCode.INTERNAL)
        assert "secret" not in details and "RuntimeError" not in details
        request_id = re.fullmatch(r"internal error \(request id ([0-9a-f]{16})\); the server's log has the details",
                                  details).group(1)
        [logged] = [r for r in caplog.records if request_id in r.getMessage()]
        assert "secret: /srv/models" in caplog.text and logged.exc_info is not None


def test_a_world_writable_model_base_path_is_warned_about(model, tmp_path, caplog):
    """Loading a version runs its graph as the server's user: anyone who can write the base path can run code as it."""
    _, exported = model
    base = tmp_path / "ds2"
    shutil.copytree(exported / "1", base / "1")
    base.chmod(0o777)
    with serving(base):
        pass
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and str(base) in r.getMessage()]
    assert f"`{base}` is writable by every user of this machine" in warning and "chmod o-w" in warning
    caplog.clear()
    base.chmod(0o755)
    with serving(base):
        pass
    assert not [r for r in caplog.records if "writable by every user" in r.getMessage()]
