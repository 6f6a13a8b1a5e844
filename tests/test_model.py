import dataclasses
import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from deepspeech2.geometry import output_length
from deepspeech2.model import (BatchNormRNN, ConvFrontEnd, FullyConnected, KerasGRU, RowConv, SequenceBatchNorm,
                               UtteranceMeanNorm, build_model, ctc_loss, gru_recurrence, log_probs, lstm_recurrence,
                               predict_log_probs, rnn_recurrence)
from deepspeech2.model_config import DS1, DS2_SMALL, PRESETS, TINY, ModelConfig, preset

RNG = np.random.default_rng(0)


def _random(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _with_garbage(x, lengths, extra=5):
    """`x` with its padding and `extra` more frames filled with large random values."""
    x = np.concatenate([x, np.zeros((x.shape[0], extra) + x.shape[2:], x.dtype)], axis=1)
    for b, length in enumerate(lengths):
        x[b, length:] = 100 * _random(*x[b, length:].shape)
    return x


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# ----------------------------------------------------------------------------------------------- config


def test_presets_are_valid_and_small_matches_paddlespeech():
    for config in PRESETS.values():
        assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert preset("ds2-small") is DS2_SMALL
    assert DS2_SMALL.frontend_output_dim == 39 * 32 == 1248  # 161 -> 80 -> 39 bins, 32 channels
    assert DS2_SMALL.time_stride == 4
    assert DS1.feature_dim == 494 and DS1.frontend_output_dim == 494


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="unknown ModelConfig keys.*'rnn_size'"):
        ModelConfig.from_dict({"rnn_size": 3})
    with pytest.raises(ValueError, match="`conv_strides`"):
        ModelConfig(conv_strides=((2, 2),))
    with pytest.raises(ValueError, match="`row_conv_context`"):
        ModelConfig(bidirectional=True, row_conv_context=2)
    with pytest.raises(ValueError, match=r"`rnn_dropout` must be in \[0, 1\), got 1.0"):
        ModelConfig(rnn_dropout=1.0)
    with pytest.raises(ValueError, match="`fc_dropout`"):
        ModelConfig(fc_dropout=-0.1)
    with pytest.raises(ValueError, match="`rnn_type`.*'transformer'"):
        ModelConfig(rnn_type="transformer")
    with pytest.raises(ValueError, match="`name`='ds3'"):
        preset("ds3")


# ------------------------------------------------------------------------------------------ layer configs

LAYERS = [
    lambda: SequenceBatchNorm(momentum=0.9, epsilon=1e-5, name="bn"),
    lambda: ConvFrontEnd((4, 6), ((3, 5), (3, 3)), ((2, 2), (1, 2)), "same", name="frontend"),
    lambda: RowConv(3, name="row_conv"),
    lambda: FullyConnected(8, dropout=0.1, name="fc"),
    lambda: BatchNormRNN(8, cell="lstm", bidirectional=True, batch_norm=False, name="rnn"),
    lambda: KerasGRU(8, bidirectional=True, name="gru"),
    lambda: UtteranceMeanNorm(name="cmn"),
]


@pytest.mark.parametrize("make", LAYERS)
def test_layer_config_round_trip(make):
    layer = make()
    config = layer.get_config()
    assert type(layer).from_config(config).get_config() == config


# ------------------------------------------------------------------------------------------- front end


@pytest.mark.parametrize("padding", ["valid", "same"])
def test_frontend_output_length_matches_shapes(padding):
    layer = ConvFrontEnd((3, 5), ((5, 3), (3, 3)), ((2, 2), (3, 1)), padding)
    for steps in (11, 12, 13, 30, 31):  # "valid" needs a batch at least as long as the receptive field (11)
        x = _random(3, steps, 20)
        lengths = np.array([steps, steps // 2, 1], np.int32)
        y, out_lengths = layer(x, lengths)
        assert y.shape[1] == layer.output_length(steps)
        assert y.shape[2] == layer.output_dim(20)
        np.testing.assert_array_equal(out_lengths, [layer.output_length(int(n)) for n in lengths])
        np.testing.assert_array_equal(out_lengths, layer.output_length(lengths))
        assert not np.any(y.numpy()[1, int(out_lengths[1]):])  # zeros beyond the length


@pytest.mark.parametrize("padding", ["valid", "same"])
@pytest.mark.parametrize("training", [False, True])
def test_frontend_padding_does_not_leak(padding, training):
    layer = ConvFrontEnd((3, 4), ((5, 3), (3, 3)), ((2, 2), (2, 1)), padding)
    lengths = np.array([23, 11, 16], np.int32)
    x = _random(3, 23, 12)
    y, out_lengths = layer(x, lengths, training=training)
    y_padded, _ = layer(_with_garbage(x, lengths, extra=7), lengths, training=training)
    for b, n in enumerate(out_lengths.numpy()):
        np.testing.assert_allclose(y_padded[b, :n], y[b, :n], atol=1e-4)


def test_sequence_batch_norm_uses_valid_frames_only():
    layer = SequenceBatchNorm(momentum=0.5, epsilon=1e-3)
    lengths = np.array([4, 2], np.int32)
    x = _with_garbage(_random(2, 4, 3), lengths, extra=2)
    mask = np.arange(6)[None, :] < lengths[:, None]
    y = layer(x, mask, training=True).numpy()
    valid = x[mask]  # (6, 3)
    mean, var = valid.mean(0), valid.var(0)
    np.testing.assert_allclose(y[mask], (valid - mean) / np.sqrt(var + 1e-3), atol=1e-4)
    np.testing.assert_allclose(layer.moving_mean.numpy(), 0.5 * mean, atol=1e-5)
    np.testing.assert_allclose(layer.moving_variance.numpy(), 0.5 + 0.5 * var, atol=1e-5)
    y_inference = layer(x, mask, training=False).numpy()
    np.testing.assert_allclose(y_inference, (x - 0.5 * mean) / np.sqrt(0.5 + 0.5 * var + 1e-3), atol=1e-4)


@pytest.mark.parametrize("shape", [(3, 7, 4), (3, 7, 5, 2)])
def test_sequence_batch_norm_gradient_matches_autodiff(shape):
    """The hand-written BN gradient against TF autodiff of the textbook masked formula."""
    layer = SequenceBatchNorm(epsilon=1e-3)
    lengths = np.array([7, 4, 1], np.int32)
    x = tf.constant(_with_garbage(_random(*shape), lengths, extra=0))
    mask = np.arange(7)[None, :] < lengths[:, None]
    layer.build(shape)
    layer.gamma.assign(_random(shape[-1]))
    layer.beta.assign(_random(shape[-1]))
    upstream = _random(*shape)
    weights = tf.constant(mask.reshape(mask.shape + (1,) * (len(shape) - 2)), tf.float32)

    def reference(x):
        count = tf.reduce_sum(weights) * np.prod(shape[2:-1])
        axes = tuple(range(len(shape) - 1))
        mean = tf.reduce_sum(x * weights, axes) / count
        variance = tf.reduce_sum(tf.square(x - mean) * weights, axes) / count
        return (x - mean) * tf.math.rsqrt(variance + 1e-3) * layer.gamma + layer.beta

    grads = []
    for fn in (lambda x: layer(x, mask, training=True), reference):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(fn(x) * upstream)
        grads.append(tape.gradient(loss, [x, layer.gamma, layer.beta]))
    for ours, expected in zip(*grads):
        np.testing.assert_allclose(ours, expected, atol=1e-4)


def test_utterance_mean_norm_matches_numpy_and_removes_a_fixed_colouring():
    lengths = np.array([7, 3, 0], np.int32)
    x = _random(3, 7, 5)
    out = UtteranceMeanNorm()(_with_garbage(x, lengths), lengths).numpy()
    assert out.shape == (3, 12, 5)
    for b, n in enumerate(lengths[:2]):
        np.testing.assert_allclose(out[b, :n], x[b, :n] - x[b, :n].mean(axis=0), atol=1e-5)
        np.testing.assert_array_equal(out[b, n:], 0)  # padding stays zero
    np.testing.assert_array_equal(out[2], 0)  # and so does an empty row (no division by zero)
    tilt = np.linspace(-3, 3, 5, dtype=np.float32)  # a fixed per-bin gain, in the log domain
    coloured = UtteranceMeanNorm()(x + tilt, lengths).numpy()
    np.testing.assert_allclose(coloured, UtteranceMeanNorm()(x, lengths).numpy(), atol=1e-5)


def test_utterance_variance_norm_matches_numpy_and_removes_a_fixed_gain_per_bin():
    lengths = np.array([7, 3, 0], np.int32)
    x = _random(3, 7, 5)
    layer = UtteranceMeanNorm(scale=True)
    out = layer(_with_garbage(x, lengths), lengths).numpy()
    for b, n in enumerate(lengths[:2]):
        centred = x[b, :n] - x[b, :n].mean(axis=0)
        expected = centred / np.maximum(centred.std(axis=0), UtteranceMeanNorm.STD_FLOOR)
        np.testing.assert_allclose(out[b, :n], expected, atol=1e-4)
        np.testing.assert_array_equal(out[b, n:], 0)
    np.testing.assert_array_equal(out[2], 0)
    scaled = layer(x * np.linspace(0.5, 3, 5, dtype=np.float32) + 1.0, lengths).numpy()  # per-bin scale and shift
    np.testing.assert_allclose(scaled, layer(x, lengths).numpy(), atol=1e-4)
    assert UtteranceMeanNorm.from_config(layer.get_config()).scale
    const = np.ones((1, 4, 5), np.float32)  # a constant bin: the floor, not a division by zero
    assert np.all(np.isfinite(layer(const, np.array([4], np.int32)).numpy()))
    with pytest.raises(ValueError, match="utterance_cvn.*utterance_cmn"):
        ModelConfig(utterance_cvn=True)


# -------------------------------------------------------------------------------------------- row conv


def test_row_conv_matches_numpy_loop():
    layer = RowConv(2)
    lengths = np.array([6, 3], np.int32)
    x = _random(2, 6, 4)
    y = layer(_with_garbage(x, lengths, extra=0), lengths).numpy()
    w = layer.kernel.numpy()
    expected = np.zeros_like(x)
    for b, n in enumerate(lengths):
        for t in range(n):
            for j in range(3):
                if t + j < n:
                    expected[b, t] += w[j] * x[b, t + j]
    np.testing.assert_allclose(y, expected, atol=1e-5)


# ---------------------------------------------------------------------------------- recurrences vs numpy


def _np_step(cell, h, x_t, kernel, bias):
    """One step of each cell in numpy; `h` is the full state ([h, c] for LSTM)."""
    units = kernel.shape[0]
    if cell == "gru":
        a = h @ kernel + bias
        z = _sigmoid(x_t[:, :units] + a[:, :units])
        r = _sigmoid(x_t[:, units:2 * units] + a[:, units:2 * units])
        n = np.tanh(x_t[:, 2 * units:] + r * a[:, 2 * units:])
        return (1 - z) * h + z * n
    if cell == "lstm":
        h, c = h[:, :units], h[:, units:]
        a = x_t + h @ kernel + bias
        i, f, o = (_sigmoid(a[:, k * units:(k + 1) * units]) for k in range(3))
        c = f * c + i * np.tanh(a[:, 3 * units:])
        return np.concatenate([o * np.tanh(c), c], axis=1)
    return np.clip(x_t + h @ kernel + bias, 0, 20)


def _np_recurrence(cell, x, lengths, h0, kernel, bias):
    """Batch-major reference: `x` (B, T, G*H) -> states (B, T, S), held beyond each length."""
    h, states = h0.copy(), []
    for t in range(x.shape[1]):
        h_new = _np_step(cell, h, x[:, t], kernel, bias)
        h = np.where((t < lengths)[:, None], h_new, h)
        states.append(h)
    return np.stack(states, axis=1)


RECURRENCES = {"gru": (gru_recurrence, 3, 1), "lstm": (lstm_recurrence, 4, 2), "rnn": (rnn_recurrence, 1, 1)}


def _recurrence_case(cell, units=5, batch=3, steps=7):
    _, gates, state_factor = RECURRENCES[cell]
    x = _random(batch, steps, gates * units)
    lengths = np.array([steps, 4, 0], np.int32)
    h0 = 0.5 * _random(batch, state_factor * units)
    kernel = 0.5 * _random(units, gates * units)
    bias = 0.1 * _random(gates * units)
    return x, lengths, h0, kernel, bias


def _call_recurrence(cell, x, lengths, h0, kernel, bias):
    mask = (np.arange(x.shape[1])[:, None] < lengths[None, :]).astype(np.float32)[:, :, None]
    states = RECURRENCES[cell][0](ops.transpose(x, (1, 0, 2)), mask, h0, kernel, bias)
    return ops.transpose(states, (1, 0, 2))


@pytest.mark.parametrize("cell", sorted(RECURRENCES))
def test_recurrence_matches_numpy(cell):
    x, lengths, h0, kernel, bias = _recurrence_case(cell)
    states = _call_recurrence(cell, x, lengths, h0, kernel, bias)
    np.testing.assert_allclose(states, _np_recurrence(cell, x, lengths, h0, kernel, bias), atol=1e-5)


@pytest.mark.parametrize("cell", sorted(RECURRENCES))
def test_recurrence_gradient_matches_autodiff(cell):
    """The hand-written backward pass against TF autodiff of the same loop unrolled in Python."""
    x, lengths, h0, kernel, bias = _recurrence_case(cell)
    upstream = _random(*_call_recurrence(cell, x, lengths, h0, kernel, bias).shape)

    def unrolled(x, h0, kernel, bias):
        h, states = h0, []
        for t in range(x.shape[1]):
            h = tf.where((t < lengths)[:, None], _tf_step(cell, h, x[:, t], kernel, bias), h)
            states.append(h)
        return tf.stack(states, axis=1)

    grads = []
    for fn in (lambda *args: _call_recurrence(cell, args[0], lengths, *args[1:]), unrolled):
        args = [tf.constant(v) for v in (x, h0, kernel, bias)]
        with tf.GradientTape() as tape:
            tape.watch(args)
            loss = tf.reduce_sum(fn(*args) * upstream)
        grads.append(tape.gradient(loss, args))
    for ours, reference in zip(*grads):
        np.testing.assert_allclose(ours, reference, atol=1e-4)


def _tf_step(cell, h, x_t, kernel, bias):
    units = kernel.shape[0]
    if cell == "gru":
        a = h @ kernel + bias
        z = tf.sigmoid(x_t[:, :units] + a[:, :units])
        r = tf.sigmoid(x_t[:, units:2 * units] + a[:, units:2 * units])
        return (1 - z) * h + z * tf.tanh(x_t[:, 2 * units:] + r * a[:, 2 * units:])
    if cell == "lstm":
        h, c = h[:, :units], h[:, units:]
        a = x_t + h @ kernel + bias
        i, f, o = (tf.sigmoid(a[:, k * units:(k + 1) * units]) for k in range(3))
        c = f * c + i * tf.tanh(a[:, 3 * units:])
        return tf.concat([o * tf.tanh(c), c], axis=1)
    return tf.clip_by_value(x_t + h @ kernel + bias, 0.0, 20.0)


# ---------------------------------------------------------------------------------------- BatchNormRNN


def _np_batch_norm_rnn(layer, x, lengths):
    """Inference-mode reference for `layer`: BN(W x) from its weights, then each direction per sequence."""
    proj = x @ layer.input_projection.kernel.numpy()
    if layer.norm is not None:
        norm = layer.norm
        proj = (proj - norm.moving_mean.numpy()) / np.sqrt(norm.moving_variance.numpy() + norm.epsilon) \
            * norm.gamma.numpy() + norm.beta.numpy()
    else:
        proj = proj + layer.input_projection.bias.numpy()
    width = proj.shape[-1] // layer.directions
    out = np.zeros(x.shape[:2] + (layer.units,), np.float32)
    for b, n in enumerate(lengths):
        for d in range(layer.directions):
            seq = proj[b:b + 1, :n, d * width:(d + 1) * width]
            if d == 1:
                seq = seq[:, ::-1]  # reverse within the sequence's own length
            h0 = np.zeros((1, layer.state_size), np.float32)
            states = _np_recurrence(layer.cell, seq, np.array([n]), h0, layer.kernels[d].numpy(),
                                    layer.biases[d].numpy())[0, :, :layer.units]
            out[b, :n] += states[::-1] if d == 1 else states
    return out


@pytest.mark.parametrize("cell,bidirectional,batch_norm", [("gru", True, True), ("lstm", True, False),
                                                            ("rnn", False, True)])
def test_batch_norm_rnn_matches_numpy(cell, bidirectional, batch_norm):
    layer = BatchNormRNN(6, cell=cell, bidirectional=bidirectional, batch_norm=batch_norm)
    lengths = np.array([9, 5, 1], np.int32)
    x = _random(3, 9, 4)
    layer(x, lengths, training=True)  # move the BN statistics away from (0, 1)
    y = layer(_with_garbage(x, lengths), lengths).numpy()
    np.testing.assert_allclose(y[:, :9], _np_batch_norm_rnn(layer, x, lengths), atol=1e-4)
    assert not np.any(y[:, 9:])


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_rnn_padding_does_not_leak(training):
    layer = BatchNormRNN(6, cell="gru", bidirectional=True)
    lengths = np.array([9, 5, 2], np.int32)
    x = _random(3, 9, 4)
    y = layer(x, lengths, training=training).numpy()
    y_padded = layer(_with_garbage(x, lengths), lengths, training=training).numpy()
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(y_padded[b, :n], y[b, :n], atol=1e-4)
        assert not np.any(y_padded[b, n:])


@pytest.mark.parametrize("cell", sorted(RECURRENCES))
def test_chunked_calls_equal_one_call(cell):
    layer = BatchNormRNN(5, cell=cell)
    lengths = np.array([12, 7], np.int32)
    x = _random(2, 12, 3)
    full, (final,) = layer(x, lengths, return_state=True)
    chunks, state = [], None
    for start in range(0, 12, 5):  # chunks of 5, 5, 2 steps
        chunk_lengths = np.clip(lengths - start, 0, 5).astype(np.int32)
        y, state = layer(x[:, start:start + 5], chunk_lengths, initial_state=state, return_state=True)
        chunks.append(y)
    np.testing.assert_allclose(np.concatenate(chunks, axis=1), full, atol=1e-5)
    np.testing.assert_allclose(state[0], final, atol=1e-5)
    assert final.shape == (2, layer.state_size)


def test_keras_gru_masks_padding():
    layer = KerasGRU(6, bidirectional=True)
    lengths = np.array([9, 4], np.int32)
    x = _random(2, 9, 4)
    y = layer(x, lengths).numpy()
    y_padded = layer(_with_garbage(x, lengths), lengths).numpy()
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(y_padded[b, :n], y[b, :n], atol=1e-5)
        assert not np.any(y_padded[b, n:])
    _, states = layer(x, lengths, return_state=True)
    assert len(states) == 2


def _keras_kernel(cell, x, lengths, initial_state, input_kernel, recurrent_kernel, bias):
    """cuDNN's GRU and LSTM math on the CPU: keras.layers.GRU (reset_after) and LSTM, whose cuDNN kernel takes
    these weights, run as their generic loop with the given weights (`stateless_call`), masked past `lengths`."""
    units = recurrent_kernel.shape[0]
    steps = x.shape[0]
    if cell == "gru":
        layer = keras.layers.GRU(units, return_sequences=True, return_state=True, reset_after=True)
        initial = [initial_state]
    else:
        layer = keras.layers.LSTM(units, return_sequences=True, return_state=True)
        initial = [initial_state[:, :units], initial_state[:, units:]]
    inputs = ops.transpose(x, (1, 0, 2))  # (B, T, I)
    layer.build(inputs.shape)
    mask = ops.arange(steps)[None, :] < ops.cast(lengths, "int32")[:, None]
    (outputs, *state), _ = layer.stateless_call([input_kernel, recurrent_kernel, bias],
                                                [v.value for v in layer.non_trainable_variables], inputs, mask=mask,
                                                initial_state=initial)
    outputs = ops.transpose(outputs * ops.cast(mask, outputs.dtype)[:, :, None], (1, 0, 2))  # (T, B, H)
    return outputs, ops.concatenate(state, axis=-1)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_fused_kernel_weights_give_the_loops_outputs_and_gradients(monkeypatch, cell, bidirectional):
    """BatchNormRNN's fused path (its weights mapped to the layout cuDNN takes, the backward direction reversed
    within each length) against its time loop: the same outputs, and the same gradients for the inputs and every
    weight, on masked batches with a row of no frames. The kernel itself is cuDNN's math as Keras runs it on a CPU
    (`_keras_kernel`); on a GPU it is CudnnRNNV3 with these weights."""
    from deepspeech2.model import rnn

    layer = BatchNormRNN(5, cell, bidirectional=bidirectional)
    x = tf.constant(_random(4, 7, 3))
    lengths = tf.constant([7, 3, 5, 0], tf.int32)
    layer.build(x.shape)
    rng = np.random.default_rng(2)
    for w in layer.trainable_weights:
        w.assign(rng.normal(scale=0.5, size=w.shape).astype(np.float32))

    projection = tf.constant(_random(4, 7, 5))

    def run(fused):
        monkeypatch.setattr(rnn, "fused_kernel_available", lambda c: fused)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, lengths, training=True)
            loss = tf.reduce_sum(y * projection)  # a random projection of every output
        return [y, *tape.gradient(loss, [x] + layer.trainable_weights)]

    monkeypatch.setattr(rnn, "cudnn_kernel", _keras_kernel)
    loop, fused = run(False), run(True)
    names = ["outputs", "inputs"] + [w.path for w in layer.trainable_weights]
    for name, a, b in zip(names, loop, fused):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    assert np.abs(loop[0].numpy()[:3]).max() > 0.05 and not loop[0].numpy()[3].any()


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_fused_kernel_keeps_the_final_state(monkeypatch, cell):
    from deepspeech2.model import rnn

    layer = BatchNormRNN(4, cell, bidirectional=True)
    x, lengths = tf.constant(_random(3, 6, 3)), tf.constant([6, 2, 4], tf.int32)
    monkeypatch.setattr(rnn, "cudnn_kernel", _keras_kernel)
    states = {}
    for fused in (False, True):
        monkeypatch.setattr(rnn, "fused_kernel_available", lambda c, fused=fused: fused)
        _, states[fused] = layer(x, lengths, return_state=True, training=True)
    for a, b in zip(states[False], states[True]):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5)


def test_the_fused_kernel_is_not_chosen_without_a_gpu():
    from deepspeech2.model import rnn

    assert not tf.config.list_logical_devices("GPU")
    assert not any(rnn.fused_kernel_available(c) for c in ("gru", "lstm", "rnn"))


# --------------------------------------------------------------------------------------------- model

MODEL_CONFIGS = {
    "tiny": TINY,
    "ds1_like": dataclasses.replace(DS1, feature_dim=20, fc_before_units=(16, 16), rnn_units=8, fc_after_units=(16,)),
    "streaming_like": ModelConfig(feature_dim=20, conv_filters=(4,), conv_kernel_sizes=((3, 3),),
                                  conv_strides=((2, 2),), conv_padding="same", rnn_type="rnn", rnn_layers=2,
                                  rnn_units=8, row_conv_context=2),
    "cudnn_gru": dataclasses.replace(TINY, rnn_type="cudnn_gru"),
    "tiny_cmn": dataclasses.replace(TINY, utterance_cmn=True),
    "tiny_cvn": dataclasses.replace(TINY, utterance_cmn=True, utterance_cvn=True),
    "tiny_rnn_dropout": dataclasses.replace(TINY, rnn_dropout=0.3),
}


def _batch(config, lengths, steps=None):
    lengths = np.asarray(lengths, np.int32)
    return _random(len(lengths), steps or int(lengths.max()), config.feature_dim), lengths


@pytest.mark.parametrize("name", sorted(MODEL_CONFIGS))
def test_model_save_load_round_trip(name, tmp_path):
    config = MODEL_CONFIGS[name]
    model = build_model(config)
    features, lengths = _batch(config, [40, 23])
    model({"features": features, "feature_lengths": lengths}, training=True)  # nontrivial BN statistics
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    expected, restored = (m({"features": features, "feature_lengths": lengths}) for m in (model, loaded))
    np.testing.assert_allclose(restored["logits"], expected["logits"], atol=1e-6)
    np.testing.assert_array_equal(restored["output_lengths"], expected["output_lengths"])


@pytest.mark.parametrize("name", sorted(MODEL_CONFIGS))
def test_model_padding_does_not_change_outputs(name):
    config = MODEL_CONFIGS[name]
    model = build_model(config)
    features, lengths = _batch(config, [37, 21, 9])
    out = model({"features": features, "feature_lengths": lengths})
    padded = model({"features": _with_garbage(features, lengths, extra=9), "feature_lengths": lengths})
    out_lengths = out["output_lengths"].numpy()
    np.testing.assert_array_equal(out_lengths, output_length(config, lengths))
    assert out["logits"].shape[1] == output_length(config, 37)
    for b, n in enumerate(out_lengths):
        np.testing.assert_allclose(padded["logits"][b, :n], out["logits"][b, :n], atol=1e-4)


def test_rnn_dropout_drops_and_rescales_in_training_only():
    rate = 0.3
    config = dataclasses.replace(TINY, rnn_dropout=rate)
    model = build_model(config)
    plain = build_model(TINY)
    plain.set_weights(model.get_weights())  # dropout adds no weights: bundles of either load into the other
    features, lengths = _batch(config, [41, 26])
    inputs = {"features": features, "feature_lengths": lengths}
    np.testing.assert_allclose(model(inputs)["logits"], plain(inputs)["logits"], atol=1e-6)  # inference: none

    # In training, against the RNN layer's own output in the same call: each unit kept and scaled by 1/(1-rate),
    # or zeroed, about `rate` of them; padding frames stay zero.
    probe = keras.Model(model.inputs, [model.get_layer("rnn0").output, model.get_layer("rnn0_dropout").output])
    before, after = (np.asarray(y) for y in probe(inputs, training=True))
    steps = output_length(config, lengths)
    valid = np.arange(before.shape[1])[None, :] < steps[:, None]
    kept = after != 0
    np.testing.assert_allclose(after[kept], before[kept] / (1 - rate), rtol=1e-5)
    assert not after[~valid].any() and not before[~valid].any()
    dropped = 1 - kept[valid].mean()
    assert abs(dropped - rate) < 0.05, dropped
    again = np.asarray(probe(inputs, training=True)[1])
    assert ((again != 0) != kept).any()  # a new mask each step


def test_log_probs_helpers_agree():
    model = build_model(TINY)
    features, lengths = _batch(TINY, [30, 17, 25])
    batch_log_probs, batch_lengths = log_probs(model, features, lengths)
    all_log_probs, all_lengths = predict_log_probs(model, features, lengths, batch_size=2)
    np.testing.assert_allclose(np.exp(all_log_probs).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(all_log_probs, batch_log_probs, atol=1e-4)
    np.testing.assert_array_equal(all_lengths, batch_lengths)


def test_training_steps_reduce_ctc_loss():
    model = build_model(TINY)
    features, lengths = _batch(TINY, [60, 48])
    labels = np.array([[5, 6, 6, 7], [8, 9, 0, 0]], np.int32)
    label_lengths = np.array([4, 2], np.int32)
    optimizer = keras.optimizers.Adam(1e-2)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            out = model({"features": features, "feature_lengths": lengths}, training=True)
            loss = ops.mean(ctc_loss(labels, label_lengths, out["logits"], out["output_lengths"]))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss, grads

    losses = []
    for _ in range(3):
        loss, grads = train_step()
        assert all(np.all(np.isfinite(g)) for g in grads)
        losses.append(float(loss))
    assert losses[-1] < losses[0]


def test_mixed_bfloat16_policy():
    # Seeded: with some initial weights (1 in 12 seeds) a BatchNorm beta's gradient of sum(logits) nearly cancels
    # (norm ~2 against 10-15), and bf16's rounding turns it 20 degrees; the test checks the policy, not that.
    keras.utils.set_random_seed(0)
    fp32 = build_model(dataclasses.replace(TINY, rnn_layers=1))
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        bf16 = build_model(dataclasses.replace(TINY, rnn_layers=1))
    finally:
        keras.config.set_dtype_policy("float32")
    bf16.set_weights(fp32.get_weights())
    features, lengths = _batch(TINY, [30, 17])

    def loss_and_grads(model):
        with tf.GradientTape() as tape:
            logits = model({"features": features, "feature_lengths": lengths}, training=True)["logits"]
            loss = ops.sum(logits)
        return logits, tape.gradient(loss, model.trainable_variables)

    logits, grads = loss_and_grads(bf16)
    reference_logits, reference_grads = loss_and_grads(fp32)
    assert logits.dtype == "float32"  # the output layer stays fp32 for the softmax and CTC
    assert bf16.get_layer("rnn0").input_projection.compute_dtype == "bfloat16"
    # The same numbers as fp32 within bf16's 8-bit mantissa: each gradient points the same way.
    np.testing.assert_allclose(logits, reference_logits, atol=0.05 * float(np.abs(reference_logits).max()))
    for g, ref in zip(grads, reference_grads):
        g, ref = np.ravel(g), np.ravel(ref)
        assert np.dot(g, ref) / (np.linalg.norm(g) * np.linalg.norm(ref) + 1e-12) > 0.99


# ----------------------------------------------------------------------------------------------- CTC


def test_ctc_loss_matches_tf_reference():
    batch, steps, vocab = 4, 20, 7
    logits = 3 * _random(batch, steps, vocab)
    logit_lengths = np.array([20, 15, 9, 12], np.int32)
    label_lengths = np.array([5, 3, 4, 1], np.int32)
    labels = RNG.integers(1, vocab, size=(batch, 6)).astype(np.int32)
    labels[np.arange(6)[None, :] >= label_lengths[:, None]] = 0
    sparse = tf.sparse.from_dense(labels)  # the reference is TF's C++ kernel (sparse labels)
    reference = tf.nn.ctc_loss(sparse, logits, None, logit_lengths, logits_time_major=False, blank_index=0)
    np.testing.assert_allclose(ctc_loss(labels, label_lengths, logits, logit_lengths), reference, rtol=1e-4)


# ------------------------------------------------------------------------------------------ JAX backend


_JAX_SCRIPT = """
import sys
import jax, jax.numpy as jnp, keras, numpy as np
from deepspeech2.model import build_model, ctc_loss
from deepspeech2.model_config import TINY
assert keras.backend.backend() == "jax"
data = np.load(sys.argv[1] + "/batch.npz")
model = build_model(TINY)
model.load_weights(sys.argv[1] + "/model.weights.h5")
inputs = {"features": data["features"], "feature_lengths": data["lengths"]}
np.testing.assert_allclose(model(inputs)["logits"], data["logits"], atol=1e-4)  # same numbers as TF

def loss(trainable):
    out, _ = model.stateless_call(trainable, [v.value for v in model.non_trainable_variables], inputs, training=True)
    return jnp.mean(ctc_loss(data["labels"], data["label_lengths"], out["logits"], out["output_lengths"]))

value, grads = jax.jit(jax.value_and_grad(loss))([v.value for v in model.trainable_variables])
np.testing.assert_allclose(value, data["loss"], rtol=1e-4)  # the TF loss and gradients on the same batch
assert len(grads) == len([k for k in data.files if k.startswith("grad")])
for i, g in enumerate(grads):
    np.testing.assert_allclose(g, data[f"grad{i}"], rtol=1e-3, atol=1e-4)
"""


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_model_runs_on_jax_backend(tmp_path):
    model = build_model(TINY)
    features, lengths = _batch(TINY, [30, 20])
    logits = model({"features": features, "feature_lengths": lengths})["logits"]
    labels, label_lengths = np.array([[3, 4], [5, 0]], np.int32), np.array([2, 1], np.int32)
    with tf.GradientTape() as tape:
        out = model({"features": features, "feature_lengths": lengths}, training=True)
        loss = ops.mean(ctc_loss(labels, label_lengths, out["logits"], out["output_lengths"]))
    grads = tape.gradient(loss, model.trainable_variables)
    model.save_weights(tmp_path / "model.weights.h5")
    np.savez(tmp_path / "batch.npz", features=features, lengths=lengths, logits=logits, labels=labels,
             label_lengths=label_lengths, loss=float(loss), **{f"grad{i}": np.asarray(g) for i, g in enumerate(grads)})
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run([sys.executable, "-c", _JAX_SCRIPT, str(tmp_path)], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize("name", ["tiny", "ds2-small", "ds2-paper-en", "ds2-streaming", "ds1", "fc-lstm"])
def test_forward_flops_count_every_weight_at_its_positions(name):
    """`forward_flops` (geometry, TF-free) against a count from the built model's kernels: each conv kernel at its
    output positions, every other kernel (FC, RNN input and recurrent, row conv, logits) once a step and direction.
    The presets' geometry with fewer RNN units, so that they build in a moment."""
    from deepspeech2.geometry import conv_output_length, forward_flops

    config = dataclasses.replace(PRESETS[name], rnn_units=min(PRESETS[name].rnn_units, 48)) if name in PRESETS \
        else dataclasses.replace(TINY, rnn_type="lstm", fc_before_units=(24,), fc_after_units=(12,))
    frames = 1000
    t, f, positions = frames, config.feature_dim, []
    for (kt, kf), (st, sf) in zip(config.conv_kernel_sizes, config.conv_strides):
        t, f = conv_output_length(t, kt, st, config.conv_padding), conv_output_length(f, kf, sf, config.conv_padding)
        positions.append(t * f)
    steps = output_length(config, frames)
    keras.utils.set_random_seed(0)
    expected, convs = 0, iter(positions)
    for w in build_model(config).weights:
        if w.path.endswith("/kernel") and len(w.shape) == 4:  # (kt, kf, in, out)
            expected += 2 * next(convs) * np.prod(w.shape)
        elif "kernel" in w.path:  # (in, out) matmuls, both directions' recurrent ones, the row conv (taps, units)
            expected += 2 * steps * np.prod(w.shape)
    assert forward_flops(config, frames) == pytest.approx(float(expected), rel=1e-12)
