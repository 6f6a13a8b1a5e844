"""DeepSpeech 1/2 acoustic models in Keras 3 (model math in keras.ops: TF, JAX and torch backends)."""

from deepspeech2.model.config import (DS1, DS2_PAPER_EN, DS2_SMALL, DS2_STREAMING, PRESETS, TINY, ModelConfig,
                                      load_model_config, preset)
from deepspeech2.model.ctc import BLANK_ID, ctc_loss
from deepspeech2.model.deepspeech2 import (build_model, ctc_feasible, ctc_label_steps, log_probs, output_length,
                                           output_steps, predict_log_probs)
from deepspeech2.model.layers import (ConvFrontEnd, FullyConnected, RowConv, SequenceBatchNorm, UtteranceMeanNorm,
                                      clipped_relu, sequence_mask)
from deepspeech2.model.rnn import (BatchNormRNN, KerasGRU, gru_recurrence, lstm_recurrence,
                                   rnn_recurrence)

__all__ = [
    "BLANK_ID", "BatchNormRNN", "ConvFrontEnd", "DS1", "DS2_PAPER_EN", "DS2_SMALL", "DS2_STREAMING",
    "FullyConnected", "KerasGRU", "ModelConfig", "PRESETS", "RowConv", "SequenceBatchNorm", "TINY",
    "UtteranceMeanNorm",
    "build_model", "clipped_relu", "ctc_feasible", "ctc_label_steps", "ctc_loss",
    "gru_recurrence", "load_model_config", "log_probs", "lstm_recurrence", "output_length", "output_steps",
    "predict_log_probs", "preset", "rnn_recurrence", "sequence_mask",
]
