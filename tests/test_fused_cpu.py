"""The fused CPU GRU (deepspeech2/model/fused_cpu.cc, fused_cpu.py) against the time loop it replaces in training:
states and every gradient on random shapes, lengths (empty rows included) and both directions, fp32 and bf16; when
BatchNormRNN picks it; checkpoints either way; and the loop where the library is missing or broken. The same for the
conv front end's fused BN + clipped ReLU against TF's ops."""

import logging
import platform
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.model import BatchNormRNN, ConvFrontEnd, fused_cpu, layers, rnn


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":")[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


FLAGS = _cpu_flags()
needs_fp32 = pytest.mark.skipif(not fused_cpu.supports("float32"), reason="the fused CPU GRU is not built or this "
                                "CPU has neither AVX-512 nor AVX2 and FMA (test_make_deps_built_it says which)")
needs_bf16 = pytest.mark.skipif(not fused_cpu.supports("bfloat16"), reason="no AVX512-BF16 or the op is not built")
needs_front = pytest.mark.skipif(not fused_cpu.supports("bn_clipped_relu"), reason="the fused CPU ops are not built or "
                                 "this CPU has no AVX2 and FMA")


def test_make_deps_built_it_where_it_can_run():
    """Where g++ and an x86-64 CPU with AVX2 and FMA are (every AVX-512 one has them), `make deps` built the library
    and it loads: the fp32 comparisons below then run rather than skip (on AVX-512's loops where the CPU has it, else
    AVX2's), the bf16 ones where it has AVX512-BF16."""
    if not (shutil.which("g++") and platform.machine() == "x86_64" and {"avx2", "fma"} <= FLAGS):
        pytest.skip("no g++ or no AVX2 here: training uses the loop")
    assert fused_cpu.library() is not None, f"{fused_cpu.LIBRARY} missing or not loadable: run make deps"
    assert fused_cpu.supports("float32")
    assert fused_cpu.supports("bfloat16") == ("avx512_bf16" in FLAGS)


def test_make_deps_built_the_front_ends_ops_where_they_can_run():
    if not (shutil.which("g++") and platform.machine() == "x86_64" and {"avx2", "fma"} <= FLAGS):
        pytest.skip("no g++ or no AVX2 here: the front end trains with TF's ops")
    assert fused_cpu.library() is not None, f"{fused_cpu.LIBRARY} missing or not loadable: run make deps"
    assert fused_cpu.supports("bn_clipped_relu")


def _inputs(steps, batch, units, dtype, seed, reverse=False):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, steps + 1, batch)
    lengths[0], lengths[-1] = steps, 0  # a full row and a row of no frames (make_dataset's filler rows)
    mask = (np.arange(steps)[:, None] < lengths[None]).astype(np.float32)[:, :, None]  # (T, B, 1)
    x = rng.standard_normal((steps, batch, 3 * units)).astype(np.float32)
    if reverse:  # the backward direction as BatchNormRNN runs it: the padded tensor flipped, padding first
        x, mask = x[::-1].copy(), mask[::-1].copy()
    kernel = rng.standard_normal((units, 3 * units)).astype(np.float32) / np.sqrt(units)
    return dict(x=tf.constant(x), mask=tf.constant(mask),
                initial_state=tf.constant(0.5 * rng.standard_normal((batch, units)).astype(np.float32)),
                kernel=tf.cast(kernel, dtype), bias=tf.constant(0.1 * rng.standard_normal(3 * units), tf.float32),
                upstream=tf.constant(rng.standard_normal((steps, batch, units)).astype(np.float32)))


def _run(recurrence, inputs):
    """States and the gradients of (states . upstream) for x, the initial state, the kernel and the bias."""
    args = [inputs[k] for k in ("x", "mask", "initial_state", "kernel", "bias")]
    with tf.GradientTape() as tape:
        tape.watch(args)
        states = recurrence(*args)
        loss = tf.reduce_sum(states * inputs["upstream"])
    grads = tape.gradient(loss, [args[0], args[2], args[3], args[4]])
    return [states.numpy()] + [tf.cast(g, tf.float32).numpy() for g in grads]


NAMES = ["states", "d_x", "d_initial_state", "d_kernel", "d_bias"]
# (steps, batch, units): one unit, odd units (a partly filled block of 16 units on AVX-512, of 8 on AVX2), batches
# below, at and above the rows of a register tile (8 on AVX-512; on AVX2 4 forward, 8 backward), and the bench's
# layer.
SHAPES = [(5, 2, 1), (9, 3, 5), (17, 11, 37), (12, 16, 64), (30, 20, 130)]


@needs_fp32
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_fp32_states_and_gradients_equal_the_loops(shape, reverse):
    """fp32: the same numbers up to summation order and the kernel's exp (max difference 1e-5 of each tensor's
    largest value)."""
    inputs = _inputs(*shape, "float32", seed=sum(shape), reverse=reverse)
    loop, fused = _run(rnn.gru_recurrence, inputs), _run(rnn.gru_fused_cpu, inputs)
    for name, a, b in zip(NAMES, loop, fused):
        assert np.abs(a).max() > 0.01, name  # something flowed
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * np.abs(a).max(), err_msg=name)


@needs_bf16
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape", SHAPES[1:] + [(124, 16, 512)])
def test_bf16_states_and_gradients_are_the_loops_within_bf16_rounding(shape, reverse):
    """bf16 weights and states in the matmuls, fp32 accumulation: the loop's TF matmul also rounds its sums to bf16,
    the op keeps them in fp32, so the two differ by bf16 rounding: within 2% of each tensor's largest value, as both
    are of the same math in fp32 (the kernel's bf16 values exactly; measured: at most 0.6%)."""
    inputs = _inputs(*shape, "bfloat16", seed=sum(shape), reverse=reverse)
    loop, fused = _run(rnn.gru_recurrence, inputs), _run(rnn.gru_fused_cpu, inputs)
    reference = _run(rnn.gru_recurrence, dict(inputs, kernel=tf.cast(inputs["kernel"], tf.float32)))
    for name, a, b, ref in zip(NAMES, loop, fused, reference):
        scale = np.abs(ref).max()
        assert scale > 0.01, name
        np.testing.assert_allclose(b, a, rtol=0, atol=2e-2 * scale, err_msg=name)
        np.testing.assert_allclose(b, ref, rtol=0, atol=2e-2 * scale, err_msg=name)


@needs_fp32
def test_batch_norm_rnn_trains_with_it_and_infers_with_the_loop(monkeypatch):
    """Training graphs hold the op, inference graphs (export, streaming, evaluation) only stock ops, and
    DS2_RNN_LOOP=1 keeps the loop."""
    layer = BatchNormRNN(8, "gru", bidirectional=True)
    x, lengths = tf.random.normal((3, 6, 5)), tf.constant([6, 2, 0])

    def op_types(training):
        graph = tf.function(lambda x, lengths: layer(x, lengths, training=training)).get_concrete_function(
            x, lengths).graph
        return {op.type for op in graph.get_operations()}

    assert "Ds2GruForward" in op_types(True) and "Ds2GruForward" not in op_types(False)
    xla = tf.function(lambda x, lengths: layer(x, lengths, training=True), jit_compile=True)
    assert "Ds2GruForward" not in {op.type for op in xla.get_concrete_function(x, lengths).graph.get_operations()}
    monkeypatch.setenv("DS2_RNN_LOOP", "1")
    assert "Ds2GruForward" not in op_types(True)
    assert not rnn.cpu_kernel_available("lstm", "float32") and not rnn.cpu_kernel_available("rnn", "float32")


@needs_fp32
def test_checkpoints_load_either_way(tmp_path, monkeypatch):
    """The same variables either way: a layer trained a step with the op, saved, loads into a layer that trains with
    the loop, and both give the same outputs and gradients."""
    keras.utils.set_random_seed(1)
    x, lengths = tf.random.normal((4, 7, 6)), tf.constant([7, 3, 5, 0])
    layer = BatchNormRNN(12, "gru", bidirectional=True)
    layer.build(x.shape)
    optimizer = keras.optimizers.SGD(0.1)

    def outputs_and_grads(layer):
        with tf.GradientTape() as tape:
            y = layer(x, lengths, training=True)
            loss = tf.reduce_sum(y * tf.sin(tf.range(12, dtype=tf.float32)))
        return [y] + tape.gradient(loss, layer.trainable_weights)

    optimizer.apply(outputs_and_grads(layer)[1:], layer.trainable_weights)
    def checkpoint(layer):  # by variable path, as the trainer's checkpoints hold them
        return tf.train.Checkpoint(variables={w.path.split("/", 1)[1]: w for w in layer.weights})

    path = checkpoint(layer).write(str(tmp_path / "ckpt"))
    fused = outputs_and_grads(layer)
    monkeypatch.setenv("DS2_RNN_LOOP", "1")
    restored = BatchNormRNN(12, "gru", bidirectional=True)
    restored.build(x.shape)
    checkpoint(restored).read(path).assert_consumed()
    for name, a, b in zip(["outputs"] + [w.path for w in layer.trainable_weights], outputs_and_grads(restored), fused):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.fixture
def library_at(monkeypatch):
    """Points fused_cpu at another library file, with its load forgotten before and after."""
    def point(path):
        monkeypatch.setattr(fused_cpu, "LIBRARY", path)
        fused_cpu.library.cache_clear()
        fused_cpu._support.cache_clear()
    yield point
    fused_cpu.library.cache_clear()
    fused_cpu._support.cache_clear()


def test_a_missing_or_broken_library_leaves_the_loop(tmp_path, library_at, caplog):
    layer = BatchNormRNN(4, "gru")
    x, lengths = tf.random.normal((2, 5, 3)), tf.constant([5, 2])
    library_at(tmp_path / "missing.so")
    assert fused_cpu.library() is None and not rnn.cpu_kernel_available("gru", "float32")
    y = layer(x, lengths, training=True)
    (tmp_path / "broken.so").write_bytes(b"not a shared library")
    library_at(tmp_path / "broken.so")
    with caplog.at_level(logging.WARNING, logger="deepspeech2.model.fused_cpu"):
        assert not rnn.cpu_kernel_available("gru", "float32")
    assert "does not load, training uses the time loop" in caplog.text
    np.testing.assert_array_equal(layer(x, lengths, training=True).numpy(), y.numpy())


# -- the front end's BN + clipped ReLU ---------------------------------------------------------------------------

def _front_inputs(shape, dtype, seed):
    """Conv activations `shape` (batch, time[, freq], channels) in `dtype`, frame weights with a full row, an empty
    row and random lengths, per-channel gamma (one large enough to clip often at 0 and 20) and beta, and an upstream
    gradient in `dtype`."""
    rng = np.random.default_rng(seed)
    batch, steps, channels = shape[0], shape[1], shape[-1]
    lengths = rng.integers(0, steps + 1, batch)
    lengths[0], lengths[-1] = steps, 0
    # Mean and spread per channel, so some channels clip at 0 and 20 often, some rarely.
    x = rng.standard_normal(shape) * rng.uniform(0.5, 4, channels) + rng.uniform(-2, 6, channels)
    return dict(x=tf.cast(tf.constant(x, tf.float32), dtype),
                weights=tf.constant((np.arange(steps)[None] < lengths[:, None]).astype(np.float32)),
                gamma=tf.constant(np.r_[30.0, rng.uniform(0.5, 6, channels - 1)], tf.float32),  # channel 0 clips
                beta=tf.constant(rng.standard_normal(channels), tf.float32),
                upstream=tf.cast(tf.constant(rng.standard_normal(shape), tf.float32), dtype))


def _front_run(fused, inputs):
    """The output and the gradients of (output . upstream) for x, gamma and beta, with statistics from TF's
    masked_moments (the fused sums are compared on their own below)."""
    x, weights, gamma, beta = (inputs[k] for k in ("x", "weights", "gamma", "beta"))
    with tf.GradientTape() as tape:
        tape.watch([x, gamma, beta])
        x32 = tf.cast(x, tf.float32)
        mean, variance, count = layers.masked_moments(tf.stop_gradient(x32), weights)
        stats = (mean, tf.math.rsqrt(variance + 1e-3), count, gamma, beta)
        if fused:
            y = layers.bn_clipped_relu_fused_cpu(x, weights, *stats)
        else:  # TF's ops, as SequenceBatchNorm and ConvFrontEnd run them, cast back as the next conv does
            mask = tf.reshape(weights, weights.shape + (1,) * (len(x.shape) - 2))
            y = tf.cast(layers.clipped_relu(layers._batch_normalize(x32, weights, *stats), mask), x.dtype)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cast(inputs["upstream"], tf.float32))
    assert y.dtype == x.dtype
    return [tf.cast(t, tf.float32).numpy() for t in [y] + tape.gradient(loss, [x, gamma, beta])]


# (batch, time[, freq], channels): rank 3 and 4, frames of fewer values than a vector (8) and of a partial last
# vector, and the bench's second conv.
FRONT_SHAPES = [(2, 5, 3), (3, 7, 5, 4), (4, 11, 9, 5), (5, 9, 13, 32), (16, 124, 40, 32)]


@needs_front
@pytest.mark.parametrize("shape", FRONT_SHAPES)
def test_fp32_front_end_output_and_gradients_equal_tfs(shape):
    """fp32: the same numbers up to fma and summation order (max difference 1e-5 of each tensor's largest value);
    zeros at padding frames."""
    inputs = _front_inputs(shape, tf.float32, seed=sum(shape))
    ops_, fused = _front_run(False, inputs), _front_run(True, inputs)
    for name, a, b in zip(["y", "d_x", "d_gamma", "d_beta"], ops_, fused):
        assert np.abs(a).max() > 0.01, name
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * np.abs(a).max(), err_msg=name)
    padding = inputs["weights"].numpy() == 0
    assert not fused[0][padding].any() and not fused[1][padding].any()
    assert 0 < (fused[0] == 20).sum() and 0 < (fused[0] == 0).sum()  # both ends of the clip were exercised


@needs_front
@pytest.mark.parametrize("shape", FRONT_SHAPES[1:])
def test_bf16_front_end_output_and_gradients_equal_tfs_within_a_rounding(shape):
    """bf16 x, y and their gradients (mixed_bfloat16's conv output and input): both paths compute in fp32 and round
    y and d_x to bf16 once, so the two differ by at most one bf16 step (2^-7 of the value) where the fp32 values
    straddle a rounding boundary; d_gamma and d_beta are fp32 (1e-5)."""
    inputs = _front_inputs(shape, tf.bfloat16, seed=sum(shape))
    ops_, fused = _front_run(False, inputs), _front_run(True, inputs)
    for name, a, b in zip(["y", "d_x"], ops_, fused):
        np.testing.assert_allclose(b, a, rtol=2 ** -7, atol=1e-5 * np.abs(a).max(), err_msg=name)
        assert (a == b).mean() > 0.99, name  # mostly the same bf16 values
    for name, a, b in zip(["d_gamma", "d_beta"], ops_[2:], fused[2:]):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * np.abs(a).max(), err_msg=name)


@needs_front
@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
@pytest.mark.parametrize("shape", FRONT_SHAPES)
def test_fused_moment_sums_equal_tfs(shape, dtype):
    """The statistics from the one-pass sums (fp64 across chunks) against NumPy's in float64, and TF's fp32 sums
    within their own cancellation bound: both take the variance as E[x^2] - E[x]^2, and over 10^5 values of a
    channel TF's fp32 sums lose up to about 1e-5 of E[x^2] (how much depends on the CPU's reduction order)."""
    inputs = _front_inputs(shape, dtype, seed=sum(shape) + 1)
    x, weights = inputs["x"], inputs["weights"]
    x64 = tf.cast(x, tf.float64).numpy()
    w64 = weights.numpy().astype(np.float64).reshape(weights.shape + (1,) * (x64.ndim - weights.ndim))
    axes = tuple(range(x64.ndim - 1))
    count = np.broadcast_to(w64, x64.shape).sum(axis=axes)
    mean = (w64 * x64).sum(axis=axes) / count
    exact = [mean, (w64 * x64 ** 2).sum(axis=axes) / count - mean ** 2, count]
    square = np.max(exact[0] ** 2 + exact[1])
    fused = layers.masked_moments(x, weights, fused=True)
    tfs = layers.masked_moments(tf.cast(x, tf.float32), weights)
    for name, a, b, c in zip(["mean", "variance", "count"], exact, fused, tfs):
        np.testing.assert_allclose(b.numpy(), a, rtol=1e-6, atol=1e-6 * square, err_msg=name)
        np.testing.assert_allclose(c.numpy(), a, rtol=1e-5, atol=2e-5 * square, err_msg=name)


def _front_end_outputs_and_grads(front, x, lengths):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y, _ = front(x, lengths, training=True)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.sin(tf.range(y.shape[-1], dtype=tf.float32)))
    return [y] + tape.gradient(loss, [x] + front.trainable_weights) + [w.value for w in front.non_trainable_weights]


@needs_front
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_conv_front_end_trains_with_it_as_with_tfs_ops(policy, monkeypatch):
    """The whole ConvFrontEnd in training: outputs, the gradients of its input, conv kernels, gamma and beta, and
    the moving statistics, fused against DS2_FRONTEND_UNFUSED=1. Under mixed_bfloat16 the output is bf16 (the next
    conv's dtype) where TF's ops give fp32; the gradients are within bf16's rounding."""
    keras.utils.set_random_seed(3)
    keras.config.set_dtype_policy(policy)
    try:
        front = ConvFrontEnd((4, 6), ((3, 5), (3, 3)), ((2, 2), (1, 2)), "same")
    finally:
        keras.config.set_dtype_policy("float32")
    x, lengths = tf.random.normal((3, 17, 12)), tf.constant([17, 9, 0])
    front.build(x.shape)
    start = [w.numpy() for w in front.non_trainable_weights]
    fused = _front_end_outputs_and_grads(front, x, lengths)
    for w, v in zip(front.non_trainable_weights, start):
        w.assign(v)
    monkeypatch.setenv("DS2_FRONTEND_UNFUSED", "1")
    ops_ = _front_end_outputs_and_grads(front, x, lengths)
    tolerance = 1e-5 if policy == "float32" else 2e-2
    names = ["outputs", "d_inputs"] + [w.path for w in front.trainable_weights + front.non_trainable_weights]
    for i, (name, a, b) in enumerate(zip(names, ops_, fused)):
        a, b = tf.cast(a, tf.float32).numpy(), tf.cast(b, tf.float32).numpy()
        assert np.abs(a).max() > (0.01 if i < len(ops_) - 4 else 0), name  # the moving averages move little
        np.testing.assert_allclose(b, a, rtol=0, atol=tolerance * np.abs(a).max(), err_msg=name)


@needs_front
def test_the_front_end_trains_with_it_and_infers_with_tfs_ops(monkeypatch):
    front = ConvFrontEnd((4,), ((3, 3),), ((2, 2),))
    x, lengths = tf.random.normal((2, 9, 7)), tf.constant([9, 4])

    def op_types(training, jit_compile=False):
        fn = tf.function(lambda x, lengths: front(x, lengths, training=training), jit_compile=jit_compile)
        return {op.type for op in fn.get_concrete_function(x, lengths).graph.get_operations()}

    fused = {"Ds2MaskedMomentSums", "Ds2BnClippedReluForward"}
    assert fused <= op_types(True) and not fused & op_types(False) and not fused & op_types(True, jit_compile=True)
    assert layers.frontend_kernel_available("bfloat16") and not layers.frontend_kernel_available("float16")
    monkeypatch.setenv("DS2_FRONTEND_UNFUSED", "1")
    assert not fused & op_types(True)


def test_a_missing_library_leaves_the_front_end_tfs_ops(tmp_path, library_at):
    front = ConvFrontEnd((4,), ((3, 3),), ((2, 2),))
    x, lengths = tf.random.normal((2, 9, 7)), tf.constant([9, 4])
    front.build(x.shape)
    library_at(tmp_path / "missing.so")
    assert not layers.frontend_kernel_available()
    graph = tf.function(lambda: front(x, lengths, training=True)).get_concrete_function().graph
    assert not any(op.type.startswith("Ds2") for op in graph.get_operations())
    y, _ = front(x, lengths, training=True)
    assert y.shape == (2, 4, 3 * 4) and np.abs(y.numpy()).max() > 0
