"""ds2-demo: a live transcription web page, audio streamed from the browser over a WebSocket.

One asyncio server on one port (127.0.0.1 unless told otherwise) serves the page (`web/`: index.html, app.js,
the AudioWorklet pcm-worklet.js) over HTTP and the audio at `/ws`. Each WebSocket is one user; each press
of the button (or uploaded file) is one utterance, streamed through the export's `stream_step` as a
`StreamSession`. Steps of all users are merged into shared forward passes by the `Batcher` (Batch Dispatch
across streams, DS2 §7.1).

The protocol (JSON text messages, audio as binary messages):

    server -> client  {"type": "hello", "model", "version", "sample_rate": 16000, "encoding": "pcm_s16le",
                       "decoder": "greedy" | "beam + LM", "max_seconds"}
    client -> server  {"type": "start", "sample_rate": 16000, "encoding": "pcm_s16le", "source": "mic" | "file"}
    client -> server  binary: little-endian int16 mono PCM at 16 kHz, any number of samples per message
    server -> client  {"type": "partial", "text", "audio_seconds", "batch_size"}   after each step (greedy)
    client -> server  {"type": "stop"}                                        end of the utterance
    server -> client  {"type": "final", "text", "greedy", "audio_seconds", "latency_ms", "decode_ms",
                       "compute_seconds", "rtf", "decoder", "batch_size"}
    server -> client  {"type": "error", "code", "message"}                    codes below

`latency_ms` is the server's time from `stop` to the final transcript (the browser shows its own, which adds
the network), `decode_ms` the final decoding's share of it (the LM beam search over the utterance);
`batch_size` is how many streams the step's forward pass carried (Batch Dispatch); `rtf` is the compute the
utterance's steps rode in (their forward passes, shared with other streams) over its audio seconds. Error
codes: `unsupported_audio` (another sample rate or encoding, or an odd number of bytes), `protocol` (audio
before `start`, an unknown message), `busy` (see below), `too_long` (over `max_seconds`), `internal`. The page
shows them, and also a denied microphone and a server that went away.

Audio arriving while a step runs waits and goes into the next step (at most `max_chunk_seconds` per step),
so a slow machine takes bigger steps instead of falling behind.

The WebSocket's limits (docs/operations.md, "Web demo limits"):

- **Origin.** A browser names the page that opens a WebSocket in its `Origin` header, and any page the user visits
  may try `ws://127.0.0.1:8000/ws`. Only the page's own origin is let through: `Origin` must be `http(s)://` plus
  the `Host` the browser asked for, and that host an IP address, `localhost` or the `host` the demo binds (a domain
  name could be DNS-rebound to this machine: list it in `allowed_origins`). Other origins get HTTP 403 with a
  one-line reason. A handshake without `Origin` is let through: browsers always send one, so no web page can
  make it; it comes from a program (ds2-demo-client, a script) that could open the socket anyway.
- **Idle.** A connection that sends nothing for `idle_seconds` is closed with code 4408 (`IDLE_CLOSE_CODE`) and
  the reason "idle: nothing received for N s", unless its final transcript is still on the way. The page says
  so and reconnects on its next use.
- **Busy.** `max_streams_per_client` connections per client address and `max_streams` in all; one more gets the
  `busy` error and the close code 1013 (try again later). One client's tabs can't lock the others out.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import mimetypes
import os
import shutil
import signal
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2.decode import DecoderConfig
from deepspeech2.fileio import atomic_write
from deepspeech2_serving.batching import BatchingConfig
from deepspeech2_serving.servable import RequestError, Servable
from deepspeech2_serving.server import Predictor, latest_version
from deepspeech2_serving.streaming import StreamSession

logger = logging.getLogger(__name__)

WEB_DIR = Path(__file__).parent / "web"  # the page, its script and the AudioWorklet
PAGES = {"/": "index.html", "/index.html": "index.html", "/app.js": "app.js", "/pcm-worklet.js": "pcm-worklet.js",
         "/style.css": "style.css"}
WEBSOCKET_PATH = "/ws"
ENCODING = "pcm_s16le"  # what the page's AudioWorklet sends: 16-bit little-endian mono
DEFAULT_PORT = 8000
DEFAULT_PORTS = {"http": 80, "https": 443}  # an origin's port when it names none
IDLE_CLOSE_CODE = 4408  # closed for sending nothing: the application's range (RFC 6455 §7.4.2), 408 as HTTP's timeout
BUSY_CLOSE_CODE = 1013  # "try again later" (IANA's WebSocket close codes)


@dataclass(frozen=True)
class DemoConfig:
    """What ds2-demo serves, and where."""

    model_dir: str  # an export (ds2-export's model base path, or one version folder), or a model bundle
    host: str = "127.0.0.1"  # the address to bind
    port: int = DEFAULT_PORT  # 0: a free port (see `port_file`)
    port_file: str = ""  # write the bound port here once serving
    decoder: DecoderConfig | None = None  # the final transcript's beam decoder (with an LM); None: the export's
    batching: BatchingConfig = BatchingConfig(batch_timeout_micros=5_000)  # across users' steps
    max_streams: int = 32  # connections at once, all clients together
    max_streams_per_client: int = 4  # connections at once from one client address (a user's tabs)
    max_seconds: float = 60.0  # longest utterance
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


def normalize_origin(origin: str) -> str | None:
    """`origin` as `scheme://host:port` (lowercase, the port explicit), or None if it is not an http(s) origin."""
    try:
        url = urllib.parse.urlsplit(origin.strip())
        port = url.port
    except (ValueError, AttributeError):
        return None
    if (url.scheme not in DEFAULT_PORTS or not url.hostname or url.path not in ("", "/") or url.query or url.fragment
            or url.username is not None):
        return None
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    return f"{url.scheme}://{host}:{port or DEFAULT_PORTS[url.scheme]}"


def resolve_version(model_dir: str | os.PathLike, scratch: Path) -> Path:
    """The SavedModel version folder to serve for `model_dir`.

    An export's version folder is used as it is; a model base path gives its newest version; a model bundle
    (model.keras) is exported into `scratch` first (the server itself only ever loads the SavedModel).

    Raises:
        FileNotFoundError: none of these.
    """
    path = Path(model_dir)
    if (path / "saved_model.pb").is_file():
        return path
    version = latest_version(path)
    if version is not None:
        return path / str(version)
    if (path / "model.keras").is_file():
        from deepspeech2_export.saved_model import ExportConfig, export_model

        logger.info("exporting the bundle %s to %s", path, scratch)
        return export_model(ExportConfig(str(path), str(scratch)))
    raise FileNotFoundError(f"`model_dir` {path} is neither an export (a version folder with saved_model.pb, or a "
                            "folder of versions from ds2-export) nor a model bundle (model.keras)")


class _Utterance:
    """One utterance of one connection: its session, the audio waiting for a step, the stop time."""

    def __init__(self, session: StreamSession):
        self.session = session
        self.pending: list[np.ndarray] = []
        self.pending_samples = 0
        self.stop_time: float | None = None  # time.monotonic() of the client's stop


class DemoServer:
    """The page and the WebSocket, over one loaded version."""

    def __init__(self, config: DemoConfig, servable: Servable):
        self.config = config
        self.servable = servable
        self.predictor = Predictor(config.batching)
        self.connections = 0
        self.clients: Counter[str] = Counter()  # open connections per client address
        self.decoder_name = "beam + LM" if servable.lm_decoder is not None else "greedy"
        self.max_chunk = int(config.max_chunk_seconds * servable.sample_rate)

    # ------------------------------------------------------------------------------------------- HTTP

    def process_request(self, connection, request):
        """Serve the page's files; let `/ws` through to the WebSocket handshake."""
        from websockets.datastructures import Headers
        from websockets.http11 import Response

        path = request.path.split("?", 1)[0]
        if path == WEBSOCKET_PATH:
            refusal = self.origin_refusal(request.headers)
            if refusal:
                logger.warning("refused a WebSocket from %s: %s", connection.remote_address[0], refusal)
                return connection.respond(403, f"{refusal}\n")
            return None
        if path == "/healthz":
            return connection.respond(200, "ok\n")
        name = PAGES.get(path)
        if name is None:
            return connection.respond(404, f"not found: {path}\n")
        body = (WEB_DIR / name).read_bytes()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind.endswith("javascript"):
            kind += "; charset=utf-8"
        headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))), ("Cache-Control", "no-store")])
        return Response(200, "OK", headers, body)

    def origin_refusal(self, headers) -> str:
        """Why a WebSocket handshake with these HTTP headers is refused, in one line; "" if it is not.

        Let through: no `Origin` (not a browser), the page's own origin (`http(s)://` + the `Host` asked for, a
        host that can't be DNS-rebound: an IP address, `localhost` or the bound `host`), and `allowed_origins`.
        """
        origins = headers.get_all("Origin")
        if not origins:
            return ""
        if len(origins) > 1:
            return f"{len(origins)} Origin headers; a browser sends one"
        origin = normalize_origin(origins[0])
        if origin is not None and (origin in self.config.allowed_origins or self._own_origin(origin, headers)):
            return ""
        return (f"origin {origins[0][:200]!r} may not open this WebSocket: only the demo page's own origin and "
                "--allowed_origins may")

    def _own_origin(self, origin: str, headers) -> bool:
        hosts = headers.get_all("Host")
        if len(hosts) != 1:
            return False
        url = urllib.parse.urlsplit(origin)
        try:
            host = urllib.parse.urlsplit(f"//{hosts[0]}")
            port = host.port or DEFAULT_PORTS[url.scheme]  # behind a TLS proxy the page is https, the Host the same
        except ValueError:
            return False
        if (host.hostname, port) != (url.hostname, url.port):
            return False
        try:
            ipaddress.ip_address(host.hostname)
            return True  # an address: the browser reached this server (or a proxy to it) there
        except ValueError:  # a name: one an attacker's DNS may point here, unless it is one of ours
            return host.hostname in ("localhost", self.config.host.lower())

    # ------------------------------------------------------------------------------------------- WebSocket

    async def handle(self, ws) -> None:
        client = ws.remote_address[0]
        busy = self._busy(client)
        if busy:
            await self._send(ws, type="error", code="busy", message=busy)
            await ws.close(BUSY_CLOSE_CODE, "busy")
            return
        self.connections += 1
        self.clients[client] += 1
        try:
            await self._send(ws, type="hello", model=self.servable.name, version=self.servable.version,
                             sample_rate=self.servable.sample_rate, encoding=ENCODING, decoder=self.decoder_name,
                             max_seconds=self.config.max_seconds)
            await self._serve(ws)
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

    async def _serve(self, ws) -> None:
        import websockets

        utterance: _Utterance | None = None
        wake = asyncio.Event()
        pump = None
        idle = self.config.idle_seconds or None
        try:
            while True:
                try:
                    message = await asyncio.wait_for(ws.recv(), idle)  # cancelling recv loses nothing
                except TimeoutError:
                    if pump is not None and utterance.stop_time is not None and not pump.done():
                        continue  # its final transcript is still on the way: the client waits for us
                    logger.info("closing %s's WebSocket: idle for %g s", ws.remote_address[0], idle)
                    await ws.close(IDLE_CLOSE_CODE, f"idle: nothing received for {idle:g} s")
                    return
                if isinstance(message, bytes):
                    if utterance is None or utterance.stop_time is not None:
                        await self._send(ws, type="error", code="protocol", message="audio before a start message; "
                                         "send {\"type\": \"start\", ...} first")
                        continue
                    if len(message) % 2:
                        await self._send(ws, type="error", code="unsupported_audio", message=f"an audio message of "
                                         f"{len(message)} bytes: {ENCODING} needs an even number")
                        continue
                    audio = np.frombuffer(message, "<i2").astype(np.float32) / 32768.0
                    total = utterance.session.audio_samples + utterance.pending_samples + len(audio)
                    if total > self.config.max_seconds * self.servable.sample_rate:
                        await self._send(ws, type="error", code="too_long", message=f"the utterance is over the "
                                         f"{self.config.max_seconds:g} s this demo takes; it was dropped")
                        pump.cancel()
                        utterance = pump = None
                        continue
                    utterance.pending.append(audio)
                    utterance.pending_samples += len(audio)
                    wake.set()
                    continue
                try:
                    request = json.loads(message)
                    kind = request["type"]
                except (ValueError, KeyError, TypeError):
                    await self._send(ws, type="error", code="protocol", message=f"not a JSON message with a "
                                     f"\"type\": {message[:80]!r}")
                    continue
                if kind == "start":
                    problem = self._check_format(request)
                    if problem:
                        await self._send(ws, type="error", code="unsupported_audio", message=problem)
                        continue
                    if utterance is not None and utterance.stop_time is None:
                        await self._send(ws, type="error", code="protocol", message="start while an utterance is "
                                         "running; send {\"type\": \"stop\"} first")
                        continue
                    if pump is not None:
                        await pump  # the previous utterance's final transcript goes out first
                    utterance = _Utterance(StreamSession(self.servable))
                    pump = asyncio.create_task(self._pump(ws, utterance, wake))
                    await self._send(ws, type="started")
                elif kind == "stop":
                    if utterance is None or utterance.stop_time is not None:
                        await self._send(ws, type="error", code="protocol", message="stop without a start")
                        continue
                    utterance.stop_time = time.monotonic()
                    wake.set()
                else:
                    await self._send(ws, type="error", code="protocol", message=f"unknown message type {kind!r}")
        except websockets.ConnectionClosed:
            pass
        finally:
            if pump is not None:
                pump.cancel()

    def _check_format(self, request: dict) -> str:
        rate, encoding = request.get("sample_rate"), request.get("encoding", ENCODING)
        if rate != self.servable.sample_rate or encoding != ENCODING:
            return (f"unsupported audio: {encoding} at {rate} Hz; this model takes {ENCODING} mono at "
                    f"{self.servable.sample_rate} Hz (the page resamples the microphone in its AudioWorklet)")
        return ""

    async def _pump(self, ws, utterance: _Utterance, wake: asyncio.Event) -> None:
        """Run the utterance's steps as its audio arrives: all that waits (up to max_chunk) per step."""
        session = utterance.session
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not utterance.pending and utterance.stop_time is None:
                    wake.clear()
                    await wake.wait()
                    continue
                audio = np.concatenate(utterance.pending) if utterance.pending else np.zeros(0, np.float32)
                chunk, rest = audio[:self.max_chunk], audio[self.max_chunk:]
                utterance.pending = [rest] if len(rest) else []
                utterance.pending_samples = len(rest)
                final = utterance.stop_time is not None and not len(rest)
                waveforms, lengths, extras = session.inputs(chunk, final)
                future = self.predictor.batcher.submit(session.servable.stream_runner, waveforms, lengths, extras)
                result = await asyncio.wrap_future(future)
                session.absorb(result.outputs, len(chunk), final, result.run_seconds)
                if not final:
                    await self._send(ws, type="partial", text=session.partial, audio_seconds=session.audio_seconds,
                                     batch_size=result.batch_size)
                    continue
                greedy = session.partial
                decode_start = time.monotonic()
                text = await loop.run_in_executor(None, session.final_text)  # the LM search, off the event loop
                now = time.monotonic()
                latency, decode = now - utterance.stop_time, now - decode_start
                await self._send(ws, type="final", text=text, greedy=greedy, audio_seconds=session.audio_seconds,
                                 latency_ms=round(1000 * latency, 1), decode_ms=round(1000 * decode, 1),
                                 compute_seconds=round(session.compute_seconds, 4),
                                 rtf=round(session.compute_seconds / max(session.audio_seconds, 1e-9), 4),
                                 decoder=self.decoder_name, batch_size=result.batch_size)
                return
        except Exception as e:  # a failed step: say so, keep the connection
            import websockets

            if isinstance(e, websockets.ConnectionClosed):
                return
            logger.exception("a streaming step failed")
            message = e.message if isinstance(e, RequestError) else str(e)
            await self._send(ws, type="error", code="internal", message=f"the server failed on this audio: {message}")

    @staticmethod
    async def _send(ws, **message) -> None:
        import websockets

        try:
            await ws.send(json.dumps(message))
        except websockets.ConnectionClosed:
            pass


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
    _scratch: Path

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        self._server.predictor.close(10)
        shutil.rmtree(self._scratch, ignore_errors=True)


def start(config: DemoConfig) -> RunningDemo:
    """Load the model, warm it up and serve the page and the WebSocket in a background thread.

    Raises:
        FileNotFoundError: `model_dir` holds no export or bundle.
        ValueError: the model can't stream, or the address can't be bound.
    """
    import websockets.asyncio.server

    scratch = Path(tempfile.mkdtemp(prefix="ds2-demo-"))
    try:
        version_dir = resolve_version(config.model_dir, scratch)
        servable = Servable(version_dir, version_dir.parent.name, config.decoder)
        if servable.stream_runner is None:
            raise ValueError(f"{version_dir} has no stream_step signature: the model can't stream (bidirectional?); "
                             "train and export a ds2-streaming model")
        server = DemoServer(config, servable)
        servable.warm_up(lambda request, s: server.predictor.predict(request, s, direct=True))
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    ready: dict = {}
    started = threading.Event()

    def main():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        stop = asyncio.Event()

        async def run():
            try:
                async with websockets.asyncio.server.serve(server.handle, config.host, config.port,
                                                           process_request=server.process_request,
                                                           max_size=4 << 20, compression=None) as ws_server:
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
        shutil.rmtree(scratch, ignore_errors=True)
        raise ValueError(f"can't listen on {config.host}:{config.port}: {ready['error']} (--port 0 picks a free port)")
    port = ready["port"]
    if config.port_file:
        with atomic_write(config.port_file) as f:
            f.write(f"{port}\n")
    host = f"[{config.host}]" if ":" in config.host else config.host
    return RunningDemo(port, f"http://{host}:{port}/", servable, ready["loop"], ready["stop"], thread, server, scratch)


def serve(config: DemoConfig) -> None:
    """Serve until SIGTERM or SIGINT."""
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        running = start(config)
        s = running.servable
        print(f"ds2-demo: model {s.name!r} version {s.version} ({s.path}), final transcripts: "
              f"{running._server.decoder_name}; open {running.url} (pid {os.getpid()})", flush=True)
        stop.wait()
        print("ds2-demo: stopping", flush=True)
        running.stop()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)



__all__ = ["BUSY_CLOSE_CODE", "DEFAULT_PORT", "DemoConfig", "DemoServer", "IDLE_CLOSE_CODE", "RunningDemo", "WEB_DIR",
           "normalize_origin", "resolve_version", "serve", "start"]
