"""The model's time geometry, without TensorFlow or Keras: conv output lengths, output steps for an utterance,
whether CTC can fit its labels, and the arithmetic an utterance costs (`forward_flops`).

Plain arithmetic on ints, so `data/` (make-shards, validate, the pipeline's filter and the trainer's count), the
decoders' clock and `export/` get the exact lengths without loading the model code; tensors work too. This module
never imports TensorFlow: when a TF tensor comes in, TF is loaded already, and the few tensor ops below take it from
`sys.modules`.

The functions that take a `config` read the fields of a `deepspeech2.model_config.ModelConfig` without importing it:
`ModelConfig` checks its own front end with `conv_stack_output_length`, so the import runs from there to here.
"""

from __future__ import annotations

import sys

from deepspeech2.feature_config import FeatureConfig, num_frames


def conv_output_length(length, kernel, stride, padding):
    """Output steps of a strided conv along one axis; works on ints and on int tensors of any backend.

    "valid": `(length - kernel) // stride + 1` (0 when shorter than the kernel);
    "same": zero padding of `kernel - 1` frames, `ceil(length / stride)`.
    """
    if padding == "same":
        return (length + stride - 1) // stride
    out = (length - kernel) // stride + 1
    # (out + |out|) / 2 is max(out, 0) with operators alone, so no tensor library is imported here.
    return max(out, 0) if isinstance(out, int) else (out + abs(out)) // 2


def same_padding(kernel):
    """Zero frames `(before, after)` that "same" padding adds around an axis for a kernel of this size: `(k - 1) // 2`
    and `k // 2`, so `ceil(length / stride)` outputs come out and output `j` is centred on input `j * stride`."""
    return (kernel - 1) // 2, kernel // 2


def conv_stack_output_length(length, kernels, strides, padding):
    """`conv_output_length` through a stack of convs: one kernel and stride per conv along this axis."""
    for kernel, stride in zip(kernels, strides):
        length = conv_output_length(length, kernel, stride, padding)
    return length


def output_length(config, feature_lengths):
    """Output steps for `feature_lengths` input frames (int or int tensor)."""
    return conv_stack_output_length(feature_lengths, [k for k, _ in config.conv_kernel_sizes],
                                    [s for s, _ in config.conv_strides], config.conv_padding)


def min_input_frames(config) -> int:
    """The fewest input frames for which the model gives one output step (the conv stack's receptive field in
    time with "valid" padding; 1 with "same")."""
    frames = 1
    if config.conv_padding == "valid":
        for (kernel, _), (stride, _) in reversed(list(zip(config.conv_kernel_sizes, config.conv_strides))):
            frames = (frames - 1) * stride + kernel
    return frames


RNN_GATES = {"rnn": 1, "gru": 3, "cudnn_gru": 3, "lstm": 4}  # input and recurrent matmuls per step, per direction


def forward_flops(config, frames: int) -> float:
    """FLOPs (2 per multiply-add) of one utterance of `frames` feature frames through the model, forward: each conv
    at its output positions, the FC layers, each RNN layer's input and recurrent matmuls (x gates x directions),
    the row conv and the output layer, at every output step. BatchNorm, activations and CTC are left out (well
    under 1% of it for the presets). A training step costs about 3x this: the backward pass computes a gradient
    for the input and one for the weights of every matmul."""
    flops, time_steps, bins, channels = 0.0, frames, config.feature_dim, 1
    for filters, (kt, kf), (st, sf) in zip(config.conv_filters, config.conv_kernel_sizes, config.conv_strides):
        time_steps = conv_output_length(time_steps, kt, st, config.conv_padding)
        bins = conv_output_length(bins, kf, sf, config.conv_padding)
        flops += 2 * time_steps * bins * filters * kt * kf * channels
        channels = filters
    steps = output_length(config, frames)
    features = config.frontend_output_dim
    for units in config.fc_before_units:
        flops += 2 * steps * features * units
        features = units
    directions = 2 if config.bidirectional else 1
    gates = RNN_GATES[config.rnn_type]
    for _ in range(config.rnn_layers):
        flops += 2 * steps * directions * gates * config.rnn_units * (features + config.rnn_units)
        features = config.rnn_units  # the directions are summed (DS2 §3.2)
    if config.row_conv_context:  # per feature, the current step and `row_conv_context` future ones
        flops += 2 * steps * features * (config.row_conv_context + 1)
    for units in (*config.fc_after_units, config.vocab_size):
        flops += 2 * steps * features * units
        features = units
    return float(flops)


# "Can CTC fit this utterance?" has one definition, used by `ds2-prepare validate`, `ds2-make-shards`, the
# input pipeline's filter and the trainer's count: the model's exact output steps for the audio against the
# fewest steps the labels need.


def _tensorflow_for(*values):
    """The `tensorflow` module if any of `values` is a TF tensor, else None. Never imports TF: a TF tensor
    exists only once something else has."""
    tf = sys.modules.get("tensorflow")
    return tf if tf is not None and any(tf.is_tensor(v) for v in values) else None


def ctc_label_steps(label_ids):
    """The fewest CTC output steps that can emit `label_ids`: one per label, plus a blank between each pair
    of equal neighbours (CTC merges repeats that no blank separates).

    Args:
        label_ids: label ids (from `Vocabulary.encode`, so any vocabulary and script counts alike), as a
            sequence of ints; or a 1-D int tensor (inside tf.data).

    Returns:
        int; an int32 scalar tensor for a tensor input.
    """
    tf = _tensorflow_for(label_ids)
    if tf is not None:
        repeats = tf.reduce_sum(tf.cast(tf.equal(label_ids[1:], label_ids[:-1]), tf.int32))
        return tf.size(label_ids, out_type=tf.int32) + repeats
    ids = [int(i) for i in label_ids]
    return len(ids) + sum(a == b for a, b in zip(ids, ids[1:]))


def output_steps(model_config, feature_config: FeatureConfig, num_samples):
    """The model's exact output steps for `num_samples` audio samples: `output_length` of the feature frames.

    Args:
        model_config: the model (its conv front end sets the time stride and edge effects).
        feature_config: the features (window and hop set the frame count).
        num_samples: audio samples at `feature_config.sample_rate`: an int, or an int tensor of any shape.

    Returns:
        int; an int32 tensor of the same shape for a tensor input.
    """
    tf = _tensorflow_for(num_samples)
    if tf is not None:
        num_samples = tf.cast(num_samples, tf.int32)  # int32 steps, whatever int type the samples come in
    steps = output_length(model_config, num_frames(num_samples, feature_config))
    return steps if tf is not None else int(steps)


def ctc_feasible(model_config, feature_config: FeatureConfig, num_samples, label_steps):
    """True if CTC can align labels needing `label_steps` steps (`ctc_label_steps`) to `num_samples`
    samples of audio through this model; otherwise its loss is infinite.

    Args:
        model_config: the model.
        feature_config: the features.
        num_samples: audio samples (int, or int tensor).
        label_steps: from `ctc_label_steps` (int, or int tensor).

    Returns:
        bool; a bool tensor for tensor inputs.
    """
    steps = output_steps(model_config, feature_config, num_samples)
    tf = _tensorflow_for(steps, label_steps)
    if tf is not None:
        return tf.cast(steps, tf.int32) >= tf.cast(label_steps, tf.int32)
    return steps >= int(label_steps)
