r"""Benchmark: streaming latency, DS2's deployment measurement (§7, Figure 6), through ds2-demo's WebSocket.

    .venv/bin/python bench/stream.py --model_dir runs/tiny-streaming/model          # a trained streaming bundle
    .venv/bin/python bench/stream.py --model_dir runs/tiny-streaming/model --lm data/tiny/lm/tiny3.bin \
        --alpha 1 --beta 2                                                         # finals with the LM beam
    .venv/bin/python bench/stream.py --untrained ds2-streaming                     # same compute, random weights

Target on a 2-core CPU with the tiny streaming model (the paper's production figures, on a GPU):
    median latency <= 44 ms and p98 <= 70 ms, end of utterance -> final transcript

ds2-demo runs as a subprocess on a free loopback port (Batch Dispatch across streams, as it serves users);
--streams (10) clients each stream --utterances (3) utterances one after the other at real-time pace, in
--chunk_ms (100) chunks, starting at random phases within the first second. An utterance's latency is the
client's time from sending `stop` (right after its last sample would have been spoken) to receiving the
final transcript: the last step's forward pass, the final decoding (the LM beam when given), and the
network. Reported: median and p98 latency (the client's and the server's), the distribution of batch sizes
over all steps (streams per forward pass), and the streaming real-time factor (forward-pass seconds the
utterances rode in over their audio seconds; the mean over utterances). The utterances come from
--manifest (the tiny test split when it exists) or are generated clips. The load average before and after
is printed: another job on the machine slows every figure. With --agreement, the streamed finals are then compared
with the offline model and decoder on the same files (same transcript, and both WERs against --manifest). Prints the
figures, then one JSON line.
"""

import argparse
import collections
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

VENV_BIN = Path(sys.executable).parent
TARGET_MEDIAN_MS, TARGET_P98_MS = 44.0, 70.0


def percentile(values, q):
    return float(np.percentile(np.asarray(values, float), q)) if values else float("nan")


def utterance_files(args, tmp: Path) -> list[str]:
    """WAV paths to stream: from --manifest, or generated clips of 1.5-4 s."""
    if args.manifest and Path(args.manifest).is_file():
        return list(manifest_texts(args.manifest))[:args.streams * args.utterances]
    from deepspeech2.audio import save_wav, speech_like_clip

    out = []
    for i in range(args.streams * args.utterances):
        path = tmp / f"clip{i}.wav"
        save_wav(path, speech_like_clip(1.5 + 2.5 * random.Random(i).random(), seed=i))
        out.append(str(path))
    return out


def manifest_texts(manifest: str) -> dict[str, str]:
    """The manifest's audio paths (shuffled with a fixed seed) -> their transcripts."""
    lines = [json.loads(line) for line in Path(manifest).read_text().splitlines() if line]
    base = Path(manifest).parent
    out = []
    for line in lines:
        p = line["audio_filepath"]
        out.append((p if Path(p).is_absolute() or Path(p).exists() else str(base / p), line.get("text", "")))
    random.Random(0).shuffle(out)
    return dict(out)


def agreement(args, results: list) -> dict:
    """The streamed finals against the offline model + the same decoder on the same files (issue 38: the
    incremental beam search must end where the offline one does), and both WERs against the manifest."""
    from deepspeech2.bundle import load_bundle
    from deepspeech2.decode import Decoder, DecoderConfig
    from deepspeech2.inference import file_utterances, transcribe
    from deepspeech2.metrics import wer

    bundle = load_bundle(args.model_dir)
    config = (DecoderConfig(lm_path=args.lm, alpha=args.alpha, beta=args.beta, beam_size=args.beam_size)
              if args.lm else DecoderConfig(kind="greedy"))
    paths = sorted({path for path, _ in results})
    with Decoder(config, bundle.vocab) as decoder:
        offline = {t.source: t.text for t in transcribe(bundle, file_utterances(paths), decoder)}
    refs = manifest_texts(args.manifest) if args.manifest and Path(args.manifest).is_file() else {}
    same = sum(r.text == offline[path] for path, r in results)
    figures = {"utterances": len(results), "same_final": same, "same_final_share": round(same / len(results), 4)}
    if refs:
        spaced = bundle.vocab.spaced
        figures["wer_streamed"] = round(100 * wer([refs[p] for p, _ in results], [r.text for _, r in results],
                                                  spaced=spaced), 2)
        figures["wer_offline"] = round(100 * wer([refs[p] for p, _ in results], [offline[p] for p, _ in results],
                                                 spaced=spaced), 2)
    return figures


def model_dir(args, tmp: Path) -> str:
    if args.untrained:
        sys.path.insert(0, str(Path(__file__).parent))
        from serve import untrained_bundle

        return str(untrained_bundle(args.untrained, tmp))
    if not Path(args.model_dir).exists():
        sys.exit(f"bench/stream.py: error: no model at {args.model_dir}; train a streaming model (see README, "
                 "Streaming), or give --untrained ds2-streaming")
    return args.model_dir


def start_demo(args, model: str, tmp: Path) -> tuple[subprocess.Popen, int]:
    port_file = tmp / "demo.port"
    command = [str(VENV_BIN / "ds2-demo"), "--model_dir", model, "--port", "0", "--port_file", str(port_file),
               "--max_batch_size", str(args.max_batch_size), "--batch_timeout_micros", str(args.batch_timeout_micros),
               # every stream comes from this one address: let them all in (the default is 4 per client)
               "--max_streams_per_client", str(args.streams), "--max_streams", str(max(args.streams, 32))]
    if args.lm:
        command += ["--decoder", "beam", "--lm", args.lm, "--alpha", str(args.alpha), "--beta", str(args.beta),
                    "--beam_size", str(args.beam_size)]
    log = open(tmp / "demo.log", "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while not (port_file.exists() and port_file.read_text().strip()):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            sys.exit("bench/stream.py: error: ds2-demo did not start:\n" + (tmp / "demo.log").read_text()[-3000:])
        time.sleep(0.2)
    return process, int(port_file.read_text())


def run_streams(args, port: int, files: list[str]) -> list:
    from deepspeech2_serving.demo_client import DemoClientConfig, stream_file

    results, errors = [], []
    lock = threading.Lock()

    def client(i):
        time.sleep(random.Random(100 + i).random())  # random phases
        for k in range(args.utterances):
            path = files[(i * args.utterances + k) % len(files)]
            try:
                result = stream_file(DemoClientConfig(f"127.0.0.1:{port}", path, chunk_ms=args.chunk_ms, speed=1.0))
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(f"{path}: {e}")
                continue
            with lock:
                results.append((path, result))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print(f"{len(errors)} utterances failed, e.g. {errors[0]}", file=sys.stderr)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", default="runs/tiny-streaming/model", help="a streaming bundle or export")
    parser.add_argument("--untrained", default="", help="benchmark this preset with random weights instead")
    parser.add_argument("--manifest", default="data/tiny/test.clean.jsonl", help="utterances to stream")
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--utterances", type=int, default=3, help="per stream, one after the other")
    parser.add_argument("--chunk_ms", type=float, default=100.0)
    parser.add_argument("--max_batch_size", type=int, default=16)
    parser.add_argument("--batch_timeout_micros", type=int, default=5000)
    parser.add_argument("--lm", default="", help="final transcripts with this LM's beam search")
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--beam_size", type=int, default=100)
    parser.add_argument("--agreement", action="store_true",
                        help="afterwards, decode the same files offline (the bundle --model_dir, the same decoder) and "
                             "report how many streamed finals equal the offline transcripts, and both WERs")
    args = parser.parse_args()
    if args.agreement and args.untrained:
        parser.error("--agreement needs a trained bundle (--model_dir), not --untrained")

    tmp = Path(tempfile.mkdtemp(prefix="ds2-bench-stream-"))
    process = None
    try:
        model = model_dir(args, tmp)
        files = utterance_files(args, tmp)
        process, port = start_demo(args, model, tmp)
        load_before = os.getloadavg()[0]
        start = time.monotonic()
        results = run_streams(args, port, files)
        wall = time.monotonic() - start
        load_after = os.getloadavg()[0]
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)
    if not results:
        sys.exit("bench/stream.py: error: no utterance finished")
    same = agreement(args, results) if args.agreement else None
    results = [r for _, r in results]

    latencies = [r.latency_ms for r in results]
    server = [r.server_latency_ms for r in results]
    sizes = collections.Counter(b for r in results for b in r.batch_sizes)
    steps = sum(sizes.values())
    audio = sum(r.audio_seconds for r in results)
    rtf = statistics.fmean(r.rtf for r in results)
    figures = {
        "model": args.untrained or args.model_dir, "streams": args.streams, "utterances": len(results),
        "audio_seconds": round(audio, 2), "wall_seconds": round(wall, 2), "chunk_ms": args.chunk_ms,
        "decoder": results[0].decoder,
        "latency_ms": {"median": round(statistics.median(latencies), 1), "p98": round(percentile(latencies, 98), 1),
                       "max": round(max(latencies), 1)},
        "server_latency_ms": {"median": round(statistics.median(server), 1), "p98": round(percentile(server, 98), 1)},
        "final_decode_ms": {"median": round(statistics.median(r.decode_ms for r in results), 1),
                            "p98": round(percentile([r.decode_ms for r in results], 98), 1)},
        "batch_sizes": {str(k): sizes[k] for k in sorted(sizes)},
        "mean_batch_size": round(sum(k * v for k, v in sizes.items()) / max(steps, 1), 2),
        "rtf": round(rtf, 4), "load_average": [round(load_before, 2), round(load_after, 2)],
        "target": {"median_ms": TARGET_MEDIAN_MS, "p98_ms": TARGET_P98_MS},
    }
    figures["meets_target"] = (figures["latency_ms"]["median"] <= TARGET_MEDIAN_MS
                               and figures["latency_ms"]["p98"] <= TARGET_P98_MS)
    print(f"{len(results)} utterances ({audio:.1f} s of audio) over {args.streams} real-time streams in {wall:.1f} s, "
          f"finals: {figures['decoder']}")
    print(f"latency end of utterance -> final (client): median {figures['latency_ms']['median']} ms, p98 "
          f"{figures['latency_ms']['p98']} ms (target {TARGET_MEDIAN_MS:g} / {TARGET_P98_MS:g}); server: median "
          f"{figures['server_latency_ms']['median']} ms, p98 {figures['server_latency_ms']['p98']} ms, of which the final "
          f"decoding median {figures['final_decode_ms']['median']} ms, p98 {figures['final_decode_ms']['p98']} ms")
    print("batch sizes (streams per forward pass, over all steps): " +
          ", ".join(f"{k}: {100 * v / steps:.0f}%" for k, v in sorted(sizes.items())) +
          f"; mean {figures['mean_batch_size']}")
    print(f"streaming RTF {rtf:.4f}; load average {load_before:.2f} -> {load_after:.2f}")
    if same is not None:
        figures["agreement"] = same
        print(f"finals equal to the offline decoding: {same['same_final']} of {same['utterances']}"
              + (f"; WER streamed {same['wer_streamed']}%, offline {same['wer_offline']}%" if "wer_offline" in same
                 else ""))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
