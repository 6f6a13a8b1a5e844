"""ds2-demo-client: stream an audio file to ds2-demo's WebSocket at real-time pace and print the partials.

The terminal version of the page (and of the seed's push-to-talk client): the same protocol
(`deepspeech2_serving.demo`), the file read and resampled to the server's rate here, sent in chunks of
`chunk_ms` every `chunk_ms / speed` milliseconds, then `stop`; the final transcript comes back with the
server's latency and real-time factor, and the client measures its own latency from `stop` to the final.
Both of the server's modes take it: a streaming model answers partials on the way, an offline one (push to
talk) only the final transcript. A server with an LM also answers the transcript's words, each with its start
and end in seconds and its confidence (`format_words` prints them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deepspeech2.audio import load_audio, to_pcm16


@dataclass(frozen=True)
class DemoClientConfig:
    """Where ds2-demo is, and what to send."""

    server: str = "127.0.0.1:8000"  # host:port of ds2-demo, or a ws:// URL
    file: str = ""  # the audio file (any format soundfile reads; resampled to the server's rate)
    chunk_ms: float = 100.0  # audio per message
    speed: float = 1.0  # 1: real time; 2: twice as fast; 0: as fast as possible
    timeout_seconds: float = 60.0  # waiting for the server

    def __post_init__(self):
        if not self.file:
            raise ValueError("give an audio `file` to stream")
        if not self.chunk_ms > 0 or self.speed < 0 or not self.timeout_seconds > 0:
            raise ValueError(f"`chunk_ms` and `timeout_seconds` must be > 0 and `speed` >= 0, got {self.chunk_ms!r}, "
                             f"{self.timeout_seconds!r}, {self.speed!r}")

    @property
    def url(self) -> str:
        return self.server if self.server.startswith(("ws://", "wss://")) else f"ws://{self.server}/ws"


@dataclass(frozen=True)
class DemoResult:
    """One streamed file's outcome."""

    text: str  # the final transcript
    partials: list[str] = field(default_factory=list)  # each partial as it arrived
    audio_seconds: float = 0.0
    latency_ms: float = 0.0  # this client: stop sent -> final received
    server_latency_ms: float = 0.0  # the server: stop received -> final sent
    rtf: float = 0.0  # the server's compute over the audio seconds
    decoder: str = ""
    decode_ms: float = 0.0  # the server's final decoding (its share of server_latency_ms)
    batch_sizes: list[int] = field(default_factory=list)  # streams in each step's forward pass (the server's)
    mode: str = ""  # the server's: "streaming" (partials as the audio goes) or "offline" (push to talk)
    # The final transcript's words, `{"word", "start", "end", "confidence"}` each (seconds from the start of the
    # file; confidence in [0, 1]); empty when the server gives none (`words_served` False: greedy finals, no LM).
    words: list[dict] = field(default_factory=list)
    words_served: bool = False  # the server's hello: its final transcripts carry words


class DemoError(Exception):
    """The server answered an error message: `code` and `message` as it sent them."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def stream_file(config: DemoClientConfig, on_partial: Callable[[str], None] | None = None) -> DemoResult:
    """Stream `config.file` to ds2-demo and wait for its final transcript.

    Args:
        config: the server and the file.
        on_partial: called with each new partial transcript as it arrives.

    Raises:
        FileNotFoundError, ValueError: the file can't be read.
        ConnectionError: the server can't be reached or went away.
        DemoError: the server refused the audio.
    """
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    if not Path(config.file).is_file():
        raise FileNotFoundError(f"`file` {config.file} does not exist")
    try:
        ws = connect(config.url, open_timeout=config.timeout_seconds, compression=None, max_size=4 << 20)
    except (OSError, TimeoutError) as e:
        raise ConnectionError(f"can't reach ds2-demo at {config.url}: {e}") from None
    partials: list[str] = []
    batch_sizes: list[int] = []
    try:
        with ws:
            hello = _receive(ws, config.timeout_seconds)
            if hello.get("type") == "error":
                raise DemoError(hello.get("code", ""), hello.get("message", ""))
            rate = int(hello["sample_rate"])
            audio = load_audio(config.file, sample_rate=rate)
            pcm = to_pcm16(audio).astype("<i2")  # a 16-bit file reaches the server sample for sample
            ws.send(json.dumps({"type": "start", "sample_rate": rate, "encoding": "pcm_s16le", "source": "file"}))
            step = max(1, int(round(rate * config.chunk_ms / 1000)))
            start = time.monotonic()
            for k, i in enumerate(range(0, len(pcm), step)):
                if config.speed:  # real-time pace: chunk k goes out when its audio would have been spoken
                    time.sleep(max(0.0, start + k * step / rate / config.speed - time.monotonic()))
                ws.send(pcm[i:i + step].tobytes())
                _drain(ws, partials, on_partial, batch_sizes)
            if config.speed:  # the utterance ends when its last sample would have been spoken
                time.sleep(max(0.0, start + len(pcm) / rate / config.speed - time.monotonic()))
            stopped = time.monotonic()  # before the send: the latency includes the message's way to the server
            ws.send(json.dumps({"type": "stop"}))
            while True:
                message = _receive(ws, config.timeout_seconds)
                kind = message.get("type")
                if kind == "partial":
                    _partial(message, partials, on_partial, batch_sizes)
                elif kind == "error":
                    raise DemoError(message.get("code", ""), message.get("message", ""))
                elif kind == "final":
                    latency = 1000 * (time.monotonic() - stopped)
                    batch_sizes.append(int(message.get("batch_size", 0)))
                    return DemoResult(message["text"], partials, float(message["audio_seconds"]), latency,
                                      float(message["latency_ms"]), float(message["rtf"]), message.get("decoder", ""),
                                      float(message.get("decode_ms", 0.0)), batch_sizes, hello.get("mode", ""),
                                      list(message.get("words", [])), bool(hello.get("words", False)))
    except ConnectionClosed as e:  # the close frame says why (the demo's idle timeout: 4408 "idle: ...")
        close = e.rcvd
        why = "" if close is None else f" (close code {close.code}{': ' + close.reason if close.reason else ''})"
        raise ConnectionError(f"ds2-demo at {config.url} closed the connection{why}") from None


def format_words(result: DemoResult) -> str:
    """`result`'s words as tab-separated lines under a header: start and end (seconds), confidence, word (what
    `ds2-demo-client --words` prints); one line saying why there are none when the server gives none."""
    if not result.words_served:
        return "words: none (this ds2-demo's final transcripts come without them: they need an LM)"
    return "\n".join(["start\tend\tconfidence\tword"] + [
        f"{w['start']:.3f}\t{w['end']:.3f}\t{w['confidence']:.4f}\t{w['word']}" for w in result.words])


def _receive(ws, timeout: float) -> dict:
    try:
        return json.loads(ws.recv(timeout=timeout))
    except TimeoutError:
        raise ConnectionError(f"ds2-demo sent nothing for {timeout:g} s") from None


def _drain(ws, partials: list[str], on_partial, batch_sizes: list[int]) -> None:
    """Take the messages that have arrived, without waiting."""
    while True:
        try:
            message = json.loads(ws.recv(timeout=0))
        except TimeoutError:
            return
        if message.get("type") == "partial":
            _partial(message, partials, on_partial, batch_sizes)
        elif message.get("type") == "error":
            raise DemoError(message.get("code", ""), message.get("message", ""))


def _partial(message: dict, partials: list[str], on_partial, batch_sizes: list[int]) -> None:
    batch_sizes.append(int(message.get("batch_size", 0)))
    text = message["text"]
    if not partials or text != partials[-1]:
        partials.append(text)
        if on_partial is not None:
            on_partial(text)


__all__ = ["DemoClientConfig", "DemoError", "DemoResult", "format_words", "stream_file"]
