"""DeepSpeech 1/2 acoustic models in Keras 3 (model math in keras.ops: TF, JAX and torch backends).

Importing this package imports Keras. What the rest of the library needs without it lives below the model: the
architecture (`deepspeech2.model_config`: `ModelConfig` and the presets) and its lengths (`deepspeech2.geometry`).
"""

from deepspeech2.model.ctc import ctc_loss
from deepspeech2.model.deepspeech2 import build_model, log_probs, predict_log_probs
from deepspeech2.model.layers import (ConvFrontEnd, FullyConnected, RowConv, SequenceBatchNorm, UtteranceMeanNorm,
                                      clipped_relu, sequence_mask)
from deepspeech2.model.rnn import BatchNormRNN, KerasGRU, gru_recurrence, lstm_recurrence, rnn_recurrence

__all__ = [
    "BatchNormRNN", "ConvFrontEnd", "FullyConnected", "KerasGRU", "RowConv", "SequenceBatchNorm", "UtteranceMeanNorm",
    "build_model", "clipped_relu", "ctc_loss", "gru_recurrence", "log_probs", "lstm_recurrence", "predict_log_probs",
    "rnn_recurrence", "sequence_mask",
]
