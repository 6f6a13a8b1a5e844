"""ds2-serve: TF Serving's gRPC API (PredictionService, ModelService) over a ds2-export model, with Batch Dispatch.

Any TF Serving client works against it unchanged: the services and messages are the real ones from
`tensorflow-serving-api`. A client discovers the signatures with `GetModelMetadata` and calls `Predict`:

    Predict            serving_default / transcribe_wav, batched with other requests (DS2 §7.1); the
                       request option `nbest` adds the beam decoder's n-best (see `servable.NBEST`), `words`
                       each word's times and confidence (`servable.WORD_OUTPUTS`), and `hotwords` biases those
                       searches (`servable.MAX_HOTWORDS`);
                       stream_step (streaming models) with the state in the request, or in a session the
                       server keeps (below), steps of concurrent streams batched together
    GetModelMetadata   the signature_def map of the served version, as TF Serving returns it
    GetModelStatus     the versions this server has loaded: the served one AVAILABLE, replaced or failed ones END

Streaming sessions (ds2-serve only): a stream_step request with the inputs `session_id` (string [1]) and
`sequence` (int [1]) instead of `state`. The client opens a session with an empty `session_id` and
`sequence` 0 (the request carries the first chunk, possibly empty); the response's output `session_id` is
the id the server issued (128 random bits, 32 hex digits), which the next steps send with `sequence` 1, 2,
... With `words` = 1 on the opening step, the server also keeps what the words need, and a final step with
`words` = 1 gets them (`servable.WORD_OUTPUTS`). A step that repeats the last number is answered from the
stored result (a retry after a lost answer is never applied twice), another number is FAILED_PRECONDITION,
an id the server didn't issue or has forgotten is NOT_FOUND. A step is taken only if it finished before the
client's deadline and the client still waits: otherwise the session stays where it was and the same step can be
sent again. A session carries at most `max_stream_seconds` of audio (a chunk past it: OUT_OF_RANGE, not taken;
the stream can still end), at most `max_streams` are open and their states and LM beam searches together hold at
most `max_stream_memory_bytes` (RESOURCE_EXHAUSTED beyond; a final step is always taken). The ids are
capabilities, not authentication.

It serves the newest version under the model base path and polls the folder (TF Serving's
`--file_system_poll_wait_seconds`): a newer version is loaded and warmed up (its
assets.extra/tf_serving_warmup_requests) while the old one keeps serving, then swapped in; one that fails
to load is logged once and the old one stays, and it is tried again on a poll once its folder's files
changed (a copy still in progress) or every `RETRY_SECONDS`. Only folders named by ASCII digits are
versions. Requests that name a version get that version or INVALID_ARGUMENT (only the newest is kept
loaded, TF Serving's default policy).

Limits: it binds 127.0.0.1 unless told otherwise, and the port has no authentication unless
`ssl_config_file` (TF Serving's SSLConfig: TLS, and client certificates with `client_verify`) or a proxy
in front provides it (docs/serving.md, "TLS and authentication"); messages over `max_message_bytes` are refused
by gRPC (RESOURCE_EXHAUSTED); at most `max_concurrent_requests` requests are handled at once and the batch
queue is bounded, and both answer RESOURCE_EXHAUSTED at once when full. A request still queued when its
deadline passes is dropped unrun (DEADLINE_EXCEEDED). Bad requests get INVALID_ARGUMENT with the reason
(unknown model, version or signature, a malformed tensor, wrong dtype or rank, NaN/Inf, empty or over-long
audio, bytes that aren't a WAV, a wrong sample rate). Unknown model names and versions are INVALID_ARGUMENT
here, where TF Serving says NOT_FOUND. SIGTERM (or SIGINT) stops taking requests and finishes the ones in
flight (up to `grace_seconds`) before the process exits.

Each response carries gRPC trailing metadata that standard clients ignore: `ds2-batch-size` (rows in the
forward pass it rode in), `ds2-queue-ms` and `ds2-run-ms`; serving/loadtest.py reads them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import tensorflow as tf
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, text_format
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_pb2, model_service_pb2_grpc,
                                     predict_pb2, prediction_service_pb2_grpc)

from deepspeech2.decode import DecoderConfig
from deepspeech2.fileio import atomic_write
from deepspeech2_export import FINAL, LOG_PROBS, OUTPUT_LENGTHS, STATE, STREAM_STEP
from deepspeech2_export.requests import WORDS
from deepspeech2_serving.batching import Batcher, BatchingConfig, BatchResult, Expired, QueueFull
from deepspeech2_serving.servable import (NBEST_SCORES, NBEST_TRANSCRIPTS, OUTPUT_TIME_KEYS, SESSION_ID,
                                          SESSION_TRANSCRIPTS, WORD_OUTPUTS, RequestError, Servable, Work, invalid,
                                          tf_error_message, word_outputs)
from deepspeech2_serving.streaming import IDLE_SECONDS, MAX_BYTES, MAX_SECONDS, MAX_STREAMS, SessionStore

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8500  # TF Serving's gRPC port
MAX_MESSAGE_BYTES = 32 << 20  # 32 MiB: ~8 minutes of float32 audio at 16 kHz, far over the default duration limit
RETRY_SECONDS = 60.0  # a version that failed to load is tried again this often even if its folder didn't change
VERSION_NAME = re.compile(r"[0-9]+")  # ASCII digits only: "²".isdigit() is true, int("²") fails


@dataclass(frozen=True)
class ServeConfig:
    """What ds2-serve serves, where, and with which limits."""

    model_base_path: str  # the folder of versions: ds2-export's EXPORT_DIR/<model_name>
    model_name: str = ""  # the name clients ask for; "": the base path's folder name
    host: str = "127.0.0.1"  # the address to bind; 0.0.0.0 serves other machines too
    port: int = DEFAULT_PORT  # 0: a free port (see `port_file`)
    port_file: str = ""  # write the bound port here once serving (for --port 0)
    batching: BatchingConfig | None = BatchingConfig()  # None: every request runs alone, as it arrives
    max_message_bytes: int = MAX_MESSAGE_BYTES  # larger requests or responses: RESOURCE_EXHAUSTED
    max_concurrent_requests: int = 64  # requests handled at once (gRPC threads); more: RESOURCE_EXHAUSTED
    poll_seconds: float = 1.0  # how often the base path is checked for a new version; 0: never
    decoder: DecoderConfig | None = None  # beam decoder for n-best requests; None: each version's own
    grace_seconds: float = 30.0  # on SIGTERM, how long requests in flight may take to finish
    max_streams: int = MAX_STREAMS  # streaming sessions open at once; more: RESOURCE_EXHAUSTED
    stream_idle_seconds: float = IDLE_SECONDS  # a session unused this long is forgotten
    max_stream_seconds: float = MAX_SECONDS  # a session's audio at most; a chunk past it: OUT_OF_RANGE
    max_stream_memory_bytes: int = MAX_BYTES  # the sessions' states and beam searches together; more: RESOURCE_EXHAUSTED
    ssl_config_file: str = ""  # TF Serving's SSLConfig (text): serve TLS (and check client certificates); "": plain

    def __post_init__(self):
        if not 0 <= self.port < 65536:
            raise ValueError(f"`port` must be in [0, 65535], got {self.port!r}")
        for name in ("stream_idle_seconds", "max_stream_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"`{name}` must be > 0, got {getattr(self, name)!r}")
        for name in ("max_message_bytes", "max_concurrent_requests", "max_streams", "max_stream_memory_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)!r}")
        if self.poll_seconds < 0 or self.grace_seconds < 0:
            raise ValueError(f"`poll_seconds` and `grace_seconds` must be >= 0, got {self.poll_seconds!r}, "
                             f"{self.grace_seconds!r}")

    @property
    def name(self) -> str:
        return self.model_name or Path(self.model_base_path).resolve().name


def latest_version(base_path: Path) -> int | None:
    """The newest complete version under a model base path (a folder named by ASCII digits, with a saved_model.pb)."""
    if not base_path.is_dir():
        return None
    found = [int(p.name) for p in base_path.iterdir()
             if VERSION_NAME.fullmatch(p.name) and p.is_dir() and (p / "saved_model.pb").is_file()]
    return max(found, default=None)


def _fingerprint(folder: Path) -> tuple | None:
    """The files under `folder` with their sizes and mtimes: it changes while a copy is in progress."""
    try:
        return tuple(sorted((str(p.relative_to(folder)), st.st_size, st.st_mtime_ns)
                            for p in folder.rglob("*") if p.is_file() for st in (p.stat(),)))
    except OSError:  # a file went away while we looked: the folder is changing
        return None


def _ssl_config_message():
    """TF Serving's SSLConfig message (tensorflow_serving/config/ssl_config.proto), which its pip package lacks."""
    proto = descriptor_pb2.FileDescriptorProto(name="ds2_serving/ssl_config.proto", package="tensorflow.serving",
                                               syntax="proto3")
    message = proto.message_type.add(name="SSLConfig")
    Field = descriptor_pb2.FieldDescriptorProto
    for number, (name, kind) in enumerate((("server_key", Field.TYPE_STRING), ("server_cert", Field.TYPE_STRING),
                                           ("custom_ca", Field.TYPE_STRING), ("client_verify", Field.TYPE_BOOL)),
                                          start=1):
        message.field.add(name=name, number=number, type=kind, label=Field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.serving.SSLConfig"))()


def server_credentials(path: str | Path) -> grpc.ServerCredentials:
    """TLS credentials from TF Serving's `--ssl_config_file`: a text SSLConfig with `server_key` and `server_cert`
    (PEM text), and optionally `custom_ca` (PEM: the CA client certificates must chain to) and `client_verify`
    (require a client certificate: mutual TLS, the port's authentication).

    Raises:
        FileNotFoundError: no such file.
        ValueError: it doesn't parse, or lacks the key or certificate, or asks to verify clients without `custom_ca`.
    """
    config = _ssl_config_message()
    try:
        text_format.Parse(Path(path).read_text(encoding="utf-8"), config)
    except text_format.ParseError as e:
        raise ValueError(f"`ssl_config_file` {path} is not a text SSLConfig: {e}") from None
    if not config.server_key or not config.server_cert:
        raise ValueError(f"`ssl_config_file` {path} needs server_key and server_cert (PEM text)")
    if config.client_verify and not config.custom_ca:
        raise ValueError(f"`ssl_config_file` {path} sets client_verify without custom_ca (the CA client certificates "
                         "must chain to)")
    return grpc.ssl_server_credentials([(config.server_key.encode(), config.server_cert.encode())],
                                       root_certificates=config.custom_ca.encode() or None,
                                       require_client_auth=config.client_verify)


class ModelManager:
    """Loads the newest version of one model, polls for newer ones, and says which version serves a request."""

    def __init__(self, config: ServeConfig, warm_up):
        self.config = config
        self.name = config.name
        self.base_path = Path(config.model_base_path)
        self._warm_up = warm_up  # warm_up(servable): run its warm-up requests
        self._lock = threading.Lock()
        self._servable: Servable | None = None
        self._states: dict[int, int] = {}  # version -> ModelVersionStatus.State
        # version -> (its folder's fingerprint, time.monotonic()) when it last failed to load
        self._failed: dict[int, tuple[tuple | None, float]] = {}
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self.on_load = None  # on_load(servable): called after a new version took over

    @property
    def servable(self) -> Servable | None:
        return self._servable

    def load_latest(self) -> bool:
        """Load the newest version if it is newer than the one serving; True if it changed.

        A version that failed to load is tried again once its folder's files changed (a copy in progress:
        saved_model.pb shows before variables/), or after `RETRY_SECONDS`; its first failure is logged.

        Raises:
            FileNotFoundError, ValueError: the first version can't be loaded (later failures are logged).
        """
        version = latest_version(self.base_path)
        current = self._servable
        if version is None or (current is not None and version <= current.version):
            return False
        folder = self.base_path / str(version)
        fingerprint = _fingerprint(folder)
        if version in self._failed:
            failed_on, failed_at = self._failed[version]
            if fingerprint is not None and fingerprint == failed_on and time.monotonic() - failed_at < RETRY_SECONDS:
                return False
        State = get_model_status_pb2.ModelVersionStatus.State
        with self._lock:
            self._states[version] = State.LOADING
        try:
            servable = Servable(folder, self.name, self.config.decoder, self.config.max_message_bytes)
            count = self._warm_up(servable)
        except Exception as e:
            first = version not in self._failed
            with self._lock:
                self._states[version] = State.END
                self._failed[version] = (fingerprint, time.monotonic())
            if current is None:
                raise
            if first:
                logger.error("version %d of %s failed to load (version %d keeps serving; it is tried again when its "
                             "files change): %s", version, self.name, current.version, e)
            else:
                logger.info("version %d of %s failed to load again: %s", version, self.name, e)
            return False
        if self._failed.pop(version, None) is not None:
            logger.warning("version %d of %s loaded after failing earlier", version, self.name)
        with self._lock:
            self._servable = servable
            self._states[version] = State.AVAILABLE
            if current is not None:
                self._states[current.version] = State.END
        logger.info("serving %s version %d from %s (%d warm-up requests)", self.name, version, servable.path, count)
        if self.on_load is not None:
            self.on_load(servable)
        return True

    def start_polling(self) -> None:
        if self.config.poll_seconds > 0:
            self._poller = threading.Thread(target=self._poll, name="version-poller", daemon=True)
            self._poller.start()

    def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join()

    def _poll(self) -> None:
        while not self._stop.wait(self.config.poll_seconds):
            try:
                self.load_latest()
            except Exception:  # never let the poller die
                logger.exception("polling %s failed", self.base_path)

    def resolve(self, spec: model_pb2.ModelSpec) -> Servable:
        """The servable for a request's ModelSpec (name, optional version or version label).

        Raises:
            RequestError: INVALID_ARGUMENT for another model name or a version that isn't loaded.
        """
        servable = self._servable
        if spec.name != self.name:
            raise invalid(f"unknown model {spec.name!r}; this server serves {self.name!r}")
        if spec.HasField("version") and spec.version.value != servable.version:
            raise invalid(f"version {spec.version.value} of model {self.name!r} is not loaded; the server has "
                          f"version {servable.version}")
        if spec.version_label:
            raise invalid(f"unknown version label {spec.version_label!r}: ds2-serve has no labels; ask for a version "
                          "number, or for none (the newest)")
        return servable

    def statuses(self, version: int | None) -> list[get_model_status_pb2.ModelVersionStatus]:
        with self._lock:
            states = dict(self._states)
        if version is not None:
            if version not in states:
                raise invalid(f"version {version} of model {self.name!r} was never loaded; loaded: {sorted(states)}")
            states = {version: states[version]}
        return [get_model_status_pb2.ModelVersionStatus(version=v, state=s) for v, s in sorted(states.items())]


class Predictor:
    """Checks a request, runs it (through the batcher, or alone), decodes the n-best, builds the response."""

    def __init__(self, batching: BatchingConfig | None, sessions: SessionStore | None = None):
        self.batcher = None
        if batching is not None:
            # The key is what runs the batch: a Servable (whole utterances) or its StreamRunner (stream steps).
            self.batcher = Batcher(batching, lambda key, w, n, **extras: key.run(w, n, **extras),
                                   length_key=OUTPUT_LENGTHS, time_keys=OUTPUT_TIME_KEYS)
        self.sessions = sessions if sessions is not None else SessionStore()

    def predict(self, request: predict_pb2.PredictRequest, servable: Servable, direct: bool = False,
                context=None) -> tuple[predict_pb2.PredictResponse, BatchResult]:
        """Check and run one request. `context` (a grpc.ServicerContext, or None) gives its deadline and says
        whether the client still waits.

        Raises:
            RequestError: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, OUT_OF_RANGE, NOT_FOUND, FAILED_PRECONDITION,
                DEADLINE_EXCEEDED, CANCELLED, INTERNAL.
        """
        deadline = _deadline(context)
        work = servable.check(request)
        wanted = list(request.output_filter)
        known = set(servable.signature_defs[work.signature].outputs) | ({NBEST_TRANSCRIPTS, NBEST_SCORES}
                                                                        if work.nbest else set())
        if work.words and (work.session is None or work.final[0]):  # a session's words come with its final step
            known |= set(WORD_OUTPUTS)
        if work.session is not None:
            known = (known - {STATE}) | {SESSION_TRANSCRIPTS, SESSION_ID}  # the server keeps a session's state
        if set(wanted) - known:
            raise invalid(f"unknown output(s) {sorted(set(wanted) - known)} in output_filter; the signature gives "
                          f"{sorted(known)}")
        if work.session is not None:
            result, outputs = self._session_step(servable, work, direct, deadline, context)
        else:
            result = self._run(servable, work, direct, deadline)
            outputs = dict(result.outputs)
        if work.nbest:
            outputs[NBEST_TRANSCRIPTS], outputs[NBEST_SCORES] = servable.nbest(
                outputs[LOG_PROBS], outputs[OUTPUT_LENGTHS], work.nbest, work.hotwords)
        if work.words and work.session is None:
            outputs.update(servable.words(outputs[LOG_PROBS], outputs[OUTPUT_LENGTHS], work.lengths, work.hotwords))
        response = predict_pb2.PredictResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        response.model_spec.signature_name = work.signature
        for key in wanted or outputs:
            response.outputs[key].CopyFrom(tf.make_tensor_proto(outputs[key]))
        return response, result

    def _session_step(self, servable: Servable, work: Work, direct: bool, deadline: float | None, context
                      ) -> tuple[BatchResult, dict]:
        """One step of the session `work.session` ("": a new one): its state in, the new state kept, its transcript
        out (and on the final step, with `words`, its words). The step is taken (state, log-probs, `sequence`) only
        if it finished in time for a client still waiting; the answer is kept for a retry of the same `sequence`."""
        opening = work.session == ""
        session = self.sessions.open(servable) if opening else self.sessions.acquire(work.session)
        taken = False
        try:
            if not opening and work.sequence == session.sequence:
                taken = True
                return session.answer  # a retry: the stored answer, the chunk not applied again
            if work.sequence != session.sequence + 1:
                ended = " (the stream has ended)" if session.done else ""
                raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"step {work.sequence} of stream "
                                   f"{session.id!r}: expected sequence {session.sequence + 1} (the next step) or "
                                   f"{session.sequence} (a retry of the last){ended}")
            if opening and work.words:
                before = session.held_bytes
                session.keep_words()
                self.sessions.reserve(session, session.held_bytes - before)
            elif work.words and not session.keeps_words:
                raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"stream {session.id!r} was opened without "
                                   f"`{WORDS}`: send `{WORDS}` = 1 with a session's opening step (sequence 0) to get "
                                   "its words on its final step; this step was not taken")
            final = bool(work.final[0])
            waveforms, lengths, extras = session.inputs(work.waveforms[:, :work.lengths[0]], final)
            result = self._run(session.servable, Work(STREAM_STEP, waveforms, lengths, 0, extras[STATE],
                                                      extras[FINAL]), direct, deadline)
            _still_wanted(context, deadline)
            self.sessions.reserve(session, session.added_bytes(result.outputs), final)
            session.absorb(result.outputs, int(lengths[0]), final, result.run_seconds)
            timed = None
            if final and work.words:
                text, timed = session.final_words()
            else:
                text = session.final_text() if final else session.partial
            outputs = {k: v for k, v in result.outputs.items() if k != STATE}
            if timed is not None:
                outputs.update(word_outputs([timed]))
            outputs[SESSION_TRANSCRIPTS] = np.array([text.encode("utf-8")], dtype=object)
            outputs[SESSION_ID] = np.array([session.id.encode()], dtype=object)
            session.sequence, session.answer, taken = work.sequence, (result, outputs), True
            return result, outputs
        finally:
            self.sessions.release(session, discard=opening and not taken)

    def _run(self, servable: Servable, work: Work, direct: bool, deadline: float | None = None) -> BatchResult:
        key = servable if work.signature != STREAM_STEP else servable.stream_runner
        extras = {STATE: work.state, FINAL: work.final} if work.signature == STREAM_STEP else {}
        _still_wanted(None, deadline)
        try:
            if self.batcher is None or direct:
                start = time.monotonic()
                outputs = key.run(work.waveforms, work.lengths, **extras)
                return BatchResult(outputs, len(work.lengths), 0.0, time.monotonic() - start)
            future = self.batcher.submit(key, work.waveforms, work.lengths, extras, deadline)
            try:
                return future.result(None if deadline is None else max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                future.cancel()  # still queued: it never runs; running: its outputs are dropped
                raise Expired("the deadline passed before the forward pass was done") from None
        except Expired as e:
            raise RequestError(grpc.StatusCode.DEADLINE_EXCEEDED, str(e)) from None
        except QueueFull as e:
            raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e)) from None
        except tf.errors.InvalidArgumentError as e:
            raise invalid(tf_error_message(e)) from None
        except tf.errors.OpError as e:
            logger.exception("the model failed")
            raise RequestError(grpc.StatusCode.INTERNAL, tf_error_message(e)) from None

    def close(self, timeout: float | None = None) -> None:
        if self.batcher is not None:
            self.batcher.close(timeout)


def _deadline(context) -> float | None:
    """The request's deadline on the time.monotonic() clock; None without one (or without a context)."""
    if context is None:
        return None
    remaining = context.time_remaining()
    return None if remaining is None or remaining > 1e8 else time.monotonic() + remaining


def _still_wanted(context, deadline: float | None) -> None:
    """Raises RequestError (CANCELLED, DEADLINE_EXCEEDED) when nobody waits for the answer any more."""
    if context is not None and not context.is_active():
        raise RequestError(grpc.StatusCode.CANCELLED, "the client cancelled the request; nothing was taken")
    if deadline is not None and time.monotonic() >= deadline:
        raise RequestError(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline passed; nothing was taken")


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """TF Serving's PredictionService: Predict and GetModelMetadata (Classify, Regress and MultiInference
    answer UNIMPLEMENTED: they take tf.Examples, not audio)."""

    def __init__(self, manager: ModelManager, predictor: Predictor):
        self.manager = manager
        self.predictor = predictor

    def Predict(self, request, context):
        try:
            servable = self.manager.resolve(request.model_spec)
            response, result = self.predictor.predict(request, servable, context=context)
        except RequestError as e:
            context.abort(e.code, e.message)
        except Exception as e:  # a bug, not the request: INTERNAL with the reason rather than gRPC's UNKNOWN
            logger.exception("Predict failed")
            context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
        context.set_trailing_metadata((("ds2-batch-size", str(result.batch_size)),
                                       ("ds2-queue-ms", f"{1000 * result.queue_seconds:.2f}"),
                                       ("ds2-run-ms", f"{1000 * result.run_seconds:.2f}")))
        return response

    def GetModelMetadata(self, request, context):
        try:
            servable = self.manager.resolve(request.model_spec)
            fields = list(request.metadata_field)
            if fields != ["signature_def"]:
                raise invalid(f"metadata_field must be ['signature_def'] (the only metadata TF Serving gives), "
                              f"got {fields}")
        except RequestError as e:
            context.abort(e.code, e.message)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        for key, value in servable.signature_defs.items():
            signatures.signature_def[key].CopyFrom(value)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        packed = any_pb2.Any()
        packed.Pack(signatures)
        response.metadata["signature_def"].CopyFrom(packed)
        return response


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    """TF Serving's ModelService: GetModelStatus (HandleReloadConfigRequest answers UNIMPLEMENTED)."""

    def __init__(self, manager: ModelManager):
        self.manager = manager

    def GetModelStatus(self, request, context):
        try:
            spec = request.model_spec
            if spec.name != self.manager.name:
                raise invalid(f"unknown model {spec.name!r}; this server serves {self.manager.name!r}")
            statuses = self.manager.statuses(spec.version.value if spec.HasField("version") else None)
        except RequestError as e:
            context.abort(e.code, e.message)
        return get_model_status_pb2.GetModelStatusResponse(model_version_status=statuses)


@dataclass
class RunningServer:
    """A started ds2-serve: its port, its parts, and `stop`."""

    port: int
    server: grpc.Server
    manager: ModelManager
    predictor: Predictor

    def stop(self, grace: float | None = None) -> None:
        """Refuse new requests, let those in flight finish (up to `grace` seconds), then stop everything."""
        stopped = self.server.stop(grace)  # refuses new requests at once; returns without waiting
        if self.predictor.batcher is not None:
            self.predictor.batcher.flush()  # queued requests run now, not after batch_timeout_micros
        stopped.wait()
        self.predictor.close(timeout=grace)
        self.manager.stop()

    @property
    def batch_sizes(self) -> dict[int, int]:
        batcher = self.predictor.batcher
        return dict(batcher.batch_sizes) if batcher is not None else {}


def start(config: ServeConfig) -> RunningServer:
    """Load the newest version, warm it up and start serving on `config.host:config.port` (in the background).

    Raises:
        FileNotFoundError: no version under the model base path, or the first version can't be read.
        ValueError: the address can't be bound, or the version is not a ds2-export.
    """
    base = Path(config.model_base_path)
    credentials = server_credentials(config.ssl_config_file) if config.ssl_config_file else None
    if latest_version(base) is None:
        raise FileNotFoundError(f"`model_base_path` {base} holds no version (a numbered folder with saved_model.pb); "
                                f"write one with ds2-export --export_dir {base.parent} --model_name {base.name}")
    predictor = Predictor(config.batching, SessionStore(config.max_streams, config.stream_idle_seconds,
                                                        config.max_stream_seconds, config.max_stream_memory_bytes))

    def warm_up(servable: Servable) -> int:
        return servable.warm_up(lambda request, s: predictor.predict(request, s, direct=True))

    manager = ModelManager(config, warm_up)
    manager.load_latest()
    options = [("grpc.max_receive_message_length", config.max_message_bytes),
               ("grpc.max_send_message_length", config.max_message_bytes),
               ("grpc.so_reuseport", 0)]  # a port in use is an error, not shared
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=config.max_concurrent_requests,
                                                    thread_name_prefix="grpc"),
                         options=options, maximum_concurrent_rpcs=config.max_concurrent_requests)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionServicer(manager, predictor),
                                                                        server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(manager), server)
    address = f"[{config.host}]:{config.port}" if ":" in config.host else f"{config.host}:{config.port}"
    try:
        port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    except RuntimeError:  # gRPC >= 1.5x raises; older versions return 0
        port = 0
    if not port:
        predictor.close()
        raise ValueError(f"can't listen on {address}: the port is in use, or the address isn't one of this "
                         "machine's (--port 0 picks a free port)")
    server.start()
    manager.start_polling()
    if config.port_file:
        with atomic_write(config.port_file) as f:
            f.write(f"{port}\n")
    return RunningServer(port=port, server=server, manager=manager, predictor=predictor)


@contextlib.contextmanager
def stop_signals():
    """Within the block, SIGTERM and SIGINT only mark a stop; `wait()` (the yielded function) returns once one came.

    The handler just appends to a list: a handler that set a `threading.Event` would run in the main thread while it
    waits on that same Event and deadlock on the Event's lock, and SIGTERM would then never stop the server.
    """
    stops: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _: stops.append(signum)) for s in (signal.SIGTERM, signal.SIGINT)}

    def wait() -> None:
        while not stops:
            time.sleep(0.1)

    try:
        yield wait
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def serve(config: ServeConfig) -> None:
    """Serve until SIGTERM or SIGINT, then finish the requests in flight and return.

    Raises:
        FileNotFoundError, ValueError: as `start`.
    """
    with stop_signals() as wait_for_stop:
        running = start(config)
        servable = running.manager.servable
        batching = "off" if config.batching is None else (
            f"max_batch_size {config.batching.max_batch_size}, batch_timeout_micros "
            f"{config.batching.batch_timeout_micros}")
        tls = ", TLS" if config.ssl_config_file else ""
        print(f"ds2-serve: serving model {servable.name!r} version {servable.version} on "
              f"{config.host}:{running.port} (batching {batching}{tls}); pid {os.getpid()}", flush=True)
        running.manager.on_load = lambda s: print(f"ds2-serve: now serving version {s.version} ({s.path})",
                                                  flush=True)
        wait_for_stop()
        print(f"ds2-serve: stopping; finishing the requests in flight (up to {config.grace_seconds:g} s)", flush=True)
        running.stop(config.grace_seconds)
        sizes = running.batch_sizes
        if sizes:
            print("ds2-serve: batch sizes " + ", ".join(f"{k}: {v}" for k, v in sorted(sizes.items())), flush=True)


__all__ = ["DEFAULT_PORT", "MAX_MESSAGE_BYTES", "ModelManager", "ModelServicer", "PredictionServicer", "Predictor",
           "RunningServer", "ServeConfig", "latest_version", "serve", "server_credentials", "start"]
