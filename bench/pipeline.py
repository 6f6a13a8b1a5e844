"""Benchmark: input-pipeline throughput in audio-seconds per wall-second (target >= 1500 with augmentation).

    .venv/bin/python bench/pipeline.py [--shards data/tiny/shards/train] [--seconds 1500]

Without --shards it generates ~`seconds` of 2-8 s clips and shards them. It measures, on epoch 1
(shuffled and bucketed): features only, and features with examples/augmentation.example.json (noise and
impulse banks generated next to the data), plus CPU utilisation and padding efficiency with and without
buckets. Prints the figures, then one JSON line.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

import tensorflow as tf  # noqa: E402

from deepspeech2.data.augment.config import parse_augmentation  # noqa: E402
from deepspeech2.data.pipeline import PipelineConfig, make_dataset, padding_efficiency  # noqa: E402
from deepspeech2.data.shards import ShardConfig, load_index, make_shards  # noqa: E402
from deepspeech2.features import FeatureConfig  # noqa: E402
from deepspeech2.prepare.noise import prepare_noise  # noqa: E402
from deepspeech2.vocab import Vocabulary  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # factories: the tests' generated clips
from factories import make_manifest  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "augmentation.example.json")


def run_epoch(ds) -> tuple[float, float, float]:
    """(audio seconds, wall seconds, process CPU seconds) for one pass over `ds`."""
    frames = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    for _, n, *_ in ds:
        frames += int(tf.reduce_sum(n))
    return frames / 100.0, time.perf_counter() - t0, time.process_time() - cpu0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", help="a shard folder from ds2-make-shards (default: generated)")
    ap.add_argument("--seconds", type=float, default=1500, help="audio to generate without --shards")
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3, help="timed epochs; the median is reported")
    ap.add_argument("--nondeterministic", action="store_true", help="let parallel maps reorder elements")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    shard_dir, manifest = args.shards, None
    if shard_dir is None:
        manifest, _ = make_manifest(tmp, n=int(args.seconds / 5), min_seconds=2.0, max_seconds=8.0)
        shard_dir = os.path.join(tmp, "shards")
        make_shards(manifest, Vocabulary.english(), ShardConfig(shard_dir, num_shards=8), progress=False)
    else:
        manifest = load_index(shard_dir)["manifest"]
    noise, rir = prepare_noise(os.path.join(tmp, "noise"), manifest)
    with open(EXAMPLE) as f:
        recipe = json.load(f)
    for entry in recipe:  # point the example's data/tiny/noise paths at the generated banks
        if entry["type"] == "noise":
            entry["params"]["noise_manifest_path"] = str(noise)
        if entry["type"] == "impulse":
            entry["params"]["impulse_manifest_path"] = str(rir)
    aug = parse_augmentation(recipe)
    fc = FeatureConfig()
    cfg = PipelineConfig(batch_size=args.batch_size, deterministic=not args.nondeterministic)
    results = {}
    for name, augmentation in (("features_only", None), ("with_example_augmentation", aug)):
        run_epoch(make_dataset([shard_dir], fc, augmentation=augmentation, config=cfg, epoch=1))  # warm up
        runs = sorted((run_epoch(make_dataset([shard_dir], fc, augmentation=augmentation, config=cfg, epoch=e))
                       for e in range(2, 2 + args.repeats)), key=lambda r: r[0] / r[1])
        secs, wall, cpu = runs[len(runs) // 2]  # the median epoch
        results[name] = (secs / wall, cpu / wall)
        print(f"{name:28s} {secs / wall:8.0f} audio-s/s  (median of {args.repeats} epochs: {secs:.0f} s of audio "
              f"in {wall:.2f} s, {cpu / wall:.2f} cores busy; range "
              f"{runs[0][0] / runs[0][1]:.0f}-{runs[-1][0] / runs[-1][1]:.0f})")
    eff = {b: padding_efficiency(make_dataset([shard_dir], fc, config=PipelineConfig(
        batch_size=args.batch_size, num_buckets=b), epoch=1)) for b in (0, 8)}
    print(f"padding efficiency (real/padded frames): {eff[0]:.3f} without buckets, {eff[8]:.3f} with 8 buckets")
    print(json.dumps([
        {"name": "pipeline_features_only", "value": round(results["features_only"][0]), "unit": "audio-s/s"},
        {"name": "pipeline_with_augmentation", "value": round(results["with_example_augmentation"][0]),
         "unit": "audio-s/s"},
        {"name": "pipeline_cpu_utilisation_with_augmentation",
         "value": round(results["with_example_augmentation"][1], 2), "unit": "cores"},
        {"name": "padding_efficiency_no_buckets", "value": round(eff[0], 3), "unit": "ratio"},
        {"name": "padding_efficiency_8_buckets", "value": round(eff[8], 3), "unit": "ratio"},
    ]))


if __name__ == "__main__":
    main()
