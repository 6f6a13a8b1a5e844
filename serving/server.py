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

Limits (docs/serving.md, "Limits", gives each one's cost): it binds 127.0.0.1 unless told otherwise, and the port has no
authentication unless `ssl_config_file` (TF Serving's SSLConfig: TLS, and client certificates with `client_verify`)
or a proxy in front provides it (docs/serving.md, "TLS and authentication"); at most `max_connections` connections, each closed after
`connection_idle_seconds` without a request and `connection_age_seconds` in all; messages over
`max_message_bytes` are refused by gRPC (RESOURCE_EXHAUSTED), and so is a request whose inputs, read, would take
more (INVALID_ARGUMENT: a TensorProto's shape filled from one value counts in full), or that carries more than a
batch of utterances; at most `max_concurrent_requests` Predicts are handled at once (GetModelStatus and
GetModelMetadata keep answering) and the batch queue is bounded, and both answer RESOURCE_EXHAUSTED at once when
full. A request still queued when its deadline passes, or whose client has gone, is dropped unrun; its beam
searches stop at the next frame once nobody waits for them, or past `max_search_seconds` of CPU (RESOURCE_EXHAUSTED);
no search waits for another's. An internal error answers INTERNAL with a request id, its text going to the log.
A streaming client holds at most `max_streams_per_client` sessions. Bad requests get INVALID_ARGUMENT with the reason
(unknown model, version or signature, a malformed tensor, wrong dtype or rank, NaN/Inf, empty or over-long
audio, bytes that aren't a WAV, a wrong sample rate). Unknown model names and versions are INVALID_ARGUMENT
here, where TF Serving says NOT_FOUND. SIGTERM (or SIGINT) stops taking requests and finishes the ones in
flight (up to `grace_seconds`, then their searches stop) before the process exits. At start, a model base path
that every user may write (or that another user owns) is warned about: loading a version runs its graph.

Each response carries gRPC trailing metadata that standard clients ignore: `ds2-batch-size` (rows in the
forward pass it rode in), `ds2-queue-ms` and `ds2-run-ms`; serving/loadtest.py reads them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import secrets
import signal
import stat
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
from deepspeech2_serving.batching import (MAX_BATCH_SAMPLES, Batcher, BatchingConfig, BatchResult, Expired, QueueFull,
                                          join, pieces)
from deepspeech2_serving.servable import (MAX_ROWS, NBEST_SCORES, NBEST_TRANSCRIPTS, OUTPUT_TIME_KEYS, SESSION_ID,
                                          SESSION_TRANSCRIPTS, WORD_OUTPUTS, RequestError, Servable, Work, invalid,
                                          tf_error_message, word_outputs)
from deepspeech2_serving.streaming import (IDLE_SECONDS, MAX_BYTES, MAX_SECONDS, MAX_STREAMS, MAX_STREAMS_PER_CLIENT,
                                           SessionStore)

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8500  # TF Serving's gRPC port
MAX_MESSAGE_BYTES = 32 << 20  # 32 MiB: ~8 minutes of float32 audio at 16 kHz, far over the default duration limit
RETRY_SECONDS = 60.0  # a version that failed to load is tried again this often even if its folder didn't change
# CPU seconds one request's beam searches (its n-best and words) may take: the untrained worst case (every token a
# candidate at every frame) at beam 200 is about 2 s per second of audio on one core, so 16 rows of 60 s would hold
# a thread for half an hour; a trained model's searches take a fraction of that (docs/serving.md, "What one request, one client and one connection may cost").
MAX_SEARCH_SECONDS = 30.0
VERSION_NAME = re.compile(r"[0-9]+")  # ASCII digits only: "²".isdigit() is true, int("²") fails
# RPCs beyond --max_concurrent_requests that gRPC still takes, so that GetModelStatus and GetModelMetadata answer
# while every Predict slot is busy (Predicts past the limit are refused by the servicer, at once).
RESERVED_RPCS = 8
HANDSHAKE_SECONDS = 10  # a connection that hasn't finished its HTTP/2 (and TLS) handshake by then is closed


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
    max_concurrent_requests: int = 64  # Predict requests handled at once; more: RESOURCE_EXHAUSTED
    max_connections: int = 256  # client connections (TCP) at once; more are closed at once (UNAVAILABLE)
    connection_idle_seconds: float = 300.0  # a connection with no request in flight for this long is closed
    connection_age_seconds: float = 3600.0  # a connection is closed after this long (its requests get
    # `grace_seconds` to finish; clients reconnect), so that no client holds one for good
    poll_seconds: float = 1.0  # how often the base path is checked for a new version; 0: never
    decoder: DecoderConfig | None = None  # beam decoder for n-best requests; None: each version's own
    max_search_seconds: float = MAX_SEARCH_SECONDS  # CPU seconds one request's beam searches may take; more:
    # RESOURCE_EXHAUSTED
    max_batch_samples: int = MAX_BATCH_SAMPLES  # padded samples (rows x the longest) per forward pass; a request
    # over it runs as several passes, one after the other
    grace_seconds: float = 30.0  # on SIGTERM, how long requests in flight may take to finish
    max_streams: int = MAX_STREAMS  # streaming sessions open at once; more: RESOURCE_EXHAUSTED
    max_streams_per_client: int = MAX_STREAMS_PER_CLIENT  # of those, from one client address; more: RESOURCE_EXHAUSTED
    stream_idle_seconds: float = IDLE_SECONDS  # a session unused this long is forgotten
    max_stream_seconds: float = MAX_SECONDS  # a session's audio at most; a chunk past it: OUT_OF_RANGE
    max_stream_memory_bytes: int = MAX_BYTES  # the sessions' states and beam searches together; more: RESOURCE_EXHAUSTED
    ssl_config_file: str = ""  # TF Serving's SSLConfig (text): serve TLS (and check client certificates); "": plain

    def __post_init__(self):
        if not 0 <= self.port < 65536:
            raise ValueError(f"`port` must be in [0, 65535], got {self.port!r}")
        for name in ("stream_idle_seconds", "max_stream_seconds", "connection_idle_seconds", "connection_age_seconds",
                     "max_search_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"`{name}` must be > 0, got {getattr(self, name)!r}")
        for name in ("max_message_bytes", "max_concurrent_requests", "max_connections", "max_streams",
                     "max_streams_per_client", "max_stream_memory_bytes", "max_batch_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)!r}")
        if self.poll_seconds < 0 or self.grace_seconds < 0:
            raise ValueError(f"`poll_seconds` and `grace_seconds` must be >= 0, got {self.poll_seconds!r}, "
                             f"{self.grace_seconds!r}")

    @property
    def name(self) -> str:
        return self.model_name or Path(self.model_base_path).resolve().name

    @property
    def max_rows(self) -> int:
        """Utterances one request may carry: a batch's worth (TF Serving's rule without large-batch splitting)."""
        return self.batching.max_batch_size if self.batching is not None else MAX_ROWS


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
            servable = Servable(folder, self.name, self.config.decoder, self.config.max_message_bytes,
                                self.config.max_rows)
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

    def __init__(self, batching: BatchingConfig | None, sessions: SessionStore | None = None,
                 max_search_seconds: float = MAX_SEARCH_SECONDS, max_batch_samples: int = MAX_BATCH_SAMPLES):
        self.max_search_seconds = max_search_seconds
        self.max_batch_samples = max_batch_samples
        self.batcher = None
        if batching is not None:
            # The key is what runs the batch: a Servable (whole utterances) or its StreamRunner (stream steps).
            self.batcher = Batcher(batching, lambda key, w, n, **extras: key.run(w, n, **extras),
                                   length_key=OUTPUT_LENGTHS, time_keys=OUTPUT_TIME_KEYS, max_samples=max_batch_samples)
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
            result = self._run(servable, work, direct, deadline, context)
            _still_wanted(context, deadline)  # the searches below are for a client that still waits
            outputs = dict(result.outputs)
        if work.nbest or (work.words and work.session is None):
            outputs.update(self._search(servable, work, outputs, context, deadline))
        response = predict_pb2.PredictResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        response.model_spec.signature_name = work.signature
        for key in wanted or outputs:
            response.outputs[key].CopyFrom(tf.make_tensor_proto(outputs[key]))
        return response, result

    def _search(self, servable: Servable, work: Work, outputs: dict, context, deadline: float | None) -> dict:
        """The n-best and words `work` asks for, over the forward pass's `outputs`. The searches end at their next
        frame once nobody waits for them (a client gone, its deadline passed, the server stopping) or once they have
        taken `max_search_seconds` of this thread's CPU: a request's search holds a thread only while its answer is
        wanted, and for a bounded time."""
        start = time.thread_time()

        def stop():
            _still_wanted(context, deadline)
            if time.thread_time() - start > self.max_search_seconds:
                raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"the request's beam searches took over "
                                   f"{self.max_search_seconds:g} s of CPU, the most one request may take "
                                   "(--max_search_seconds); send fewer or shorter utterances, or fewer hotwords")

        found = {}
        try:
            if work.nbest:
                found[NBEST_TRANSCRIPTS], found[NBEST_SCORES] = servable.nbest(
                    outputs[LOG_PROBS], outputs[OUTPUT_LENGTHS], work.nbest, work.hotwords, stop)
            if work.words and work.session is None:
                found.update(servable.words(outputs[LOG_PROBS], outputs[OUTPUT_LENGTHS], work.lengths, work.hotwords,
                                            stop))
        except RequestError as e:
            logger.info("stopped the beam search of a request after %.2f s of CPU (%s): %s", time.thread_time() - start,
                        e.code.name, e.message)
            raise
        return found

    def _session_step(self, servable: Servable, work: Work, direct: bool, deadline: float | None, context
                      ) -> tuple[BatchResult, dict]:
        """One step of the session `work.session` ("": a new one): its state in, the new state kept, its transcript
        out (and on the final step, with `words`, its words). The step is taken (state, log-probs, `sequence`) only
        if it finished in time for a client still waiting; the answer is kept for a retry of the same `sequence`."""
        opening = work.session == ""
        session = self.sessions.open(servable, _client(context)) if opening else self.sessions.acquire(work.session)
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
                                                      extras[FINAL]), direct, deadline, context)
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

    def _run(self, servable: Servable, work: Work, direct: bool, deadline: float | None = None, context=None
             ) -> BatchResult:
        """The forward pass of `work`, in pieces of at most `max_batch_samples` padded samples run one after the
        other (a pass's memory grows with its padded size, and other requests' batches run between the pieces),
        its outputs joined back in the request's row order."""
        groups = pieces(work.lengths, self.max_batch_samples)
        if len(groups) == 1:
            return self._run_piece(servable, work, direct, deadline, context)
        results = []
        for rows in groups:
            longest = int(work.lengths[rows].max())
            piece = dataclasses.replace(work, waveforms=work.waveforms[rows, :longest], lengths=work.lengths[rows],
                                        state=None if work.state is None else work.state[rows],
                                        final=None if work.final is None else work.final[rows])
            results.append(self._run_piece(servable, piece, direct, deadline, context))
        return BatchResult(join([r.outputs for r in results], groups, OUTPUT_TIME_KEYS),
                           max(r.batch_size for r in results), sum(r.queue_seconds for r in results),
                           sum(r.run_seconds for r in results))

    def _run_piece(self, servable: Servable, work: Work, direct: bool, deadline: float | None, context
                   ) -> BatchResult:
        key = servable if work.signature != STREAM_STEP else servable.stream_runner
        extras = {STATE: work.state, FINAL: work.final} if work.signature == STREAM_STEP else {}
        _still_wanted(context, deadline)
        try:
            if self.batcher is None or direct:
                start = time.monotonic()
                outputs = key.run(work.waveforms, work.lengths, **extras)
                return BatchResult(outputs, len(work.lengths), 0.0, time.monotonic() - start)
            # A live stream waits for each of its steps: they are batched before whole utterances.
            future = self.batcher.submit(key, work.waveforms, work.lengths, extras, deadline,
                                         priority=int(work.signature == STREAM_STEP))
            if context is not None and not context.add_callback(future.cancel):  # the client gone: dropped unrun
                future.cancel()
            try:
                return future.result(None if deadline is None else max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                future.cancel()  # still queued: it never runs; running: its outputs are dropped
                raise Expired("the deadline passed before the forward pass was done") from None
            except futures.CancelledError:
                raise RequestError(grpc.StatusCode.CANCELLED, "the client cancelled the request; it was not run") \
                    from None
        except Expired as e:
            raise RequestError(grpc.StatusCode.DEADLINE_EXCEEDED, str(e)) from None
        except QueueFull as e:
            raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e)) from None
        except tf.errors.InvalidArgumentError as e:
            raise invalid(tf_error_message(e)) from None
        except tf.errors.OpError:
            raise internal("the model failed") from None

    def close(self, timeout: float | None = None) -> None:
        if self.batcher is not None:
            self.batcher.close(timeout)


def internal(what: str) -> RequestError:
    """INTERNAL for the exception being handled: its text and traceback go to the log under a new request id, the
    client gets the id alone (an exception's text can hold paths, versions, tensor contents: nothing a client
    should see)."""
    request_id = secrets.token_hex(8)
    logger.exception("%s (request id %s)", what, request_id)
    return RequestError(grpc.StatusCode.INTERNAL, f"internal error (request id {request_id}); the server's log has "
                        "the details")


def _client(context) -> str:
    """The client's address (the peer's, without the port): "127.0.0.1", "::1", "unix:/path"; "" without a context."""
    if context is None:
        return ""
    peer = context.peer()
    kind, _, address = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return address.rsplit(":", 1)[0].strip("[]")
    return peer


def _deadline(context) -> float | None:
    """The request's deadline on the time.monotonic() clock; None without one (or without a context)."""
    if context is None:
        return None
    remaining = context.time_remaining()
    return None if remaining is None or remaining > 1e8 else time.monotonic() + remaining


def _still_wanted(context, deadline: float | None) -> None:
    """Raises RequestError (DEADLINE_EXCEEDED, CANCELLED) when nobody waits for the answer any more."""
    if deadline is not None and time.monotonic() >= deadline:
        raise RequestError(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline passed; nothing was taken")
    if context is not None and not context.is_active():
        raise RequestError(grpc.StatusCode.CANCELLED, "the client cancelled the request; nothing was taken")


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """TF Serving's PredictionService: Predict and GetModelMetadata (Classify, Regress and MultiInference
    answer UNIMPLEMENTED: they take tf.Examples, not audio)."""

    def __init__(self, manager: ModelManager, predictor: Predictor, max_requests: int = 64):
        self.manager = manager
        self.predictor = predictor
        self.max_requests = max_requests
        self.in_flight = 0  # Predict requests being handled
        self._lock = threading.Lock()

    def Predict(self, request, context):
        with self._lock:
            busy = self.in_flight >= self.max_requests
            self.in_flight += not busy
        if busy:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{self.max_requests} requests are being handled, the "
                          "most this server takes at once (--max_concurrent_requests); retry later")
        try:
            servable = self.manager.resolve(request.model_spec)
            response, result = self.predictor.predict(request, servable, context=context)
        except RequestError as e:
            context.abort(e.code, e.message)
        except Exception:  # a bug, not the request: INTERNAL rather than gRPC's UNKNOWN
            e = internal("Predict failed")
            context.abort(e.code, e.message)
        finally:
            with self._lock:
                self.in_flight -= 1
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
    servicer: PredictionServicer

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
    for warning in base_path_warnings(base):
        logger.warning(warning)
    predictor = Predictor(config.batching, SessionStore(config.max_streams, config.stream_idle_seconds,
                                                        config.max_stream_seconds, config.max_stream_memory_bytes,
                                                        config.max_streams_per_client), config.max_search_seconds,
                          config.max_batch_samples)

    def warm_up(servable: Servable) -> int:
        return servable.warm_up(lambda request, s: predictor.predict(request, s, direct=True))

    manager = ModelManager(config, warm_up)
    manager.load_latest()
    options = [("grpc.max_receive_message_length", config.max_message_bytes),
               ("grpc.max_send_message_length", config.max_message_bytes),
               ("grpc.so_reuseport", 0),  # a port in use is an error, not shared
               # Connections are file descriptors and buffers: a bounded number, none kept idle or for good.
               ("grpc.max_allowed_incoming_connections", config.max_connections),
               ("grpc.server_handshake_timeout_ms", HANDSHAKE_SECONDS * 1000),
               ("grpc.max_connection_idle_ms", round(config.connection_idle_seconds * 1000)),
               ("grpc.max_connection_age_ms", round(config.connection_age_seconds * 1000)),
               ("grpc.max_connection_age_grace_ms", round(config.grace_seconds * 1000))]
    rpcs = config.max_concurrent_requests + RESERVED_RPCS
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=rpcs, thread_name_prefix="grpc"), options=options,
                         maximum_concurrent_rpcs=rpcs)
    servicer = PredictionServicer(manager, predictor, config.max_concurrent_requests)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(servicer, server)
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
    return RunningServer(port=port, server=server, manager=manager, predictor=predictor, servicer=servicer)


def base_path_warnings(base: Path) -> list[str]:
    """Why the model base path is unsafe to serve from, one line each: loading a version runs its graph (and a
    SavedModel can hold any op, file and network ones included) as the server's user, so whoever may write there
    may run code as that user. The base path and its version folders must be writable by no one but the server's
    user (or root): not by every user (a sticky bit doesn't help: anyone may still add a version), and not owned by
    another user."""
    problems = []
    me = os.geteuid()
    folders = [base] + sorted(p for p in base.iterdir() if VERSION_NAME.fullmatch(p.name) and p.is_dir())
    for folder in folders:
        st = folder.stat()
        if st.st_mode & stat.S_IWOTH:
            problems.append(f"`{folder}` is writable by every user of this machine: any of them can put a version "
                            f"there, whose graph ds2-serve runs as uid {me}; chmod o-w it (docs/serving.md, "
                            "\"Who may write the model base path\")")
        elif st.st_uid not in (me, 0):
            problems.append(f"`{folder}` belongs to uid {st.st_uid}, not to ds2-serve's uid {me} (or root): its owner "
                            f"can put a version there, whose graph ds2-serve runs as uid {me} (docs/serving.md, "
                            "\"Who may write the model base path\")")
    return problems


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
           "RunningServer", "ServeConfig", "base_path_warnings", "internal", "latest_version", "serve",
           "server_credentials", "start"]
