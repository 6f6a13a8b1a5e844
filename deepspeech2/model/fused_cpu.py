"""The fused GRU and the front end's fused BN + clipped ReLU for training on CPU: the TensorFlow ops of
`fused_cpu.cc`, which `make deps` builds into `_fused_cpu.so` beside this file.

`BatchNormRNN` trains its GRU layers with them where they are built, load and run on this CPU (for fp32 AVX-512, or
AVX2 and FMA; AVX512-BF16 for bf16), on TensorFlow with no GPU visible; elsewhere with the time loop of `rnn.py`.
`ConvFrontEnd` trains each conv's BN and clipped ReLU with them under the same conditions (AVX2 and FMA, either
dtype); elsewhere with TF's ops. The library is loaded on first use, once; if it fails to load, the reason is logged
once and the loop and TF's ops are used.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

LIBRARY = Path(__file__).with_name("_fused_cpu.so")
# Ds2FusedCpuSupport's bits, by kernel: the GRU's for its recurrent kernel's dtype (fp32: its AVX-512 or its AVX2
# loops), the front end's BN + clipped ReLU
_BITS = {"float32": 1, "bfloat16": 2, "bn_clipped_relu": 4}

log = logging.getLogger(__name__)


@functools.cache
def library():
    """The loaded op module (`ds2_gru_forward`, `ds2_gru_backward`, `ds2_fused_cpu_support`), or None where
    `LIBRARY` is missing or does not load here."""
    if not LIBRARY.exists():
        return None
    import tensorflow as tf

    try:
        return tf.load_op_library(str(LIBRARY))
    except (tf.errors.OpError, OSError) as error:  # built against another TensorFlow, or not a library at all
        log.warning("the fused CPU GRU (%s) does not load, training uses the time loop: %s", LIBRARY, error)
        return None


@functools.cache
def _support() -> int:
    ops = library()
    if ops is None:
        return 0
    import tensorflow as tf

    with tf.init_scope():  # eagerly, also when first asked inside a tf.function
        return int(ops.ds2_fused_cpu_support())


def supports(kernel: str) -> bool:
    """Whether the ops load and this CPU runs `kernel`: the GRU's for a recurrent kernel of dtype "float32" or
    "bfloat16", or "bn_clipped_relu" (the front end's, either dtype)."""
    bit = _BITS.get(kernel, 0)
    return bool(bit and _support() & bit)


def usable(kernel: str) -> bool:
    """Whether a graph being built now may use `kernel` (`supports`): on TensorFlow with no GPU visible, outside XLA
    (`--jit_compile`: XLA can't compile a custom op)."""
    import keras

    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    if control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
        return False
    return not tf.config.list_logical_devices("GPU") and supports(kernel)
