"""One ds2-demo connection: its messages, and its utterances run through the model and sent back as transcripts.

Each WebSocket is one user; each press of the button (or uploaded file) is one utterance. Streaming, an utterance
is a `StreamSession` stepped as its audio comes, a partial transcript after each step; offline (push to talk), it
waits for `stop` and goes through `serving_default` whole. Both send the same final message.

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
or an odd number of bytes), `protocol` (audio before `start`, an unknown message), `busy` (too many connections:
`demo.py`), `too_long` (over `max_seconds`), `internal`. The page shows them, and also a denied microphone and a
server that went away.

Offline, `batch_size` counts the utterances in the forward pass (0 when none ran: an utterance shorter than
the export's `min_samples` gets an empty transcript), and `hello`'s `max_seconds` is no more than the export's
`max_audio_seconds` (what `serving_default` takes); over it, `too_long` drops the utterance and keeps the
connection, as in the streaming mode.

Audio arriving while a step runs waits and goes into the next step (at most `max_chunk_seconds` per step),
so a slow machine takes bigger steps instead of falling behind. Offline, the audio waits (at most
`max_seconds` of it) until `stop`.


A connection that sends nothing for `idle_seconds` is closed with `IDLE_CLOSE_CODE`, unless its final transcript is
still on the way. A text message over `MAX_TEXT_CHARS` characters, or nested deeper than `MAX_JSON_DEPTH`, gets the
`protocol` error unparsed; the connection stays open.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

import numpy as np

from deepspeech2.audio import from_pcm16
from deepspeech2_export import LOG_PROBS, OUTPUT_LENGTHS, TRANSCRIPTS
from deepspeech2_serving.checks import RequestError
from deepspeech2_serving.predictor import Predictor
from deepspeech2_serving.servable import Servable
from deepspeech2_serving.streaming import StreamSession

logger = logging.getLogger(__name__)

ENCODING = "pcm_s16le"  # what the page's AudioWorklet sends: 16-bit little-endian mono
IDLE_CLOSE_CODE = 4408  # closed for sending nothing: the application's range (RFC 6455 §7.4.2), 408 as HTTP's timeout
MAX_TEXT_CHARS = 4096  # a control message at most (the page's are under 200 characters)
MAX_JSON_DEPTH = 4  # a control message's nesting at most (the page's are flat objects); deeper is never parsed
STREAMING, OFFLINE = "streaming", "offline"  # the modes (`hello`'s "mode"): stream_step, or whole utterances


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


class Utterance:
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


def check_format(request: dict, sample_rate: int) -> str:
    """Why a `start` message's audio format is refused, in one line; "" when it is the one the model takes."""
    rate, encoding = request.get("sample_rate"), request.get("encoding", ENCODING)
    if rate != sample_rate or encoding != ENCODING:
        return (f"unsupported audio: {encoding} at {rate} Hz; this model takes {ENCODING} mono at "
                f"{sample_rate} Hz (the page resamples the microphone in its AudioWorklet)")
    return ""


@dataclass(frozen=True)
class Transcriber:
    """What a connection's utterances run on, and how: `serve` reads a WebSocket's messages until it closes."""

    servable: Servable
    predictor: Predictor  # its batcher merges the steps (or utterances) of all connections
    mode: str  # STREAMING or OFFLINE
    max_seconds: float  # the longest utterance
    max_chunk: int  # samples per streaming step at most
    idle_seconds: float | None  # close a connection that sent nothing this long; None: never
    decoder_name: str  # the final transcripts' decoder, as `hello` and `final` name it
    words: bool  # final messages carry the transcript's words (times, confidences)

    async def serve(self, ws) -> None:
        import websockets

        utterance: Utterance | None = None
        wake = asyncio.Event()
        pump = None
        idle = self.idle_seconds
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
                        await send(ws, type="error", code="protocol", message="audio before a start message; "
                                         "send {\"type\": \"start\", ...} first")
                        continue
                    if len(message) % 2:
                        await send(ws, type="error", code="unsupported_audio", message=f"an audio message of "
                                         f"{len(message)} bytes: {ENCODING} needs an even number")
                        continue
                    audio = from_pcm16(message)
                    if utterance.samples + len(audio) > self.max_seconds * self.servable.sample_rate:
                        await send(ws, type="error", code="too_long", message=f"the utterance is over the "
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
                    await send(ws, type="error", code="protocol", message=request)
                    continue
                kind = request["type"]
                if kind == "start":
                    problem = check_format(request, self.servable.sample_rate)
                    if problem:
                        await send(ws, type="error", code="unsupported_audio", message=problem)
                        continue
                    if utterance is not None and utterance.stop_time is None:
                        await send(ws, type="error", code="protocol", message="start while an utterance is "
                                         "running; send {\"type\": \"stop\"} first")
                        continue
                    if pump is not None:
                        await pump  # the previous utterance's final transcript goes out first
                    if self.mode == STREAMING:
                        session = StreamSession(self.servable)
                        if self.words:
                            session.keep_words()  # before its first step: the words' search runs beside the LM's
                        utterance = Utterance(session)
                        pump = asyncio.create_task(self._stream(ws, utterance, wake))
                    else:
                        utterance = Utterance(None)
                        pump = asyncio.create_task(self._transcribe(ws, utterance, wake))
                    await send(ws, type="started")
                elif kind == "stop":
                    if utterance is None or utterance.stop_time is not None:
                        await send(ws, type="error", code="protocol", message="stop without a start")
                        continue
                    utterance.stop_time = time.monotonic()
                    wake.set()
                else:
                    await send(ws, type="error", code="protocol", message=f"unknown message type {kind!r}")
        except websockets.ConnectionClosed:
            pass
        finally:
            if pump is not None:
                pump.cancel()

    async def _stream(self, ws, utterance: Utterance, wake: asyncio.Event) -> None:
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
                    await send(ws, type="partial", text=session.partial, audio_seconds=session.audio_seconds,
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
                await send(ws, type="final", text=text, greedy=greedy, audio_seconds=session.audio_seconds,
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
            await send(ws, type="error", code="internal", message=f"the server failed on this audio: {message}")

    async def _transcribe(self, ws, utterance: Utterance, wake: asyncio.Event) -> None:
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
            await send(ws, type="final", text=text, greedy=greedy, audio_seconds=seconds,
                             latency_ms=round(1000 * latency, 1), decode_ms=round(1000 * decode, 1),
                             compute_seconds=round(run_seconds, 4), rtf=round(run_seconds / max(seconds, 1e-9), 4),
                             decoder=self.decoder_name, batch_size=batch_size, words=[w.to_dict() for w in words])
        except Exception as e:  # a failed forward pass or search: say so, keep the connection
            import websockets

            if isinstance(e, websockets.ConnectionClosed):
                return
            logger.exception("transcribing an utterance failed")
            message = e.message if isinstance(e, RequestError) else str(e)
            await send(ws, type="error", code="internal", message=f"the server failed on this audio: {message}")


async def send(ws, **message) -> None:
    """`message` as JSON text; nothing when the client has gone."""
    import websockets

    try:
        await ws.send(json.dumps(message))
    except websockets.ConnectionClosed:
        pass


__all__ = ["ENCODING", "IDLE_CLOSE_CODE", "MAX_JSON_DEPTH", "MAX_TEXT_CHARS", "OFFLINE", "STREAMING", "Transcriber",
           "Utterance", "check_format", "control_message", "json_depth", "send", "words_refusal"]
