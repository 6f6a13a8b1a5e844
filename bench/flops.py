"""What one epoch of LibriSpeech costs to train, ESTIMATED from FLOPs (prints figures; not a test, not a measurement).

    .venv/bin/python bench/flops.py
    .venv/bin/python bench/flops.py --subset 460 --gpu_tflop_per_s 20,60 --cpu_gflop_per_s ds2-small=80

From each preset's config (`deepspeech2.geometry.forward_flops`, which counts every conv, matmul and
recurrence of the model; no TensorFlow needed): the FLOPs of one second of audio through it, forward; of training
on it (3x: the backward pass computes a gradient for the inputs and one for the weights of every matmul); of one
ds2-train step at en.flags' batch (--batch_frames 24000 padded frames per replica: 240 s of audio); of one epoch of
the subset. The hours an epoch takes then follow from a sustained throughput:
- on one GPU at each ASSUMED --gpu_tflop_per_s (nothing here was run on a GPU). For scale: DS2 §5 sustained
  3 TFLOP/s per Titan X, 45% of its fp32 peak; an A100's bf16 dense peak is 312 TFLOP/s, an H100 SXM's about 990,
  and a recurrent layer's step-by-step loop keeps a GPU far below peak (its matmuls are batch x units x units);
- on this machine's CPU at the throughput bench/train.py measured for the preset (--cpu_gflop_per_s: the defaults
  are the bf16 figures measured here, 2 cores shared with other work).
Padding, the input pipeline, the dev set scored each epoch and checkpoints are left out: a real epoch takes longer.
The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from deepspeech2.feature_config import HOP_MS  # noqa: E402
from deepspeech2.geometry import forward_flops  # noqa: E402
from deepspeech2.model_config import preset  # noqa: E402

FRAMES_PER_SECOND = 1000 / HOP_MS  # 100 feature frames a second of audio
TRAIN_FACTOR = 3  # training step = forward + input gradients + weight gradients, each about one forward pass
BATCH_FRAMES = 24000  # examples/librispeech/base.flags: padded frames per replica a step
# Training hours of each LibriSpeech subset (Panayotov et al. 2015, Table 1): train-clean-100 100.6 h,
# train-clean-360 363.6 h, train-other-500 496.7 h.
SUBSET_HOURS = {"100": 100.6, "460": 100.6 + 363.6, "960": 100.6 + 363.6 + 496.7}
UTTERANCE_SECONDS = 15  # a typical LibriSpeech training utterance (they run up to ~35 s); the count is linear in it
# bench/train.py on this 2-core machine (shared with other work, load average 5-6), mixed_bfloat16, 5 s utterances:
# ds2-small 16 a step (911 ms, 75 GFLOP), ds2-paper-en 2 a step (71.5 s median, 49 s best, 376 GFLOP).
MEASURED_CPU_GFLOP_PER_S = {"ds2-small": 82.0, "ds2-paper-en": 5.3}


def estimate(model: str, hours: float, gpu_tflop_per_s: list[float], cpu_gflop_per_s: float | None) -> dict:
    config = preset(model)
    frames = UTTERANCE_SECONDS * FRAMES_PER_SECOND
    forward_per_second = forward_flops(config, int(frames)) / UTTERANCE_SECONDS
    train_per_second = TRAIN_FACTOR * forward_per_second
    epoch = train_per_second * hours * 3600
    out = {"model": model, "forward_gflop_per_audio_second": forward_per_second / 1e9,
           "train_gflop_per_audio_second": train_per_second / 1e9,
           "train_tflop_per_step": train_per_second * BATCH_FRAMES / FRAMES_PER_SECOND / 1e12,
           "steps_per_epoch_one_replica": round(hours * 3600 * FRAMES_PER_SECOND / BATCH_FRAMES),
           "epoch_pflop": epoch / 1e15,
           "gpu_hours_per_epoch": {f"{t:g}": epoch / (t * 1e12) / 3600 for t in gpu_tflop_per_s}}
    if cpu_gflop_per_s:
        out["cpu_gflop_per_s_measured"] = cpu_gflop_per_s
        out["cpu_hours_per_epoch"] = epoch / (cpu_gflop_per_s * 1e9) / 3600
    return out


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.2g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--models", default="ds2-paper-en,ds2-small", help="presets, comma-separated")
    ap.add_argument("--subset", default="960", choices=sorted(SUBSET_HOURS), help="training hours (SUBSET of run.sh)")
    ap.add_argument("--gpu_tflop_per_s", default="10,30,100", help="ASSUMED sustained TFLOP/s of one GPU, a list")
    ap.add_argument("--cpu_gflop_per_s", default=",".join(f"{k}={v:g}" for k, v in MEASURED_CPU_GFLOP_PER_S.items()),
                    help="measured CPU throughput per preset, model=GFLOP/s,... (bench/train.py --model M)")
    args = ap.parse_args()
    try:
        gpus = [float(t) for t in args.gpu_tflop_per_s.split(",")]
        cpu = {k: float(v) for k, v in (item.split("=") for item in args.cpu_gflop_per_s.split(",") if item)}
        models = args.models.split(",")
        for m in models:
            preset(m)
    except ValueError as e:
        sys.exit(f"flops: error: {e}")
    hours = SUBSET_HOURS[args.subset]
    results = [estimate(m, hours, gpus, cpu.get(m)) for m in models]
    print(f"LibriSpeech {args.subset} h subset: {hours:.1f} h of training audio an epoch; ESTIMATES from FLOPs "
          f"(training = {TRAIN_FACTOR}x forward; padding, input pipeline and dev scoring left out)")
    for r in results:
        print(f"\n{r['model']}: {r['forward_gflop_per_audio_second']:.2f} GFLOP forward per second of audio, "
              f"{r['train_gflop_per_audio_second']:.2f} training")
        print(f"  one step of {BATCH_FRAMES} frames ({BATCH_FRAMES / FRAMES_PER_SECOND:.0f} s of audio): "
              f"{r['train_tflop_per_step']:.2f} TFLOP; {r['steps_per_epoch_one_replica']} steps an epoch on one GPU")
        print(f"  one epoch: {_num(r['epoch_pflop'])} PFLOP")
        for t, h in r["gpu_hours_per_epoch"].items():
            print(f"  ~{_num(h)} GPU-hours an epoch at an ASSUMED {t} TFLOP/s sustained")
        if "cpu_hours_per_epoch" in r:
            print(f"  ~{_num(r['cpu_hours_per_epoch'])} hours an epoch on this machine's CPU, at the "
                  f"{r['cpu_gflop_per_s_measured']:g} GFLOP/s bench/train.py measured here")
    print(json.dumps({"subset": args.subset, "hours": hours, "batch_frames": BATCH_FRAMES,
                      "train_factor": TRAIN_FACTOR, "estimates": results}))


if __name__ == "__main__":
    main()
