"""Where training runs: one device, all local GPUs, or the machines TF_CONFIG names; a GPU host where TensorFlow
sees no GPU; which process is the chief; and a SIGTERM that every worker of a cluster acts on at the same step."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
from pathlib import Path

import tensorflow as tf

NVIDIA_PROC = Path("/proc/driver/nvidia")  # the NVIDIA kernel driver's files, present where it is loaded
# The pip packages `tensorflow[and-cuda]` adds: TensorFlow's Linux wheel finds CUDA and cuDNN through them.
CUDA_WHEEL_MODULES = ("nvidia.cuda_runtime", "nvidia.cublas", "nvidia.cudnn", "nvidia.cufft", "nvidia.cusolver",
                      "nvidia.cusparse", "nvidia.nccl")


def nvidia_driver(proc: Path | None = None) -> str | None:
    """The loaded NVIDIA driver's version ("535.104.05"), "unknown version" where only `nvidia-smi` shows one
    is installed, or None where there is no sign of an NVIDIA GPU.

    Args:
        proc: the driver's folder under /proc; None = `NVIDIA_PROC`.
    """
    proc = NVIDIA_PROC if proc is None else proc
    version = proc / "version"
    if version.is_file():
        words = version.read_text(errors="replace").split()
        # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..."
        numbers = [w for w in words if w[:1].isdigit() and w.count(".") >= 1]
        return numbers[0] if numbers else "unknown version"
    if proc.is_dir() or shutil.which("nvidia-smi"):
        return "unknown version"
    return None


def gpu_problem(driver: str | None = None, gpus: list | None = None) -> str | None:
    """Why TensorFlow trains on the CPU of a machine with an NVIDIA GPU, or None when it sees its GPUs (or the
    machine has none).

    Args:
        driver: `nvidia_driver()`'s answer; None = ask it.
        gpus: TensorFlow's physical GPUs; None = ask TensorFlow.
    """
    driver = nvidia_driver() if driver is None else driver
    gpus = tf.config.list_physical_devices("GPU") if gpus is None else gpus
    if not driver or gpus:
        return None
    build = tf.sysconfig.get_build_info()
    if not build.get("is_cuda_build"):
        why = (f"this TensorFlow {tf.__version__} is not built with CUDA; install the Linux x86-64 wheel with its "
               "CUDA libraries: `make deps GPU=1` (or `pip install 'tensorflow[and-cuda]==" + tf.__version__ + "'`)")
    else:
        missing = [m for m in CUDA_WHEEL_MODULES if importlib.util.find_spec(m.split(".")[0]) is None
                   or importlib.util.find_spec(m) is None]
        wants = f"CUDA {build.get('cuda_version', '?')} and cuDNN {build.get('cudnn_version', '?')}"
        if missing:
            why = (f"TensorFlow {tf.__version__} wants {wants} from the pip packages tensorflow[and-cuda] brings, and "
                   f"{', '.join(missing)} is missing: `make deps GPU=1` (or `pip install 'tensorflow[and-cuda]=="
                   f"{tf.__version__}'`)")
        else:
            why = (f"TensorFlow {tf.__version__} has its {wants} libraries but could not use the driver: the driver "
                   f"must support CUDA {build.get('cuda_version', '?')} (`nvidia-smi` shows the CUDA version it "
                   "supports), and CUDA_VISIBLE_DEVICES must not hide the GPUs")
    return f"an NVIDIA driver ({driver}) is installed but TensorFlow sees no GPU: {why}"


def select_strategy() -> tf.distribute.Strategy:
    """MultiWorkerMirrored when TF_CONFIG names a cluster (NCCL's all-reduce between GPUs, TF's ring on CPUs),
    Mirrored over several GPUs (NCCL's all-reduce), else one device."""
    if "cluster" in json.loads(os.environ.get("TF_CONFIG", "{}")):
        # Physical devices: listing logical ones would start TF's runtime, which a cluster strategy must precede.
        implementation = (tf.distribute.experimental.CommunicationImplementation.NCCL
                          if tf.config.list_physical_devices("GPU")
                          else tf.distribute.experimental.CommunicationImplementation.RING)
        return tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation))
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")


def is_chief_process() -> bool:
    """Whether TF_CONFIG makes this process the chief (worker 0 without a "chief" task), before any strategy."""
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task, cluster = tf_config.get("task", {}), tf_config.get("cluster", {})
    if not cluster:
        return True
    return task.get("type") == "chief" or (task.get("type") == "worker" and task.get("index", 0) == 0
                                           and "chief" not in cluster)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process is the chief of `strategy`'s cluster (always, outside a cluster)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                             and "chief" not in resolver.cluster_spec().as_dict())


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """The machines of `strategy`'s cluster (chief included); 1 outside a cluster."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    return max(1, len(spec.get("worker", [])) + len(spec.get("chief", [])))


class Preempted:
    """SIGTERM sets a flag. The step all-reduces it, so every worker of a cluster learns of one worker's SIGTERM
    at the same step; they all checkpoint that step and stop."""

    def __init__(self):
        self.flag = False
        self._previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        self.flag = True

    def restore(self):
        signal.signal(signal.SIGTERM, self._previous)
