"""Recurrent layers: DS2's batch-normalized RNN (GRU, LSTM or clipped-ReLU RNN) and a keras.layers.GRU wrapper.

`BatchNormRNN` splits each layer the way DS2 §3.2 eq. 4 does: `h_t = f(B(W x_t) + U h_{t-1})`. The input
projection `B(W x)` is one big matmul (and one sequence-wise BN) over all batch x time frames; only
`U h_{t-1}` stays inside the time loop.

The time loops (`gru_recurrence`, `lstm_recurrence`, `rnn_recurrence`) carry their own gradients
(`keras.ops.custom_gradient`), the way cuDNN does it. Their backward pass:
  1. recomputes every gate for all steps at once from the saved states (one big matmul, vectorized
     elementwise math), so the forward loop saves nothing but the states;
  2. runs a reverse loop whose body is only `dh -> dh_prev`: a few elementwise ops and the
     `(batch, gates*units) x (gates*units, units)` matmul;
  3. forms the recurrent weight gradient with one big matmul over all steps, instead of one small
     matmul and a `(units, gates*units)` accumulation per step as autodiff of the loop would.

Masking: at steps `t >= length` a sequence's state is carried unchanged; `mask` is applied as
`state + m_t * (new - state)` so the loop body has no branches.
"""

from __future__ import annotations

import itertools

import keras
from keras import ops

from deepspeech2.model.layers import RELU_CLIP, SequenceBatchNorm, sequence_mask, upstream_gradient

_GATES = {"rnn": 1, "gru": 3, "lstm": 4}  # gate blocks per cell in W and U


def _matmul(a, kernel):
    """`a @ kernel` in the kernel's dtype (bf16 under mixed precision), result in fp32."""
    return ops.cast(ops.matmul(ops.cast(a, kernel.dtype), kernel), "float32")


def _weight_gradient(inputs, grads, dtype):
    """`sum_t inputs_t^T grads_t` as one matmul in `dtype`: `(T, B, I), (T, B, O) -> (I, O)`."""
    inputs = ops.reshape(ops.cast(inputs, dtype), (-1, inputs.shape[-1]))
    return ops.matmul(ops.transpose(inputs), ops.reshape(ops.cast(grads, dtype), (-1, grads.shape[-1])))


def _bias_gradient(grads):
    """`sum_t sum_b grads_tb`: `(T, B, O) -> (O,)`, as a ones-vector matmul (TF's column sums are slower)."""
    grads = ops.reshape(grads, (-1, grads.shape[-1]))
    return ops.matmul(ops.ones((1, ops.shape(grads)[0]), grads.dtype), grads)[0]


def _previous(initial, states):
    """States entering each step: `(T, B, S)` = initial state, then all but the last output state."""
    return ops.concatenate([initial[None], states[:-1]], axis=0)


def _scan(step, initial, sequences, reverse=False):
    """`ops.scan` over several `(T, B, n_i)` sequences: `step(carry, *slices_t)`.

    The sequences travel packed along the last axis as one tensor: Keras' TF `scan` fails on several
    inputs when the time axis is not static.
    """
    ends = list(itertools.accumulate(s.shape[-1] for s in sequences))[:-1]

    def packed_step(carry, packed_t):
        return step(carry, *ops.split(packed_t, ends, axis=-1))

    return ops.scan(packed_step, initial, ops.concatenate(sequences, axis=-1), reverse=reverse)


@ops.custom_gradient
def gru_recurrence(x, mask, initial_state, kernel, bias):
    """The GRU time loop in DS2's form (§3.3): the reset gate scales `U_h h`, so all of `U h` comes first.

        z = σ(x_z + U_z h + b_z),  r = σ(x_r + U_r h + b_r),  n = tanh(x_n + r ∘ (U_h h + b_h)),
        h' = (1 - z) ∘ h + z ∘ n

    Args:
        x: `(time, batch, 3 * units)` fp32 input projections, gates ordered z, r, n.
        mask: `(time, batch, 1)` fp32, 1 at valid steps.
        initial_state: `(batch, units)` fp32.
        kernel: `(units, 3 * units)` recurrent weights U (the matmul runs in this dtype).
        bias: `(3 * units,)` fp32 recurrent bias.

    Returns:
        `(time, batch, units)` fp32 states after each step (held at masked steps).
    """
    units = initial_state.shape[-1]
    # U h as two matmuls (z and r, then n) instead of one and a split: the graph executor runs them on two
    # cores at once, and the biases of z and r join x outside the loop.
    kernel_zr, kernel_n = ops.split(kernel, [2 * units], axis=-1)
    bias_zr, bias_n = ops.split(bias, [2 * units], axis=-1)

    def step(h, x_zr, x_n, m_t):
        z, r = ops.split(ops.sigmoid(x_zr + _matmul(h, kernel_zr)), 2, axis=-1)
        n = ops.tanh(x_n + r * (_matmul(h, kernel_n) + bias_n))
        h = h + m_t * z * (n - h)
        return h, h

    x_zr, x_n = ops.split(x, [2 * units], axis=-1)
    _, states = _scan(step, initial_state, (x_zr + bias_zr, x_n, mask))

    def grad(*args, upstream=None):
        # Every step's gates again, all steps at once.
        h_prev = _previous(initial_state, states)  # (T, B, H)
        x_zr, x_n = ops.split(x, [2 * units], axis=-1)
        a_zr, a_n = ops.split(_matmul(h_prev, kernel) + bias, [2 * units], axis=-1)
        z, r = ops.split(ops.sigmoid(x_zr + a_zr), 2, axis=-1)
        n = ops.tanh(x_n + r * a_n)
        # h' = h + m z (n - h): dh'/d(pre-activation) of n, z, and r (through n).
        mz = mask * z
        d_pre_n = mz * (1.0 - n * n)
        d_pre_z = mz * (1.0 - z) * (n - h_prev)
        d_pre_r = d_pre_n * a_n * r * (1.0 - r)
        d_a_zr = ops.concatenate([d_pre_z, d_pre_r], axis=-1)  # dh'/d(U h + b), (T, B, 2H) and (T, B, H)
        d_a_n = d_pre_n * r
        keep = 1.0 - mz  # dh'/dh, direct path
        kernel_zr_t, kernel_n_t = ops.transpose(kernel_zr), ops.transpose(kernel_n)

        def back_step(dh_next, d_out, d_a_zr_t, d_a_n_t, keep_t):
            dh = dh_next + d_out  # total gradient reaching h_t
            return (dh * keep_t + _matmul(ops.tile(dh, (1, 2)) * d_a_zr_t, kernel_zr_t)
                    + _matmul(dh * d_a_n_t, kernel_n_t)), dh

        d_initial, dh = _scan(back_step, ops.zeros_like(initial_state),
                              (upstream_gradient(args, upstream), d_a_zr, d_a_n, keep), reverse=True)
        d_zr = ops.tile(dh, (1, 1, 2)) * d_a_zr  # gradient of the z and r pre-activations, (T, B, 2H)
        d_a = ops.concatenate([d_zr, dh * d_a_n], axis=-1)  # of U h + b, (T, B, 3H)
        d_x = ops.concatenate([d_zr, dh * d_pre_n], axis=-1)  # of x: x_n skips the reset gate
        return (d_x, ops.zeros_like(mask), d_initial, _weight_gradient(h_prev, d_a, kernel.dtype),
                _bias_gradient(d_a))

    return states, grad


@ops.custom_gradient
def lstm_recurrence(x, mask, initial_state, kernel, bias):
    """The LSTM time loop (no peepholes).

        i, f, o = σ(x_{i,f,o} + U_{i,f,o} h + b_{i,f,o}),  g = tanh(x_g + U_g h + b_g),
        c' = f ∘ c + i ∘ g,  h' = o ∘ tanh(c')

    Args:
        x: `(time, batch, 4 * units)` fp32 input projections, gates ordered i, f, o, g.
        mask: `(time, batch, 1)` fp32, 1 at valid steps.
        initial_state: `(batch, 2 * units)` fp32, `[h, c]`.
        kernel: `(units, 4 * units)` recurrent weights U.
        bias: `(4 * units,)` fp32 recurrent bias.

    Returns:
        `(time, batch, 2 * units)` fp32 states `[h, c]` after each step (held at masked steps).
    """
    units = initial_state.shape[-1] // 2

    def step(carry, x_t, m_t):
        h, c = carry
        a = x_t + _matmul(h, kernel) + bias  # (B, 4H)
        ifo = ops.sigmoid(a[:, :3 * units])
        c_new = ifo[:, units:2 * units] * c + ifo[:, :units] * ops.tanh(a[:, 3 * units:])
        h_new = ifo[:, 2 * units:] * ops.tanh(c_new)
        h, c = h + m_t * (h_new - h), c + m_t * (c_new - c)
        return (h, c), (h, c)

    _, (hs, cs) = _scan(step, (initial_state[:, :units], initial_state[:, units:]), (x, mask))
    states = ops.concatenate([hs, cs], axis=-1)

    def grad(*args, upstream=None):
        h_prev = _previous(initial_state[:, :units], hs)  # (T, B, H)
        c_prev = _previous(initial_state[:, units:], cs)
        a = x + _matmul(h_prev, kernel) + bias  # (T, B, 4H)
        i, f, o = (ops.sigmoid(a[..., k * units:(k + 1) * units]) for k in range(3))
        g = ops.tanh(a[..., 3 * units:])
        tanh_c = ops.tanh(f * c_prev + i * g)
        # With m = 0 everything below is 0 and the state gradient passes straight through.
        dc_dh = mask * o * (1.0 - tanh_c * tanh_c)  # dc'-gradient per unit of dh'
        # d(pre-activation) per unit of (dc', dc', dh', dc'):
        d_a = ops.concatenate([g * i * (1.0 - i), c_prev * f * (1.0 - f), mask * tanh_c * o * (1.0 - o),
                               i * (1.0 - g * g)], axis=-1)
        f_mask = mask * f
        d_out = upstream_gradient(args, upstream)
        kernel_t = ops.transpose(kernel)

        def back_step(carry, dh_out, dc_out, m_t, dc_dh_t, d_a_t, f_t):
            dh_next, dc_next = carry
            dh, dc = dh_next + dh_out, dc_next + dc_out
            dc_new = m_t * dc + dh * dc_dh_t  # total gradient reaching c'
            d_pre = ops.concatenate([dc_new, dc_new, dh, dc_new], axis=-1) * d_a_t
            dh_prev = dh * (1.0 - m_t) + _matmul(d_pre, kernel_t)
            dc_prev = dc * (1.0 - m_t) + dc_new * f_t
            return (dh_prev, dc_prev), (dh, dc_new)

        zeros = ops.zeros_like(initial_state[:, :units])
        (dh0, dc0), (dh, dc_new) = _scan(
            back_step, (zeros, zeros),
            (d_out[..., :units], d_out[..., units:], mask, dc_dh, d_a, f_mask), reverse=True)
        d_a = ops.concatenate([dc_new, dc_new, dh, dc_new], axis=-1) * d_a  # (T, B, 4H)
        return (d_a, ops.zeros_like(mask), ops.concatenate([dh0, dc0], axis=-1),
                _weight_gradient(h_prev, d_a, kernel.dtype), _bias_gradient(d_a))

    return states, grad


@ops.custom_gradient
def rnn_recurrence(x, mask, initial_state, kernel, bias):
    """The simple RNN time loop with clipped ReLU (DS2 §3.1): `h' = min(max(x + U h + b, 0), 20)`.

    Args:
        x: `(time, batch, units)` fp32 input projections.
        mask: `(time, batch, 1)` fp32, 1 at valid steps.
        initial_state: `(batch, units)` fp32.
        kernel: `(units, units)` recurrent weights U.
        bias: `(units,)` fp32 recurrent bias.

    Returns:
        `(time, batch, units)` fp32 states after each step (held at masked steps).
    """
    def step(h, x_t, m_t):
        h = h + m_t * (ops.clip(x_t + _matmul(h, kernel) + bias, 0.0, RELU_CLIP) - h)
        return h, h

    _, states = _scan(step, initial_state, (x, mask))

    def grad(*args, upstream=None):
        h_prev = _previous(initial_state, states)
        pre = x + _matmul(h_prev, kernel) + bias
        d_pre = mask * ops.cast((pre > 0.0) & (pre < RELU_CLIP), "float32")  # dh'/d(pre-activation)
        keep = 1.0 - mask
        kernel_t = ops.transpose(kernel)

        def back_step(dh_next, d_out, d_pre_t, keep_t):
            dh = dh_next + d_out
            return dh * keep_t + _matmul(dh * d_pre_t, kernel_t), dh

        d_initial, dh = _scan(back_step, ops.zeros_like(initial_state),
                              (upstream_gradient(args, upstream), d_pre, keep), reverse=True)
        d_pre = dh * d_pre
        return (d_pre, ops.zeros_like(mask), d_initial, _weight_gradient(h_prev, d_pre, kernel.dtype),
                _bias_gradient(d_pre))

    return states, grad


def gru_fused_cpu(x, mask, initial_state, kernel, bias):
    """`gru_recurrence` through the fused CPU ops (`fused_cpu.py`): the same arguments, states and gradients.

    The forward op keeps each step's gates for the backward op, whose reverse loop returns the gradients of `x`, of
    `U h + b` and of the initial state; the recurrent weight gradient is one matmul over all steps here, as in the
    loop's gradient.
    """
    from deepspeech2.model import fused_cpu

    lib = fused_cpu.library()

    @ops.custom_gradient
    def recurrence(x, mask, initial_state, kernel, bias):
        states, gates = lib.ds2_gru_forward(x, mask, initial_state, kernel, bias)

        def grad(*args, upstream=None):
            d_x, d_a, d_bias, d_initial = lib.ds2_gru_backward(upstream_gradient(args, upstream), gates, states,
                                                                mask, initial_state, kernel)
            return (d_x, ops.zeros_like(mask), d_initial,
                    _weight_gradient(_previous(initial_state, states), d_a, kernel.dtype), d_bias)

        return states, grad

    return recurrence(x, mask, initial_state, kernel, bias)


# -- the fused kernel (cuDNN) ---------------------------------------------------------------------------------
#
# On a GPU the GRU and LSTM loops above run as one cuDNN kernel per layer and direction (TF's CudnnRNNV3, the
# kernel keras.layers.GRU and LSTM use), with DS2's sequence-wise BN still on the input projection outside it:
# the kernel gets the normalized projection as its input, through fixed input weights that pass it on (the
# identity, with the sign of GRU's update gate flipped), and our recurrent weights mapped to cuDNN's gates. The
# math is the loop's: the same gates, the same state, zeros past each sequence's end. The clipped-ReLU RNN
# ("rnn") has no such kernel (cuDNN's ReLU RNN is unclipped) and stays a loop.


def fused_weights(cell: str, kernel, bias):
    """Our recurrence's weights in the layout of keras.layers.GRU (`reset_after=True`) and LSTM, which is what
    their cuDNN kernel computes with: `(input_kernel, recurrent_kernel, bias)`.

    GRU: Keras's gates are [z, r, h] with `h' = z h + (1 - z) hh`, ours [z, r, n] with `h' = (1 - z) h + z n`, so
    Keras's update gate is ours with its pre-activation negated; our `b_z, b_r` join the input, `b_n` sits inside
    the reset gate's product (Keras's recurrent bias). LSTM: Keras's gates are [i, f, c, o], ours [i, f, o, g].

    Args:
        cell: "gru" or "lstm".
        kernel: `(units, gates * units)` our recurrent weights U.
        bias: `(gates * units,)` our recurrent bias.

    Returns:
        `input_kernel` `(gates * units, gates * units)`, applied to our input projection `x` (gates in our
        order); `recurrent_kernel` `(units, gates * units)`; `bias`: GRU `(2, 3 * units)` (input, recurrent),
        LSTM `(4 * units,)`.
    """
    units = kernel.shape[0]
    eye = ops.eye(units, dtype=kernel.dtype)
    zero = ops.zeros((units, units), kernel.dtype)
    if cell == "gru":
        u_z, u_r, u_n = ops.split(kernel, 3, axis=-1)
        b_z, b_r, b_n = ops.split(bias, 3, axis=-1)
        input_kernel = ops.concatenate([ops.concatenate([-eye, zero, zero], axis=1),
                                        ops.concatenate([zero, eye, zero], axis=1),
                                        ops.concatenate([zero, zero, eye], axis=1)], axis=0)
        zeros = ops.zeros_like(b_n)
        return (input_kernel, ops.concatenate([-u_z, u_r, u_n], axis=-1),
                ops.stack([ops.concatenate([-b_z, b_r, zeros]), ops.concatenate([zeros, zeros, b_n])]))
    if cell != "lstm":
        raise ValueError(f"no fused kernel for `cell`={cell!r}; only 'gru' and 'lstm' have one")
    order = (0, 1, 3, 2)  # ours i, f, o, g -> Keras i, f, c (= g), o
    blocks = [[eye if j == i else zero for j in range(4)] for i in order]  # row block: our gate j feeds Keras's i
    input_kernel = ops.concatenate([ops.concatenate([blocks[i][j] for i in range(4)], axis=1) for j in range(4)],
                                   axis=0)
    u, b = ops.split(kernel, 4, axis=-1), ops.split(bias, 4, axis=-1)
    return (input_kernel, ops.concatenate([u[i] for i in order], axis=-1),
            ops.concatenate([b[i] for i in order], axis=-1))


def cudnn_kernel(cell: str, x, lengths, initial_state, input_kernel, recurrent_kernel, bias):
    """One direction of a GRU or LSTM layer through TF's CudnnRNNV3 (GPU only).

    Args:
        cell: "gru" or "lstm".
        x: `(time, batch, features)` inputs.
        lengths: `(batch,)` int32 valid steps, each at least 1 (cuDNN refuses an empty sequence).
        initial_state: `(batch, units)`; LSTM `(batch, 2 * units)`, `[h, c]`.
        input_kernel, recurrent_kernel, bias: `fused_weights`' layout.

    Returns:
        `(outputs, state)`: `(time, batch, units)`, zero past each length, and the state after each sequence's
        last step (LSTM `[h, c]`).
    """
    import tensorflow as tf

    units = recurrent_kernel.shape[0]
    gates = recurrent_kernel.shape[1] // units
    weights = ops.split(input_kernel, gates, axis=1) + ops.split(recurrent_kernel, gates, axis=1)
    if cell == "gru":
        biases = ops.split(ops.reshape(bias, (-1,)), 6)
        # cuDNN orders a GRU's gates [r, z, h] (Keras [z, r, h]); an LSTM's are Keras's [i, f, c, o].
        weights = [weights[i] for i in (1, 0, 2, 4, 3, 5)]
        biases = [biases[i] for i in (1, 0, 2, 4, 3, 5)]
        h0, c0 = initial_state, 0.0
    else:
        biases = ops.split(ops.concatenate([ops.zeros_like(bias), bias]), 8)  # cuDNN's input bias: unused, 0
        h0, c0 = initial_state[:, :units], initial_state[:, units:][None]
    # cuDNN's canonical matrices are (units, inputs): Keras's blocks transposed, all flattened into one vector.
    params = ops.concatenate([ops.reshape(ops.transpose(w), (-1,)) for w in weights] +
                             [ops.reshape(b, (-1,)) for b in biases])
    outputs, h, c, _, _ = tf.raw_ops.CudnnRNNV3(input=x, input_h=h0[None], input_c=c0, params=params,
                                                 is_training=True, rnn_mode=cell, sequence_lengths=lengths,
                                                 time_major=True)
    return outputs, (h[0] if cell == "gru" else ops.concatenate([h[0], c[0]], axis=-1))


def fused_kernel_available(cell: str) -> bool:
    """Whether `cell` runs as a fused kernel here: a GRU or LSTM, on TensorFlow built with CUDA, with a GPU
    visible (a ROCm build orders the gates otherwise: it keeps the loop). DS2_RNN_LOOP=1 keeps the loop (to
    compare, or where a driver's cuDNN misbehaves)."""
    import os

    if cell not in ("gru", "lstm") or keras.backend.backend() != "tensorflow" or os.environ.get("DS2_RNN_LOOP") == "1":
        return False
    import tensorflow as tf

    return bool(tf.sysconfig.get_build_info().get("is_cuda_build")) and bool(tf.config.list_logical_devices("GPU"))


def cpu_kernel_available(cell: str, dtype: str) -> bool:
    """Whether `cell` trains with the fused CPU op here (`fused_cpu.py`): a GRU whose recurrent matmul runs in
    `dtype` ("float32" or "bfloat16"), on TensorFlow with no GPU visible, where `make deps` built the op library and
    this CPU runs its kernel (AVX-512, or AVX2 and FMA; AVX512-BF16 for bf16), outside XLA (`--jit_compile`: XLA
    can't compile a custom op). DS2_RNN_LOOP=1 keeps the loop."""
    import os

    from deepspeech2.model import fused_cpu

    return cell == "gru" and os.environ.get("DS2_RNN_LOOP") != "1" and fused_cpu.usable(dtype)


def recurrent_kernel(config, on_gpu: bool, dtype: str = "float32") -> str:
    """Which kernel a model's recurrent layers train with, in words (for the training log); `dtype`: the recurrent
    matmuls' ("bfloat16" under mixed_bfloat16)."""
    if config.rnn_type == "cudnn_gru":
        return "keras.layers.GRU (cuDNN on a GPU; no batch norm)"
    if not on_gpu and cpu_kernel_available(config.rnn_type, dtype):
        return "the fused CPU GRU (deepspeech2/model/fused_cpu.cc), BN on the input projection outside it"
    if not on_gpu:
        return f"{config.rnn_type} time loop (keras.ops.scan, a custom gradient)"
    if config.rnn_type in ("gru", "lstm") and fused_kernel_available(config.rnn_type):
        return f"cuDNN's fused {config.rnn_type.upper()} (CudnnRNNV3), BN on the input projection outside it"
    if config.rnn_type == "rnn":
        return ("clipped-ReLU time loop: cuDNN's ReLU RNN has no clip at 20, so it has no fused kernel (the GRU "
                "presets, e.g. ds2-paper-en-gru, have one)")
    return f"{config.rnn_type} time loop (DS2_RNN_LOOP=1)"


def _lstm_bias_initializer(shape, dtype=None):
    """Zeros, except 1 for the forget gate (gate order i, f, o, g), so early training keeps the cell."""
    units = shape[0] // 4
    return ops.concatenate([ops.zeros((units,), dtype), ops.ones((units,), dtype), ops.zeros((2 * units,), dtype)])


@keras.saving.register_keras_serializable(package="deepspeech2")
class BatchNormRNN(keras.layers.Layer):
    """One recurrent layer `h_t = f(B(W x_t) + U h_{t-1})` with sequence-wise BN (DS2 §3.2 eq. 4).

    `W x` for every frame is one matmul, batch-normalized over the valid frames of the batch; the
    time loop only does `U h`. Bidirectional layers run a second loop on the time-reversed sequence
    and sum both directions' outputs (DS2 §3.2). That reversal flips the padded tensor: each sequence's
    padding then comes first, and since the state is held through padding, the backward direction
    starts from the initial state at the sequence's own last valid frame.

    Args:
        units: hidden units per direction.
        cell: "gru" (DS2 §3.3 form), "lstm" or "rnn" (clipped ReLU, DS2 §3.1).
        bidirectional: add a backward direction (outputs summed).
        batch_norm: BN on `W x`; without it `W x` gets a bias instead.
        momentum: BN moving-average momentum.
        epsilon: BN variance epsilon.

    Call args:
        inputs: `(batch, time, features)`.
        lengths: `(batch,)` int32 valid steps.
        initial_state: optional list with one `(batch, state_size)` tensor per direction (zeros if
            omitted).
        return_state: also return the final states.
        training: BN uses batch statistics (and updates its moving averages).

    Returns:
        `(batch, time, units)` outputs, zero at steps `t >= length`; with `return_state`,
        `(outputs, states)` where `states` is a list of one fp32 `(batch, state_size)` per direction
        (the state at each sequence's last valid step, or the initial state if `length` is 0).
    """

    def __init__(self, units, cell="gru", bidirectional=False, batch_norm=True, momentum=0.99, epsilon=1e-3,
                 **kwargs):
        super().__init__(**kwargs)
        if cell not in _GATES:
            raise ValueError(f"`cell` must be one of {sorted(_GATES)}, got {cell!r}")
        self.units = units
        self.cell = cell
        self.bidirectional = bidirectional
        self.batch_norm = batch_norm
        self.momentum = momentum
        self.epsilon = epsilon
        self.directions = 2 if bidirectional else 1
        self.state_size = 2 * units if cell == "lstm" else units  # LSTM state is [h, c]
        width = self.directions * _GATES[cell] * units
        self.input_projection = keras.layers.Dense(width, use_bias=not batch_norm, name="input_projection")
        # fp32 even under mixed precision: the time loop wants fp32 inputs, so BN hands them over directly.
        self.norm = SequenceBatchNorm(momentum, epsilon, dtype="float32", name="norm") if batch_norm else None

    def build(self, input_shape):
        self.input_projection.build(input_shape)
        if self.norm is not None:
            self.norm.build(tuple(input_shape[:-1]) + (self.input_projection.units,))
        width = _GATES[self.cell] * self.units
        bias_initializer = _lstm_bias_initializer if self.cell == "lstm" else "zeros"
        self.kernels, self.biases = [], []
        for direction in ("forward", "backward")[:self.directions]:
            self.kernels.append(self.add_weight(shape=(self.units, width), initializer="orthogonal",
                                                name=f"{direction}_recurrent_kernel"))
            self.biases.append(self.add_weight(shape=(width,), initializer=bias_initializer, autocast=False,
                                               name=f"{direction}_recurrent_bias"))  # the loop math is fp32

    def call(self, inputs, lengths, initial_state=None, return_state=False, training=None):
        batch, steps = ops.shape(inputs)[0], ops.shape(inputs)[1]
        # Time-major from here on: the loops scan over axis 0.
        mask = ops.transpose(sequence_mask(lengths, steps))  # (T, B)
        x = self.input_projection(ops.transpose(inputs, (1, 0, 2)))  # (T, B, directions * gates * H)
        if self.norm is not None:
            x = self.norm(x, mask, training=training)
        x = ops.cast(x, "float32")
        mask = ops.cast(mask, "float32")[:, :, None]  # (T, B, 1)
        if initial_state is None:
            initial_state = [ops.zeros((batch, self.state_size), "float32")] * self.directions
        if self.cell == "gru":
            recurrence = gru_fused_cpu if training and cpu_kernel_available("gru", self.compute_dtype) \
                else gru_recurrence
        elif self.cell == "lstm":
            recurrence = lstm_recurrence
        else:
            recurrence = rnn_recurrence
        xs = ops.split(x, 2, axis=-1) if self.bidirectional else [x]  # (T, B, gates * H) per direction
        if training and fused_kernel_available(self.cell):
            outputs, states = self._fused(xs, lengths, mask, initial_state)
            outputs = ops.transpose(ops.cast(outputs, self.compute_dtype), (1, 0, 2))  # (B, T, H)
            return (outputs, states) if return_state else outputs
        outputs, states = 0.0, []
        for d, (x_d, kernel, bias) in enumerate(zip(xs, self.kernels, self.biases)):
            mask_d = mask
            if d == 1:
                x_d, mask_d = ops.flip(x_d, axis=0), ops.flip(mask, axis=0)
            # Weights go in as (cast) tensors: TF's custom_gradient must not see variable reads inside.
            sequence = recurrence(x_d, mask_d, ops.cast(initial_state[d], "float32"),
                                  ops.cast(kernel, self.compute_dtype), ops.cast(bias, "float32"))
            if return_state:
                states.append(sequence[-1])
            if self.cell == "lstm":
                sequence = sequence[..., :self.units]  # h, without the cell c
            outputs = outputs + (ops.flip(sequence, axis=0) if d == 1 else sequence)
        outputs = ops.transpose(ops.cast(outputs * mask, self.compute_dtype), (1, 0, 2))  # (B, T, H)
        return (outputs, states) if return_state else outputs

    def _fused(self, xs, lengths, mask, initial_state):
        """`call`'s directions through the fused kernel (`cudnn_kernel`): the backward one on each sequence
        reversed within its length. Returns the directions' summed outputs `(T, B, H)`, zero past each length,
        and each direction's final state."""
        import tensorflow as tf

        # fp16 where the policy computes in it, else fp32 (cuDNN's RNN has no bf16 kernel).
        dtype = "float16" if self.compute_dtype == "float16" else "float32"
        # A filler row has no frames (`make_dataset`'s rows of no frames): cuDNN takes one step of it, and the
        # mask below zeroes it.
        steps = ops.maximum(ops.cast(lengths, "int32"), 1)
        outputs, states = 0.0, []
        for d, (x_d, kernel, bias) in enumerate(zip(xs, self.kernels, self.biases)):
            if d == 1:
                x_d = tf.reverse_sequence(x_d, steps, seq_axis=0, batch_axis=1)
            weights = fused_weights(self.cell, ops.cast(kernel, dtype), ops.cast(bias, dtype))
            sequence, state = cudnn_kernel(self.cell, ops.cast(x_d, dtype), steps,
                                           ops.cast(initial_state[d], dtype), *weights)
            if d == 1:
                sequence = tf.reverse_sequence(sequence, steps, seq_axis=0, batch_axis=1)
            outputs = outputs + ops.cast(sequence, "float32")
            states.append(ops.cast(state, "float32"))
        return outputs * mask, states

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, cell=self.cell, bidirectional=self.bidirectional,
                      batch_norm=self.batch_norm, momentum=self.momentum, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="deepspeech2")
class KerasGRU(keras.layers.Layer):
    """`keras.layers.GRU` (cuDNN on GPU) behind the `BatchNormRNN` call signature; no batch norm.

    Args:
        units: hidden units per direction.
        bidirectional: add a backward direction (outputs summed).

    Call args:
        inputs: `(batch, time, features)`.
        lengths: `(batch,)` int32 valid steps (right padding, as cuDNN requires).
        initial_state: optional list with one `(batch, units)` tensor per direction.
        return_state: also return the list of final states.

    Returns:
        `(batch, time, units)` outputs, zero at steps `t >= length` (and states, with `return_state`).
    """

    def __init__(self, units, bidirectional=False, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.bidirectional = bidirectional
        gru = keras.layers.GRU(units, return_sequences=True, return_state=True, name="gru")
        self.gru = keras.layers.Bidirectional(gru, merge_mode="sum", name="bidirectional") if bidirectional \
            else gru

    def build(self, input_shape):
        self.gru.build(input_shape)

    def call(self, inputs, lengths, initial_state=None, return_state=False):
        mask = sequence_mask(lengths, ops.shape(inputs)[1])
        outputs, *states = self.gru(inputs, mask=mask, initial_state=initial_state)
        outputs = outputs * ops.cast(mask, outputs.dtype)[:, :, None]
        return (outputs, states) if return_state else outputs

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, bidirectional=self.bidirectional)
        return config
