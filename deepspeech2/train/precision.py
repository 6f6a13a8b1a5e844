"""Mixed precision: the policies `--mixed_precision` takes, and what "auto" stands for on this machine."""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

from deepspeech2.train.config import MIXED_POLICIES

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of CPUs with native bf16 matmuls


def _cpu_flags() -> set[str]:
    """The CPU feature flags of /proc/cpuinfo's first processor; empty where there is no such file."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def resolve_mixed_precision(policy: str, cpu_flags: set[str] | None = None,
                            gpu_capabilities: list[tuple[int, int]] | None = None) -> str:
    """The policy "auto" stands for on this machine; any other policy is returned as it is.

    "auto" picks the fastest policy the hardware computes natively: "mixed_bfloat16" on GPUs of compute
    capability 8.0 or newer and on CPUs with AVX512-BF16 or AMX (bf16 matmuls there are 1.25-2x faster than
    fp32); "mixed_float16" on older GPUs with fp16 tensor cores (7.0+); float32 ("") everywhere else. A CPU
    without bf16 instructions emulates them: measured on a 2-core AVX2 EPYC, the tiny recipe trained 1.75x
    slower in mixed_bfloat16 than in float32.

    Args:
        policy: a `MIXED_POLICIES` entry.
        cpu_flags: the CPU's feature flags; None = read /proc/cpuinfo.
        gpu_capabilities: (major, minor) compute capability of each visible GPU; None = ask TensorFlow.
    """
    if policy not in MIXED_POLICIES:
        raise ValueError(f"`mixed_precision` must be one of {MIXED_POLICIES}, got {policy!r}")
    if policy != "auto":
        return policy
    return auto_precision(cpu_flags, gpu_capabilities)[0]


def auto_precision(cpu_flags: set[str] | None = None,
                   gpu_capabilities: list[tuple[int, int]] | None = None) -> tuple[str, str]:
    """`(policy, the device it was chosen for)`: what "auto" stands for (`resolve_mixed_precision`), and why, in
    words: "2 GPUs of compute capability 9.0", "this CPU (avx512_bf16)"."""
    if gpu_capabilities is None:
        gpu_capabilities = [tuple(tf.config.experimental.get_device_details(gpu).get("compute_capability")
                                  or (0, 0)) for gpu in tf.config.list_physical_devices("GPU")]
    if gpu_capabilities:
        oldest = min(gpu_capabilities)
        n = len(gpu_capabilities)
        device = f"{n} GPU{'s' * (n > 1)} of compute capability {oldest[0]}.{oldest[1]}" + (" or newer" if len(
            set(gpu_capabilities)) > 1 else "")
        return ("mixed_bfloat16" if oldest >= (8, 0) else "mixed_float16" if oldest >= (7, 0) else ""), device
    flags = _cpu_flags() if cpu_flags is None else cpu_flags
    native = sorted(flags & set(BF16_CPU_FLAGS))
    if native:
        return "mixed_bfloat16", f"this CPU ({', '.join(native)}; no GPU seen)"
    return "", "this CPU (no bf16 instructions; no GPU seen)"


@contextlib.contextmanager
def global_policy(policy: str):
    """Keras's global dtype policy set to `policy` ("": float32, left as it is) for the block, and put back after
    it: the policy is process-global, and a run must not leave its own to the code that follows."""
    previous = keras.mixed_precision.global_policy()
    if policy:
        keras.mixed_precision.set_global_policy(policy)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)
