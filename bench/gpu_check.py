"""The checks that need a GPU, in one run (prints figures; not a test): on the GPU TensorFlow sees,

1. BatchNormRNN's fused cuDNN path against its time loop, GRU and LSTM, bidirectional, on a masked batch with a
   row of no frames: the largest difference of the outputs and of every gradient (the CPU tests compare the
   weights' mapping with Keras's GRU and LSTM; this compares CudnnRNNV3 itself);
2. the time of one layer's forward and backward pass, fused and looped;
3. a few training steps of the tiny model through `ds2-train`'s loop on generated utterances, with every GPU
   (MirroredStrategy where there are several), whose losses must be finite.

    .venv/bin/python bench/gpu_check.py            # then bench/train.py --device gpu for the step's throughput

The last line printed is one JSON object.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

import tensorflow as tf  # noqa: E402


def compare_layer(cell: str, units: int = 256, batch: int = 16, steps: int = 200, features: int = 320) -> dict:
    """Fused against looped outputs and gradients of one bidirectional BatchNormRNN layer, and their times."""
    from deepspeech2.model import BatchNormRNN, rnn

    rng = np.random.default_rng(0)
    layer = BatchNormRNN(units, cell, bidirectional=True)
    x = tf.constant(rng.standard_normal((batch, steps, features)).astype(np.float32))
    lengths = tf.constant(np.r_[rng.integers(1, steps + 1, batch - 1), 0].astype(np.int32))  # a filler row too
    projection = tf.constant(rng.standard_normal((batch, steps, units)).astype(np.float32))
    layer.build(x.shape)

    def run(fused: bool):
        os.environ["DS2_RNN_LOOP"] = "0" if fused else "1"

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(x, lengths, training=True)
                loss = tf.reduce_sum(y * projection)
            return [y, *tape.gradient(loss, [x] + layer.trainable_weights)]

        values = [v.numpy() for v in step()]
        start = time.perf_counter()
        for _ in range(5):
            [v.numpy() for v in step()]
        return values, (time.perf_counter() - start) / 5

    assert rnn.fused_kernel_available(cell), "no fused kernel here (no GPU, or DS2_RNN_LOOP=1)"
    fused, fused_s = run(True)
    loop, loop_s = run(False)
    scale = max(float(np.abs(a).max()) for a in loop)
    worst = max(float(np.abs(a - b).max()) for a, b in zip(loop, fused))
    return {"cell": cell, "max_abs_difference": worst, "largest_value": scale, "fused_ms": 1000 * fused_s,
            "loop_ms": 1000 * loop_s}


def train_steps() -> dict:
    """A few steps of the tiny model with every GPU, through the trainer."""
    from factories import make_manifest

    from deepspeech2.data.pipeline import PipelineConfig
    from deepspeech2.data.shards import ShardConfig, make_shards
    from deepspeech2.features import FeatureConfig
    from deepspeech2.model_config import TINY
    from deepspeech2.prepare.stats import compute_mean_std
    from deepspeech2.train.config import OptimizationConfig, TrainConfig
    from deepspeech2.train.trainer import train
    from deepspeech2.vocab import Vocabulary

    with tempfile.TemporaryDirectory() as d:
        manifest, _ = make_manifest(d, n=24, min_seconds=0.8, max_seconds=2.0)
        Vocabulary.english().save(f"{d}/vocab.txt")
        make_shards(manifest, Vocabulary.english(), ShardConfig(f"{d}/shards", num_shards=2), progress=False)
        compute_mean_std([manifest], FeatureConfig()).save(f"{d}/mean_std.npz")
        result = train(TrainConfig(workdir=f"{d}/run", train_shards=(f"{d}/shards",), vocab_path=f"{d}/vocab.txt",
                                   normalizer_path=f"{d}/mean_std.npz", model=TINY, model_name="tiny",
                                   pipeline=PipelineConfig(batch_size=6, num_buckets=2), epochs=2,
                                   optimization=OptimizationConfig(warmup_steps=1), mixed_precision="auto",
                                   verbose=1))
    return {"steps": result["step"], "losses_finite": bool(np.isfinite(result["loss"]).all()),
            "replicas": len(tf.config.list_logical_devices("GPU"))}


def main():
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        sys.exit("bench/gpu_check.py: TensorFlow sees no GPU here")
    names = [tf.config.experimental.get_device_details(g).get("device_name", "GPU") for g in gpus]
    print(f"GPUs: {', '.join(names)}; TensorFlow {tf.__version__}, {tf.sysconfig.get_build_info()}")
    figures = {"gpus": names, "layers": [], "training": None}
    for cell in ("gru", "lstm"):
        r = compare_layer(cell)
        print(f"{cell}: fused vs loop, largest difference {r['max_abs_difference']:.2e} (values up to "
              f"{r['largest_value']:.1f}); forward+backward {r['fused_ms']:.1f} ms fused, {r['loop_ms']:.1f} ms loop")
        figures["layers"].append(r)
    os.environ.pop("DS2_RNN_LOOP", None)
    figures["training"] = train_steps()
    print(f"training: {figures['training']}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
