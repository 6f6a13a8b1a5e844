"""A TF Serving client for ds2 models: WAV files -> transcripts through the standard PredictionServiceStub.

`transcribe` is not specific to ds2-serve: it speaks TF Serving's API (GetModelMetadata to check the
`transcribe_wav` signature is there, then one Predict per file), so it works against stock
`tensorflow_model_server` as well. Files are sent as they are (the server decodes them in its graph, at the
model's sample rate); manifest segments (lines with an offset) are cut out and sent as WAV bytes at their
file's rate. Requests go out concurrently (`max_in_flight`), so ds2-serve can batch them; each file is read
when its request goes out, so at most `max_in_flight` files are in memory, and results come in input order
as they are ready.

`stream` runs one waveform through a ds2-serve streaming session (stream_step with `session_id` and
`sequence`): the first request has an empty `session_id` and `sequence` 0 and opens the session; its
response's output `session_id` is the id the server issued, sent with `sequence` 1, 2, ... in the next
steps. A step whose answer didn't arrive (DEADLINE_EXCEEDED, UNAVAILABLE) is sent again with the same number:
the server answers a repeat from the stored result, so a chunk is never applied twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2, prediction_service_pb2_grpc

from deepspeech2_export import FINAL, LENGTHS, STREAM_STEP, TRANSCRIBE_WAV, TRANSCRIPTS, WAV, WAVEFORMS
# The export's contract; re-exported here.
from deepspeech2_export.requests import as_wav_bytes, predict_request, wav_bytes
from deepspeech2_serving.checks import NBEST, SEQUENCE, SESSION_ID
from deepspeech2_serving.servable import NBEST_SCORES, NBEST_TRANSCRIPTS, SESSION_TRANSCRIPTS

MAX_MESSAGE_BYTES = 32 << 20  # as ds2-serve's default


@dataclass(frozen=True)
class ClientConfig:
    """Where the server is, and what to transcribe."""

    server: str = "localhost:8500"  # host:port of ds2-serve or tensorflow_model_server
    model_name: str = "ds2"  # ModelSpec.name
    files: tuple[str, ...] = ()  # audio files, sent as WAV (a 16-bit PCM WAV as it is; FLAC and others decoded)
    manifest: str = ""  # or: lines of this manifest (references are kept)
    num_samples: int = 0  # with `manifest`: this many random lines (0: all)
    seed: int = 0  # the draw of `num_samples`
    nbest: int = 0  # > 0: ask ds2-serve for the beam decoder's n best hypotheses too
    timeout_seconds: float = 60.0  # per request
    max_in_flight: int = 8  # requests outstanding at once
    max_message_bytes: int = MAX_MESSAGE_BYTES

    def __post_init__(self):
        if bool(self.files) == bool(self.manifest):
            raise ValueError("give audio files, or a `manifest` (not both)")
        if self.nbest < 0 or self.num_samples < 0:
            raise ValueError(f"`nbest` and `num_samples` must be >= 0, got {self.nbest!r}, {self.num_samples!r}")
        if not self.timeout_seconds > 0 or self.max_in_flight < 1:
            raise ValueError(f"`timeout_seconds` must be > 0 and `max_in_flight` >= 1, got {self.timeout_seconds!r}, "
                             f"{self.max_in_flight!r}")


@dataclass(frozen=True)
class ClientResult:
    """One input's transcript, or why it has none."""

    source: str  # the file (or manifest line's file)
    transcript: str | None  # None: failed (see `error`)
    error: str | None = None  # "INVALID_ARGUMENT: ..." or why the file couldn't be read
    reference: str | None = None  # the manifest's transcript
    nbest: tuple[tuple[str, float], ...] = field(default=())  # (text, score), best first
    latency_seconds: float = 0.0  # the Predict call
    model_version: int | None = None  # the version that answered


def wav_request(model_name: str, data: bytes, nbest: int = 0) -> predict_pb2.PredictRequest:
    """transcribe_wav on one WAV file's bytes; `nbest` > 0 adds the ds2-serve option for the n-best."""
    inputs = {WAV: np.array([data], dtype=object)}
    if nbest:
        inputs[NBEST] = np.int32(nbest)
    return predict_request(model_name, TRANSCRIBE_WAV, inputs)


def stream_request(model_name: str, chunk: np.ndarray, final: bool, session_id: str = "", sequence: int = 0
                   ) -> predict_pb2.PredictRequest:
    """One step of a ds2-serve streaming session: `chunk` float32 (samples,); `session_id` "" with `sequence` 0
    opens a session."""
    chunk = np.asarray(chunk, np.float32).reshape(1, -1)
    return predict_request(model_name, STREAM_STEP, {
        WAVEFORMS: chunk, LENGTHS: np.array([chunk.shape[1]], np.int32), FINAL: np.array([bool(final)]),
        SESSION_ID: np.array([session_id.encode()], dtype=object), SEQUENCE: np.array([sequence], np.int64)})


@dataclass(frozen=True)
class StreamResult:
    """What a stream through a ds2-serve session gave."""

    session_id: str  # the id the server issued
    partials: tuple[str, ...]  # the transcript so far after each step but the last
    text: str  # the final transcript (the server's LM beam search, when it has an LM)
    batch_sizes: tuple[int, ...]  # streams in the forward pass each step rode in
    retries: int  # steps sent again after a lost answer


RETRIED = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)  # the answer may be lost: send again


def stream(stub, model_name: str, waveform: np.ndarray, chunk_samples: int = 1600, timeout: float = 60.0,
           retries: int = 2) -> StreamResult:
    """Stream `waveform` (float32 (samples,), at the model's rate) through a new ds2-serve session, `chunk_samples`
    per step, one step after the other; a step that timed out or found the server unavailable is sent again (same
    `sequence`) up to `retries` times (a retried opening step may leave an unused session on the server, until
    it is forgotten).

    Raises:
        grpc.RpcError: a step failed (after its retries).
    """
    pieces = [waveform[i:i + chunk_samples] for i in range(0, len(waveform), chunk_samples)] or [waveform[:0]]
    session, partials, sizes, retried = "", [], [], 0
    for k, piece in enumerate(pieces):
        for attempt in range(retries + 1):
            try:
                response, call = stub.Predict.with_call(stream_request(model_name, piece, k == len(pieces) - 1,
                                                                       session, k), timeout=timeout)
                break
            except grpc.RpcError as e:
                if e.code() not in RETRIED or attempt == retries:
                    raise
                retried += 1
        session = tf.make_ndarray(response.outputs[SESSION_ID])[0].decode()
        partials.append(tf.make_ndarray(response.outputs[SESSION_TRANSCRIPTS])[0].decode("utf-8"))
        sizes.append(int(dict(call.trailing_metadata() or ()).get("ds2-batch-size", 0)))
    return StreamResult(session, tuple(partials[:-1]), partials[-1], tuple(sizes), retried)


def channel(server: str, max_message_bytes: int = MAX_MESSAGE_BYTES) -> grpc.Channel:
    return grpc.insecure_channel(server, options=[("grpc.max_receive_message_length", max_message_bytes),
                                                  ("grpc.max_send_message_length", max_message_bytes)])


def signatures(stub, model_name: str, timeout: float = 30.0) -> dict:
    """GetModelMetadata: the model's signature_def map (name -> SignatureDef)."""
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = model_name
    response = stub.GetModelMetadata(request, timeout=timeout)
    defs = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(defs)
    return dict(defs.signature_def)


def _file_reader(path) -> Callable[[], bytes]:
    """Reads the file when called, as WAV bytes (a FLAC, such as LibriSpeech's, is decoded first)."""
    return lambda: as_wav_bytes(Path(path).read_bytes())


def _inputs(config: ClientConfig) -> list[tuple[str, str | None, Callable[[], bytes]]]:
    """(source, reference, read: () -> the bytes to send) per input, in order; nothing is read yet."""
    if config.files:
        return [(str(path), None, _file_reader(path)) for path in config.files]
    from deepspeech2.audio import audio_info
    from deepspeech2.data.manifest import load_utterance, read_manifest

    utterances = read_manifest(config.manifest)
    if 0 < config.num_samples < len(utterances):
        keep = np.random.default_rng(config.seed).choice(len(utterances), config.num_samples, replace=False)
        utterances = [utterances[i] for i in sorted(keep)]

    def reader(u) -> Callable[[], bytes]:
        if u.is_segment:  # send only the segment, at its file's own rate
            return lambda: wav_bytes(load_utterance(u, sample_rate=None), audio_info(u.audio_filepath)[0])
        return _file_reader(u.audio_filepath)

    return [(u.audio_filepath, u.text, reader(u)) for u in utterances]


def transcribe(config: ClientConfig) -> Iterator[ClientResult]:
    """Transcribe the inputs on the server, one Predict each, `max_in_flight` at a time; each file is read when
    its request goes out. Yields the results in input order, as they are ready.

    Raises (when the iteration starts):
        FileNotFoundError: the manifest is missing.
        ValueError: the server can't be reached, doesn't serve the model, or lacks `transcribe_wav`.
    """
    inputs = _inputs(config)
    with channel(config.server, config.max_message_bytes) as ch:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        try:
            found = signatures(stub, config.model_name, config.timeout_seconds)
        except grpc.RpcError as e:
            raise ValueError(f"server {config.server} gave no signatures for model {config.model_name!r}: "
                             f"{e.code().name}: {e.details()}") from None
        if TRANSCRIBE_WAV not in found:
            raise ValueError(f"model {config.model_name!r} on {config.server} has no {TRANSCRIBE_WAV!r} signature "
                             f"(it has {sorted(found)}); export it with ds2-export")

        def one(item) -> ClientResult:
            source, reference, read = item
            try:
                data = read()
            except (OSError, ValueError) as e:
                return ClientResult(source, None, f"can't read the audio: {e}", reference)
            start = time.perf_counter()
            try:
                response = stub.Predict(wav_request(config.model_name, data, config.nbest),
                                        timeout=config.timeout_seconds)
            except grpc.RpcError as e:
                return ClientResult(source, None, f"{e.code().name}: {e.details()}", reference,
                                    latency_seconds=time.perf_counter() - start)
            latency = time.perf_counter() - start
            text = tf.make_ndarray(response.outputs[TRANSCRIPTS])[0].decode("utf-8")
            nbest = ()
            if config.nbest:
                texts = tf.make_ndarray(response.outputs[NBEST_TRANSCRIPTS])[0]
                scores = tf.make_ndarray(response.outputs[NBEST_SCORES])[0]
                nbest = tuple((t.decode("utf-8"), float(s)) for t, s in zip(texts, scores) if np.isfinite(s))
            return ClientResult(source, text, None, reference, nbest, latency, response.model_spec.version.value)

        with ThreadPoolExecutor(config.max_in_flight) as pool:
            yield from pool.map(one, inputs)  # tasks hold a reader, not the bytes


def format_results(results: Sequence[ClientResult]) -> str:
    """`FILE<TAB>transcript` per input (`FILE<TAB>error: ...` for a failure), as ds2-infer prints; the n-best
    as `  #k<TAB>score<TAB>text` lines and the reference as `  (reference: ...)` below it."""
    lines = []
    for r in results:
        lines.append(f"{r.source}\t{r.transcript}" if r.transcript is not None else f"{r.source}\terror: {r.error}")
        lines += [f"  #{k}\t{score:.3f}\t{text}" for k, (text, score) in enumerate(r.nbest, start=1)]
        if r.reference is not None:
            lines.append(f"  (reference: {r.reference})")
    return "\n".join(lines)


def results_json(config: ClientConfig, results: Sequence[ClientResult]) -> dict:
    """The results as a JSON-able dict (what `ds2-client --json` writes)."""
    ok = [r for r in results if r.transcript is not None]
    return {"server": config.server, "model_name": config.model_name, "signature": TRANSCRIBE_WAV,
            "model_versions": sorted({r.model_version for r in ok}), "transcribed": len(ok),
            "failed": len(results) - len(ok),
            "median_latency_ms": round(1000 * float(np.median([r.latency_seconds for r in ok])), 1) if ok else None,
            "results": [{"file": r.source, "transcript": r.transcript, "error": r.error, "reference": r.reference,
                         "nbest": [{"text": t, "score": s} for t, s in r.nbest],
                         "latency_ms": round(1000 * r.latency_seconds, 1)} for r in results]}
