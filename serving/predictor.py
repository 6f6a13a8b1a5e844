"""How ds2-serve answers one Predict: the request checked, run through the batcher (or alone, or in pieces), its
searches run, its response built; a streaming session's step taken or refused.

A request still queued when its deadline passes, or whose client has gone, is dropped unrun; its beam searches stop
at the next frame once nobody waits for them, or past `max_search_seconds` of CPU (RESOURCE_EXHAUSTED); no search
waits for another's. A session's step is taken only if it finished before the client's deadline and the client
still waits: otherwise the session stays where it was and the same step can be sent again. An internal error
answers INTERNAL with a request id, its text going to the log.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from concurrent import futures

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from deepspeech2_export import FINAL, LOG_PROBS, OUTPUT_LENGTHS, STATE, STREAM_STEP
from deepspeech2_export.requests import WORDS
from deepspeech2_serving.batching import (MAX_BATCH_SAMPLES, Batcher, BatchingConfig, BatchResult, Expired, QueueFull,
                                          join, pieces)
from deepspeech2_serving.checks import SESSION_ID, RequestError, Work, check_request, invalid, tf_error_message
from deepspeech2_serving.servable import (NBEST_SCORES, NBEST_TRANSCRIPTS, OUTPUT_TIME_KEYS, SESSION_TRANSCRIPTS,
                                          WORD_OUTPUTS, Servable, word_outputs)
from deepspeech2_serving.streaming import SessionStore

logger = logging.getLogger(__name__)

# CPU seconds one request's beam searches (its n-best and words) may take: the untrained worst case (every token a
# candidate at every frame) at beam 200 is about 2 s per second of audio on one core, so 16 rows of 60 s would hold
# a thread for half an hour; a trained model's searches take a fraction of that (docs/serving.md, "What one request,
# one client and one connection may cost").
MAX_SEARCH_SECONDS = 30.0


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
        work = check_request(servable, request)
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


__all__ = ["MAX_SEARCH_SECONDS", "Predictor", "internal"]
