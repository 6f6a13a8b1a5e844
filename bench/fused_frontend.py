"""The ds2-small training step, and its front end alone, with the front end's fused CPU ops and with TF's ops,
timed alternately in one process (prints figures; not a test).

`bench/train.py --variants bn_gru-bf16,bn_gru-bf16-unfused_front` runs each variant in its own process, minutes
apart; on a machine shared with other work the load moves in between. Here both graphs are built on the same model
and the same batch (bench/train.py's: 16 x 5 s, CTC + Adam) and the steps alternate, so each pair of steps sees the
same load.

    .venv/bin/python bench/fused_frontend.py --precision bf16 --steps 8

The last line printed is a JSON list of {"name", "value", "unit"} (the medians).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    parser.add_argument("--steps", type=int, default=8, help="timed steps of each, alternating")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    keras.config.set_dtype_policy("mixed_bfloat16" if args.precision == "bf16" else "float32")
    from bench.train import random_batch
    from deepspeech2.model import build_model, layers
    from deepspeech2.model_config import preset
    from deepspeech2.train.ctc import sparse_ctc_loss

    config = dataclasses.replace(preset("ds2-small"), rnn_type="gru")
    model = build_model(config)
    optimizer = keras.optimizers.Adam(1e-4)
    optimizer.build(model.trainable_variables)
    apply = tf.function(lambda grads: optimizer.apply(grads, model.trainable_variables), jit_compile=True)
    features, lengths, labels, label_lengths = random_batch(config.vocab_size)
    front = model.get_layer("frontend")

    def step():
        with tf.GradientTape() as tape:
            outputs = model({"features": features, "feature_lengths": lengths}, training=True)
            loss = ops.mean(sparse_ctc_loss(labels, label_lengths, outputs["logits"], outputs["output_lengths"]))
        apply(tape.gradient(loss, model.trainable_variables))
        return loss

    def front_end():  # forward and backward, as bench/train.py's profile times it
        with tf.GradientTape() as tape:
            tape.watch(features)
            loss = tf.reduce_sum(tf.cast(front(features, lengths, training=True)[0], tf.float32))
        return tape.gradient(loss, [features] + front.trainable_variables)

    graphs = {}
    for name, unfused in (("TF ops", "1"), ("fused", "0")):
        os.environ["DS2_FRONTEND_UNFUSED"] = unfused  # read when the graphs are traced, here
        graphs[name] = [tf.function(step), tf.function(front_end)]
        for fn in graphs[name]:
            fn.get_concrete_function()
        assert layers.frontend_kernel_available() == (unfused == "0"), "the fused ops are not built or can't run here"
    times = {(name, part): [] for name in graphs for part in (0, 1)}
    for _ in range(2):  # warm-up
        for fns in graphs.values():
            for fn in fns:
                tf.nest.map_structure(lambda t: t.numpy(), fn())
    for _ in range(args.steps):
        for part in (0, 1):
            for name, fns in graphs.items():
                start = time.perf_counter()
                tf.nest.map_structure(lambda t: t.numpy(), fns[part]())
                times[name, part].append(1000 * (time.perf_counter() - start))
    print(f"{args.precision}, {args.steps} alternating runs of each (median, min ms):")
    figures = []
    for (name, part), ms in times.items():
        what = ["step", "front end alone"][part]
        print(f"  {what:16s} {name:7s} {statistics.median(ms):7.0f} {min(ms):7.0f}")
        figures.append({"name": f"{args.precision} {what}, {name}", "value": statistics.median(ms), "unit": "ms"})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
