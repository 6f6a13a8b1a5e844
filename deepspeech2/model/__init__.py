"""DeepSpeech 1/2 acoustic models in Keras 3 (model math in keras.ops: TF, JAX and torch backends).

`config` and `geometry` need neither TensorFlow nor Keras, and they are all this file imports up front: importing
any `deepspeech2.model.<module>` runs this file first, and `data/` imports those two without starting
TensorFlow. The Keras half (layers, the model, CTC) is imported on first use of one of its names here.
"""

import importlib

from deepspeech2.model.config import (DS1, DS2_PAPER_EN, DS2_PAPER_EN_GRU, DS2_SMALL, DS2_STREAMING, PRESETS, TINY,
                                      ModelConfig, load_model_config, preset)
from deepspeech2.model.geometry import ctc_feasible, ctc_label_steps, output_length, output_steps
from deepspeech2.vocab import BLANK_ID

# name -> the module that defines it, for the names that need Keras.
_KERAS_NAMES = {
    "ctc_loss": "deepspeech2.model.ctc",
    "build_model": "deepspeech2.model.deepspeech2",
    "log_probs": "deepspeech2.model.deepspeech2",
    "predict_log_probs": "deepspeech2.model.deepspeech2",
    "ConvFrontEnd": "deepspeech2.model.layers",
    "FullyConnected": "deepspeech2.model.layers",
    "RowConv": "deepspeech2.model.layers",
    "SequenceBatchNorm": "deepspeech2.model.layers",
    "UtteranceMeanNorm": "deepspeech2.model.layers",
    "clipped_relu": "deepspeech2.model.layers",
    "sequence_mask": "deepspeech2.model.layers",
    "BatchNormRNN": "deepspeech2.model.rnn",
    "KerasGRU": "deepspeech2.model.rnn",
    "gru_recurrence": "deepspeech2.model.rnn",
    "lstm_recurrence": "deepspeech2.model.rnn",
    "rnn_recurrence": "deepspeech2.model.rnn",
}


def __getattr__(name):
    if name not in _KERAS_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_KERAS_NAMES[name]), name)


__all__ = [
    "BLANK_ID", "BatchNormRNN", "ConvFrontEnd", "DS1", "DS2_PAPER_EN", "DS2_PAPER_EN_GRU", "DS2_SMALL", "DS2_STREAMING",
    "FullyConnected", "KerasGRU", "ModelConfig", "PRESETS", "RowConv", "SequenceBatchNorm", "TINY",
    "UtteranceMeanNorm",
    "build_model", "clipped_relu", "ctc_feasible", "ctc_label_steps", "ctc_loss",
    "gru_recurrence", "load_model_config", "log_probs", "lstm_recurrence", "output_length", "output_steps",
    "predict_log_probs", "preset", "rnn_recurrence", "sequence_mask",
]
