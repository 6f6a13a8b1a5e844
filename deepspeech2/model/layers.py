"""Length-aware layers around the RNN stack: conv front end, sequence-wise batch norm, row conv, FC.

Every layer takes `(inputs, lengths)`: `inputs` is batch-major `(batch, time, ...)` and `lengths` is an
int32 `(batch,)` tensor of valid frames. Frames at `t >= length` are padding: they never change the
outputs at valid frames, and layers write zeros there.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from deepspeech2.geometry import conv_output_length, conv_stack_output_length, same_padding

RELU_CLIP = 20.0  # clipped ReLU min(max(x, 0), 20) (DS2 §3.1)


def clipped_relu(x, mask=None):
    """min(max(x, 0), 20) (DS2 §3.1), times `mask` (broadcastable to `x`) when given.

    Written as a rescaled relu6, with the mask folded into the rescaling: TF runs relu6 and its gradient
    as one fused kernel each, while min/max clipping and a separate mask cost about twice as many passes
    over the (large) conv activations.
    """
    scale = RELU_CLIP / 6.0 if mask is None else mask * (RELU_CLIP / 6.0)
    return ops.relu6(x * (6.0 / RELU_CLIP)) * scale


def sequence_mask(lengths, max_length, dtype="bool"):
    """`(batch, max_length)` mask, true (1) at frames `t < lengths[b]`."""
    mask = ops.expand_dims(ops.arange(max_length, dtype="int32"), 0) < ops.expand_dims(lengths, 1)
    return mask if dtype == "bool" else ops.cast(mask, dtype)


def _channel_sums(x, weights):
    """Per-channel sums of `x` `(B, T[, F], C)` over all but the channel axis, weighting frame `(b, t)` by
    `weights[b, t]` `(B, T)`: a tensordot, i.e. one matmul that reads `x` once (TF's reductions over
    leading axes are several times slower)."""
    sums = ops.tensordot(weights, x, axes=([0, 1], [0, 1]))  # ([F,] C)
    return sums if len(sums.shape) == 1 else ops.sum(sums, axis=0)


def _frame_count(x, weights):
    """Valid frames times positions per frame (the frequency bins of conv activations)."""
    return ops.sum(weights) * math.prod(x.shape[2:-1])


def cross_replica_sum(x):
    """`x` summed over the replicas of a TensorFlow distribution strategy; `x` itself everywhere else.

    Sequence-wise BN takes its statistics over the whole global batch (synchronized BN): a model trained
    on N replicas is then the model trained on one device with the same batch, and its moving statistics
    see every replica's data, not replica 0's alone. Only TensorFlow's tf.distribute runs replicas here
    (Keras's own `BatchNormalization(synchronized=True)` is TF-only for the same reason); on the other
    backends, and outside a strategy, there is one replica.
    """
    if keras.backend.backend() != "tensorflow":
        return x
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return x
    return context.all_reduce(tf.distribute.ReduceOp.SUM, x)


def masked_moments(x, weights, fused=False):
    """Per-channel mean and variance over the frames with weight 1, across all replicas.

    Args:
        x: `(batch, time, channels)` or `(batch, time, freq, channels)` fp32 (or bf16 with `fused`).
        weights: `(batch, time)` fp32, 1 for valid frames and 0 for padding.
        fused: take this replica's sums with the fused CPU op (`fused_cpu.py`; one pass over `x` in its own dtype)
            rather than TF's ops.

    Returns:
        `(mean, variance, count)`: `(channels,)`, `(channels,)` and the number of positions they cover
        (valid frames times frequency bins, summed over replicas; at least 1).
    """
    channels = x.shape[-1]
    if fused:
        from deepspeech2.model import fused_cpu

        local = ops.reshape(fused_cpu.library().ds2_masked_moment_sums(x, weights), (2 * channels,))
    else:
        local = ops.concatenate([_channel_sums(x, weights), _channel_sums(ops.square(x), weights)])
    # One all-reduce for both sums and the count.
    sums = cross_replica_sum(ops.concatenate([local, ops.reshape(_frame_count(x, weights), (1,))]))
    count = ops.maximum(sums[2 * channels], 1.0)
    mean = sums[:channels] / count
    # E[x^2] - E[x]^2 saves a pass over x against E[(x - mean)^2]; in fp32 the cancellation error stays
    # small for activations whose mean is not far above their spread.
    return mean, ops.maximum(sums[channels:2 * channels] / count - ops.square(mean), 0.0), count


def _statistics_gradient(d_beta, d_gamma, mean, inv_std, scale, count):
    """`(c1, c0)` of the BN gradient `dx = scale * g - w * (x * c1 + c0)`: the part through the batch statistics,
    from this replica's `d_beta = sum(g)` and `d_gamma = sum(g * x_hat)`.

    The statistics saw the frames with w = 1 on every replica, so the sums through them are global too (the
    parameter gradients stay local: the trainer all-reduces those).
    """
    channels = d_beta.shape[-1]
    sums = cross_replica_sum(ops.concatenate([d_beta, d_gamma]))
    c1 = scale * inv_std * sums[channels:] / count
    return c1, scale * sums[:channels] / count - mean * c1


@ops.custom_gradient
def _batch_normalize(x, weights, mean, inv_std, count, gamma, beta):
    """`gamma * (x - mean) * inv_std + beta` for the masked batch statistics `mean`, `inv_std` of `x`, with
    the full BN gradient (through the statistics) written out: a few passes over `x` instead of autodiff's
    many.

    Args:
        x: `(batch, time[, freq], channels)` fp32.
        weights: `(batch, time)` fp32, 1 for the frames the statistics were taken over.
        mean: `(channels,)` masked mean of `x` (no gradient needed).
        inv_std: `(channels,)` `1 / sqrt(masked variance + epsilon)` (no gradient needed).
        count: positions the statistics cover, over all replicas (`masked_moments`).
        gamma: `(channels,)` scale.
        beta: `(channels,)` offset.

    Returns:
        Same shape as `x`.
    """
    scale = gamma * inv_std

    def grad(*args, upstream=None):
        g = upstream_gradient(args, upstream)
        # y is defined on every frame, so dgamma and dbeta sum over all of them.
        everywhere = ops.ones_like(weights)
        d_beta = _channel_sums(g, everywhere)
        d_gamma = (_channel_sums(g * x, everywhere) - mean * d_beta) * inv_std  # sum(g * x_hat)
        # dx = scale * (g - w * (d_beta + x_hat * d_gamma) / count)
        c1, c0 = _statistics_gradient(d_beta, d_gamma, mean, inv_std, scale, count)
        w = ops.reshape(weights, ops.shape(weights) + (1,) * (len(x.shape) - 2))  # (B, T, 1[, 1])
        zeros = ops.zeros_like(mean)
        return (g * scale - w * (x * c1 + c0), ops.zeros_like(weights), zeros, zeros, ops.zeros_like(count),
                d_gamma, d_beta)

    return x * scale + (beta - mean * scale), grad


def bn_clipped_relu_fused_cpu(x, weights, mean, inv_std, count, gamma, beta):
    """`clipped_relu(_batch_normalize(x, ...), weights)` through the fused CPU ops (`fused_cpu.py`): the same
    arguments, outputs and gradients (x, gamma and beta), in one pass over `x` forward and two backward.

    `x` may be bf16 (the conv's output under mixed_bfloat16): the op reads it as it is and returns `y` in `x`'s
    dtype, which the next conv (or the RNN's projection) casts to anyway, so neither side needs a cast pass. The
    statistics and the BN gradient's per-channel terms stay TF ops, summed across replicas as in `_batch_normalize`.
    """
    from deepspeech2.model import fused_cpu

    lib = fused_cpu.library()

    @ops.custom_gradient
    def fused(x, weights, mean, inv_std, count, gamma, beta):
        scale = gamma * inv_std
        shift = beta - mean * scale
        y = lib.ds2_bn_clipped_relu_forward(x, scale, shift, weights, Tout=x.dtype, clip=RELU_CLIP)

        def grad(*args, upstream=None):
            g = upstream_gradient(args, upstream)
            # sum(g) and sum(g * (x - mean)) of the BN output's gradient g: d_beta and d_gamma / inv_std.
            sums = lib.ds2_bn_clipped_relu_grad_sums(g, x, scale, shift, weights, mean, clip=RELU_CLIP)
            d_beta, d_gamma = sums[0], sums[1] * inv_std
            c1, c0 = _statistics_gradient(d_beta, d_gamma, mean, inv_std, scale, count)
            d_x = lib.ds2_bn_clipped_relu_grad_input(g, x, scale, shift, weights, c1, c0, clip=RELU_CLIP)
            zeros = ops.zeros_like(mean)
            return d_x, ops.zeros_like(weights), zeros, zeros, ops.zeros_like(count), d_gamma, d_beta

        return y, grad

    return fused(x, weights, mean, inv_std, count, gamma, beta)


def frontend_kernel_available(dtype="float32") -> bool:
    """Whether the front end's BN + clipped ReLU trains with the fused CPU ops here on conv outputs of `dtype`
    (`fused_cpu.usable`: TensorFlow on a CPU with AVX2, outside XLA, the library built; fp32 or bf16, as the ops
    read no fp16). DS2_FRONTEND_UNFUSED=1 keeps TF's ops."""
    import os

    from deepspeech2.model import fused_cpu

    return (keras.backend.standardize_dtype(dtype) in ("float32", "bfloat16")
            and os.environ.get("DS2_FRONTEND_UNFUSED") != "1" and fused_cpu.usable("bn_clipped_relu"))


def upstream_gradient(args, upstream):
    """The output gradient inside a `keras.ops.custom_gradient` function's `grad(*args, upstream=None)`.

    TF passes it positionally, JAX as the single argument, torch as `upstream`.
    """
    return args[0] if upstream is None else upstream


@keras.saving.register_keras_serializable(package="deepspeech2")
class SequenceBatchNorm(keras.layers.Layer):
    """Batch norm whose statistics cover valid frames only (sequence-wise BN, DS2 §3.2 eq. 4).

    Mean and variance are taken per channel (last axis) over batch x time (and, for rank-4 conv
    activations, frequency), counting only frames `t < length`, and over all replicas of a TF
    distribution strategy (`cross_replica_sum`). Inference uses moving averages.

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
            weights = ops.cast(mask, "float32")
            y = _batch_normalize(x, weights, *self.batch_statistics(x, weights))
        else:
            scale = self.gamma * ops.rsqrt(self.moving_variance + self.epsilon)
            y = x * scale + (self.beta - self.moving_mean * scale)
        return ops.cast(y, self.compute_dtype)

    def batch_statistics(self, x, weights, fused=False):
        """`(mean, inv_std, count, gamma, beta)` for training on `x` over the frames of weight 1 of `weights`
        `(batch, time)` fp32; updates the moving averages. The statistics are fp32; `fused` (`masked_moments`) reads
        `x` in its own dtype."""
        x = ops.stop_gradient(x if fused else ops.cast(x, "float32"))
        mean, variance, count = masked_moments(x, weights, fused=fused)
        self.moving_mean.assign(self.momentum * self.moving_mean + (1.0 - self.momentum) * mean)
        self.moving_variance.assign(self.momentum * self.moving_variance + (1.0 - self.momentum) * variance)
        # Variables go in as tensors: TF's custom_gradient must not see variable reads inside.
        return (mean, ops.rsqrt(variance + self.epsilon), count, ops.cast(self.gamma, "float32"),
                ops.cast(self.beta, "float32"))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(momentum=self.momentum, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="deepspeech2")
class UtteranceMeanNorm(keras.layers.Layer):
    """Subtract each utterance's mean frame, over its valid frames: cepstral mean normalization.

    On log spectra a fixed colouring of the whole utterance (a microphone, a channel, a voice's spectral
    tilt) is a constant added to every frame, so subtracting the utterance's per-bin mean removes it and the
    model sees what changes over time. It needs the whole utterance, so a model with it can't stream.
    With `scale`, each bin is also divided by its std over the utterance (floored at `STD_FLOOR`): mean and
    variance normalization.

    Call args:
        inputs: `(batch, time, features)` (normalized) features.
        lengths: `(batch,)` int32 valid frames.

    Returns:
        `(batch, time, features)`: `x - mean_t(x[:length])` (divided by `std_t(x[:length])` with `scale`), zero
        at frames `t >= length`.
    """

    STD_FLOOR = 0.1  # in units of the global std the inputs are normalized by: a near-constant bin stays small

    def __init__(self, scale: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.scale = bool(scale)

    def call(self, inputs, lengths):
        x = ops.cast(inputs, "float32")
        mask = sequence_mask(lengths, ops.shape(x)[1], "float32")[:, :, None]  # (B, T, 1)
        count = ops.maximum(ops.sum(mask, axis=1, keepdims=True), 1.0)  # (B, 1, 1); an empty row stays 0
        mean = ops.sum(x * mask, axis=1, keepdims=True) / count
        x = (x - mean) * mask
        if self.scale:
            std = ops.sqrt(ops.sum(ops.square(x), axis=1, keepdims=True) / count)
            x = x / ops.maximum(std, self.STD_FLOOR)
        return ops.cast(x, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(scale=self.scale)
        return config

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package="deepspeech2")
class ConvFrontEnd(keras.layers.Layer):
    """1-3 2-D convolutions over (time, frequency), each with masked BN and clipped ReLU (DS2 §3.1, §3.2).

    Padding frames are zero going into every conv (the input is masked, and each clipped ReLU multiplies
    by the mask), so outputs at valid steps do not depend on how much padding the batch has, and BN
    statistics cover valid frames only. Time and frequency are padded alike: "valid" (none; a batch must then be at
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
        # fp32 even under mixed precision: elementwise math on these large activations is faster in fp32
        # on CPU, and BN wants fp32 statistics anyway.
        self.norms = [SequenceBatchNorm(dtype="float32", name=f"bn{i}") for i in range(len(self.filters))]

    def output_length(self, input_length):
        """Steps out for `input_length` frames in (int or int tensor)."""
        return conv_stack_output_length(input_length, [k[0] for k in self.kernel_sizes],
                                        [s[0] for s in self.strides], self.padding)

    def output_dim(self, feature_dim):
        """Features per output step for `feature_dim` input bins."""
        bins = conv_stack_output_length(feature_dim, [k[1] for k in self.kernel_sizes], [s[1] for s in self.strides],
                                        self.padding)
        return bins * self.filters[-1]

    def build(self, input_shape):
        shape = (input_shape[0], None, input_shape[2], 1)
        for conv, norm, (kt, kf) in zip(self.convs, self.norms, self.kernel_sizes):
            if self.padding == "same":
                shape = (shape[0], None, shape[2] + kf - 1, shape[3])
            conv.build(shape)
            shape = conv.compute_output_shape(shape)
            norm.build(shape)

    def call(self, inputs, lengths, training=None):
        mask = sequence_mask(lengths, ops.shape(inputs)[1], inputs.dtype)
        x = ops.expand_dims(inputs * mask[:, :, None], -1)  # (B, T, F, 1), zero at padding
        for i, ((kt, kf), (st, _)) in enumerate(zip(self.kernel_sizes, self.strides)):
            if self.padding == "same":
                x = ops.pad(x, ((0, 0), same_padding(kt), same_padding(kf), (0, 0)))
            lengths = conv_output_length(lengths, kt, st, self.padding)
            x = self.conv_layer(i, x, lengths, training=training)  # (B, T', F', C), zero at padding
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1], x.shape[2] * x.shape[3])), lengths

    def conv_layer(self, index, x, output_lengths, training=None):
        """Conv `index` with its BN and clipped ReLU on input that is already padded (no padding is added here).

        The streaming step (`deepspeech2.streaming`) runs each conv on a chunk with its left context through
        this method, so offline and streaming share the math.

        Args:
            index: which conv (0-based).
            x: `(batch, time, freq, channels)` input of that conv, with any "same" padding already added.
            output_lengths: `(batch,)` int32 valid output steps; outputs beyond are zeroed.
            training: BN uses batch statistics over the valid steps.

        Returns:
            `(batch, (time - kernel) // stride + 1, freq', filters[index])`.
        """
        x = self.convs[index](x)
        mask = sequence_mask(output_lengths, ops.shape(x)[1], "float32")
        if training and frontend_kernel_available(x.dtype):
            # The fused op reads the conv's output in its own dtype, bf16 under mixed_bfloat16.
            return bn_clipped_relu_fused_cpu(x, mask, *self.norms[index].batch_statistics(x, mask, fused=True))
        return clipped_relu(self.norms[index](x, mask, training=training), mask[:, :, None, None])

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
        return self.window_outputs(x) * mask  # (B, T, D)

    def window_outputs(self, x):
        """The outputs whose `τ + 1` input steps all lie inside `x`: `(batch, time, features)` ->
        `(batch, time - τ, features)`. `call` pads τ zero steps first; the streaming step keeps the last τ
        inputs of each chunk instead, so its outputs lag the input by τ steps. The streaming step calls it outside
        `call`, where a mixed-precision policy does not cast the kernel: it is cast to `x`'s dtype here."""
        return ops.depthwise_conv(x, ops.expand_dims(ops.cast(self.kernel, x.dtype), -1), padding="valid")

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
        self.dense = keras.layers.Dense(units, name="dense")
        self.dropout_layer = keras.layers.Dropout(dropout, name="dropout")

    def build(self, input_shape):
        self.dense.build(input_shape)

    def call(self, inputs, lengths, training=None):
        x = self.dense(inputs)
        x = clipped_relu(x, sequence_mask(lengths, ops.shape(x)[1], x.dtype)[:, :, None])
        return self.dropout_layer(x, training=training)

    def compute_output_shape(self, input_shape):
        return input_shape[:-1] + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, dropout=self.dropout)
        return config
