"""The DeepSpeech model (DS2 Fig. 1): conv front end -> FC -> RNN stack -> row conv -> FC -> logits."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from deepspeech2.model.layers import ConvFrontEnd, FullyConnected, RowConv, UtteranceMeanNorm
from deepspeech2.model.rnn import BatchNormRNN, KerasGRU
from deepspeech2.model_config import ModelConfig


def build_model(config: ModelConfig, name: str = "deepspeech2") -> keras.Model:
    """A functional Keras model for `config`; saves and loads as `.keras`.

    Inputs: `{"features": (batch, time, feature_dim) float, "feature_lengths": (batch,) int32}`.
    Outputs: `{"logits": (batch, time', vocab_size) fp32, "output_lengths": (batch,) int32}`, with
    `time'` and `output_lengths` given by `deepspeech2.geometry.output_length(config, ...)`. Logits stay
    fp32 under mixed precision (the softmax and CTC want the range).
    """
    features = keras.Input((None, config.feature_dim), name="features")
    feature_lengths = keras.Input((), dtype="int32", name="feature_lengths")
    x, lengths = features, feature_lengths
    if config.utterance_cmn:
        x = UtteranceMeanNorm(scale=config.utterance_cvn, name="utterance_cmn")(x, lengths)
    if config.conv_filters:
        x, lengths = ConvFrontEnd(config.conv_filters, config.conv_kernel_sizes, config.conv_strides,
                                  config.conv_padding, name="frontend")(x, lengths)
    for i, units in enumerate(config.fc_before_units):
        x = FullyConnected(units, config.fc_dropout, name=f"fc_before{i}")(x, lengths)
    for i in range(config.rnn_layers):
        if config.rnn_type == "cudnn_gru":
            rnn = KerasGRU(config.rnn_units, config.bidirectional, name=f"rnn{i}")
        else:
            rnn = BatchNormRNN(config.rnn_units, config.rnn_type, config.bidirectional, config.rnn_batch_norm,
                               name=f"rnn{i}")
        x = rnn(x, lengths)
        if config.rnn_dropout:  # padding frames are zero and stay zero
            x = keras.layers.Dropout(config.rnn_dropout, name=f"rnn{i}_dropout")(x)
    if config.row_conv_context:
        x = RowConv(config.row_conv_context, name="row_conv")(x, lengths)
    for i, units in enumerate(config.fc_after_units):
        x = FullyConnected(units, config.fc_dropout, name=f"fc_after{i}")(x, lengths)
    logits = keras.layers.Dense(config.vocab_size, dtype="float32", name="logits")(x)
    return keras.Model({"features": features, "feature_lengths": feature_lengths},
                       {"logits": logits, "output_lengths": lengths}, name=name)


def log_probs(model: keras.Model, features, feature_lengths, training=False):
    """Log-softmax outputs for one batch.

    Args:
        model: from `build_model`.
        features: `(batch, time, feature_dim)`.
        feature_lengths: `(batch,)` int32.
        training: run in training mode (batch statistics, dropout).

    Returns:
        `(log_probs, output_lengths)`: `(batch, time', vocab_size)` fp32 and `(batch,)` int32 tensors.
    """
    outputs = model({"features": features, "feature_lengths": feature_lengths}, training=training)
    return ops.log_softmax(outputs["logits"], axis=-1), outputs["output_lengths"]


def predict_log_probs(model: keras.Model, features, feature_lengths, batch_size: int = 32):
    """Log-probabilities for many utterances, run through the model's compiled predict step in batches.

    Args:
        model: from `build_model`.
        features: `(num_utterances, time, feature_dim)` padded features.
        feature_lengths: `(num_utterances,)` valid frames.
        batch_size: utterances per model call.

    Returns:
        `(log_probs, output_lengths)` numpy arrays: `(num_utterances, time', vocab_size)` fp32 and
        `(num_utterances,)` int32.
    """
    outputs = model.predict({"features": np.asarray(features, np.float32),
                             "feature_lengths": np.asarray(feature_lengths, np.int32)},
                            batch_size=batch_size, verbose=0)
    return ops.convert_to_numpy(ops.log_softmax(outputs["logits"], axis=-1)), outputs["output_lengths"]
