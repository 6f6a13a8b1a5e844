"""Training-step throughput of the ds2-small workload on this machine (prints figures; not a test).

Workload: ds2-small (PaddleSpeech's front end: two 3x3 convs, stride 2 in time and frequency, 32 channels
-> 1248 features per step; 3 unidirectional GRU-512; 29 outputs), CTC + Adam, batch 16 x 5.0 s
utterances (500 frames of 161 bins -> 124 RNN steps) with random labels of length 60.

Each variant runs in its own process (clean peak RSS and dtype policy). A variant is
`<rnn>-<precision>[-xla]`: rnn `bn_gru` (our BatchNormRNN GRU, sequence-wise BN) or `cudnn_gru`
(keras.layers.GRU); precision `fp32` or `bf16` (the "mixed_bfloat16" policy); `-xla` compiles the
whole train step with XLA. Without `-xla`, `--xla_pieces` lists the parts of the step compiled with
XLA on their own (default: the Adam update; `ctc` swaps the trainer's sparse TF CTC kernel for the
XLA-compiled keras.ops CTC); XLA:CPU has slow convolutions and
no oneDNN/AMX matmuls, so the model itself runs best in TF's executor.

    .venv/bin/python bench/train.py --steps 10 --variants bn_gru-bf16,cudnn_gru-fp32 --profile
    .venv/bin/python bench/train.py --model ds2-paper-en --variants model-bf16 --batch 4 --steps 3

`--model` times another preset instead (its own RNN with the variant `model-<precision>`), on the same
utterances (`--batch` of them a step).

`bn_gru` trains with the fused kernel BatchNormRNN picks: on a CPU the fused CPU GRU where `make deps` built it
(deepspeech2/model/fused_cpu.cc), with `--device gpu` (the GPU TensorFlow sees; the default hides GPUs, so the CPU
figures stay the CPU's) cuDNN's. `bn_gru_loop` is the same model with the time loop (DS2_RNN_LOOP=1), to compare.
On a CPU the front end trains each conv's BN and clipped ReLU with the fused CPU ops where they are built; a
variant ending in `-unfused_front` (e.g. `bn_gru-bf16-unfused_front`) uses TF's ops there (DS2_FRONTEND_UNFUSED=1).

The last line printed is a JSON list of {"name", "value", "unit"}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time



def _device(argv: list[str]) -> str:
    """--device, read before TensorFlow starts: it decides whether TensorFlow may see the GPUs."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    return parser.parse_known_args(argv)[0].device


if _device(sys.argv[1:]) == "cpu":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from deepspeech2.train.preflight import matmul_peak  # noqa: E402

BATCH = 16  # utterances a step (--batch)
SECONDS = 5.0
FRAMES = 500  # 5.0 s of 10 ms frames -> 249 -> 124 steps after the two stride-2 convs
FEATURE_DIM = 161  # linear spectrogram bins
LABEL_LENGTH = 60
DEFAULT_VARIANTS = "bn_gru-fp32,bn_gru-bf16,cudnn_gru-fp32,cudnn_gru-bf16"


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def random_batch(vocab_size: int) -> tuple:
    """The timed batch: `(features, lengths, labels, label_lengths)` of BATCH utterances of FRAMES frames and
    LABEL_LENGTH labels, the same on every call."""
    rng = np.random.default_rng(0)
    features = tf.constant(rng.standard_normal((BATCH, FRAMES, FEATURE_DIM), np.float32))
    labels = tf.constant(rng.integers(1, vocab_size, (BATCH, LABEL_LENGTH)), tf.int32)
    return features, tf.fill((BATCH,), FRAMES), labels, tf.fill((BATCH,), LABEL_LENGTH)


def train_step_flops(config, batch: int, frames: int) -> float:
    """FLOPs of one training step: 3x the forward pass (forward, input and weight grads)."""
    from deepspeech2.geometry import forward_flops

    return 3 * forward_flops(config, frames) * batch


def run_variant(variant: str, steps: int, warmup: int, xla_pieces: list[str], profile: bool,
                model_name: str = "ds2-small") -> dict:
    """Time `steps` training steps of one variant of preset `model_name` in this process; returns its figures."""
    import keras
    from keras import ops

    from deepspeech2.model import build_model, ctc_loss
    from deepspeech2.model_config import preset

    rnn, precision, *rest = variant.split("-")
    if "unfused_front" in rest:
        rest.remove("unfused_front")
        os.environ["DS2_FRONTEND_UNFUSED"] = "1"  # the front end's BN + clipped ReLU as TF's ops
    if rnn not in ("bn_gru", "bn_gru_loop", "cudnn_gru", "model") or precision not in ("fp32", "bf16") or rest not in (
            [], ["xla"]):
        raise ValueError(f"bad variant {variant!r}; expected <bn_gru|bn_gru_loop|cudnn_gru|model>-<fp32|bf16>[-xla]"
                         "[-unfused_front]")
    if rnn == "bn_gru_loop":
        os.environ["DS2_RNN_LOOP"] = "1"  # BatchNormRNN's time loop where it would pick a fused kernel
    keras.config.set_dtype_policy("mixed_bfloat16" if precision == "bf16" else "float32")
    config = preset(model_name)
    if rnn != "model":
        config = dataclasses.replace(config, rnn_type="cudnn_gru" if rnn == "cudnn_gru" else "gru")
    model = build_model(config)
    optimizer = keras.optimizers.Adam(1e-4)
    optimizer.build(model.trainable_variables)
    from deepspeech2.train.ctc import sparse_ctc_loss

    if rest:  # the whole step under XLA needs the keras.ops CTC (TF's sparse CTC kernel has no XLA version)
        loss_fn = ctc_loss
    elif "ctc" in xla_pieces:
        loss_fn = tf.function(ctc_loss, jit_compile=True)
    else:
        loss_fn = sparse_ctc_loss  # what ds2-train uses: TF's C++ CTC kernel, ~9 ms here

    def apply_gradients(grads):
        optimizer.apply(grads, model.trainable_variables)

    if "adam" in xla_pieces and not rest:
        apply_gradients = tf.function(apply_gradients, jit_compile=True)

    features, lengths, labels, label_lengths = random_batch(config.vocab_size)

    @tf.function(jit_compile=bool(rest))
    def train_step(features, lengths, labels, label_lengths):
        with tf.GradientTape() as tape:
            outputs = model({"features": features, "feature_lengths": lengths}, training=True)
            loss = ops.mean(loss_fn(labels, label_lengths, outputs["logits"], outputs["output_lengths"]))
        apply_gradients(tape.gradient(loss, model.trainable_variables))
        return loss

    args = (features, lengths, labels, label_lengths)
    compile_s = _timed(lambda: train_step(*args).numpy())
    for _ in range(warmup):
        train_step(*args).numpy()
    cpu_start = time.process_time()
    times = [_timed(lambda: train_step(*args).numpy()) for _ in range(steps)]
    # CPU seconds per step (all threads) move less than wall time when other processes share the machine.
    cpu_s = (time.process_time() - cpu_start) / steps
    step_s = statistics.median(times)
    flops = train_step_flops(config, BATCH, FRAMES)
    result = {
        "variant": variant,
        "xla_pieces": "all" if rest else ",".join(xla_pieces),
        "step_ms": 1000 * step_s,
        "best_step_ms": 1000 * min(times),
        "cpu_ms": 1000 * cpu_s,
        "sent_per_s": BATCH / step_s,
        "audio_s_per_s": BATCH * SECONDS / step_s,
        "step_gflop": flops / 1e9,
        "gflop_per_s": flops / step_s / 1e9,
        "compile_s": compile_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_loss": float(train_step(*args)),
    }
    if profile:
        result["breakdown_ms"] = _breakdown(model, apply_gradients, loss_fn, args, bool(rest))
    return result


def _breakdown(model, apply_gradients, loss_fn, args, jit: bool) -> dict:
    """Median ms of each part of the step run on its own (forward + backward, unless marked)."""
    from keras import ops

    from deepspeech2.model import BatchNormRNN, gru_recurrence, rnn

    features, lengths, labels, label_lengths = args
    front = model.get_layer("frontend")
    rnns = [layer for layer in model.layers if layer.name.startswith("rnn")]
    head = model.get_layer("logits")
    x, steps = front(features, lengths)
    hidden = [x]
    for layer in rnns:
        hidden.append(layer(hidden[-1], steps))
    logits = head(hidden[-1])

    def grads_of(layer, inputs, *extra):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out = layer(inputs, *extra, training=True)
            out = out[0] if isinstance(out, tuple) else out
            loss = tf.reduce_sum(tf.cast(out, tf.float32))
        return tape.gradient(loss, [inputs] + layer.trainable_variables)

    def ctc_part(logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = ops.mean(loss_fn(labels, label_lengths, logits, steps))
        return tape.gradient(loss, logits)

    def optimizer_part():
        apply_gradients([tf.zeros_like(v) for v in model.trainable_variables])
        return tf.constant(0)

    parts = {"frontend: 2 conv + BN + clipped ReLU": lambda: grads_of(front, features, lengths)}
    for layer, inputs in zip(rnns, hidden):
        parts[f"{layer.name}: projection + BN + loop"] = (
            lambda layer=layer, inputs=inputs: grads_of(layer, inputs, steps))
    if isinstance(rnns[0], BatchNormRNN):
        units = rnns[0].units
        x_proj = tf.random.normal((int(steps[0]), features.shape[0], 3 * units))
        mask = tf.ones(x_proj.shape[:2] + (1,))
        kernel = tf.cast(rnns[0].kernels[0], rnns[0].compute_dtype)

        def loop_only():
            with tf.GradientTape() as tape:
                tape.watch([x_proj, kernel])
                out = gru_recurrence(x_proj, mask, tf.zeros((features.shape[0], units)), kernel,
                                     tf.zeros((3 * units,)))
                loss = tf.reduce_sum(out)
            return tape.gradient(loss, [x_proj, kernel])

        def loop_forward():
            return gru_recurrence(x_proj, mask, tf.zeros((features.shape[0], units)), kernel, tf.zeros((3 * units,)))

        parts["  one GRU time loop alone, forward"] = loop_forward
        parts["  one GRU time loop alone, forward+backward"] = loop_only
        if rnn.cpu_kernel_available("gru", kernel.dtype.name):  # what BatchNormRNN trains with here
            def fused_only():
                with tf.GradientTape() as tape:
                    tape.watch([x_proj, kernel])
                    loss = tf.reduce_sum(rnn.gru_fused_cpu(x_proj, mask, tf.zeros((features.shape[0], units)), kernel,
                                                           tf.zeros((3 * units,))))
                return tape.gradient(loss, [x_proj, kernel])

            parts["  the fused CPU GRU alone, forward"] = lambda: rnn.gru_fused_cpu(
                x_proj, mask, tf.zeros((features.shape[0], units)), kernel, tf.zeros((3 * units,)))
            parts["  the fused CPU GRU alone, forward+backward"] = fused_only
        if not jit:  # the lever "XLA on the loop alone": the same loop compiled by XLA, this shape only
            parts["  the same loop under XLA, forward"] = tf.function(loop_forward, jit_compile=True)
            parts["  the same loop under XLA, forward+backward"] = tf.function(loop_only, jit_compile=True)
    parts.update(_floors(front, rnns, features, hidden, steps))
    parts["output dense"] = lambda: grads_of(head, hidden[-1])
    parts["CTC loss"] = lambda: ctc_part(logits)
    parts["Adam update"] = optimizer_part
    return _time_parts(parts, jit)


def _time_parts(parts: dict, jit: bool) -> dict:
    """Median ms of five runs of each part, compiled (by XLA when `jit`) and run once before."""
    timings = {}
    for name, fn in parts.items():
        compiled = tf.function(fn, jit_compile=jit)
        tf.nest.map_structure(lambda t: t.numpy(), compiled())
        timings[name] = 1000 * statistics.median(
            _timed(lambda: tf.nest.map_structure(lambda t: t.numpy(), compiled())) for _ in range(5))
    return timings


def _floors(front, rnns, features, hidden, steps) -> dict:
    """The part's matmuls and convs alone, at the step's shapes and dtype: no elementwise math, no loop
    machinery. What a part can't go below on this CPU without doing less arithmetic. Each piece is timed on
    its own (run together, the graph executor would overlap independent ones).

    front end: each conv forward, and its input and kernel gradients. An RNN layer: its five whole-sequence
    matmuls (the input projection forward, its input and weight gradients, the backward pass's recomputed
    gates and recurrent weight gradient), and the time loop's matmuls chained one after another as the
    recurrence chains them: `T` of `(B, H) x (H, 3H)` forward, `T` of `(B, 3H) x (3H, H)` backward.
    """
    from deepspeech2.model import BatchNormRNN

    dtype = rnns[0].compute_dtype
    x = tf.cast(tf.expand_dims(features, -1), dtype)
    conv_inputs = []
    for conv in front.convs:
        conv_inputs.append(x)
        x = conv(x)

    def convs():
        out = []
        for conv, x in zip(front.convs, conv_inputs):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = conv(x)
            out += tape.gradient(y, [x, conv.kernel], output_gradients=tf.ones_like(y))
        return out

    floors = {"  floor: the convs alone (forward, both gradients)": convs}
    if not isinstance(rnns[0], BatchNormRNN):
        return floors
    for layer, inputs in zip(rnns, hidden):
        flat = tf.cast(tf.reshape(inputs[:, :int(steps[0])], (-1, inputs.shape[-1])), dtype)  # (T*B, I)
        w = tf.cast(layer.input_projection.kernel, dtype)  # (I, 3H)
        u = tf.cast(layer.kernels[0], dtype)  # (H, 3H)
        g = tf.ones((flat.shape[0], w.shape[1]), dtype)
        h_all = tf.ones((flat.shape[0], layer.units), dtype)

        def whole(flat=flat, w=w, u=u, g=g, h_all=h_all):
            return [tf.matmul(flat, w), tf.matmul(g, w, transpose_b=True), tf.matmul(flat, g, transpose_a=True),
                    tf.matmul(h_all, u), tf.matmul(h_all, g, transpose_a=True)]

        floors[f"  floor: {layer.name}'s 5 whole-sequence matmuls"] = whole
    layer = rnns[0]
    u, units, batch, time_steps = tf.cast(layer.kernels[0], dtype), layer.units, features.shape[0], int(steps[0])

    def forward_chain():
        h = tf.zeros((batch, units), dtype)
        for _ in range(time_steps):  # each needs the one before, as in the recurrence
            h = tf.matmul(h, u)[:, :units]
        return h

    u_t = tf.transpose(u)  # (3H, H), transposed once outside the loop, as the backward loop does

    def backward_chain():
        dh = tf.zeros((batch, 3 * units), dtype)
        for _ in range(time_steps):
            dh = tf.tile(tf.matmul(dh, u_t), (1, 3))
        return dh

    floors[f"  floor: {time_steps} chained ({batch}, {units}) x ({units}, {3 * units}) (a loop forward)"] = forward_chain
    floors[f"  floor: {time_steps} chained ({batch}, {3 * units}) x ({3 * units}, {units}) (a loop backward)"] = backward_chain
    return floors


def step_floor_ms(breakdown: dict) -> float | None:
    """The step's floor from a profile: every floor piece (the loop chains once per RNN layer), plus the output
    dense, CTC and Adam as measured. None without the loop floors (keras GRU)."""
    rnn_layers = sum(name.startswith("rnn") for name in breakdown)
    chains = [ms for name, ms in breakdown.items() if name.startswith("  floor:") and "chained" in name]
    if len(chains) != 2:
        return None
    rest = [ms for name, ms in breakdown.items() if name.startswith("  floor:") and "chained" not in name]
    measured = [breakdown[name] for name in ("output dense", "CTC loss", "Adam update")]
    return sum(rest) + rnn_layers * sum(chains) + sum(measured)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per variant (after warm-up)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps after the compiling one")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help="comma-separated, see above")
    parser.add_argument("--xla_pieces", default="adam",
                        help="parts compiled with XLA on their own in non-xla variants: ctc, adam (or none)")
    parser.add_argument("--profile", action="store_true", help="also time each part of the step alone")
    parser.add_argument("--paddle", action="store_true",
                        help="then PaddleSpeech's DS2 on the same workload (bench/paddle_ds2.py in .venv-paddle, "
                             "`make bench-paddle-venv`), and each variant's ratio to it")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="cpu (GPUs hidden) or gpu (the GPU TensorFlow sees)")
    parser.add_argument("--model", default="ds2-small", help="the preset to time (ds2-small, ds2-paper-en, ...)")
    parser.add_argument("--batch", type=int, default=BATCH, help="utterances of 5 s a step")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one variant, JSON out
    return parser


def main():
    global BATCH
    args = _parser().parse_args()
    BATCH = args.batch
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    sys.path.insert(0, root)
    paddle_python = os.path.join(root, ".venv-paddle", "bin", "python")
    if args.paddle and not os.access(paddle_python, os.X_OK):
        sys.exit(f"--paddle: {os.path.normpath(paddle_python)} is missing; run `make bench-paddle-venv` first")

    if args.child:
        pieces = [p for p in args.xla_pieces.split(",") if p in ("ctc", "adam")]
        print(json.dumps(run_variant(args.variants, args.steps, args.warmup, pieces, args.profile, args.model)))
        return

    if args.device == "gpu" and not tf.config.list_physical_devices("GPU"):
        sys.exit("--device gpu: TensorFlow sees no GPU here")
    peak_fp32, peak_bf16 = matmul_peak("float32"), matmul_peak("bfloat16")
    print(f"matmul peak, 2048^2: fp32 {peak_fp32 / 1e9:.0f} GFLOP/s, bf16 {peak_bf16 / 1e9:.0f} GFLOP/s")
    figures = [{"name": "matmul_2048_fp32", "value": round(peak_fp32 / 1e9, 1), "unit": "GFLOP/s"},
               {"name": "matmul_2048_bf16", "value": round(peak_bf16 / 1e9, 1), "unit": "GFLOP/s"}]
    for variant in args.variants.split(","):
        command = [sys.executable, os.path.abspath(__file__), "--child", "--variants", variant,
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--xla_pieces", args.xla_pieces,
                   "--device", args.device, "--model", args.model, "--batch", str(args.batch)]
        done = subprocess.run(command + (["--profile"] if args.profile else []), capture_output=True, text=True)
        if done.returncode:
            print(f"{variant}: failed\n{done.stderr[-3000:]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        utilisation = r["gflop_per_s"] * 1e9 / peak_fp32
        print(f"{variant:16s} xla={r['xla_pieces']:8s} {r['sent_per_s']:5.1f} sent/s  "
              f"{r['audio_s_per_s']:5.1f} audio-s/s  step {r['step_ms']:.0f} ms (best {r['best_step_ms']:.0f}, "
              f"CPU {r['cpu_ms']:.0f})  {r['gflop_per_s']:.0f} GFLOP/s of {r['step_gflop']:.0f} GFLOP/step = "
              f"{100 * utilisation:.0f}% of fp32 peak ({100 * r['gflop_per_s'] * 1e9 / peak_bf16:.0f}% of bf16)  "
              f"peak RSS {r['peak_rss_mb']:.0f} MB  compile {r['compile_s']:.0f} s  loss {r['final_loss']:.1f}")
        breakdown = r.get("breakdown_ms", {})
        for name, ms in breakdown.items():
            print(f"    {name:44s} {ms:7.1f} ms")
        if breakdown:
            total = sum(ms for name, ms in breakdown.items() if not name.startswith(" "))
            print(f"    {'sum of the parts run alone':44s} {total:7.1f} ms")
            floor = step_floor_ms(breakdown)
            if floor:
                print(f"    {'floor of the step (the floors, the rest as run)':44s} {floor:7.1f} ms = "
                      f"{BATCH / floor * 1000:.1f} sent/s")
                figures.append({"name": f"{variant}/step_floor", "value": round(floor, 1), "unit": "ms"})
        figures += [
            {"name": f"{variant}/sent_per_s", "value": round(r["sent_per_s"], 2), "unit": "sent/s"},
            {"name": f"{variant}/audio_s_per_s", "value": round(r["audio_s_per_s"], 1), "unit": "audio-s/s"},
            {"name": f"{variant}/model_flops", "value": round(r["gflop_per_s"], 1), "unit": "GFLOP/s"},
            {"name": f"{variant}/utilisation_vs_fp32_peak", "value": round(100 * utilisation, 1), "unit": "%"},
            {"name": f"{variant}/peak_rss", "value": round(r["peak_rss_mb"]), "unit": "MB"},
            {"name": f"{variant}/step_time", "value": round(r["step_ms"], 1), "unit": "ms"},
        ]
    if args.paddle:  # the same workload in PaddleSpeech's DS2, on this machine now
        done = subprocess.run([paddle_python, os.path.join(root, "bench", "paddle_ds2.py"), "--steps", str(args.steps),
                               "--warmup", str(args.warmup)], capture_output=True, text=True)
        if done.returncode:
            print(f"paddlespeech: failed\n{done.stderr[-3000:]}")
        else:
            *lines, last = done.stdout.strip().splitlines()
            paddle = json.loads(last)
            print("\n".join(lines))
            figures.append({"name": "paddlespeech/sent_per_s", "value": round(paddle["sent_per_s"], 2),
                            "unit": "sent/s"})
            ours = [f for f in figures if f["name"].endswith("/sent_per_s") and f["name"] != "paddlespeech/sent_per_s"]
            for f in ours:
                variant, ratio = f["name"][:-len("/sent_per_s")], f["value"] / paddle["sent_per_s"]
                print(f"{variant:16s} {f['value']:5.1f} sent/s = {ratio:.2f} x PaddleSpeech's {paddle['sent_per_s']:.1f} "
                      f"(paddle {paddle['paddle_version']}, fp32, {paddle['threads']} threads)")
                figures.append({"name": f"{variant}/x_paddlespeech", "value": round(ratio, 2), "unit": "x"})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
