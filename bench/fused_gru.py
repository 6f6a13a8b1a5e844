"""One GRU layer's recurrence, the fused CPU op (deepspeech2/model/fused_cpu.cc) against the time loop it replaces
in training, forward and forward + backward, timed alternately in one process (prints figures; not a test).

The shape is one of bench/train.py's GRU-512 layers: 124 steps, batch 16, the input projection given (the op's
input `x`). Each timed round runs the four graphs one after the other, so on a machine shared with other work each
comparison sees the same load. The op runs the loops this CPU has: AVX-512's, else AVX2's (`--precision bf16` needs
AVX512-BF16).

    .venv/bin/python bench/fused_gru.py --steps 12

The last line printed is a JSON list of {"name", "value", "unit"} (the medians).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def graphs(recurrence, inputs):
    """The forward graph and the forward + backward one (the gradients of x and of the kernel)."""
    x, mask, h0, kernel, bias, upstream = inputs

    @tf.function
    def forward():
        return [recurrence(x, mask, h0, kernel, bias)]

    @tf.function
    def backward():
        with tf.GradientTape() as tape:
            tape.watch([x, kernel])
            loss = tf.reduce_sum(recurrence(x, mask, h0, kernel, bias) * upstream)
        return tape.gradient(loss, [x, kernel])

    return forward, backward


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="the recurrent kernel's dtype")
    parser.add_argument("--steps", type=int, default=12, help="timed rounds of the four graphs")
    parser.add_argument("--units", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--time", type=int, default=124, help="RNN steps")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from deepspeech2.model import fused_cpu, rnn

    dtype = {"fp32": "float32", "bf16": "bfloat16"}[args.precision]
    if not fused_cpu.supports(dtype):
        sys.exit(f"the fused CPU GRU does not run {dtype} here (not built: make deps; or this CPU lacks the loops)")
    steps, batch, units = args.time, args.batch, args.units
    rng = np.random.default_rng(0)
    inputs = (tf.constant(rng.standard_normal((steps, batch, 3 * units)), tf.float32), tf.ones((steps, batch, 1)),
              tf.zeros((batch, units)), tf.cast(rng.standard_normal((units, 3 * units)) / np.sqrt(units), dtype),
              tf.zeros((3 * units,)), tf.constant(rng.standard_normal((steps, batch, units)), tf.float32))
    runs = {}
    for name, recurrence in (("fused", rnn.gru_fused_cpu), ("loop", rnn.gru_recurrence)):
        forward, backward = graphs(recurrence, inputs)
        runs[f"{name}/forward"], runs[f"{name}/forward_backward"] = forward, backward
    times = {name: [] for name in sorted(runs, key=lambda n: n.split("/")[::-1])}
    for step in range(args.steps + 2):  # two untimed: tracing, then a warm-up
        for name in times:
            start = time.perf_counter()
            [t.numpy() for t in runs[name]()]
            if step >= 2:
                times[name].append(1000 * (time.perf_counter() - start))
    for name, values in times.items():
        print(f"{name:24} median {statistics.median(values):7.1f} ms  best {min(values):7.1f} ms")
    print(json.dumps([{"name": f"{name}/median", "value": round(statistics.median(values), 1), "unit": "ms"}
                      for name, values in times.items()]))


if __name__ == "__main__":
    main()
