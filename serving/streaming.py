"""Streaming sessions: a stream's state, partial transcript and log-probs kept by the server between its chunks.

The export's `stream_step` is stateless (the state travels in each request and response, which is what stock
TF Serving needs). ds2-serve (a stream_step request with `session_id` instead of `state`) and ds2-demo (one
session per WebSocket) keep the state on the server instead:

    StreamSession    one stream: its state, greedy partial transcript (repeats merged across chunks), its
                     log-probs so far (for the final LM beam search), audio and compute seconds
    SessionStore     sessions by id, at most `max_streams`, forgotten after `idle_seconds` unused; a session
                     runs one step at a time (the state of step n+1 is the output of step n)

Steps of different sessions are merged into one forward pass by the `Batcher` (Batch Dispatch across streams,
DS2 §7.1): each session's step is one row, its state and `final` flag extra per-row inputs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import grpc
import numpy as np

from deepspeech2.vocab import BLANK_ID
from deepspeech2_export import FINAL, LOG_PROBS, OUTPUT_LENGTHS, STATE
from deepspeech2_serving.servable import RequestError, Servable

MAX_STREAMS = 256  # sessions held at once
IDLE_SECONDS = 60.0  # a session unused this long is forgotten


@dataclass(frozen=True)
class StepResult:
    """What one step of a session gave."""

    log_probs: np.ndarray  # float32 (steps, vocab): the output steps that became final with this chunk
    text: str  # the transcript so far (greedy); after the final step, the finished transcript
    final: bool  # this was the stream's last step (the session is over)
    batch_size: int  # streams in the forward pass it rode in
    run_seconds: float  # that forward pass
    queue_seconds: float  # waiting for it


class StreamSession:
    """One stream on the server: feed it chunks with `inputs` + `absorb` (or `step`)."""

    def __init__(self, servable: Servable, session_id: str = ""):
        if servable.stream_runner is None:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION,
                               f"model {servable.name!r} version {servable.version} can't stream (it has no "
                               "stream_step signature: a bidirectional model?); export a ds2-streaming model")
        self.servable = servable  # the version the stream started on (its state fits no other)
        self.id = session_id
        self.state = np.zeros((1, servable.state_size), np.float32)
        self._log_probs: list[np.ndarray] = []
        # Incremental best path, as deepspeech2.streaming.GreedyStream (not imported: the server loads no model code).
        self._ids: list[int] = []
        self._last = BLANK_ID
        self.audio_samples = 0
        self.compute_seconds = 0.0  # forward passes this stream rode in (shared with the other rows)
        self.steps = 0
        self.done = False
        self.busy = False
        self.used = time.monotonic()

    @property
    def audio_seconds(self) -> float:
        return self.audio_samples / self.servable.sample_rate

    @property
    def partial(self) -> str:
        """The greedy transcript so far, joined as the library's greedy decoder joins it."""
        text = self.servable.vocab.decode(self._ids)
        return " ".join(text.split()) if " " in self.servable.vocab.tokens() else "".join(text.split())

    @property
    def log_probs(self) -> np.ndarray:
        """All the stream's output steps so far, `(steps, vocab)`."""
        if not self._log_probs:
            return np.zeros((0, self.servable.vocab.size), np.float32)
        return np.concatenate(self._log_probs)

    def inputs(self, audio: np.ndarray, final: bool) -> tuple[np.ndarray, np.ndarray, dict]:
        """The batch row for this chunk: `(waveforms (1, n), lengths (1,), {state, final})` for `Batcher.submit`.

        Raises:
            RequestError: FAILED_PRECONDITION when the stream already ended.
        """
        if self.done:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"stream {self.id!r} already ended (its final "
                               "step was sent); start a new session")
        audio = np.asarray(audio, np.float32).reshape(1, -1)
        return audio, np.array([audio.shape[1]], np.int32), {STATE: self.state, FINAL: np.array([bool(final)])}

    def absorb(self, outputs: dict, samples: int, final: bool, run_seconds: float = 0.0) -> np.ndarray:
        """Take one step's outputs (this stream's row): the new state, the partial transcript, the log-probs.

        Returns:
            The new log-probs, `(steps, vocab)`.
        """
        steps = int(outputs[OUTPUT_LENGTHS][0])
        new = np.asarray(outputs[LOG_PROBS][0, :steps], np.float32)
        self.state = np.asarray(outputs[STATE], np.float32)
        self._log_probs.append(new)
        for i in np.argmax(new, axis=-1).tolist():  # merge repeats across chunks: the last label is carried
            if i != self._last and i != BLANK_ID:
                self._ids.append(i)
            self._last = i
        self.audio_samples += samples
        self.compute_seconds += run_seconds
        self.steps += 1
        self.done = bool(final)
        return new

    def final_text(self) -> str:
        """The finished transcript: the LM beam search when the server has an LM, else the greedy one."""
        return self.servable.final_transcript(self.log_probs, self.partial)

    def step(self, audio: np.ndarray, final: bool, submit) -> StepResult:
        """Run one chunk through `submit(key, waveforms, lengths, extras) -> Future[BatchResult]` (the batcher's
        submit, or a direct run) and take its outputs. Blocks until the step is done."""
        waveforms, lengths, extras = self.inputs(audio, final)
        result = submit(self.servable.stream_runner, waveforms, lengths, extras).result()
        new = self.absorb(result.outputs, int(lengths[0]), final, result.run_seconds)
        text = self.final_text() if final else self.partial
        return StepResult(new, text, bool(final), result.batch_size, result.run_seconds, result.queue_seconds)


class SessionStore:
    """Sessions by id, for a server whose clients name their stream (`session_id`)."""

    def __init__(self, max_streams: int = MAX_STREAMS, idle_seconds: float = IDLE_SECONDS):
        self.max_streams = max_streams
        self.idle_seconds = idle_seconds
        self._sessions: dict[str, StreamSession] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def acquire(self, session_id: str, servable: Servable) -> StreamSession:
        """The session `session_id` (a new one on `servable` if unknown), marked busy until `release`.

        Raises:
            RequestError: FAILED_PRECONDITION when a step of this session is running already;
                RESOURCE_EXHAUSTED when `max_streams` sessions are open.
        """
        now = time.monotonic()
        with self._lock:
            for sid in [k for k, s in self._sessions.items() if not s.busy and now - s.used > self.idle_seconds]:
                del self._sessions[sid]
            session = self._sessions.get(session_id)
            if session is None:
                if len(self._sessions) >= self.max_streams:
                    raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{len(self._sessions)} streams are open, "
                                       f"the most this server holds; retry later")
                session = self._sessions[session_id] = StreamSession(servable, session_id)
            elif session.busy:
                raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"a step of stream {session_id!r} is still "
                                   "running; send a stream's chunks one after the other")
            session.busy = True
            session.used = now
            return session

    def release(self, session: StreamSession) -> None:
        """Done with a step: an ended session is dropped, another waits for its next chunk."""
        with self._lock:
            session.busy = False
            session.used = time.monotonic()
            if session.done:
                self._sessions.pop(session.id, None)


__all__ = ["IDLE_SECONDS", "MAX_STREAMS", "SessionStore", "StepResult", "StreamSession"]
