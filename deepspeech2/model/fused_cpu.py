"""The fused GRU for training on CPU: the TensorFlow ops of `fused_cpu.cc`, which `make deps` builds into
`_fused_cpu.so` beside this file.

`BatchNormRNN` trains its GRU layers with them where they are built, load and run on this CPU (AVX-512 for fp32,
AVX512-BF16 for bf16), on TensorFlow with no GPU visible; elsewhere with the time loop of `rnn.py`. The library is
loaded on first use, once; if it fails to load, the reason is logged once and the loop is used.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

LIBRARY = Path(__file__).with_name("_fused_cpu.so")
_FP32, _BF16 = 1, 2  # Ds2FusedCpuSupport's bits

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


def supports(dtype: str) -> bool:
    """Whether the ops load and this CPU runs their kernel for a recurrent kernel of `dtype` ("float32" or
    "bfloat16")."""
    bit = {"float32": _FP32, "bfloat16": _BF16}.get(dtype, 0)
    return bool(bit and _support() & bit)
