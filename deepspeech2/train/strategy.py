"""Where training runs: one device, all local GPUs, or the machines TF_CONFIG names; which process is the chief;
and a SIGTERM that every worker of a cluster acts on at the same step."""

from __future__ import annotations

import json
import os
import signal

import tensorflow as tf


def select_strategy() -> tf.distribute.Strategy:
    """MultiWorkerMirrored when TF_CONFIG names a cluster, Mirrored over several GPUs, else one device."""
    if "cluster" in json.loads(os.environ.get("TF_CONFIG", "{}")):
        return tf.distribute.MultiWorkerMirroredStrategy()
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
