"""The checks a PredictRequest goes through before it may join a batch, and the refusals they give.

Each request is checked on its own, before it can join a batch, so a bad request is answered INVALID_ARGUMENT with
the reason and never fails the requests it would have been batched with. Every input, the options included, goes
through one check (`_tensor`): its dtype, a shape its values agree with, its values counted as they will be read (a
shape filled from fewer values counts in full), and the whole request within the version's `max_request_bytes`,
before any input is read as an array; then the rows and each WAV's length (from its header) before any audio is
decoded. A message never quotes more than a few values.

The signature and tensor names are the export's (`deepspeech2_export`, `deepspeech2_export.requests`); the options
below are ds2-serve's own inputs, which stock TF Serving refuses.
"""

from __future__ import annotations

import dataclasses
import math
import re

import grpc
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

from deepspeech2.decode.hotwords import normalize_hotwords
from deepspeech2_export import (EXPORT_INFO, FINAL, FRAME_CLOCK, LENGTHS, SERVING_DEFAULT, STATE, STREAM_STEP,
                                TRANSCRIBE_WAV, WAV, WAVEFORMS)
from deepspeech2_export.requests import HOTWORDS, WORDS

# The request option for server-side beam search: an int input `nbest` (a scalar or shape [1]) asks for that many
# hypotheses per utterance from the beam decoder (with the LM, when the server has one), returned as two extra
# outputs (`servable.NBEST_TRANSCRIPTS`, `servable.NBEST_SCORES`).
NBEST = "nbest"
# With `nbest`, the string input `hotwords` (export/requests.py) adds words or phrases for that request's beam
# search to favour, to the server's own (--hotwords), at the server's --hotword_weight; its hotword bonus counts in
# `nbest_scores`; with `words`, it biases the words' search too. Without either it is refused: the `transcripts`
# output is the graph's greedy decoding.
MAX_HOTWORDS = 256  # hotwords one request may add
MAX_HOTWORD_CHARS = 100  # characters per hotword at most, as sent
# Words one request's hotwords may add in all, counted after normalization ("1234567" becomes eleven words): each is a
# regex alternative and a trie entry, built per request and matched against every new hypothesis text, so the
# search's time grows with them (docs/serving.md, "What one request, one client and one connection may cost", gives
# the cost of a request at this cap).
MAX_HOTWORD_WORDS = 64
# Streaming sessions: a stream_step request with the string input `session_id` and the int input `sequence` (one
# value each, batch 1) instead of `state` has the server keep the stream's state. An empty `session_id` with
# `sequence` 0 opens a session: the server issues its id (128 random bits as 32 hex digits), returned in the output
# `session_id` of every step's response; the following steps send that id with `sequence` 1, 2, ... Repeating the
# last number gets the stored answer again (a retry is never applied twice); another number is FAILED_PRECONDITION;
# an id the server did not issue (or has forgotten) is NOT_FOUND. The outputs: `servable.SESSION_TRANSCRIPTS`.
SESSION_ID = "session_id"
SEQUENCE = "sequence"
SESSION_ID_HEX = re.compile(r"[0-9a-f]{32}")
MAX_REQUEST_BYTES = 32 << 20  # a request's inputs may take no more than this once read (ds2-serve: its message limit)
MAX_ROWS = 16  # utterances one request may carry (ds2-serve: --max_batch_size, TF Serving's rule)
STRING_BYTES = 48  # what a string costs once read besides its bytes (a numpy object slot and a Python bytes object)
MAX_OPTION_VALUES = 1024  # values an option (`nbest`, `hotwords`, `words`, ...) may hold to be read at all, a few
# KB: its own check then says what it takes (one value, at most MAX_HOTWORDS); a shape of millions is refused unread
_VALUE_FIELDS = {types_pb2.DT_FLOAT: "float_val", types_pb2.DT_INT32: "int_val", types_pb2.DT_INT64: "int64_val",
                 types_pb2.DT_BOOL: "bool_val", types_pb2.DT_STRING: "string_val"}  # the dtypes requests use
_INTS = (types_pb2.DT_INT32, types_pb2.DT_INT64)


class RequestError(Exception):
    """A request the server refuses: a gRPC status code and a message for the client."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message: str) -> RequestError:
    return RequestError(grpc.StatusCode.INVALID_ARGUMENT, message)


def brief(value: np.ndarray) -> str:
    """A value for a message: its first few elements, and how many there are when that is more."""
    flat = np.asarray(value).reshape(-1)
    shown = [v[:40] if isinstance(v, bytes) else v for v in flat[:4].tolist()]
    return f"{shown}" if flat.size <= 4 else f"{shown[:3]}... ({flat.size} values)"


def wav_frames(data: bytes) -> int | None:
    """The audio frames (samples per channel) a WAV file's header declares, capped at the bytes it holds; None when
    it has no `fmt ` and `data` chunk to read them from (the decoder then says what is wrong)."""
    block, at = None, 12
    while at + 8 <= len(data):
        chunk, size = data[at:at + 4], int.from_bytes(data[at + 4:at + 8], "little")
        if chunk == b"fmt " and at + 22 <= len(data):
            block = int.from_bytes(data[at + 20:at + 22], "little")  # bytes per frame (block align)
        elif chunk == b"data":
            return min(size, len(data) - at - 8) // block if block else None
        at += 8 + size + (size & 1)  # chunks are padded to an even size
    return None


def tf_error_message(e: tf.errors.OpError) -> str:
    """The line of a TensorFlow error that says what is wrong, without the graph and stack trace.

    The export's checks fail as "assertion failed: [text] [value] [text]"; that becomes "text value text".
    """
    message = re.split(r"\n\s*\[\[", e.message, maxsplit=1)[0]  # the node trace: "\n\t [[{{node ...}}]]"
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    text = lines[-1] if lines else type(e).__name__
    if text.startswith("assertion failed: "):
        text = " ".join(re.findall(r"\[(.*?)\](?=\s*\[|\s*$)", text[len("assertion failed: "):]))
    return text


def _array(proto, key: str) -> np.ndarray:
    """An input `_tensor` has checked, read."""
    try:
        return tf.make_ndarray(proto)
    except Exception as e:  # what the checks don't foresee: still the client's proto
        raise invalid(f"input `{key}` is not a readable tensor: {str(e)[:200]}") from None


def _decode_error(e: Exception) -> str:
    if isinstance(e, UnicodeDecodeError):
        return "the WAV file could not be decoded (malformed header or data)"
    return tf_error_message(e)


@dataclasses.dataclass(frozen=True)
class Work:
    """A checked request, ready for the batcher."""

    signature: str
    waveforms: np.ndarray  # float32 (rows, samples), cut to the longest row
    lengths: np.ndarray  # int32 (rows,)
    nbest: int  # 0: no server-side beam search
    state: np.ndarray | None = None  # stream_step: float32 (rows, state_size); None in a session (the server's)
    final: np.ndarray | None = None  # stream_step: bool (rows,)
    session: str | None = None  # stream_step in a session: its id ("": open one); None: the state is in the request
    sequence: int = 0  # stream_step in a session: the step's number (0 opens the session)
    hotwords: object = None  # the n-best's `decode.beam.Hotwords`: the request's and the server's; None: the server's
    words: bool = False  # the request asks for its words' times and confidences (`servable.WORD_OUTPUTS`)


def check_request(servable, request) -> Work:
    """Check a PredictRequest against one loaded version (a `servable.Servable`: its signatures, limits, decoder and
    clock); the audio as rows for the batcher.

    Raises:
        RequestError: INVALID_ARGUMENT naming the problem (unknown signature or input, wrong dtype or
            rank, a request over `max_request_bytes` or `max_rows`, NaN/Inf samples, empty, too short or too
            long audio, bytes that aren't a WAV, a WAV at another sample rate, a bad `nbest`, `hotwords` or
            `words`); FAILED_PRECONDITION for `words` from a server without a beam search or an export without a
            clock.
    """
    signature = request.model_spec.signature_name or SERVING_DEFAULT
    if signature not in servable.signature_defs:
        raise invalid(f"unknown signature {signature!r}; model {servable.name!r} version {servable.version} has "
                      f"{sorted(servable.signature_defs)}")
    sig = servable.signature_defs[signature]
    given, expected = set(request.inputs), set(sig.inputs)
    options = {SESSION_ID, SEQUENCE, WORDS} if signature == STREAM_STEP else {NBEST, HOTWORDS, WORDS}
    if given - expected - options:
        named = ", ".join(f"`{o}`" for o in sorted(options))
        raise invalid(f"unknown input(s) {sorted(given - expected - options)} for signature {signature!r}; it "
                      f"takes {sorted(expected)} (and the option(s) {named})")
    # Every input through the one check, and the request's size counted, before any input is read.
    spent = 0
    for key in sorted(given):
        if key in expected:
            info = sig.inputs[key]
            nbytes = _tensor(servable, request.inputs[key], key, (info.dtype,), rank=len(info.tensor_shape.dim))
        else:
            nbytes = _tensor(servable, request.inputs[key], key, (types_pb2.DT_STRING,) if key in (SESSION_ID, HOTWORDS)
                                  else _INTS, most=MAX_OPTION_VALUES)
        spent += nbytes
        if spent > servable.max_request_bytes:
            raise invalid(f"the request's inputs take {spent} bytes or more once read (input `{key}`: {nbytes}; a "
                          f"shape filled from fewer values counts in full), over the {servable.max_request_bytes} "
                          "bytes a request may take (--max_message_bytes); send fewer or shorter utterances")
    arrays = {key: _array(request.inputs[key], key) for key in sorted(given)}
    if signature == STREAM_STEP and SESSION_ID in given:
        expected = expected - {STATE}  # the server keeps the session's state
    if expected - given:
        raise invalid(f"signature {signature!r} needs the input(s) {sorted(expected - given)}; got "
                      f"{sorted(given)}")
    if signature == STREAM_STEP:
        return _check_stream(servable, arrays)
    nbest = _nbest(servable, arrays[NBEST]) if NBEST in given else 0
    words = _words(arrays[WORDS]) if WORDS in given else False
    if words:
        _check_words(servable)
    hotwords = _hotwords(servable, arrays[HOTWORDS], nbest or words) if HOTWORDS in given else None
    if signature == TRANSCRIBE_WAV:
        waveforms, lengths = _decode(servable, arrays[WAV])
    else:
        waveforms, lengths = arrays[WAVEFORMS], arrays[LENGTHS]
        if waveforms.shape[0] != lengths.shape[0]:
            raise invalid(f"`{LENGTHS}` has {lengths.shape[0]} entries for {waveforms.shape[0]} rows of "
                          f"`{WAVEFORMS}`; give one length per row")
        if not np.all(np.isfinite(waveforms)):
            rows = np.flatnonzero(~np.all(np.isfinite(waveforms), axis=1))
            raise invalid(f"`{WAVEFORMS}` row(s) {rows[:5].tolist()} hold NaN or Inf samples")
        too_long = np.flatnonzero(lengths > waveforms.shape[1])
        if too_long.size:
            raise invalid(f"`{LENGTHS}`[{too_long[0]}] = {lengths[too_long[0]]} exceeds the "
                          f"{waveforms.shape[1]} samples of its row")
    _check_lengths(servable, lengths, WAV if signature == TRANSCRIBE_WAV else LENGTHS)
    longest = int(lengths.max())
    return Work(signature, np.ascontiguousarray(waveforms[:, :longest], np.float32), lengths.astype(np.int32),
                nbest, hotwords=hotwords, words=words)


def _tensor(servable, proto, key: str, dtypes: tuple[int, ...], rank: int | None = None, most: int | None = None
            ) -> int:
    """The one check every input goes through, before it is read: its dtype, a shape its values agree with, its
    rank and rows (`rank`: a signature input's, batch first) or its number of values (`most`: an option's).
    Returns what it takes once read, in bytes.

    TensorFlow reads a shape with fewer values than elements by repeating the last one (as
    `tf.make_tensor_proto(0.0, shape=...)` writes), and so does this, counting the repeats in full; more values
    than elements, tensor_content of the wrong length or a negative dimension are refused.

    Raises:
        RequestError: INVALID_ARGUMENT naming the input.
    """
    if proto.dtype not in dtypes:
        raise invalid(f"input `{key}` must be {' or '.join(types_pb2.DataType.Name(d) for d in dtypes)}, got "
                      f"{types_pb2.DataType.Name(proto.dtype)}")
    dims = [d.size for d in proto.tensor_shape.dim]
    if proto.tensor_shape.unknown_rank or any(d < 0 for d in dims):
        raise invalid(f"input `{key}` has no valid shape ({brief(np.array(dims))}, unknown_rank "
                      f"{proto.tensor_shape.unknown_rank}): give every dimension's size")
    if rank is not None:
        if len(dims) != rank:
            shape = ("[batch, state_size]" if key == STATE else "[batch, samples]") if rank == 2 else "[batch]"
            raise invalid(f"input `{key}` must have rank {rank} {shape}, got shape {brief(np.array(dims))}")
        if dims[0] == 0:
            raise invalid(f"input `{key}` holds no audio (a batch of 0)")
        if dims[0] > servable.max_rows:
            raise invalid(f"input `{key}` has {dims[0]} rows, over the {servable.max_rows} utterances one request may "
                          "carry (--max_batch_size); split it into several requests")
    count = math.prod(dims)
    if most is not None and count > most:
        raise invalid(f"input `{key}` holds {count} values, far more than it takes (at most {most} are read)")
    if proto.tensor_content:
        itemsize = tf.as_dtype(proto.dtype).size
        if proto.dtype == types_pb2.DT_STRING or len(proto.tensor_content) != count * itemsize:
            raise invalid(f"input `{key}`: shape {brief(np.array(dims))} holds {count} values, its tensor_content "
                          f"has {len(proto.tensor_content)} bytes")
        return count * itemsize
    values = getattr(proto, _VALUE_FIELDS[proto.dtype])
    if len(values) > count:
        raise invalid(f"input `{key}`: shape {brief(np.array(dims))} holds {count} value(s), the proto has "
                      f"{len(values)}")
    if proto.dtype != types_pb2.DT_STRING:
        return count * tf.as_dtype(proto.dtype).size
    filled = (count - len(values)) * len(values[-1]) if values else 0  # the last value, repeated
    return sum(len(v) for v in values) + filled + count * STRING_BYTES


def _decode(servable, wav: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    for i, data in enumerate(wav):  # TF's own message quotes the bytes it found, which may not be text
        if not (isinstance(data, bytes) and data[:4] == b"RIFF" and data[8:12] == b"WAVE"):
            raise invalid(f"`{WAV}`[{i}] is not a WAV file (it doesn't start with a RIFF/WAVE header)")
    # Each WAV's length from its header, before any is decoded: the decoded rows, padded to the longest, then
    # take at most rows x the export's limit.
    frames = [wav_frames(data) for data in wav]  # None: no header to read; at most 2 bytes a frame (16-bit)
    _check_lengths(servable, np.array([len(data) // 2 if n is None else n for n, data in zip(frames, wav)]), WAV,
                        too_short=False)
    try:
        waveforms, lengths = servable.decode_wav(tf.constant(wav, tf.string))
    except (tf.errors.InvalidArgumentError, UnicodeDecodeError) as e:
        for i in range(len(wav)):  # which one? (the graph doesn't say)
            try:
                servable.decode_wav(tf.constant(wav[i:i + 1], tf.string))
            except (tf.errors.InvalidArgumentError, UnicodeDecodeError) as one:
                raise invalid(f"`{WAV}`[{i}]: {_decode_error(one)}") from None
        raise invalid(f"`{WAV}`: {_decode_error(e)}") from None
    return waveforms.numpy(), lengths.numpy()


def _check_stream(servable, arrays: dict) -> Work:
    waveforms, lengths, final = arrays[WAVEFORMS], arrays[LENGTHS].astype(np.int32), arrays[FINAL].astype(bool)
    rows = waveforms.shape[0]
    state = arrays.get(STATE)
    for key, value in ((LENGTHS, lengths), (FINAL, final)) + (((STATE, state),) if state is not None else ()):
        if value.shape[0] != rows:
            raise invalid(f"`{key}` has {value.shape[0]} entries for {rows} rows of `{WAVEFORMS}`; give one per "
                          "stream")
    if not np.all(np.isfinite(waveforms)):
        raise invalid(f"`{WAVEFORMS}` hold NaN or Inf samples")
    bad = np.flatnonzero((lengths < 0) | (lengths > waveforms.shape[1]))
    if bad.size:
        raise invalid(f"`{LENGTHS}`[{bad[0]}] = {lengths[bad[0]]} is not in [0, {waveforms.shape[1]}] (the samples "
                      "of its row)")
    long = np.flatnonzero(lengths > servable.max_samples)
    if long.size:
        raise invalid(f"`{LENGTHS}`[{long[0]}]: a chunk of {lengths[long[0]] / servable.sample_rate:.2f} s is over the "
                      f"{servable.seconds_limit:g} s limit of this export")
    session, sequence = None, 0
    words = _words(arrays[WORDS]) if WORDS in arrays else False
    if words and SESSION_ID not in arrays:
        raise invalid(f"`{WORDS}` in a stream need a session (`{SESSION_ID}`): the server times the words with "
                      "the stream's beam search, which it keeps only for a session")
    if state is not None and SESSION_ID in arrays:
        raise invalid(f"give `{STATE}` (the client keeps the stream's state) or `{SESSION_ID}` (the server keeps "
                      "it), not both")
    if state is not None:
        if state.shape[1] != servable.state_size:
            raise invalid(f"`{STATE}` must be [batch, {servable.state_size}] for this model (version "
                          f"{servable.version}), got {list(state.shape)}; start a stream with zeros of that size")
        if not np.all(np.isfinite(state)):
            raise invalid(f"`{STATE}` holds NaN or Inf")
        if SEQUENCE in arrays:
            raise invalid(f"`{SEQUENCE}` numbers the steps of a session: send it with `{SESSION_ID}` (and without "
                          f"`{STATE}`)")
    else:
        session = _session_id(arrays[SESSION_ID])
        if SEQUENCE not in arrays:
            raise invalid(f"a request with `{SESSION_ID}` needs `{SEQUENCE}`: 0 to open a session, then 1, 2, ...")
        sequence = _sequence(arrays[SEQUENCE])
        if not session and sequence != 0:
            raise invalid(f"`{SEQUENCE}` must be 0 to open a session (an empty `{SESSION_ID}`), got {sequence}")
        if rows != 1:
            raise invalid(f"a request with `{SESSION_ID}` carries one stream (batch 1), got {rows} rows")
    longest = int(lengths.max())
    return Work(STREAM_STEP, np.ascontiguousarray(waveforms[:, :longest], np.float32), lengths, 0,
                state=None if state is None else state.astype(np.float32), final=final, session=session,
                sequence=sequence, words=words)


def _session_id(value: np.ndarray) -> str:
    value = value.reshape(-1)
    text = value[0].decode("utf-8", "replace") if value.size == 1 else None
    if text is None or not (text == "" or SESSION_ID_HEX.fullmatch(text)):
        shown = f"{value.size} strings" if text is None else repr(text[:40])
        raise invalid(f"`{SESSION_ID}` must be one string: empty (to open a session) or the id this server issued "
                      f"for it (32 hex digits), got {shown}")
    return text


def _sequence(value: np.ndarray) -> int:
    if value.size != 1 or int(value.reshape(-1)[0]) < 0:
        raise invalid(f"`{SEQUENCE}` must be one integer >= 0 (the step's number in its session), got "
                      f"{brief(value)}")
    return int(value.reshape(-1)[0])


def _nbest(servable, value: np.ndarray) -> int:
    if servable.decoder is None:
        raise invalid(f"`{NBEST}` asks for server-side beam search, but this server runs none (started with "
                      "--decoder greedy)")
    beam = servable.decoder.config.beam_size
    if value.size != 1 or not 1 <= int(value.reshape(-1)[0]) <= beam:
        raise invalid(f"`{NBEST}` must be one integer in [1, {beam}] (the beam size), got {brief(value)}")
    return int(value.reshape(-1)[0])


def _words(value: np.ndarray) -> bool:
    if value.size != 1 or int(value.reshape(-1)[0]) not in (0, 1):
        raise invalid(f"`{WORDS}` must be one integer, 1 (give each word's times and confidence) or 0 (don't), "
                      f"got {brief(value)}")
    return bool(value.reshape(-1)[0])


def _check_words(servable) -> None:
    """Raises FAILED_PRECONDITION when this server can't time words: no beam search, or no clock."""
    if servable.decoder is None:
        raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"`{WORDS}` come from the server's beam search, "
                           "but this server runs none (started with --decoder greedy)")
    if servable.clock is None:
        raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"`{WORDS}` need the model's clock, which version "
                           f"{servable.version} of {servable.name!r} doesn't record (`{FRAME_CLOCK}` in "
                           f"{EXPORT_INFO}); "
                           "export it again with ds2-export")


def _hotwords(servable, value: np.ndarray, searched: bool):
    if not searched:
        raise invalid(f"`{HOTWORDS}` bias the server's beam search, which runs for `{NBEST}` and `{WORDS}` only "
                      f"(the `transcripts` output is the graph's greedy decoding): send `{NBEST}` with them, or "
                      f"`{WORDS}`")
    if value.ndim > 1 or value.size > MAX_HOTWORDS:
        raise invalid(f"`{HOTWORDS}` must be a string or a list of at most {MAX_HOTWORDS} strings (shape [n]), "
                      f"got shape {list(value.shape)}")
    words = []
    for item in value.reshape(-1):
        try:
            word = item.decode("utf-8")
        except UnicodeDecodeError:
            raise invalid(f"`{HOTWORDS}`: {item[:40]!r} is not UTF-8 text") from None
        if len(word) > MAX_HOTWORD_CHARS:
            raise invalid(f"`{HOTWORDS}`: {word[:40]!r}... has {len(word)} characters, over {MAX_HOTWORD_CHARS}")
        words.append(word)
    try:
        words = normalize_hotwords(words)
        count = sum(len(w.split()) for w in words)  # what the search matches: words, as normalized
        if count > MAX_HOTWORD_WORDS:
            raise ValueError(f"`{HOTWORDS}` make {count} words once normalized (numbers spelled out), over the "
                             f"{MAX_HOTWORD_WORDS} a request may add")
        return servable.decoder.search.hotwords_with(words)
    except ValueError as e:
        raise invalid(str(e)) from None


def _check_lengths(servable, lengths: np.ndarray, key: str, too_short: bool = True) -> None:
    """INVALID_ARGUMENT for audio over the export's limit, and (`too_short`) under its least."""
    short = np.flatnonzero(lengths < servable.min_samples) if too_short else np.zeros(0, int)
    if short.size:
        i = short[0]
        milliseconds = 1000 * servable.min_samples / servable.sample_rate
        what = "is empty" if lengths[i] == 0 else f"is {lengths[i]} samples long, shorter than the " \
            f"{servable.min_samples} samples ({milliseconds:g} ms) the model needs"
        raise invalid(f"`{key}`[{i}]: the audio {what}")
    long = np.flatnonzero(lengths > servable.max_samples)
    if long.size:
        i = long[0]
        raise invalid(f"`{key}`[{i}]: the audio is {lengths[i] / servable.sample_rate:.2f} s long, over the "
                      f"{servable.seconds_limit:g} s limit of this export")


__all__ = ["MAX_HOTWORDS", "MAX_HOTWORD_CHARS", "MAX_HOTWORD_WORDS", "MAX_OPTION_VALUES", "MAX_REQUEST_BYTES",
           "MAX_ROWS", "NBEST", "SEQUENCE", "SESSION_ID", "SESSION_ID_HEX", "RequestError", "Work", "brief",
           "check_request", "invalid", "tf_error_message", "wav_frames"]
