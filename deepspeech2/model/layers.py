"""Length-aware layers around the RNN stack: conv front end, sequence-wise batch norm, row conv, FC.

Every layer takes `(inputs, lengths)`: `inputs` is batch-major `(batch, time, ...)` and `lengths` is an
int32 `(batch,)` tensor of valid frames. Frames at `t >= length` are padding: they never change the
outputs at valid frames, and layers write zeros there.
"""

from __future__ import annotations

import math

import keras
from keras import ops

RELU_CLIP = 20.0  # clipped ReLU min(max(x, 0), 20) (DS2 §3.1)


@keras.saving.register_keras_serializable(package="deepspeech2")
def clipped_relu(x):
    """min(max(x, 0), 20) (DS2 §3.1)."""
    return ops.clip(x, 0.0, RELU_CLIP)


def sequence_mask(lengths, max_length, dtype="bool"):
    """`(batch, max_length)` mask, true (1) at frames `t < lengths[b]`."""
    mask = ops.expand_dims(ops.arange(max_length, dtype="int32"), 0) < ops.expand_dims(lengths, 1)
    return mask if dtype == "bool" else ops.cast(mask, dtype)


def conv_output_length(length, kernel, stride, padding):
    """Output steps of a strided conv along one axis; works on ints and int tensors.

    "valid": `(length - kernel) // stride + 1` (0 when shorter than the kernel);
    "same": zero padding of `kernel - 1` frames, `ceil(length / stride)`.
    """
    if padding == "same":
        return (length + stride - 1) // stride
    out = (length - kernel) // stride + 1
    return max(out, 0) if isinstance(out, int) else ops.maximum(out, 0)


@keras.saving.register_keras_serializable(package="deepspeech2")
class SequenceBatchNorm(keras.layers.Layer):
    """Batch norm whose statistics cover valid frames only (sequence-wise BN, DS2 §3.2 eq. 4).

    Mean and variance are taken per channel (last axis) over batch x time (and, for rank-4 conv
    activations, frequency), counting only frames `t < length`. Inference uses moving averages.

    Args:
        momentum: moving-average momentum.
        epsilon: added to the variance.

    Call args:
        inputs: `(batch, time, channels)` or `(batch, time, freq, channels)`.
        mask: `(batch, time)` bool or 0/1, true at valid frames.
        training: use batch statistics and update the moving averages.

    Returns:
        The normalized inputs, same shape (padding frames are normalized too; callers zero them).
    """

    def __init__(self, momentum=0.99, epsilon=1e-3, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.epsilon = epsilon

    def build(self, input_shape):
        channels = input_shape[-1]
        # autocast=False: fp32 also under mixed precision (the statistics are computed in fp32).
        self.gamma = self.add_weight(shape=(channels,), initializer="ones", autocast=False, name="gamma")
        self.beta = self.add_weight(shape=(channels,), initializer="zeros", autocast=False, name="beta")
        self.moving_mean = self.add_weight(shape=(channels,), initializer="zeros", trainable=False, autocast=False,
                                           name="moving_mean")
        self.moving_variance = self.add_weight(shape=(channels,), initializer="ones", trainable=False,
                                               autocast=False, name="moving_variance")

    def call(self, inputs, mask, training=None):
        x = ops.cast(inputs, "float32")  # statistics in fp32 also under mixed precision
        if training:
            # Masked sums over batch x time (x frequency) as contractions with the 0/1 frame weights: one
            # read of `x` each, no masked copy.
            weights = ops.cast(mask, "float32")  # (B, T)
            spec = "bt,btc->c" if len(x.shape) == 3 else "bt,btfc->c"
            count = ops.maximum(ops.sum(weights) * math.prod(x.shape[2:-1]), 1.0)  # frames x bins per frame
            mean = ops.einsum(spec, weights, x) / count
            centered = x - mean
            variance = ops.einsum(spec, weights, ops.square(centered)) / count
            self.moving_mean.assign(self.momentum * self.moving_mean + (1.0 - self.momentum) * mean)
            self.moving_variance.assign(self.momentum * self.moving_variance + (1.0 - self.momentum) * variance)
        else:
            centered, variance = x - self.moving_mean, self.moving_variance
        y = centered * (self.gamma * ops.rsqrt(variance + self.epsilon)) + self.beta
        return ops.cast(y, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(momentum=self.momentum, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="deepspeech2")
class ConvFrontEnd(keras.layers.Layer):
    """1-3 2-D convolutions over (time, frequency), each with masked BN and clipped ReLU (DS2 §3.1, §3.2).

    Padding frames are zeroed before every conv, so outputs at valid steps do not depend on how much
    padding the batch has. Time and frequency are padded alike: "valid" (none; a batch must then be at
    least as long as the receptive field) or "same" (zeros, `(k - 1) // 2` before and `k // 2` after:
    explicit, so it never depends on the padded length).

    Args:
        filters: output channels per conv, e.g. `(32, 32)`.
        kernel_sizes: `(time, freq)` kernel per conv.
        strides: `(time, freq)` stride per conv.
        padding: "valid" or "same".

    Call args:
        inputs: `(batch, time, freq)` features.
        lengths: `(batch,)` int32 valid frames.

    Returns:
        `(outputs, output_lengths)`: `(batch, time', freq' * filters[-1])` and `(batch,)` int32, with
        `output_lengths = self.output_length(lengths)` and zeros at steps beyond it.
    """

    def __init__(self, filters=(32, 32), kernel_sizes=((3, 3), (3, 3)), strides=((2, 2), (2, 2)),
                 padding="valid", **kwargs):
        super().__init__(**kwargs)
        if padding not in ("valid", "same"):
            raise ValueError(f"`padding` must be 'valid' or 'same', got {padding!r}")
        if not len(filters) == len(kernel_sizes) == len(strides) >= 1:
            raise ValueError(f"`filters`, `kernel_sizes` and `strides` need one entry per conv, got "
                             f"{filters!r}, {kernel_sizes!r}, {strides!r}")
        self.filters = tuple(filters)
        self.kernel_sizes = tuple(tuple(k) for k in kernel_sizes)
        self.strides = tuple(tuple(s) for s in strides)
        self.padding = padding
        self.convs = [keras.layers.Conv2D(f, k, strides=s, use_bias=False, name=f"conv{i}")
                      for i, (f, k, s) in enumerate(zip(self.filters, self.kernel_sizes, self.strides))]
        self.norms = [SequenceBatchNorm(name=f"bn{i}") for i in range(len(self.filters))]

    def output_length(self, input_length):
        """Steps out for `input_length` frames in (int or int tensor)."""
        for (kernel, _), (stride, _) in zip(self.kernel_sizes, self.strides):
            input_length = conv_output_length(input_length, kernel, stride, self.padding)
        return input_length

    def output_dim(self, feature_dim):
        """Features per output step for `feature_dim` input bins."""
        for (_, kernel), (_, stride) in zip(self.kernel_sizes, self.strides):
            feature_dim = conv_output_length(feature_dim, kernel, stride, self.padding)
        return feature_dim * self.filters[-1]

    def build(self, input_shape):
        shape = (input_shape[0], None, input_shape[2], 1)
        for conv, norm, (kt, kf) in zip(self.convs, self.norms, self.kernel_sizes):
            if self.padding == "same":
                shape = (shape[0], None, shape[2] + kf - 1, shape[3])
            conv.build(shape)
            shape = conv.compute_output_shape(shape)
            norm.build(shape)

    def call(self, inputs, lengths, training=None):
        x = ops.expand_dims(inputs, -1)  # (B, T, F, 1)
        for conv, norm, (kt, kf), (st, _) in zip(self.convs, self.norms, self.kernel_sizes, self.strides):
            x = x * sequence_mask(lengths, ops.shape(x)[1], x.dtype)[:, :, None, None]
            if self.padding == "same":
                x = ops.pad(x, ((0, 0), ((kt - 1) // 2, kt // 2), ((kf - 1) // 2, kf // 2), (0, 0)))
            x = conv(x)  # (B, T', F', C)
            lengths = conv_output_length(lengths, kt, st, self.padding)
            mask = sequence_mask(lengths, ops.shape(x)[1])
            x = clipped_relu(norm(x, mask, training=training))
        x = x * ops.cast(mask, x.dtype)[:, :, None, None]
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1], x.shape[2] * x.shape[3])), lengths

    def get_config(self):
        config = super().get_config()
        config.update(filters=self.filters, kernel_sizes=self.kernel_sizes, strides=self.strides,
                      padding=self.padding)
        return config


@keras.saving.register_keras_serializable(package="deepspeech2")
class RowConv(keras.layers.Layer):
    """Lookahead ("row") convolution over `context` future steps, per feature (DS2 §3.5).

    `y[t, d] = sum_{j=0..context} W[j, d] * x[t + j, d]`, where `x` is zero beyond each sequence's length.

    Args:
        context: future steps `τ` each output sees.

    Call args:
        inputs: `(batch, time, features)`.
        lengths: `(batch,)` int32 valid steps.

    Returns:
        `(batch, time, features)`, zero at steps `t >= length`.
    """

    def __init__(self, context, **kwargs):
        super().__init__(**kwargs)
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise ValueError(f"`context` must be a non-negative int, got {context!r}")
        self.context = context

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(self.context + 1, input_shape[-1]), initializer="glorot_uniform",
                                      name="kernel")

    def call(self, inputs, lengths):
        mask = sequence_mask(lengths, ops.shape(inputs)[1], inputs.dtype)[:, :, None]
        x = ops.pad(inputs * mask, ((0, 0), (0, self.context), (0, 0)))  # (B, T + τ, D)
        y = ops.depthwise_conv(x, ops.expand_dims(self.kernel, -1), padding="valid")  # (B, T, D)
        return y * mask

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(context=self.context)
        return config


@keras.saving.register_keras_serializable(package="deepspeech2")
class FullyConnected(keras.layers.Layer):
    """Per-frame dense layer with clipped ReLU (DS2 §3.1) and dropout; zero at padding frames.

    Args:
        units: output features.
        dropout: dropout rate during training.

    Call args:
        inputs: `(batch, time, features)`.
        lengths: `(batch,)` int32 valid steps.

    Returns:
        `(batch, time, units)`.
    """

    def __init__(self, units, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.dropout = dropout
        self.dense = keras.layers.Dense(units, activation=clipped_relu, name="dense")
        self.dropout_layer = keras.layers.Dropout(dropout, name="dropout")

    def build(self, input_shape):
        self.dense.build(input_shape)

    def call(self, inputs, lengths, training=None):
        x = self.dropout_layer(self.dense(inputs), training=training)
        return x * sequence_mask(lengths, ops.shape(x)[1], x.dtype)[:, :, None]

    def compute_output_shape(self, input_shape):
        return input_shape[:-1] + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, dropout=self.dropout)
        return config
