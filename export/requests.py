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


def wav_bytes(waveform: np.ndarray, sample_rate: int) -> bytes:
    """A mono float waveform (in [-1, 1]) as the bytes of a 16-bit PCM WAV file."""
    buffer = io.BytesIO()
    sf.write(buffer, np.clip(np.asarray(waveform, np.float32), -1, 1), sample_rate, subtype="PCM_16", format="WAV")
    return buffer.getvalue()


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


__all__ = ["predict_request", "wav_bytes"]
