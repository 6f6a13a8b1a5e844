"""Streaming in deployment: the export's stream_step (state in and out as tensors, stock-TF-Serving servable),
ds2-serve's streaming sessions over gRPC with Batch Dispatch across streams, and ds2-demo's HTTP + WebSocket
server with its terminal client. References are the Keras model on the whole utterance (greedy) and the
export's LM beam decoder on those log-probs."""

import ast
import collections
import dataclasses
import json
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import prediction_service_pb2_grpc

from deepspeech2.audio import speech_like_clip
from deepspeech2.bundle import load_bundle, save_bundle
from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.decode.words import FrameClock, WordConfig, decode_words
from deepspeech2.features import FeatureConfig, featurize
from deepspeech2.model import build_model
from deepspeech2.model_config import DS2_STREAMING
from deepspeech2.prepare.stats import compute_mean_std
from deepspeech2.vocab import Vocabulary
from deepspeech2_export import ASSETS_EXTRA, STREAM_STEP
from deepspeech2_export.requests import predict_request, wav_bytes
from deepspeech2_export.saved_model import ExportConfig, export_model
from deepspeech2_serving.batching import BatchingConfig
from deepspeech2_serving.client import wav_request
from deepspeech2_serving.checks import RequestError
from deepspeech2_serving.servable import Servable
from deepspeech2_serving.streaming import SessionStore

from factories import bundle_log_probs, make_manifest

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
    waves = [speech_like_clip(s, seed=i) for i, s in enumerate((1.3, 0.7, 2.1, 1.0, 0.45, 1.7))]
    return [(np.round(w * 32767) / 32768).astype(np.float32) for w in waves]  # as 16-bit PCM holds them


@pytest.fixture(scope="module")
def references(model, clips):
    """Per clip: (offline log-probs, greedy transcript, LM beam transcript)."""
    bundle, _, _, lm = model
    greedy, beam = Decoder(DecoderConfig(kind="greedy"), EN), Decoder(dataclasses.replace(lm, num_workers=1), EN)
    out = []
    for wave in clips:
        log_probs = bundle_log_probs(bundle, wave)
        out.append((log_probs, greedy.decode_utterances([log_probs])[0], beam.decode_utterances([log_probs])[0]))
    return out


def beam_partials(log_probs, decoder: DecoderConfig) -> set[str]:
    """Every partial transcript a session's LM beam search can show on these log-probs: its best beam after each
    number of frames (the same whatever the chunking; tests/test_decode.py checks that)."""
    stream = Decoder(dataclasses.replace(decoder, num_workers=1), EN).search.stream()
    texts = {stream.text}
    for frame in log_probs:
        stream.update(frame[None])
        texts.add(stream.text)
    return texts


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


CAP_SECONDS = 10.0  # the `limited` server's --max_stream_seconds


@pytest.fixture(scope="module")
def limited(model):
    """ds2-serve in this process with a 10 s cap on a session's audio; batches run as soon as a thread is free.
    Yields (stub, the RunningServer)."""
    from deepspeech2_serving.server import ServeConfig, start

    _, _, version, _ = model
    running = start(ServeConfig(str(version.parent), port=0, poll_seconds=0, max_stream_seconds=CAP_SECONDS,
                                batching=BatchingConfig(max_batch_size=4, batch_timeout_micros=0)))
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel), running
    channel.close()
    running.stop(5)


def step_request(piece, final, session=None, sequence=0, state=None):
    """A stream_step request: stateless with `state`, else in a session (`session` "" opens one)."""
    inputs = {"waveforms": piece[None], "lengths": np.array([len(piece)], np.int32), "final": np.array([final])}
    if state is not None:
        inputs["state"] = state
    request = predict_request("ds2", STREAM_STEP, inputs)
    if session is not None:
        request.inputs["session_id"].CopyFrom(tf.make_tensor_proto(np.array([session.encode()], dtype=object)))
        request.inputs["sequence"].CopyFrom(tf.make_tensor_proto(sequence, dtype=tf.int64))
    return request


def text_of(response, key="session_transcripts"):
    return tf.make_ndarray(response.outputs[key])[0].decode()


def code_of(call, request, **kwargs):
    """The gRPC status of `call(request)`: "OK" or the code's name (and the response or the error)."""
    try:
        return "OK", call(request, **kwargs)
    except grpc.RpcError as e:
        return e.code().name, e


def stream_session(stub, wave, size=1600):
    """A stream through a new session, one step after the other: (partials, final text, batch sizes, output names)."""
    partials, sizes, session = [], [], ""
    pieces = chunks(wave, size)
    for k, piece in enumerate(pieces):
        response, call = stub.Predict.with_call(step_request(piece, k == len(pieces) - 1, session, k), timeout=TIMEOUT)
        session = text_of(response, "session_id")
        partials.append(text_of(response))
        sizes.append(int(dict(call.trailing_metadata())["ds2-batch-size"]))
    return partials[:-1], partials[-1], sizes, set(response.outputs)


def test_concurrent_sessions_are_batched_and_match_the_offline_model(server, model, clips, references):
    results = [None] * len(clips)

    def run(i):
        results[i] = stream_session(server, clips[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clips))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for (partials, final, sizes, names), (log_probs, greedy, beam) in zip(results, references):
        assert final == beam  # the final transcript: the export's LM beam decoder over the whole stream
        # no state (the server keeps it); the session's id instead
        assert names == {"log_probs", "output_lengths", "transcripts", "session_transcripts", "session_id"}
        # The transcript so far: the LM beam search's best, advanced with each chunk (issue 38).
        assert partials and set(partials) <= beam_partials(log_probs, model[3]), (partials, greedy)
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


@pytest.mark.parametrize("name", ["wrong state size", "two rows in a session", "nbest", "bad session id",
                                  "no sequence", "sequence without a session", "opening past 0"])
def test_bad_stream_requests_are_invalid_argument(limited, clips, name):
    stub, _ = limited
    piece = clips[0][:1600]
    if name == "wrong state size":
        request = step_request(piece, False, state=np.zeros((1, 7), np.float32))
    elif name == "two rows in a session":
        request = predict_request("ds2", STREAM_STEP, {"waveforms": np.stack([piece, piece]),
                                                       "lengths": np.array([1600, 1600], np.int32),
                                                       "final": np.array([False, False]), "session_id": np.array(
                                                           [b""], dtype=object), "sequence": np.array([0])})
    elif name == "nbest":
        request = step_request(piece, False, session="")
        request.inputs["nbest"].CopyFrom(tf.make_tensor_proto(3, dtype=tf.int32))
    elif name == "bad session id":  # a name the client chose, as ds2-serve once took
        request = step_request(piece, False, session="user-1", sequence=1)
    elif name == "no sequence":
        request = step_request(piece, False, session="")
        del request.inputs["sequence"]
    elif name == "sequence without a session":
        request = step_request(piece, False, state=np.zeros((1, state_size(stub)), np.float32))
        request.inputs["sequence"].CopyFrom(tf.make_tensor_proto(0, dtype=tf.int64))
    else:
        request = step_request(piece, False, session="", sequence=3)
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(request, timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert {"wrong state size": "state", "two rows in a session": "batch 1", "nbest": "unknown input",
            "bad session id": "32 hex digits", "no sequence": "`sequence`", "sequence without a session":
            "`session_id`", "opening past 0": "`sequence` must be 0"}[name] in e.value.details()


def test_session_ids_are_issued_by_the_server(limited, clips, references):
    """Issue 36, item 3: an empty `session_id` opens a session and the response names it (128 random bits); an id
    the server did not issue is NOT_FOUND, a name the client made up is INVALID_ARGUMENT."""
    stub, _ = limited
    pieces = chunks(clips[1], 4000)
    opened = [stub.Predict(step_request(pieces[0], False, ""), timeout=TIMEOUT) for _ in range(3)]
    ids = [text_of(r, "session_id") for r in opened]
    assert len(set(ids)) == 3 and all(re.fullmatch("[0-9a-f]{32}", i) for i in ids), ids
    code, error = code_of(stub.Predict, step_request(pieces[1], False, secrets.token_hex(16), 1), timeout=TIMEOUT)
    assert code == "NOT_FOUND" and "not issued" in error.details(), code
    code, error = code_of(stub.Predict, step_request(pieces[1], False, "user-1", 1), timeout=TIMEOUT)
    assert code == "INVALID_ARGUMENT", code
    for session in ids:  # each issued id carries its own stream to the end
        for k, piece in enumerate(pieces[1:], start=1):
            response = stub.Predict(step_request(piece, k == len(pieces) - 1, session, k), timeout=TIMEOUT)
            assert text_of(response, "session_id") == session
        assert text_of(response) == references[1][2]
    code, error = code_of(stub.Predict, step_request(pieces[0], False, ids[0], len(pieces)), timeout=TIMEOUT)
    assert code == "FAILED_PRECONDITION" and "ended" in error.details(), code


def test_a_retried_chunk_is_applied_once(limited, clips, references):
    """Issue 36, item 2: a step that repeats the last sequence number gets the stored answer (the chunk is not
    applied again); a gap, or an older number, is FAILED_PRECONDITION."""
    stub, _ = limited
    wave, (_, greedy, beam) = clips[5], references[5]
    pieces = chunks(wave, 4000)
    session = text_of(stub.Predict(step_request(pieces[0], False, ""), timeout=TIMEOUT), "session_id")
    first = stub.Predict(step_request(pieces[1], False, session, 1), timeout=TIMEOUT)
    retried = stub.Predict(step_request(pieces[1], False, session, 1), timeout=TIMEOUT)  # the answer was "lost"
    assert retried == first  # the stored answer: same log-probs, same transcript so far
    for sequence in (3, 0):
        code, error = code_of(stub.Predict, step_request(pieces[2], False, session, sequence), timeout=TIMEOUT)
        assert code == "FAILED_PRECONDITION" and "sequence 2" in error.details(), (code, error)
    for k, piece in enumerate(pieces[2:], start=2):
        final = stub.Predict(step_request(piece, k == len(pieces) - 1, session, k), timeout=TIMEOUT)
        if k == 3:  # a retry in the middle of the stream, too
            assert stub.Predict(step_request(piece, False, session, k), timeout=TIMEOUT) == final
    assert text_of(final) == beam  # every chunk counted once: the offline model's transcript
    again = stub.Predict(step_request(pieces[-1], True, session, len(pieces) - 1), timeout=TIMEOUT)
    assert again == final  # the final answer is kept for a retry too


def test_an_expired_deadline_does_not_advance_the_session(server, clips, references):
    """Issue 36, item 2: a step whose deadline passes while it waits for a batch (this server waits 2 s to fill
    one) is dropped: the client gets DEADLINE_EXCEEDED and the session is where it was."""
    wave, (_, _, beam) = clips[3], references[3]
    first, last = chunks(wave, 8000)
    session = text_of(server.Predict(step_request(first, False, ""), timeout=TIMEOUT), "session_id")
    code, _ = code_of(server.Predict, step_request(last, True, session, 1), timeout=0.5)
    assert code == "DEADLINE_EXCEEDED"
    deadline = time.monotonic() + TIMEOUT
    while True:  # the next number is still 1: step 1 was not applied
        code, error = code_of(server.Predict, step_request(last, True, session, 2), timeout=TIMEOUT)
        if "still running" not in str(error) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert code == "FAILED_PRECONDITION" and "sequence 1" in error.details(), (code, error)
    response = server.Predict(step_request(last, True, session, 1), timeout=TIMEOUT)
    assert text_of(response) == beam


def test_a_session_is_capped_and_other_sessions_keep_answering(limited, clips, references):
    """Issue 36, item 1: 20 minutes streamed into one session are refused (OUT_OF_RANGE, not applied) past
    --max_stream_seconds (10 s here); another session streams to its end meanwhile; the capped one can still
    end with a final chunk and get its transcript."""
    from deepspeech2_serving.client import stream

    stub, running = limited
    chunk = np.tile(clips[2], 2)[:4 * RATE]  # 4 s: the export's longest chunk
    count = 20 * 60 * RATE // len(chunk)  # 300 chunks: 20 minutes
    other = {}

    def other_stream():
        other["result"] = stream(stub, "ds2", clips[0], chunk_samples=1600, timeout=TIMEOUT)
        other["done"] = time.monotonic()

    helper = threading.Thread(target=other_stream)
    codes, session, sequence, details = [], "", 0, ""
    for k in range(count):
        code, answer = code_of(stub.Predict, step_request(chunk, False, session, sequence), timeout=TIMEOUT)
        codes.append(code)
        if code == "OK":
            session, sequence = text_of(answer, "session_id"), sequence + 1
        else:
            details = answer.details()
        if k == 2:
            helper.start()  # once this stream is refused
        if k == count // 2:
            helper.join(TIMEOUT)  # the other stream has ended while this one is refused
    refused_until = time.monotonic()
    helper.join(TIMEOUT)
    assert codes[:2] == ["OK", "OK"] and set(codes[2:]) == {"OUT_OF_RANGE"}, collections.Counter(codes)
    assert f"{CAP_SECONDS:g} s" in details
    assert other["result"].text == references[0][2] and other["done"] < refused_until
    ended = stub.Predict(step_request(np.zeros(0, np.float32), True, session, sequence), timeout=TIMEOUT)
    assert text_of(ended, "session_id") == session  # 8 s of audio taken, the rest refused


def test_the_sessions_memory_together_is_bounded(model, clips):
    """Issue 36, item 1: the sessions' states and beam searches together stay within --max_stream_memory_mb: a session
    that doesn't fit is refused RESOURCE_EXHAUSTED, so is a step that would grow past it (not applied: the same
    step goes through once memory is free); a final step always goes through, and ending a session frees its
    memory."""
    from deepspeech2_serving.server import ServeConfig, start

    _, _, version, _ = model
    state_bytes = 4 * json.loads((version / ASSETS_EXTRA / "export.json").read_text())["streaming"]["state_size"]
    # Two sessions' states and beam searches, and a step or two: each output step may add 40 bytes to each beam.
    beam_bytes = 256 * (3 * LM_DECODER["beam_size"] + 1)
    budget = 2 * (state_bytes + beam_bytes) + 2000
    running = start(ServeConfig(str(version.parent), port=0, poll_seconds=0, batching=None,
                                max_stream_memory_bytes=budget))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            pieces = chunks(clips[2], 1600)
            a = text_of(stub.Predict(step_request(pieces[0], False, ""), timeout=TIMEOUT), "session_id")
            b = text_of(stub.Predict(step_request(pieces[0], False, ""), timeout=TIMEOUT), "session_id")
            code, error = code_of(stub.Predict, step_request(pieces[0], False, ""), timeout=TIMEOUT)
            assert code == "RESOURCE_EXHAUSTED" and "memory" in error.details(), code
            sequence = 1
            for piece in pieces[1:]:  # session a grows until the budget is spent
                code, error = code_of(stub.Predict, step_request(piece, False, a, sequence), timeout=TIMEOUT)
                if code != "OK":
                    break
                sequence += 1
            assert code == "RESOURCE_EXHAUSTED" and "memory" in error.details(), code
            assert running.predictor.sessions.bytes <= budget
            stub.Predict(step_request(pieces[1], True, b, 1), timeout=TIMEOUT)  # b ends: its memory is free
            stub.Predict(step_request(piece, False, a, sequence), timeout=TIMEOUT)  # the refused step, now taken
            stub.Predict(step_request(pieces[0], True, a, sequence + 1), timeout=TIMEOUT)
            assert running.predictor.sessions.bytes == 0
    finally:
        running.stop(5)


def malformed(field, clip, size):
    """A request whose `field` is a hand-built TensorProto with a shape its values don't fill (or overflow)."""
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

    def proto(dtype, dims, **values):
        shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims])
        return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, **values)

    piece = clip[:1600]
    if field == "wav":
        request = predict_request("ds2", "transcribe_wav", {"wav": np.array([wav_bytes(clip, RATE)], object)})
    elif field == "nbest":
        request = wav_request("ds2", wav_bytes(clip, RATE), nbest=1)
    elif field == "state":
        request = step_request(piece, False, state=np.zeros((1, size), np.float32))
    elif field in ("session_id", "sequence"):
        request = step_request(piece, False, session="")
    else:
        request = step_request(piece, False, state=np.zeros((1, size), np.float32))
    bad = {
        "waveforms": proto(types_pb2.DT_FLOAT, [1, 1600], tensor_content=b"\0" * 100),  # 25 floats for 1600
        "lengths": proto(types_pb2.DT_INT32, [1], int_val=[1600, 1600]),
        "final": proto(types_pb2.DT_BOOL, [1], bool_val=[False, True]),
        "state": proto(types_pb2.DT_FLOAT, [1, size], tensor_content=b"\0" * (4 * size - 4)),
        "wav": proto(types_pb2.DT_STRING, [1], string_val=[b"RIFF", b"RIFF"]),
        "session_id": proto(types_pb2.DT_STRING, [1], string_val=[b"", b""]),
        "sequence": proto(types_pb2.DT_INT64, [], int64_val=[0, 1]),
        "nbest": proto(types_pb2.DT_INT32, [1], int_val=[1, 2]),
        # One value repeated to 64 MB (TensorFlow fills a shape from its last value): over the message limit.
        "waveforms from one value": proto(types_pb2.DT_FLOAT, [1, 1 << 24], float_val=[0.0]),
    }[field]
    request.inputs[field.split()[0]].CopyFrom(bad)
    if field == "session_id":  # checked before the rules between inputs
        del request.inputs["sequence"]
    return request


MALFORMED = ["waveforms", "lengths", "final", "state", "wav", "session_id", "sequence", "nbest",
             "waveforms from one value"]


@pytest.mark.parametrize("field", MALFORMED)
def test_malformed_tensor_protos_are_invalid_argument(limited, clips, field):
    """Issue 36, item 5: every input goes through one check; a TensorProto whose shape and values disagree is
    INVALID_ARGUMENT naming the input (it was UNKNOWN for `session_id` and `nbest`)."""
    stub, _ = limited
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(malformed(field, clips[0], state_size(stub)), timeout=TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (e.value.code(), e.value.details())
    assert f"`{field.split()[0]}`" in e.value.details()
    assert "session_id" in stub.Predict(step_request(clips[4], True, ""), timeout=TIMEOUT).outputs  # still serving


def test_session_store_limits(model):
    _, _, version, _ = model
    servable = Servable(version, "ds2", DecoderConfig(kind="greedy"))
    store = SessionStore(max_streams=1, idle_seconds=60)
    session = store.open(servable)
    assert re.fullmatch("[0-9a-f]{32}", session.id)
    with pytest.raises(RequestError) as e:  # one step at a time per stream
        store.acquire(session.id)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(RequestError) as e:  # at most max_streams sessions
        store.open(servable)
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(RequestError) as e:  # ids the store did not issue
        store.acquire(secrets.token_hex(16))
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    store.release(session)
    store.idle_seconds = 0.0  # forgotten once idle: room for another stream
    other = store.open(servable)
    assert other.id != session.id and len(store) == 1
    with pytest.raises(RequestError) as e:
        store.acquire(session.id)
    assert e.value.code == grpc.StatusCode.NOT_FOUND


# ------------------------------------------------------------------------------------------- ds2-demo


@pytest.fixture(scope="module")
def demo(model, tmp_path_factory):
    """ds2-demo in this process on a free port, serving the bundle exported as its command exports one."""
    from deepspeech2_serving.demo import DemoConfig, start

    _, bundle_dir, _, lm = model
    version = export_model(ExportConfig(str(bundle_dir), str(tmp_path_factory.mktemp("demo"))))
    running = start(DemoConfig(str(version), port=0, decoder=dataclasses.replace(lm, num_workers=1)))
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


def test_demo_client_streams_a_file_and_gets_partials_and_the_lm_transcript(demo, model, clips, references, tmp_path):
    """... and its words (issue 39): the session keeps them as the steps come, and the final message gives what
    `decode_words` gives for the whole utterance on the offline model's log-probs, within the stream's tolerance."""
    from deepspeech2.audio import save_wav
    from deepspeech2_serving.demo_client import DemoClientConfig, stream_file
    from test_demo_offline import assert_words  # the push-to-talk final's check: the same message

    wav = tmp_path / "clip.wav"
    save_wav(wav, clips[5])
    result = stream_file(DemoClientConfig(f"127.0.0.1:{demo.port}", str(wav), chunk_ms=100, speed=0))
    log_probs, _, beam = references[5]
    assert result.text == beam and result.decoder == "beam + LM"
    bundle, _, _, lm = model
    text, words = decode_words(Decoder(dataclasses.replace(lm, num_workers=1), EN).search, log_probs,
                               FrameClock.of(bundle.model_config, bundle.feature_config), duration=len(clips[5]) / RATE)
    assert text == beam and len(words) >= 2 and result.words_served  # words the untrained model's noise reads as
    assert_words(result.words, words)
    assert result.partials and set(result.partials) <= beam_partials(references[5][0], model[3])
    assert result.audio_seconds == pytest.approx(len(clips[5]) / RATE, abs=1e-3)
    assert result.rtf > 0 and result.latency_ms > 0
    assert len(result.batch_sizes) >= len(result.partials) + 1 and min(result.batch_sizes) >= 1  # a step each


def test_demo_refuses_unsupported_audio_and_bad_protocol(demo):
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{demo.port}/ws") as ws:
        hello = json.loads(ws.recv(timeout=TIMEOUT))
        assert hello["type"] == "hello" and hello["mode"] == "streaming" and hello["words"] is True
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
            "batch_size": 1, "words": []}


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


# ------------------------------------------------------------------------------------------- words in sessions

STREAM_WORD_CONFIG = WordConfig(start_shift=-0.02, end_shift=0.015, posterior_weight=0.5, frame_weight=0.9,
                                intercept=-0.2)


@pytest.fixture(scope="module")
def words_streaming(model, tmp_path_factory):
    """The streaming bundle exported with a word config, served in this process (batches of up to 4 streams, run as
    soon as a thread is free); yields (stub, the RunningServer, version folder)."""
    from deepspeech2_serving.server import ServeConfig, start

    _, bundle_dir, _, decoder = model
    d = tmp_path_factory.mktemp("stream_words")
    version = export_model(ExportConfig(str(bundle_dir), str(d / "export"), max_audio_seconds=4.0, decoder=decoder,
                                        words=STREAM_WORD_CONFIG))
    running = start(ServeConfig(str(version.parent), port=0, poll_seconds=0,
                                batching=BatchingConfig(max_batch_size=4, batch_timeout_micros=0)))
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel), running, version
    channel.close()
    running.stop(5)


def with_words(request, value=1):
    request.inputs["words"].CopyFrom(tf.make_tensor_proto(value, dtype=tf.int32))
    return request


WORD_KEYS = ("word_texts", "word_starts", "word_ends", "word_confidences")


def test_a_sessions_final_step_gives_the_words_of_the_offline_model(words_streaming, model, clips, references):
    """Issue 39: a session opened with `words` = 1 gets, on its final step with `words` = 1, the words
    `decode_words` gives for the whole utterance: exactly (1e-6) on the stream's own log-probs, and on the offline
    model's within the streaming tolerance (the log-probs differ by up to 1e-4), whatever the chunking."""
    stub, _, _ = words_streaming
    bundle, _, _, lm = model
    search = Decoder(dataclasses.replace(lm, num_workers=1), EN).search
    clock = FrameClock.of(bundle.model_config, bundle.feature_config)
    timed = 0
    for i, size in ((0, 1600), (2, 4000), (5, 800), (3, 16000)):  # 16000: the opening step is the final one
        pieces, session, streamed = chunks(clips[i], size), "", []
        for k, piece in enumerate(pieces):
            final = k == len(pieces) - 1
            request = step_request(piece, final, session, k)
            response = stub.Predict(with_words(request) if k == 0 or final else request, timeout=TIMEOUT)
            session = text_of(response, "session_id")
            streamed.append(tf.make_ndarray(response.outputs["log_probs"])[0, :int(
                tf.make_ndarray(response.outputs["output_lengths"])[0])])
            assert final or not set(WORD_KEYS) & set(response.outputs)  # words come with the final step only
        served = {k: tf.make_ndarray(response.outputs[k])[0] for k in WORD_KEYS}
        duration = len(clips[i]) / RATE
        for log_probs, tolerance in ((np.concatenate(streamed), 1e-6), (references[i][0], 1e-4)):
            text, expected = decode_words(search, log_probs, clock, STREAM_WORD_CONFIG, duration=duration)
            assert text_of(response) == text == references[i][2]
            assert [t.decode() for t in served["word_texts"]] == [w.word for w in expected]
            for key, field in (("word_starts", "start"), ("word_ends", "end")):
                np.testing.assert_allclose(served[key], [getattr(w, field) for w in expected], rtol=0, atol=1e-6)
            np.testing.assert_allclose(served["word_confidences"], [w.confidence for w in expected], rtol=0,
                                       atol=tolerance)
        timed += len(expected)
    assert timed >= 4  # the untrained model's noise reads as words: a real comparison


def test_session_words_are_asked_for_when_the_session_opens(words_streaming, model, clips):
    stub, running, version = words_streaming
    sessions = running.predictor.sessions
    pieces = chunks(clips[1], 4000)
    before = sessions.bytes
    response = stub.Predict(step_request(pieces[0], False, ""), timeout=TIMEOUT)
    plain, plain_bytes = text_of(response, "session_id"), sessions.bytes - before
    timed = text_of(stub.Predict(with_words(step_request(pieces[0], False, "")), timeout=TIMEOUT), "session_id")
    # A session is charged its state, its search's beams and LM caches, and per output step a character and a word
    # span for every beam; with words, two searches, and each step's log-probs and index.
    state_bytes = 4 * json.loads((version / ASSETS_EXTRA / "export.json").read_text())["streaming"]["state_size"]
    beam_bytes, beam = 256 * (3 * LM_DECODER["beam_size"] + 1), LM_DECODER["beam_size"]
    steps = int(tf.make_ndarray(response.outputs["output_lengths"])[0])
    assert plain_bytes == state_bytes + beam_bytes + steps * 40 * beam
    assert sessions.bytes - before - plain_bytes == state_bytes + 2 * beam_bytes + steps * (2 * 40 * beam + 4 * 29 + 8)
    code, error = code_of(stub.Predict, with_words(step_request(pieces[1], False, plain, 1)), timeout=TIMEOUT)
    assert code == "FAILED_PRECONDITION" and "opened without `words`" in error.details(), code
    for session in (plain, timed):  # the refused step was not taken: sequence 1 is still the next
        for k, piece in enumerate(pieces[1:], start=1):
            final = stub.Predict(step_request(piece, k == len(pieces) - 1, session, k), timeout=TIMEOUT)
        assert not set(WORD_KEYS) & set(final.outputs)  # a final step without `words` gets none
    assert sessions.bytes == before

    # A retried final step gets the stored answer, its words included.
    session = text_of(stub.Predict(with_words(step_request(pieces[0], False, "")), timeout=TIMEOUT), "session_id")
    answer = stub.Predict(with_words(step_request(pieces[1], True, session, 1)), timeout=TIMEOUT)
    assert set(WORD_KEYS) <= set(answer.outputs)
    assert stub.Predict(with_words(step_request(pieces[1], True, session, 1)), timeout=TIMEOUT) == answer
    for name, request, message in (
            ("stateless", with_words(step_request(pieces[0], False, state=np.zeros((1, state_size(stub)),
                                                                                   np.float32))), "need a session"),
            ("bad value", with_words(step_request(pieces[0], False, ""), 3), "`words` must be one integer")):
        code, error = code_of(stub.Predict, request, timeout=TIMEOUT)
        assert code == "INVALID_ARGUMENT" and message in error.details() and "`words`" in error.details(), name

    # Without an LM a stream's transcript is greedy: there is no search to time its words.
    from deepspeech2_serving.streaming import StreamSession

    session = StreamSession(Servable(version, "ds2", DecoderConfig(num_workers=1)))
    with pytest.raises(RequestError) as e:
        session.keep_words()
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and "no LM" in e.value.message


# ------------------------------------------------------------------------- what one client's sessions may hold

def test_one_client_is_capped_at_its_own_number_of_sessions(model, clips):
    """One client can't take every session slot: past --max_streams_per_client it is refused while others fit."""
    from deepspeech2_serving.server import ServeConfig, start

    _, _, version, _ = model
    running = start(ServeConfig(str(version.parent), port=0, poll_seconds=0, batching=None, max_streams=10,
                                max_streams_per_client=2))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            piece = clips[0][:1600]
            ids = [text_of(stub.Predict(step_request(piece, False, ""), timeout=TIMEOUT), "session_id")
                   for _ in range(2)]
            code, error = code_of(stub.Predict, step_request(piece, False, ""), timeout=TIMEOUT)
            assert code == "RESOURCE_EXHAUSTED" and "2 streams from 127.0.0.1 are open" in error.details() and \
                "(--max_streams_per_client)" in error.details(), (code, error)
            assert len(running.predictor.sessions) == 2  # the server's own limit (10) is far off
            stub.Predict(step_request(piece, True, ids[0], 1), timeout=TIMEOUT)  # one ends: room for another
            stub.Predict(step_request(piece, False, ""), timeout=TIMEOUT)
    finally:
        running.stop(5)


def test_keep_alive_chunks_do_not_hold_a_session(model, clips):
    """10 ms of audio every half second never leaves a session idle, but the session waits far longer for its
    chunks than they last: it is forgotten once that is --stream_idle_seconds more, while a stream that brings its
    audio as fast as it is spoken goes on."""
    from deepspeech2_serving.server import ServeConfig, start

    _, _, version, _ = model
    idle = 1.0
    running = start(ServeConfig(str(version.parent), port=0, poll_seconds=0, batching=None, stream_idle_seconds=idle))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            tick = clips[0][:160]  # 10 ms
            trickle = text_of(stub.Predict(step_request(tick, False, ""), timeout=TIMEOUT), "session_id")
            codes = []
            for sequence in range(1, 40):  # at most 10 s: the trickle is 1 s behind after about 1 s
                time.sleep(idle / 4)
                codes.append(code_of(stub.Predict, step_request(tick, False, trickle, sequence), timeout=TIMEOUT)[0])
                if codes[-1] != "OK":
                    break
            assert codes[-1] == "NOT_FOUND" and codes[:-1] == ["OK"] * (len(codes) - 1), codes
            # 0.5 s of audio every 0.25 s: twice real time, for longer than `idle` in all.
            pieces = chunks(np.concatenate([clips[2], clips[5], clips[0]]), RATE // 2)
            live = ""
            for sequence, piece in enumerate(pieces):
                response = stub.Predict(step_request(piece, sequence == len(pieces) - 1, live, sequence),
                                        timeout=TIMEOUT)
                live = text_of(response, "session_id")
                time.sleep(idle / 8)
            assert len(pieces) * idle / 8 > idle
    finally:
        running.stop(5)
