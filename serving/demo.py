"""ds2-demo: a live transcription web page, audio streamed from the browser over a WebSocket.

One asyncio server on one port (127.0.0.1 unless told otherwise) serves the page (`web/`: index.html, app.js,
the AudioWorklet pcm-worklet.js) over HTTP and the audio at `/ws`. Each WebSocket is one user; each press
of the button (or uploaded file) is one utterance. The export picks the mode, and `hello` names it:

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

The protocol (JSON text messages, audio as binary messages), the same in both modes:

    server -> client  {"type": "hello", "model", "version", "sample_rate": 16000, "encoding": "pcm_s16le",
                       "decoder": "greedy" | "beam + LM", "max_seconds", "mode": "streaming" | "offline",
                       "words": true | false}
    client -> server  {"type": "start", "sample_rate": 16000, "encoding": "pcm_s16le", "source": "mic" | "file"}
    client -> server  binary: little-endian int16 mono PCM at 16 kHz, any number of samples per message
    server -> client  {"type": "partial", "text", "audio_seconds", "batch_size"}   after each step (the LM's
                       best beam so far, or greedy without an LM)
    client -> server  {"type": "stop"}                                        end of the utterance
    server -> client  {"type": "final", "text", "greedy", "audio_seconds", "latency_ms", "decode_ms",
                       "compute_seconds", "rtf", "decoder", "batch_size",
                       "words": [{"word", "start", "end", "confidence"}, ...]}   ([] when hello's "words" is false)
    server -> client  {"type": "error", "code", "message"}                    codes below

`latency_ms` is the server's time from `stop` to the final transcript (the browser shows its own, which adds
the network), `decode_ms` the final decoding's share of it (with an LM: the end-of-sentence score, and the
words' times and confidences when they come; the beam search has advanced with every step, so only the last
step's frames were left); `greedy` the best path; `words` are `Word.to_dict()`'s, in the transcript's order
(seconds to the millisecond, the confidence to 4 decimals); `batch_size` is how many streams the step's forward
pass carried (Batch Dispatch); `rtf` is the compute the utterance's steps rode in (their forward passes, shared
with other streams) over its audio seconds. Error codes: `unsupported_audio` (another sample rate or encoding,
or an odd number of bytes), `protocol` (audio before `start`, an unknown message), `busy` (see below),
`too_long` (over `max_seconds`), `internal`. The page shows them, and also a denied microphone and a server that
went away.

Offline, `batch_size` counts the utterances in the forward pass (0 when none ran: an utterance shorter than
the export's `min_samples` gets an empty transcript), and `hello`'s `max_seconds` is no more than the export's
`max_audio_seconds` (what `serving_default` takes); over it, `too_long` drops the utterance and keeps the
connection, as in the streaming mode.

Audio arriving while a step runs waits and goes into the next step (at most `max_chunk_seconds` per step),
so a slow machine takes bigger steps instead of falling behind. Offline, the audio waits (at most
`max_seconds` of it) until `stop`.

The WebSocket's limits (docs/streaming.md, "Web demo limits"), the same in both modes:

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
- **Size.** A message over `MAX_MESSAGE_BYTES` closes the connection with code 1009 (message too big); the page
  and ds2-demo-client send 100 ms of audio per message. At most `MAX_QUEUE` received messages wait for the server
  to read them (then it stops reading from the socket), so a connection buffers at most `MAX_QUEUE` x
  `MAX_MESSAGE_BYTES`. A text message over `MAX_TEXT_CHARS` characters, or nested deeper than `MAX_JSON_DEPTH`,
  gets the `protocol` error unparsed; the connection stays open.
- **Headers.** Every HTTP answer carries `Content-Security-Policy` (the page's own scripts, styles and WebSocket
  only, and no framing: `frame-ancestors 'none'`), `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY` and
  `Referrer-Policy: no-referrer`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import mimetypes
import os
import re
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2.audio import from_pcm16
from deepspeech2.decode import DecoderConfig
from deepspeech2.fileio import atomic_write
from deepspeech2_export import LOG_PROBS, OUTPUT_LENGTHS, TRANSCRIPTS
from deepspeech2_serving.batching import BatchingConfig
from deepspeech2_serving.servable import RequestError, Servable
from deepspeech2_serving.server import Predictor, latest_version, stop_signals
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
MAX_MESSAGE_BYTES = 256 << 10  # a message at most: 8 s of 16-bit 16 kHz audio; more closes with 1009 (too big)
MAX_QUEUE = 4  # messages a connection buffers before the server stops reading its socket (websockets' default: 16)
MAX_TEXT_CHARS = 4096  # a control message at most (the page's are under 200 characters)
MAX_JSON_DEPTH = 4  # a control message's nesting at most (the page's are flat objects); deeper is never parsed
# What every HTTP answer carries. The page loads its own script, worklet and style sheet, plays a file the user
# chose (a blob: URL) and opens its WebSocket (connect-src, with the Host it was asked under); nothing else, and no
# other page may frame it.
SECURITY_HEADERS = (("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
                    ("Referrer-Policy", "no-referrer"))
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "media-src 'self' blob:; connect-src 'self' {sockets}; base-uri 'none'; form-action 'none'; "
                           "frame-ancestors 'none'")
HOST_PORT = re.compile(r"[A-Za-z0-9.-]+(:[0-9]+)?|\[[0-9A-Fa-f:.]+\](:[0-9]+)?")  # a Host header fit to quote
STREAMING, OFFLINE = "streaming", "offline"  # the modes (`hello`'s "mode"): stream_step, or whole utterances


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


def json_depth(text: str) -> int:
    """How deeply `text`'s JSON arrays and objects nest (brackets inside strings don't count), read without parsing:
    a parser recurses once per level, so a deep one is refused before it is parsed."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def control_message(text: str) -> dict | str:
    """A client's text message as the dict it holds (with a "type"), or why it isn't one, in one line."""
    if len(text) > MAX_TEXT_CHARS:
        return f"a text message of {len(text)} characters, over the {MAX_TEXT_CHARS} a control message may have"
    if json_depth(text) > MAX_JSON_DEPTH:
        return f"a JSON message nested deeper than {MAX_JSON_DEPTH} levels; control messages are flat objects"
    try:
        request = json.loads(text)
    except ValueError:
        request = None
    if not isinstance(request, dict) or "type" not in request:
        return f"not a JSON message with a \"type\": {text[:80]!r}"
    return request


def words_refusal(servable: Servable, mode: str) -> str:
    """Why the final transcripts of `servable` in `mode` come without words, in one line; "" when they come with them.

    The library decides, by the call each utterance makes: `StreamSession.keep_words` (streaming) or
    `Servable.final_words` on an utterance of no steps (offline: its check alone, no search runs). Both need the
    server's LM beam search and the export's clock.
    """
    try:
        if mode == STREAMING:
            StreamSession(servable).keep_words()
        else:
            servable.final_words(np.zeros((0, servable.vocab.size), np.float32), 0)
    except RequestError as e:
        return e.message
    return ""


class _Utterance:
    """One utterance of one connection: its session (None offline), the audio waiting for a step (offline: all
    of it, until stop), the stop time."""

    def __init__(self, session: StreamSession | None):
        self.session = session
        self.pending: list[np.ndarray] = []
        self.pending_samples = 0
        self.stop_time: float | None = None  # time.monotonic() of the client's stop

    @property
    def samples(self) -> int:
        """The utterance's audio so far: stepped through the model, and waiting."""
        return (self.session.audio_samples if self.session is not None else 0) + self.pending_samples


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
        self.mode = STREAMING if servable.stream_runner is not None else OFFLINE
        # The longest utterance: streaming steps take chunks, so only the flag bounds it; offline, serving_default
        # takes no more than the export's limit either.
        self.max_seconds = config.max_seconds if self.mode == STREAMING else min(config.max_seconds,
                                                                                 servable.seconds_limit)
        refusal = words_refusal(servable, self.mode)
        self.words = not refusal  # final messages carry the transcript's words (times, confidences)
        if refusal:
            logger.info("final transcripts come without words: %s", refusal)

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
            return connection.respond(404, f"not found: {path[:200]}\n")
        body = (WEB_DIR / name).read_bytes()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind.endswith("javascript"):
            kind += "; charset=utf-8"
        headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))), ("Cache-Control", "no-store")])
        return Response(200, "OK", headers, body)

    @staticmethod
    def process_response(connection, request, response):
        """Every HTTP answer (the page's files, refusals, the handshake's) with `SECURITY_HEADERS` and the
        Content-Security-Policy (its WebSocket under the `Host` asked for, when that is a plain host[:port])."""
        host = request.headers.get("Host", "")
        sockets = f"ws://{host} wss://{host}" if HOST_PORT.fullmatch(host) else ""
        for header, value in SECURITY_HEADERS + (("Content-Security-Policy",
                                                  CONTENT_SECURITY_POLICY.format(sockets=sockets)),):
            response.headers[header] = value
        return response

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
                             max_seconds=self.max_seconds, mode=self.mode, words=self.words)
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
                    audio = from_pcm16(message)
                    if utterance.samples + len(audio) > self.max_seconds * self.servable.sample_rate:
                        await self._send(ws, type="error", code="too_long", message=f"the utterance is over the "
                                         f"{self.max_seconds:g} s this demo takes; it was dropped")
                        pump.cancel()
                        utterance = pump = None
                        continue
                    utterance.pending.append(audio)
                    utterance.pending_samples += len(audio)
                    wake.set()
                    continue
                request = control_message(message)
                if isinstance(request, str):
                    await self._send(ws, type="error", code="protocol", message=request)
                    continue
                kind = request["type"]
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
                    if self.mode == STREAMING:
                        session = StreamSession(self.servable)
                        if self.words:
                            session.keep_words()  # before its first step: the words' search runs beside the LM's
                        utterance = _Utterance(session)
                        pump = asyncio.create_task(self._pump(ws, utterance, wake))
                    else:
                        utterance = _Utterance(None)
                        pump = asyncio.create_task(self._transcribe(ws, utterance, wake))
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
                # The LM beam search advances over the new frames here, off the event loop.
                await loop.run_in_executor(None, session.absorb, result.outputs, len(chunk), final,
                                           result.run_seconds)
                if not final:
                    await self._send(ws, type="partial", text=session.partial, audio_seconds=session.audio_seconds,
                                     batch_size=result.batch_size)
                    continue
                greedy = session.greedy
                decode_start = time.monotonic()
                # The end-of-sentence LM score (and the words' times and confidences), off the event loop.
                if session.keeps_words:
                    text, words = await loop.run_in_executor(None, session.final_words)
                else:
                    text, words = await loop.run_in_executor(None, session.final_text), []
                now = time.monotonic()
                latency, decode = now - utterance.stop_time, now - decode_start
                await self._send(ws, type="final", text=text, greedy=greedy, audio_seconds=session.audio_seconds,
                                 latency_ms=round(1000 * latency, 1), decode_ms=round(1000 * decode, 1),
                                 compute_seconds=round(session.compute_seconds, 4),
                                 rtf=round(session.compute_seconds / max(session.audio_seconds, 1e-9), 4),
                                 decoder=self.decoder_name, batch_size=result.batch_size,
                                 words=[w.to_dict() for w in words])
                return
        except Exception as e:  # a failed step: say so, keep the connection
            import websockets

            if isinstance(e, websockets.ConnectionClosed):
                return
            logger.exception("a streaming step failed")
            message = e.message if isinstance(e, RequestError) else str(e)
            await self._send(ws, type="error", code="internal", message=f"the server failed on this audio: {message}")

    async def _transcribe(self, ws, utterance: _Utterance, wake: asyncio.Event) -> None:
        """Offline: wait for the utterance's stop, then transcribe it whole (serving_default through the batcher,
        then the server's final decoding) and send the final message."""
        loop = asyncio.get_running_loop()
        try:
            while utterance.stop_time is None:
                wake.clear()
                await wake.wait()
            audio = np.concatenate(utterance.pending) if utterance.pending else np.zeros(0, np.float32)
            utterance.pending, utterance.pending_samples = [], 0
            seconds = len(audio) / self.servable.sample_rate
            text = greedy = ""
            words = []
            decode = run_seconds = 0.0
            batch_size = 0
            if len(audio) >= self.servable.min_samples:  # shorter: no output step, nothing to recognize
                future = self.predictor.batcher.submit(self.servable, audio[None], np.array([len(audio)], np.int32))
                result = await asyncio.wrap_future(future)
                steps = int(result.outputs[OUTPUT_LENGTHS][0])
                log_probs = result.outputs[LOG_PROBS][0, :steps]
                greedy = result.outputs[TRANSCRIPTS][0].decode("utf-8")
                run_seconds, batch_size = result.run_seconds, result.batch_size
                decode_start = time.monotonic()
                if self.words:
                    text, words = await loop.run_in_executor(None, self.servable.final_words, log_probs, len(audio))
                else:
                    text = await loop.run_in_executor(None, self.servable.final_transcript, log_probs, greedy)
                decode = time.monotonic() - decode_start
            latency = time.monotonic() - utterance.stop_time
            await self._send(ws, type="final", text=text, greedy=greedy, audio_seconds=seconds,
                             latency_ms=round(1000 * latency, 1), decode_ms=round(1000 * decode, 1),
                             compute_seconds=round(run_seconds, 4), rtf=round(run_seconds / max(seconds, 1e-9), 4),
                             decoder=self.decoder_name, batch_size=batch_size, words=[w.to_dict() for w in words])
        except Exception as e:  # a failed forward pass or search: say so, keep the connection
            import websockets

            if isinstance(e, websockets.ConnectionClosed):
                return
            logger.exception("transcribing an utterance failed")
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

    @property
    def mode(self) -> str:
        """`STREAMING` or `OFFLINE` (push to talk), as the export allows."""
        return self._server.mode

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
                                                           process_request=server.process_request,
                                                           process_response=server.process_response,
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
        words = " with word times and confidences" if running._server.words else ""
        print(f"ds2-demo: model {s.name!r} version {s.version} ({s.path}), {how}; final transcripts: "
              f"{running._server.decoder_name}{words}, at most {running._server.max_seconds:g} s; open {running.url} "
              f"(pid {os.getpid()})", flush=True)
        wait_for_stop()
        print("ds2-demo: stopping", flush=True)
        running.stop()



__all__ = ["BUSY_CLOSE_CODE", "DEFAULT_PORT", "DemoConfig", "DemoServer", "IDLE_CLOSE_CODE", "MAX_MESSAGE_BYTES",
           "MAX_QUEUE", "OFFLINE", "RunningDemo", "STREAMING", "WEB_DIR", "control_message", "json_depth",
           "normalize_origin", "resolve_version", "serve", "start", "words_refusal"]
