"""What a training run is about to do, said before its first step: the devices and strategy, the precision, the
global batch, the steps of an epoch and the recurrent kernel; and `--dry_run`'s epoch time, estimated from a few
timed steps of a shuffled epoch."""

from __future__ import annotations

import dataclasses
import math
import statistics
import tempfile
import time

import keras
import tensorflow as tf

from deepspeech2.data.pipeline import ShardSet, bucket_plan, epoch_steps
from deepspeech2.model.rnn import recurrent_kernel
from deepspeech2.train.strategy import num_workers

DRY_RUN_STEPS = 12  # timed steps of `--dry_run`, after DRY_RUN_WARMUP untimed ones (tracing, the first batches)
DRY_RUN_WARMUP = 3


def describe_devices(strategy: tf.distribute.Strategy) -> str:
    """`8 replicas on 1 worker (MirroredStrategy): 8 x NVIDIA H100 80GB HBM3` and the like."""
    devices = strategy.extended.worker_devices
    gpus = tf.config.list_physical_devices("GPU")
    names = sorted({tf.config.experimental.get_device_details(g).get("device_name", "GPU") for g in gpus})
    kind = " and ".join(names) if any("GPU" in d.upper() for d in devices) and names else "CPU"
    workers = num_workers(strategy)
    return (f"{strategy.num_replicas_in_sync} replica{'s' * (strategy.num_replicas_in_sync > 1)} on {workers} "
            f"worker{'s' * (workers > 1)} ({type(strategy).__name__}): {len(devices)} x {kind} here")


def describe_batch(pipeline, feature_config, train_shards, replicas: int, workers: int) -> str:
    """The global batch and each replica's share, as `make_dataset` will cut it."""
    if pipeline.batch_frames:
        shards = ShardSet.load(train_shards)
        _, sizes = bucket_plan(shards.percentiles(), feature_config, pipeline, 0, replicas // workers, workers)
        rows = f"{min(sizes) * workers}-{max(sizes) * workers} utterances by length bucket"
        share = f"; a replica's share ~{pipeline.batch_frames // replicas} frames" if replicas > 1 else ""
        return f"global batch: up to {pipeline.batch_frames} padded frames ({rows}){share}"
    share = f"; a replica's share {math.ceil(pipeline.batch_size / replicas)}" if replicas > 1 else ""
    return f"global batch: {pipeline.batch_size} utterances{share}"


def describe(trainer) -> list[str]:
    """The lines `ds2-train` prints before its first step (and `--dry_run` prints alone)."""
    config, strategy, pipeline = trainer.config, trainer.strategy, trainer.pipeline
    replicas, workers = strategy.num_replicas_in_sync, num_workers(strategy)
    shards = list(config.train_shards)
    planned = [epoch_steps(shards, trainer.feature_config, config.model, pipeline, sorted_epoch=s, pipelines=workers)
               for s in (pipeline.sortagrad, False)]
    steps = f"{planned[0]} steps" + (f" in the first (sorted) epoch, {planned[1]} in the others"
                                     if planned[0] != planned[1] else " an epoch")
    on_gpu = any("GPU" in d.upper() for d in strategy.extended.worker_devices)
    return [
        f"devices: {describe_devices(strategy)}",
        f"precision: {config.mixed_precision or 'float32'}",
        describe_batch(pipeline, trainer.feature_config, shards, replicas, workers),
        f"steps: {steps} (from the shard indexes; speed perturbation moves a few between buckets)",
        f"recurrent layers: {recurrent_kernel(config.model, on_gpu, keras.config.dtype_policy().compute_dtype)}",
    ]


def dry_run(config) -> dict:
    """Set up `config`'s run and time a few steps of a shuffled epoch, in a temporary workdir (nothing of the
    run's own is read or written); returns the figures `ds2-train --dry_run` prints.

    Returns:
        `{"lines": describe()'s lines, "step_seconds": mean of the timed steps, "steps_per_epoch": a shuffled
        epoch's steps, "epoch_seconds": their product}`.
    """
    from deepspeech2.train.trainer import Trainer  # the trainer imports this module

    with tempfile.TemporaryDirectory(prefix="ds2-dry-run-") as workdir:
        # The real run's data and model; a shuffled epoch, so the timed steps mix short and long utterances.
        probe = dataclasses.replace(
            config, workdir=workdir, dev_shards=(), init_model_path="", ema_decay=0.0, average_epochs=0, verbose=0,
            benchmark=dataclasses.replace(config.benchmark, max_step=DRY_RUN_WARMUP + DRY_RUN_STEPS),
            checkpoints=dataclasses.replace(config.checkpoints, every_steps=10**9),
            pipeline=dataclasses.replace(config.pipeline, sortagrad=False))
        trainer = Trainer(probe)
        lines = describe(trainer)
        trainer.fit()
    steps = epoch_steps(list(config.train_shards), trainer.feature_config, trainer.config.model, trainer.pipeline,
                        sorted_epoch=False, pipelines=num_workers(trainer.strategy))
    deltas = trainer.step_seconds[DRY_RUN_WARMUP:]
    step_seconds = statistics.mean(deltas) if deltas else math.nan
    return {"lines": lines, "step_seconds": step_seconds, "timed_steps": len(deltas), "steps_per_epoch": steps,
            "epoch_seconds": step_seconds * steps}


def matmul_peak(dtype: str, size: int = 2048, repeats: int = 10) -> float:
    """This machine's FLOP/s on a `size`^2 matmul in `dtype` (best of three runs of `repeats` chained matmuls):
    what its training figures are read against (machines of one kind differ by up to 2x from day to day)."""
    a = tf.cast(tf.random.normal((size, size), stddev=size ** -0.5), dtype)

    @tf.function
    def chain(x):
        for _ in range(repeats):  # chained, so nothing can be folded or run concurrently
            x = tf.matmul(x, a)
        return x

    chain(a).numpy()
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        chain(a).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 * repeats / best
