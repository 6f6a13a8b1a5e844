"""The fused CPU GRU (deepspeech2/model/fused_cpu.cc, fused_cpu.py) against the time loop it replaces in training:
states and every gradient on random shapes, lengths (empty rows included) and both directions, fp32 and bf16; when
BatchNormRNN picks it; checkpoints either way; and the loop where the library is missing or broken."""

import logging
import platform
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.model import BatchNormRNN, fused_cpu, rnn


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":")[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


FLAGS = _cpu_flags()
needs_fp32 = pytest.mark.skipif(not fused_cpu.supports("float32"), reason="the fused CPU GRU is not built or this "
                                "CPU has no AVX-512 (test_make_deps_built_it says which)")
needs_bf16 = pytest.mark.skipif(not fused_cpu.supports("bfloat16"), reason="no AVX512-BF16 or the op is not built")


def test_make_deps_built_it_where_it_can_run():
    """Where g++ and an AVX-512 x86-64 CPU are, `make deps` built the library and it loads: the comparisons below
    then run rather than skip."""
    if not (shutil.which("g++") and platform.machine() == "x86_64" and "avx512f" in FLAGS):
        pytest.skip("no g++ or no AVX-512 here: training uses the loop")
    assert fused_cpu.library() is not None, f"{fused_cpu.LIBRARY} missing or not loadable: run make deps"
    assert fused_cpu.supports("float32")
    assert fused_cpu.supports("bfloat16") == ("avx512_bf16" in FLAGS)


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
# (steps, batch, units): one unit, odd units (a partly filled block of 16), batches below, at and above the 8 rows
# of a register tile, and the bench's layer.
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
