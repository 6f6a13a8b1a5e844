"""ds2-serve: TF Serving's gRPC API (PredictionService, ModelService) over a ds2-export model, with Batch Dispatch.

Any TF Serving client works against it unchanged: the services and messages are the real ones from
`tensorflow-serving-api`. A client discovers the signatures with `GetModelMetadata` and calls `Predict`:

    Predict            serving_default / transcribe_wav, batched with other requests (DS2 §7.1); the
                       request option `nbest` adds the beam decoder's n-best (see `checks.NBEST`), `words`
                       each word's times and confidence (`servable.WORD_OUTPUTS`), and `hotwords` biases those
                       searches (`checks.MAX_HOTWORDS`);
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

It serves the newest version under the model base path and picks up newer ones as they appear (`versions.py`).
The parts: `services.py` (the gRPC handlers), `predictor.py` (one request: checked by `checks.py`, batched by
`batching.py`, run by `servable.py`, sessions kept by `streaming.py`), `versions.py` (which version serves); here,
the configuration, the port and the process.

Limits (docs/serving.md, "Limits", gives each one's cost): it binds 127.0.0.1 unless told otherwise, and the port
has no authentication unless `ssl_config_file` (TF Serving's SSLConfig: TLS, and client certificates with
`client_verify`) or a proxy in front provides it (docs/serving.md, "TLS and authentication"); at most
`max_connections` connections, each closed after `connection_idle_seconds` without a request and
`connection_age_seconds` in all; messages over `max_message_bytes` are refused by gRPC (RESOURCE_EXHAUSTED), and so
is a request whose inputs, read, would take more (INVALID_ARGUMENT: a TensorProto's shape filled from one value
counts in full), or that carries more than a batch of utterances; at most `max_concurrent_requests` Predicts are
handled at once (GetModelStatus and GetModelMetadata keep answering) and the batch queue is bounded, and both answer
RESOURCE_EXHAUSTED at once when full. A request still queued when its deadline passes, or whose client has gone, is
dropped unrun; its beam searches stop at the next frame once nobody waits for them, or past `max_search_seconds` of
CPU (RESOURCE_EXHAUSTED); no search waits for another's. An internal error answers INTERNAL with a request id, its
text going to the log. A streaming client holds at most `max_streams_per_client` sessions. Bad requests get
INVALID_ARGUMENT with the reason (unknown model, version or signature, a malformed tensor, wrong dtype or rank,
NaN/Inf, empty or over-long audio, bytes that aren't a WAV, a wrong sample rate). Unknown model names and versions
are INVALID_ARGUMENT here, where TF Serving says NOT_FOUND. SIGTERM (or SIGINT) stops taking requests and finishes
the ones in flight (up to `grace_seconds`, then their searches stop) before the process exits. At start, a model
base path that every user may write (or that another user owns) is warned about: loading a version runs its graph.
Each response carries trailing metadata (`services.py`) that serving/loadtest.py reads."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from deepspeech2.decode import DecoderConfig
from deepspeech2.fileio import atomic_write
from deepspeech2_serving.batching import MAX_BATCH_SAMPLES, BatchingConfig
from deepspeech2_serving.checks import MAX_ROWS
from deepspeech2_serving.predictor import MAX_SEARCH_SECONDS, Predictor
from deepspeech2_serving.servable import Servable
from deepspeech2_serving.services import ModelServicer, PredictionServicer
from deepspeech2_serving.streaming import (IDLE_SECONDS, MAX_BYTES, MAX_SECONDS, MAX_STREAMS, MAX_STREAMS_PER_CLIENT,
                                           SessionStore)
from deepspeech2_serving.versions import ModelManager, base_path_warnings, latest_version

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8500  # TF Serving's gRPC port
MAX_MESSAGE_BYTES = 32 << 20  # 32 MiB: ~8 minutes of float32 audio at 16 kHz, far over the default duration limit
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
    max_stream_memory_bytes: int = MAX_BYTES  # the sessions' states and beam searches together; more:
    # RESOURCE_EXHAUSTED
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

    def load(folder: Path) -> tuple[Servable, int]:
        servable = Servable(folder, config.name, config.decoder, config.max_message_bytes, config.max_rows)
        return servable, servable.warm_up(lambda request, s: predictor.predict(request, s, direct=True))

    manager = ModelManager(base, config.name, load, config.poll_seconds)
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


__all__ = ["DEFAULT_PORT", "MAX_MESSAGE_BYTES", "RunningServer", "ServeConfig", "serve", "server_credentials", "start",
           "stop_signals"]
