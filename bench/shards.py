"""Benchmark: audio-seconds written to TFRecord shards per wall-second (target >= 200x real time, 2 cores).

    .venv/bin/python bench/shards.py [--manifest data/tiny/train.jsonl] [--num_utts 300]

Without --manifest it generates `num_utts` clips of 2-8 s. Prints the figures, then one JSON line.
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

from deepspeech2.data.manifest import read_manifest  # noqa: E402
from deepspeech2.data.shards import ShardConfig, make_shards  # noqa: E402
from deepspeech2.vocab import Vocabulary  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # factories: the tests' generated clips
from factories import make_manifest  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", help="shard this manifest (default: generated clips)")
    ap.add_argument("--num_utts", type=int, default=300)
    ap.add_argument("--num_shards", type=int, default=8)
    ap.add_argument("--num_workers", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        manifest = args.manifest
        if manifest is None:
            manifest, _ = make_manifest(tmp, n=args.num_utts, min_seconds=2.0, max_seconds=8.0)
        utts = read_manifest(manifest)
        vocab = Vocabulary.from_texts(u.text for u in utts)
        audio_seconds = sum(u.duration for u in utts)
        cfg = ShardConfig(os.path.join(tmp, "shards"), num_shards=args.num_shards, num_workers=args.num_workers)
        cpu0, t0 = time.process_time(), time.perf_counter()
        index = make_shards(manifest, vocab, cfg, progress=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    rtf = audio_seconds / wall
    print(f"{index['total_count']} utterances, {audio_seconds:.0f} s of audio, {wall:.2f} s wall, "
          f"{cpu / wall:.2f} cores busy: {rtf:.0f}x real time (target >= 200x)")
    print(json.dumps([
        {"name": "shards_write_speed", "value": round(rtf, 1), "unit": "audio-s/s"},
        {"name": "shards_cpu_utilisation", "value": round(cpu / wall, 2), "unit": "cores"},
        {"name": "shards_peak_rss", "value": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
         "unit": "MiB"},
    ]))


if __name__ == "__main__":
    main()
