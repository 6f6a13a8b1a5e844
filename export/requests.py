"""Requests for an export's signatures: what clients, servers' tests and the warm-up file send.

The export owns its contract: the signature and tensor names (`deepspeech2_export`), and here how a request
is built and how audio travels as WAV bytes (`transcribe_wav`'s input). `deepspeech2_serving` builds its
requests with these; nothing here knows about a server.
"""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from deepspeech2.audio import decode_audio_bytes, to_pcm16

# An optional input of serving_default and transcribe_wav that ds2-serve takes besides the signature's (with
# `nbest`, whose n-best it biases): string [n] (or a scalar), each a word or phrase for the server's beam search to
# favour (README "Hotwords"). The signatures don't declare it: stock TF Serving refuses a request that carries it
# (INVALID_ARGUMENT, "input size does not match signature ... Sent extra: {hotwords}"), and the export's own graph
# decodes greedily, with nothing a hotword could bias.
HOTWORDS = "hotwords"
# An optional int input of serving_default, transcribe_wav and (in a ds2-serve session) stream_step that ds2-serve
# takes besides the signature's: 1 (a scalar or shape [1]) asks for each word's start and end (seconds into the
# audio) and confidence (the calibrated probability that it is right), from the server's beam search (its LM and
# hotwords, and the request's `hotwords`) and the export's words.json (README "Word times and confidence"); 0 asks
# for none. The outputs are `deepspeech2_serving.servable.WORD_OUTPUTS`. A session asks for them with its opening
# step (the server then keeps what they need as the chunks come) and gets them on its final step. The signatures
# don't declare it: stock TF Serving refuses a request that carries it (INVALID_ARGUMENT, "input size does not match
# signature ... Sent extra: {words}"), and its graph has no beam search to time words with (its `log_probs` and
# export.json's `frame_clock` are what a client would need to run `deepspeech2.decode.words.decode_words` itself).
WORDS = "words"


def wav_bytes(waveform: np.ndarray, sample_rate: int) -> bytes:
    """A mono float waveform (in [-1, 1]) as the bytes of a 16-bit PCM WAV file (`deepspeech2.audio.to_pcm16`'s
    scale, so reading the file gives the samples back)."""
    buffer = io.BytesIO()
    sf.write(buffer, to_pcm16(waveform), sample_rate, subtype="PCM_16", format="WAV")
    return buffer.getvalue()


def as_wav_bytes(data: bytes) -> bytes:
    """An audio file's bytes as `transcribe_wav` takes them (tf.audio.decode_wav reads 16-bit PCM WAV only): a
    16-bit PCM WAV's as they are; any other format libsndfile reads (FLAC, such as LibriSpeech's; 24-bit or float
    WAV; Ogg) decoded, downmixed and written as a 16-bit WAV at its own rate. Bytes libsndfile can't read are
    returned unchanged: the server's refusal says what is wrong with them."""
    try:
        info = sf.info(io.BytesIO(data))
    except Exception:  # LibsndfileError / RuntimeError on bytes that aren't audio
        return data
    if info.format == "WAV" and info.subtype == "PCM_16":
        return data
    return wav_bytes(*decode_audio_bytes(data))


def predict_request(model_name: str, signature: str, inputs: dict) -> predict_pb2.PredictRequest:
    """A PredictRequest for `signature` of model `model_name`.

    Args:
        model_name: the name the server serves the model under (ModelSpec.name).
        signature: e.g. `SERVING_DEFAULT`, `TRANSCRIBE_WAV`, `STREAM_STEP`.
        inputs: input names -> values `tf.make_tensor_proto` takes (numpy arrays, bytes as dtype=object,
            Python scalars).
    """
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    return request


__all__ = ["HOTWORDS", "WORDS", "as_wav_bytes", "predict_request", "wav_bytes"]
