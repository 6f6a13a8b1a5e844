"""ds2-demo: a live transcription web page, audio streamed from the browser over a WebSocket.

One asyncio server on one port (127.0.0.1 unless told otherwise) serves the page over HTTP (`demo_page.py`: the
files, the origins that may connect, the headers) and the audio at `/ws` (`demo_session.py`: the protocol, each
connection's utterances). Each WebSocket is one user; each press of the button (or uploaded file) is one
utterance. The export picks the mode, and `hello` names it:

- **streaming** (the export has `stream_step`: a unidirectional model): the utterance is streamed through
  `stream_step` as a `StreamSession`, partial transcripts coming back while it is spoken. Steps of all users
  are merged into shared forward passes by the `Batcher` (Batch Dispatch across streams, DS2 §7.1).
- **offline** (no `stream_step`: a bidirectional model, such as `make demo`'s): push to talk. The audio waits
  on the server until `stop`; then the whole utterance goes through `serving_default` (batched with other
  users' utterances) and `Servable.final_transcript`: the LM beam search over the utterance with the configured
  LM, alpha, beta and beam (the search the streaming mode runs as the audio comes), or greedy without an LM.
  No partials; the same final message.

With an LM (and an export that records its clock, as every ds2-export does), the final message also gives the
transcript's words, each with its start and end in seconds from the start of the utterance and its confidence in
[0, 1]: `decode.words.decode_words` over the utterance (README "Word times and confidence"), with the export's
clock and words.json. Streaming, the session keeps them as the audio comes (`StreamSession.keep_words`, then
`final_words`: the second, diverse search doubles the LM search's work per step); push to talk, the final decoding
is `Servable.final_words`. Greedy finals have no words (no search to time them); `hello` says whether words come.


The WebSocket's limits (docs/streaming.md, "Web demo limits"), the same in both modes; Origin and Headers are
`demo_page.py`'s:

- **Idle.** A connection that sends nothing for `idle_seconds` is closed with code 4408
  (`demo_session.IDLE_CLOSE_CODE`) and the reason "idle: nothing received for N s", unless its final transcript is
  still on the way. The page says so and reconnects on its next use.
- **Busy.** `max_streams_per_client` connections per client address and `max_streams` in all; one more gets the
  `busy` error and the close code 1013 (try again later). One client's tabs can't lock the others out.
- **Size.** A message over `MAX_MESSAGE_BYTES` closes the connection with code 1009 (message too big); the page
  and ds2-demo-client send 100 ms of audio per message. At most `MAX_QUEUE` received messages wait for the server
  to read them (then it stops reading from the socket), so a connection buffers at most `MAX_QUEUE` x
  `MAX_MESSAGE_BYTES`. A text message over `demo_session.MAX_TEXT_CHARS` characters, or nested deeper than
  `MAX_JSON_DEPTH`, gets the `protocol` error unparsed; the connection stays open.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from deepspeech2.decode import DecoderConfig
from deepspeech2.fileio import atomic_write
from deepspeech2_serving.batching import BatchingConfig
from deepspeech2_serving.demo_page import normalize_origin, process_request, process_response
from deepspeech2_serving.demo_session import ENCODING, OFFLINE, STREAMING, Transcriber, send, words_refusal
from deepspeech2_serving.predictor import Predictor
from deepspeech2_serving.servable import Servable
from deepspeech2_serving.server import stop_signals
from deepspeech2_serving.versions import latest_version

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8000
BUSY_CLOSE_CODE = 1013  # "try again later" (IANA's WebSocket close codes)
MAX_MESSAGE_BYTES = 256 << 10  # a message at most: 8 s of 16-bit 16 kHz audio; more closes with 1009 (too big)
MAX_QUEUE = 4  # messages a connection buffers before the server stops reading its socket (websockets' default: 16)


@dataclass(frozen=True)
class DemoConfig:
    """What ds2-demo serves, and where."""

    model_dir: str  # an export: ds2-export's model base path, or one version folder (ds2-demo exports a bundle first)
    host: str = "127.0.0.1"  # the address to bind
    port: int = DEFAULT_PORT  # 0: a free port (see `port_file`)
    port_file: str = ""  # write the bound port here once serving
    decoder: DecoderConfig | None = None  # the final transcript's beam decoder (with an LM); None: the export's
    batching: BatchingConfig = BatchingConfig(batch_timeout_micros=5_000)  # across users' steps
    max_streams: int = 32  # connections at once, all clients together
    max_streams_per_client: int = 4  # connections at once from one client address (a user's tabs)
    max_seconds: float = 60.0  # longest utterance (offline: no more than the export's max_audio_seconds either)
    max_chunk_seconds: float = 1.0  # most audio per step (more waits for the next one)
    allowed_origins: tuple[str, ...] = ()  # origins (scheme://host[:port]) besides the page's own that may connect
    idle_seconds: float = 300.0  # close a WebSocket that sent nothing this long (0: never)

    def __post_init__(self):
        if not 0 <= self.port < 65536:
            raise ValueError(f"`port` must be in [0, 65535], got {self.port!r}")
        if self.max_streams < 1 or self.max_streams_per_client < 1:
            raise ValueError(f"`max_streams` and `max_streams_per_client` must be >= 1, got {self.max_streams!r}, "
                             f"{self.max_streams_per_client!r}")
        if not self.max_seconds > 0 or not self.max_chunk_seconds > 0 or not self.idle_seconds >= 0:
            raise ValueError(f"`max_seconds`, `max_chunk_seconds` must be > 0 and `idle_seconds` >= 0, got "
                             f"{self.max_seconds!r}, {self.max_chunk_seconds!r}, {self.idle_seconds!r}")
        if isinstance(self.allowed_origins, str):
            raise ValueError(f"`allowed_origins` must be a sequence of origins, got a string: "
                             f"{self.allowed_origins!r}")
        origins = tuple(normalize_origin(o) for o in self.allowed_origins)
        for given, origin in zip(self.allowed_origins, origins):
            if origin is None:
                raise ValueError(f"`allowed_origins` holds origins as browsers send them, http(s)://host[:port] "
                                 f"(e.g. https://demo.example.org), got {given!r}")
        object.__setattr__(self, "allowed_origins", origins)  # compared normalized


def resolve_version(model_dir: str | os.PathLike) -> Path:
    """The SavedModel version folder to serve for `model_dir`: an export's version folder as it is, or a model base
    path's newest version. The demo loads SavedModels only, never the model code that exporting takes.

    Raises:
        FileNotFoundError: neither; a model bundle (model.keras) is named as one to export first.
    """
    path = Path(model_dir)
    if (path / "saved_model.pb").is_file():
        return path
    version = latest_version(path)
    if version is not None:
        return path / str(version)
    if (path / "model.keras").is_file():
        raise FileNotFoundError(f"`model_dir` {path} is a model bundle; export it first (ds2-export, or ds2-demo "
                                "--model_dir, which exports a bundle into a temporary folder)")
    raise FileNotFoundError(f"`model_dir` {path} is not an export (a version folder with saved_model.pb, or a folder "
                            "of versions from ds2-export)")


class DemoServer:
    """The WebSocket's connections, over one loaded version: at most `max_streams` (`max_streams_per_client` per
    client address), each greeted with `hello` and served by the `Transcriber`."""

    def __init__(self, config: DemoConfig, servable: Servable):
        self.config = config
        self.servable = servable
        self.predictor = Predictor(config.batching)
        self.connections = 0
        self.clients: Counter[str] = Counter()  # open connections per client address
        mode = STREAMING if servable.stream_runner is not None else OFFLINE
        # The longest utterance: streaming steps take chunks, so only the flag bounds it; offline, serving_default
        # takes no more than the export's limit either.
        max_seconds = config.max_seconds if mode == STREAMING else min(config.max_seconds, servable.seconds_limit)
        refusal = words_refusal(servable, mode)
        if refusal:
            logger.info("final transcripts come without words: %s", refusal)
        self.transcriber = Transcriber(
            servable, self.predictor, mode, max_seconds, int(config.max_chunk_seconds * servable.sample_rate),
            config.idle_seconds or None, "beam + LM" if servable.lm_decoder is not None else "greedy", not refusal)

    async def handle(self, ws) -> None:
        client = ws.remote_address[0]
        busy = self._busy(client)
        if busy:
            await send(ws, type="error", code="busy", message=busy)
            await ws.close(BUSY_CLOSE_CODE, "busy")
            return
        self.connections += 1
        self.clients[client] += 1
        t = self.transcriber
        try:
            await send(ws, type="hello", model=self.servable.name, version=self.servable.version,
                       sample_rate=self.servable.sample_rate, encoding=ENCODING, decoder=t.decoder_name,
                       max_seconds=t.max_seconds, mode=t.mode, words=t.words)
            await t.serve(ws)
        finally:
            self.connections -= 1
            self.clients[client] -= 1
            if not self.clients[client]:
                del self.clients[client]

    def _busy(self, client: str) -> str:
        mine, limit = self.clients[client], self.config.max_streams_per_client
        if mine >= limit:
            return (f"{mine} connections from {client} are open, the most this demo serves one client ({limit}); "
                    "close one (another tab?) and try again")
        if self.connections >= self.config.max_streams:
            return f"{self.connections} connections are open, the most this demo serves; try again later"
        return ""


@dataclass
class RunningDemo:
    """A started ds2-demo (in a background thread): its port and `stop`."""

    port: int
    url: str
    servable: Servable
    _loop: asyncio.AbstractEventLoop
    _stop: asyncio.Event
    _thread: threading.Thread
    _server: DemoServer

    @property
    def mode(self) -> str:
        """`STREAMING` or `OFFLINE` (push to talk), as the export allows."""
        return self._server.transcriber.mode

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        self._server.predictor.close(10)


def start(config: DemoConfig) -> RunningDemo:
    """Load the model, warm it up and serve the page and the WebSocket in a background thread.

    The mode follows the export: streaming when it has stream_step, offline (push to talk) when not.

    Raises:
        FileNotFoundError: `model_dir` holds no export.
        ValueError: the address can't be bound, or the export can't be served (see `Servable`).
    """
    import websockets.asyncio.server

    version_dir = resolve_version(config.model_dir)
    servable = Servable(version_dir, version_dir.parent.name, config.decoder)
    server = DemoServer(config, servable)
    servable.warm_up(lambda request, s: server.predictor.predict(request, s, direct=True))
    ready: dict = {}
    started = threading.Event()

    def main():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        stop = asyncio.Event()

        async def run():
            try:
                async with websockets.asyncio.server.serve(server.handle, config.host, config.port,
                                                           process_request=functools.partial(
                                                               process_request, allowed_origins=config.allowed_origins,
                                                               host=config.host),
                                                           process_response=process_response,
                                                           max_size=MAX_MESSAGE_BYTES, max_queue=MAX_QUEUE,
                                                           compression=None) as ws_server:
                    ready["port"] = ws_server.sockets[0].getsockname()[1]
                    ready["loop"], ready["stop"] = loop, stop
                    started.set()
                    await stop.wait()
            except OSError as e:
                ready["error"] = e
                started.set()

        loop.run_until_complete(run())
        loop.close()

    thread = threading.Thread(target=main, name="ds2-demo", daemon=True)
    thread.start()
    started.wait()
    if "error" in ready:
        server.predictor.close()
        raise ValueError(f"can't listen on {config.host}:{config.port}: {ready['error']} (--port 0 picks a free port)")
    port = ready["port"]
    if config.port_file:
        with atomic_write(config.port_file) as f:
            f.write(f"{port}\n")
    host = f"[{config.host}]" if ":" in config.host else config.host
    return RunningDemo(port, f"http://{host}:{port}/", servable, ready["loop"], ready["stop"], thread, server)


def serve(config: DemoConfig) -> None:
    """Serve until SIGTERM or SIGINT."""
    with stop_signals() as wait_for_stop:
        running = start(config)
        s = running.servable
        how = ("streaming: partial transcripts as you speak" if running.mode == STREAMING else
               "offline model, push to talk: the utterance is transcribed when you release the button")
        t = running._server.transcriber
        words = " with word times and confidences" if t.words else ""
        print(f"ds2-demo: model {s.name!r} version {s.version} ({s.path}), {how}; final transcripts: "
              f"{t.decoder_name}{words}, at most {t.max_seconds:g} s; open {running.url} (pid {os.getpid()})",
              flush=True)
        wait_for_stop()
        print("ds2-demo: stopping", flush=True)
        running.stop()


__all__ = ["BUSY_CLOSE_CODE", "DEFAULT_PORT", "MAX_MESSAGE_BYTES", "MAX_QUEUE", "DemoConfig", "DemoServer",
           "RunningDemo", "resolve_version", "serve", "start"]
