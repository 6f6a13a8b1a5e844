"""Streaming sessions: a stream's state, partial transcript and log-probs kept by the server between its chunks.

The export's `stream_step` is stateless (the state travels in each request and response, which is what stock
TF Serving needs). ds2-serve (a stream_step request with `session_id` and `sequence` instead of `state`, see
`checks.SESSION_ID`) and ds2-demo (one session per WebSocket) keep the state on the server instead:

    StreamSession    one stream: its state, its greedy transcript (repeats merged across chunks) and, when the
                     server has an LM, its LM beam search advanced with each chunk (`decode.BeamStream`: the
                     partial transcript is the best beam, and at the end only the end-of-sentence score is
                     left to add), audio and compute seconds, at most `max_seconds` of audio (more: OUT_OF_RANGE);
                     with `keep_words`, also what the final words' times and confidences need (`final_words`)
    SessionStore     sessions by the id it issues (128 random bits), at most `max_streams` open, at most
                     `max_per_client` of them from one client address, and `max_bytes` of states and beam searches
                     together (more: RESOURCE_EXHAUSTED); forgotten after `idle_seconds` unused, or once they have
                     waited for their client's chunks `idle_seconds` longer than the chunks last
                     (`StreamSession.stale`); a session runs one step at a time (the
                     state of step n+1 is the output of step n); an ended session keeps its last answer (for a
                     retry) until forgotten

Steps of different sessions are merged into one forward pass by the `Batcher` (Batch Dispatch across streams,
DS2 §7.1): each session's step is one row, its state and `final` flag extra per-row inputs.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass

import grpc
import numpy as np

from deepspeech2.decode.greedy import GreedyStream
from deepspeech2_export import FINAL, LOG_PROBS, OUTPUT_LENGTHS, STATE
from deepspeech2_serving.checks import RequestError
from deepspeech2_serving.servable import Servable

MAX_STREAMS = 256  # sessions open at once
MAX_STREAMS_PER_CLIENT = 32  # sessions open at once from one client address
IDLE_SECONDS = 60.0  # a session unused this long is forgotten
MAX_SECONDS = 60.0  # a session's audio at most (ds2-demo's `max_seconds`)
MAX_BYTES = 1 << 30  # the sessions' states and beam searches together
SESSION_ID_BYTES = 16  # 128 random bits, written as 32 hex digits (checks.SESSION_ID_HEX)


@dataclass(frozen=True)
class StepResult:
    """What one step of a session gave."""

    log_probs: np.ndarray  # float32 (steps, vocab): the output steps that became final with this chunk
    text: str  # the transcript so far (the LM's best beam, or greedy without an LM); after the final step, the final
    final: bool  # this was the stream's last step (the session is over)
    batch_size: int  # streams in the forward pass it rode in
    run_seconds: float  # that forward pass
    queue_seconds: float  # waiting for it


class StreamSession:
    """One stream on the server: feed it chunks with `inputs` + `absorb` (or `step`)."""

    def __init__(self, servable: Servable, session_id: str = "", max_seconds: float | None = None, client: str = ""):
        """
        Args:
            servable: the version that runs the stream (its state fits no other).
            session_id: the id clients know it by (SessionStore issues one).
            max_seconds: the most audio the stream may carry (a chunk past it: OUT_OF_RANGE); None: no limit.
            client: the address of the client that opened it (SessionStore counts sessions per client).

        Raises:
            RequestError: FAILED_PRECONDITION when the model can't stream.
        """
        if servable.stream_runner is None:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION,
                               f"model {servable.name!r} version {servable.version} can't stream (it has no "
                               "stream_step signature: a bidirectional model?); export a ds2-streaming model")
        self.servable = servable  # the version the stream started on (its state fits no other)
        self.id = session_id
        self.client = client
        self.max_seconds = max_seconds
        self.state = np.zeros((1, servable.state_size), np.float32)
        self._greedy = GreedyStream(servable.vocab)  # best path, repeats merged across chunks
        decoder = servable.lm_decoder
        self._beam = None if decoder is None else decoder.search.stream()  # the LM beam search, as audio arrives
        self.audio_samples = 0
        self.compute_seconds = 0.0  # forward passes this stream rode in (shared with the other rows)
        self.steps = 0
        self.done = False
        self.busy = False
        self.used = time.monotonic()  # when its last step ended (or began, while it runs)
        self.waited = 0.0  # seconds it spent waiting for its client's next chunk, between steps
        self.sequence = -1  # the number of the last step taken (ds2-serve's `sequence`)
        self.answer = None  # what that step answered, for a retry of it
        self.charged = 0  # bytes its SessionStore counts for it

    @property
    def audio_seconds(self) -> float:
        return self.audio_samples / self.servable.sample_rate

    def stale(self, now: float, idle_seconds: float) -> bool:
        """Whether a session not running a step is to be forgotten at `now` (time.monotonic()): unused for
        `idle_seconds`, or having waited for its client's chunks longer than their audio lasts plus `idle_seconds`.
        A live stream brings its audio as it is spoken and never waits that long, however slow the server's steps;
        keep-alive chunks (10 ms every minute) would otherwise hold a session, and its memory, for days."""
        waiting = self.waited + now - self.used
        return now - self.used > idle_seconds or waiting > self.audio_seconds + idle_seconds

    @property
    def keeps_words(self) -> bool:
        """Whether `final_words` can give the words (`keep_words` was called)."""
        return self._beam is not None and self._beam.words

    def keep_words(self) -> None:
        """Keep, as the chunks come, what the final words' times and confidences need (`final_words`): the LM beam
        search's second, diverse search (it doubles the search's work per chunk), the kept frames and the log-probs.
        Call it before the first step, then charge the session `held_bytes` more (SessionStore.reserve).

        Raises:
            RequestError: FAILED_PRECONDITION when the server has no LM (a stream's transcript is then greedy, with no
                search to time its words) or the export records no clock, or a step was taken already.
        """
        if self.servable.lm_decoder is None:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, "a stream's `words` come from the server's LM beam "
                               "search, and this server has no LM (its streams' transcripts are greedy): start it with "
                               "--lm, or export the model with one")
        if self.servable.clock is None:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"`words` need the model's clock, which version "
                               f"{self.servable.version} doesn't record; export it again with ds2-export")
        if self.steps:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"stream {self.id!r} has taken {self.steps} "
                               "step(s): keep its words from its first step on")
        self._beam = self.servable.lm_decoder.search.stream(words=True)

    @property
    def greedy(self) -> str:
        """The greedy transcript so far, joined as the library's greedy decoder joins it."""
        return self._greedy.text

    @property
    def partial(self) -> str:
        """The transcript so far: the LM beam search's best hypothesis (its last word may be unfinished), or the
        greedy transcript when the server has no LM."""
        return self.greedy if self._beam is None else self._beam.text

    @property
    def held_bytes(self) -> int:
        """The memory a new stream is charged: its state and the most its beam search's beams and LM caches hold (its
        two searches', once it keeps words)."""
        return self.state.nbytes + (0 if self._beam is None else self._beam.fixed_bytes)

    def added_bytes(self, outputs: dict) -> int:
        """The most memory `absorb(outputs, ...)` may add: the beams' texts and frame spans, per new output step
        (`BeamStream.step_bytes`: with words, both searches' and the step's log-probs)."""
        return 0 if self._beam is None else int(outputs[OUTPUT_LENGTHS][0]) * self._beam.step_bytes

    def inputs(self, audio: np.ndarray, final: bool) -> tuple[np.ndarray, np.ndarray, dict]:
        """The batch row for this chunk: `(waveforms (1, n), lengths (1,), {state, final})` for `Batcher.submit`.

        Raises:
            RequestError: FAILED_PRECONDITION when the stream already ended; OUT_OF_RANGE when the chunk would take
                it past `max_seconds` (the chunk is refused, the stream can still end with an empty final chunk).
        """
        if self.done:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"stream {self.id!r} already ended (its final "
                               "step was sent); open a new session")
        audio = np.asarray(audio, np.float32).reshape(1, -1)
        rate = self.servable.sample_rate
        if self.max_seconds is not None and self.audio_samples + audio.shape[1] > round(self.max_seconds * rate):
            raise RequestError(grpc.StatusCode.OUT_OF_RANGE, f"this chunk would take the stream to "
                               f"{(self.audio_samples + audio.shape[1]) / rate:.2f} s of audio, over the "
                               f"{self.max_seconds:g} s a stream may carry; it was not taken. End the stream (a "
                               "final chunk, empty or within the limit) and open a new one")
        return audio, np.array([audio.shape[1]], np.int32), {STATE: self.state, FINAL: np.array([bool(final)])}

    def absorb(self, outputs: dict, samples: int, final: bool, run_seconds: float = 0.0) -> np.ndarray:
        """Take one step's outputs (this stream's row): the new state, the partial transcript, the log-probs.

        Returns:
            The new log-probs, `(steps, vocab)`.
        """
        steps = int(outputs[OUTPUT_LENGTHS][0])
        new = np.asarray(outputs[LOG_PROBS][0, :steps], np.float32)
        self.state = np.asarray(outputs[STATE], np.float32)
        self._greedy.update(new)
        if self._beam is not None:
            self._beam.update(new)
        self.audio_samples += samples
        self.compute_seconds += run_seconds
        self.steps += 1
        self.done = bool(final)
        return new

    def final_text(self) -> str:
        """The finished transcript: the LM beam search's, ended with the end-of-sentence score (only the last
        chunk's frames were left to search), or the greedy one when the server has no LM. Call it once."""
        return self.greedy if self._beam is None else self._beam.finish()

    def final_words(self) -> tuple[str, list]:
        """The finished transcript (`final_text`'s) and its words: `decode.words.Word`s, each with its start and end
        in seconds from the stream's start and its confidence in [0, 1], what `decode.words.decode_words` gives for
        the whole utterance (the export's clock and words.json). Call it once, in place of `final_text`, after the
        final step.

        Raises:
            RequestError: FAILED_PRECONDITION when `keep_words` wasn't called.
        """
        if not self.keeps_words:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"stream {self.id!r} kept no words: call "
                               "`keep_words` before its first step")
        return self._beam.finish_words(self.servable.clock, self.servable.word_config, self.audio_seconds)

    def free(self) -> None:
        """Drop the state and beam search of an ended stream (its transcript was made)."""
        self._beam = None
        self.state = np.zeros((1, 0), np.float32)

    def step(self, audio: np.ndarray, final: bool, submit) -> StepResult:
        """Run one chunk through `submit(key, waveforms, lengths, extras) -> Future[BatchResult]` (the batcher's
        submit, or a direct run) and take its outputs. Blocks until the step is done."""
        waveforms, lengths, extras = self.inputs(audio, final)
        result = submit(self.servable.stream_runner, waveforms, lengths, extras).result()
        new = self.absorb(result.outputs, int(lengths[0]), final, result.run_seconds)
        text = self.final_text() if final else self.partial
        return StepResult(new, text, bool(final), result.batch_size, result.run_seconds, result.queue_seconds)


class SessionStore:
    """Sessions by the ids this store issues, for ds2-serve's stream_step requests with `session_id`."""

    def __init__(self, max_streams: int = MAX_STREAMS, idle_seconds: float = IDLE_SECONDS,
                 max_seconds: float | None = MAX_SECONDS, max_bytes: int = MAX_BYTES,
                 max_per_client: int = MAX_STREAMS_PER_CLIENT):
        """
        Args:
            max_streams: sessions open at once; another: RESOURCE_EXHAUSTED.
            idle_seconds: a session unused this long, or that has waited this much longer for its client's chunks
                than they last, is forgotten (its id is then NOT_FOUND; `StreamSession.stale`).
            max_seconds: a session's audio at most (`StreamSession.max_seconds`).
            max_bytes: the open sessions' states and kept log-probs together; a session or a step that would
                take them past it: RESOURCE_EXHAUSTED. A final step is always taken: it frees its session's memory.
            max_per_client: sessions open at once from one client address; another: RESOURCE_EXHAUSTED.
        """
        self.max_streams = max_streams
        self.max_per_client = max_per_client
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self.max_bytes = max_bytes
        self.bytes = 0  # held by the open sessions
        self._sessions: dict[str, StreamSession] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Open sessions (ended ones kept for a retry of their last step don't count)."""
        return sum(not s.done for s in self._sessions.values())

    def open(self, servable: Servable, client: str = "") -> StreamSession:
        """A new session on `servable` for the client at address `client`, with a new id, marked busy until
        `release`.

        Raises:
            RequestError: RESOURCE_EXHAUSTED when `max_streams` sessions are open, or `max_per_client` of this
                client's, or its state doesn't fit in `max_bytes`; FAILED_PRECONDITION when the model can't stream.
        """
        session = StreamSession(servable, secrets.token_hex(SESSION_ID_BYTES), self.max_seconds, client)
        with self._lock:
            self._forget_idle()
            mine = sum(not s.done and s.client == client for s in self._sessions.values())
            if mine >= self.max_per_client:
                raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{mine} streams from {client or 'this client'} "
                                   "are open, the most this server holds for one client (--max_streams_per_client); "
                                   "end one, or retry later")
            if len(self) >= self.max_streams:
                raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{len(self)} streams are open, the most this "
                                   "server holds (--max_streams); retry later")
            self._charge(session, session.held_bytes)
            session.busy = True
            self._sessions[session.id] = session
            return session

    def acquire(self, session_id: str) -> StreamSession:
        """The session `session_id`, marked busy until `release`.

        Raises:
            RequestError: NOT_FOUND for an id this store did not issue or has forgotten; FAILED_PRECONDITION when
                a step of this session is running already.
        """
        with self._lock:
            self._forget_idle()
            session = self._sessions.get(session_id)
            if session is None:
                raise RequestError(grpc.StatusCode.NOT_FOUND, f"no session {session_id!r}: it was not issued by this "
                                   f"server, or it was forgotten after {self.idle_seconds:g} s unused or waiting as "
                                   "far behind its audio (a client must send a stream's chunks about as fast as they "
                                   "are spoken), or after a restart; open a new one with an empty `session_id`")
            if session.busy:
                raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"a step of stream {session_id!r} is still "
                                   "running; send a stream's chunks one after the other")
            now = time.monotonic()
            session.busy = True
            session.waited += now - session.used
            session.used = now
            return session

    def reserve(self, session: StreamSession, nbytes: int, final: bool = False) -> None:
        """Count `nbytes` more for `session` (the log-probs a step adds); a `final` step is always taken.

        Raises:
            RequestError: RESOURCE_EXHAUSTED when that would take the sessions past `max_bytes`.
        """
        with self._lock:
            self._charge(session, nbytes, force=final)

    def release(self, session: StreamSession, discard: bool = False) -> None:
        """Done with a step: a `discard`ed session (its opening step failed) is dropped; an ended one frees its
        memory and keeps only its last answer; another waits for its next chunk."""
        with self._lock:
            session.busy = False
            session.used = time.monotonic()
            if discard:
                self._forget(session)
            elif session.done:
                session.free()
                self.bytes -= session.charged
                session.charged = 0

    def _charge(self, session: StreamSession, nbytes: int, force: bool = False) -> None:
        if not force and self.bytes + nbytes > self.max_bytes:
            raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"the streams' memory is spent ({self.bytes} of "
                               f"{self.max_bytes} bytes, --max_stream_memory_mb); this step was not taken: retry it "
                               "later, or end the stream")
        self.bytes += nbytes
        session.charged += nbytes

    def _forget(self, session: StreamSession) -> None:
        self._sessions.pop(session.id, None)
        self.bytes -= session.charged
        session.charged = 0

    def _forget_idle(self) -> None:
        now = time.monotonic()
        for session in [s for s in self._sessions.values() if not s.busy and s.stale(now, self.idle_seconds)]:
            self._forget(session)
        ended = sorted((s for s in self._sessions.values() if s.done and not s.busy), key=lambda s: s.used)
        for session in ended[:max(0, len(ended) - self.max_streams)]:  # answers kept for retries: bounded too
            self._forget(session)


__all__ = ["IDLE_SECONDS", "MAX_BYTES", "MAX_SECONDS", "MAX_STREAMS", "MAX_STREAMS_PER_CLIENT", "SessionStore",
           "StepResult", "StreamSession"]
