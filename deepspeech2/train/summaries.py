"""What a run reports as it trains: each logged step's TensorBoard scalars and log line, each epoch's dev scores
and decoded examples, an augmented example and the weights' histograms, and PaddleSpeech's benchmark line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from deepspeech2.data.shards import load_index, read_shards

BENCHMARK_SKIP_STEPS = 10  # steps left out of the final throughput figure (tracing, warm-up)
FP_ITEMS = {"": "fp32", "mixed_bfloat16": "bf16", "mixed_float16": "fp16"}  # PaddleSpeech's names


def log_step(writer, verbose: int, benchmark: bool, epoch: int, step: int, loss: float, lr: float,
             grad_norm: float, dt: float, ips: float) -> None:
    """A logged step: its scalars in TensorBoard, and (`verbose` 2, or a benchmark's) its line in the log."""
    with writer.as_default(step=step):
        tf.summary.scalar("loss", loss)
        tf.summary.scalar("learning_rate", lr)
        tf.summary.scalar("gradient_norm", grad_norm)
        tf.summary.scalar("throughput_sent_per_sec", ips)
    if verbose >= 2 or (benchmark and verbose):  # PaddleSpeech's benchmark log format
        print(f"epoch: {epoch + 1}, step: {step}, loss: {loss:.4f}, lr: {lr:.3e}, grad_norm: {grad_norm:.2f}, "
              f"batch_cost: {dt:.4f} s, ips: {ips:.3f} sent./sec", flush=True)


def dev_summary(writer, step: int, wer: float, cer: float, examples: list[tuple[str, str]]) -> None:
    """The dev scores and decoded examples (reference, hypothesis) of the epoch ending at `step`."""
    with writer.as_default(step=step):
        tf.summary.scalar("wer", wer)
        tf.summary.scalar("cer", cer)
        tf.summary.text("examples", "\n\n".join(f"**ref:** {r}  \n**hyp:** {h}" for r, h in examples))


def epoch_summary(writer, step: int, shard_dirs, augmentation, sample_rate: int, weights=None) -> None:
    """At an epoch's end: the first training utterance as augmented (with `augmentation`), and a histogram of
    each of `weights` (when given)."""
    with writer.as_default(step=step):
        if augmentation:
            first = str(Path(shard_dirs[0]) / load_index(shard_dirs[0])["shards"][0]["path"])
            record = next(iter(read_shards([first])))
            wav, length = augmentation.apply_waveform(record["audio"], record["num_samples"])
            tf.summary.audio("augmented_example", wav[None, :length, None], sample_rate, max_outputs=1)
        for w in weights or ():
            tf.summary.histogram(w.path, w)


def benchmark_line(model_name: str, batch_size: int, mixed_precision: str, replicas: int,
                   timings: list[float]) -> dict:
    """PaddleSpeech's benchmark line: mean sent./sec (`timings`: each applied step's) after the first
    BENCHMARK_SKIP_STEPS steps."""
    measured = timings[BENCHMARK_SKIP_STEPS:] or timings
    return {
        "model_name": model_name, "batch_size": batch_size, "fp_item": FP_ITEMS[mixed_precision],
        "run_mode": "DP", "gpu_num": len(tf.config.list_logical_devices("GPU")) and replicas,
        "FINAL_RESULT": round(float(np.mean(measured)), 3) if measured else 0.0, "UNIT": "sent./sec",
        "JOB_FAIL_FLAG": 0,
    }
