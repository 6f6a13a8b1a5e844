r"""Benchmark: serving through ds2-serve (gRPC, Batch Dispatch) against the SavedModel called in-process.

    .venv/bin/python bench/serve.py                                 # the model make demo exports
    .venv/bin/python bench/serve.py --model_dir runs/tiny/model     # export this bundle first (temp folder)
    .venv/bin/python bench/serve.py --untrained ds2-small           # no trained model: same compute, random weights

Targets on a 2-core CPU:
    gRPC overhead at 1 stream          <= 1.15x the in-process latency (tensorflow/serving#670 measured 1.9x)
    batched saturation throughput     >= 2x unbatched
    p98 at 10 real-time streams       <= 2x the single-stream latency

On --seconds (5) long utterances sent as WAV bytes to `transcribe_wav`:
 1. one stream: the SavedModel's transcribe_wav called in this process and through a ds2-serve subprocess on
    loopback (batching on), call for call in turn; median latencies and their ratio, the gRPC overhead;
 2. --streams (10) clients, each sending an utterance every --seconds (open loop at real-time pace, random
    phases), batching on and off: p50/p98 latency, utterances/s and the batch sizes (DS2 §7.1, Figure 5);
 3. saturation: --saturation_streams (48, three batches' worth, so the queue never runs dry) closed-loop
    clients, batching on and off, twice each in turn: audio seconds served per second (the mean).
Both servers (batching on, batching off) run from the start and the measurements alternate between them,
so a change in the machine's load touches both; the load generator shares the CPU with the servers, as a
client on the same machine would. The load average before and after is printed: another job on the
machine slows every figure. Prints the figures, then one JSON line.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

import tensorflow as tf  # noqa: E402
from tensorflow_serving.apis import prediction_service_pb2_grpc  # noqa: E402

from deepspeech2_serving.client import channel, wav_request  # noqa: E402
from deepspeech2_serving.loadtest import LoadTestConfig, format_report, load_test, synthetic_utterances  # noqa: E402
from deepspeech2_serving.versions import latest_version  # noqa: E402

VENV_BIN = Path(sys.executable).parent


def untrained_bundle(preset_name: str, folder: Path) -> Path:
    """A bundle of `preset_name` with random weights and stats of a few generated clips."""
    from deepspeech2.bundle import save_bundle
    from deepspeech2.features import FeatureConfig
    from deepspeech2.model import build_model
    from deepspeech2.model_config import preset
    from deepspeech2.prepare.stats import compute_mean_std
    from deepspeech2.vocab import Vocabulary

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # factories: the tests' generated clips
    from factories import make_manifest

    config = preset(preset_name)
    manifest, _ = make_manifest(folder / "clips", n=4)
    stats = compute_mean_std([manifest], FeatureConfig(kind=config.feature_kind))
    return save_bundle(folder / "model", build_model(config), config, Vocabulary.english(), stats,
                       {"note": f"untrained {preset_name}, for benchmarking"})


def model_base_path(args, tmp: Path) -> tuple[Path, str]:
    """The folder of versions to serve, and where it came from."""
    if args.untrained or not Path(args.model_base_path).is_dir() or latest_version(Path(args.model_base_path)) is None:
        from deepspeech2_export.saved_model import ExportConfig, export_model

        if args.untrained:
            bundle, source = untrained_bundle(args.untrained, tmp), f"untrained {args.untrained}"
        elif Path(args.model_dir).is_dir():
            bundle, source = Path(args.model_dir), args.model_dir
        else:
            sys.exit(f"bench/serve.py: error: no export at {args.model_base_path} and no bundle at {args.model_dir}; "
                     "run make demo, or give --untrained ds2-small")
        export_model(ExportConfig(str(bundle), str(tmp / "export"), max_audio_seconds=max(60.0, args.seconds)))
        return tmp / "export" / "ds2", source
    return Path(args.model_base_path), args.model_base_path


def in_process_function(base: Path, utterances: list[bytes]):
    """The newest version's transcribe_wav, loaded in this process and warmed up."""
    fn = tf.saved_model.load(str(base / str(latest_version(base)))).signatures["transcribe_wav"]
    for data in utterances[:3]:
        fn(wav=tf.constant([data]))
    return fn


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


class Server:
    """ds2-serve in a subprocess on a free loopback port."""

    def __init__(self, base: Path, folder: Path, *flags: str):
        port_file = folder / "port"
        port_file.unlink(missing_ok=True)
        self.log = open(folder / "serve.log", "a")
        self.proc = subprocess.Popen([str(VENV_BIN / "ds2-serve"), "--model_base_path", str(base), "--port", "0",
                                      "--port_file", str(port_file), "--file_system_poll_wait_seconds", "0", *flags],
                                     stdout=self.log, stderr=self.log)
        while not port_file.exists():
            if self.proc.poll() is not None:
                sys.exit(f"bench/serve.py: error: ds2-serve exited {self.proc.returncode}; see {folder / 'serve.log'}")
            time.sleep(0.1)
        self.address = f"127.0.0.1:{int(port_file.read_text())}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)
        self.log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--model_base_path", default="runs/tiny/export/ds2", help="exported versions to serve")
    ap.add_argument("--model_dir", default="runs/tiny/model", help="bundle to export when there is no export")
    ap.add_argument("--untrained", default="", help="benchmark an untrained model of this preset (e.g. ds2-small)")
    ap.add_argument("--seconds", type=float, default=5.0, help="utterance length (and the paced streams' period)")
    ap.add_argument("--runs", type=int, default=20, help="single-stream requests, in-process and over gRPC")
    ap.add_argument("--streams", type=int, default=10, help="paced streams")
    ap.add_argument("--rounds", type=int, default=6, help="utterances per paced stream")
    ap.add_argument("--saturation_streams", type=int, default=48, help="closed-loop streams at saturation "
                    "(3x max_batch_size: the queue never runs dry)")
    ap.add_argument("--saturation_requests", type=int, default=192, help="requests per saturation run")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="ds2-bench-serve-"))
    try:
        run_bench(args, tmp, load_before)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_bench(args, tmp: Path, load_before: float) -> None:
    base, source = model_base_path(args, tmp)
    utterances, seconds = synthetic_utterances(args.seconds)
    print(f"model: {source} ({base}); {args.seconds:g} s utterances; load average {load_before:.2f} "
          f"on {os.cpu_count()} cores")

    # Both servers run from the start and the measurements alternate between them (and the in-process calls),
    # so a change in the machine's load affects both sides alike.
    (tmp / "on").mkdir()
    (tmp / "off").mkdir()
    servers = {"on": Server(base, tmp / "on"), "off": Server(base, tmp / "off", "--noenable_batching")}
    runs = {"on": {"saturation": []}, "off": {"saturation": []}}
    try:
        fn = in_process_function(base, utterances)
        local, remote = [], []
        with channel(servers["on"].address) as ch:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
            requests = [wav_request("ds2", u) for u in utterances]
            stub.Predict(requests[0], timeout=60)
            for i in range(args.runs):
                local.append(timed(lambda: fn(wav=tf.constant([utterances[i % len(utterances)]]))["transcripts"]
                                   .numpy()))
                remote.append(timed(lambda: stub.Predict(requests[i % len(requests)], timeout=60)))
        figures = {"bench": "serve", "model": source, "utterance_seconds": args.seconds,
                   "in_process_ms": round(1000 * statistics.median(local), 1),
                   "grpc_ms": round(1000 * statistics.median(remote), 1)}
        figures["grpc_overhead"] = round(figures["grpc_ms"] / figures["in_process_ms"], 3)
        print(f"\n[1] one stream: in-process SavedModel median {figures['in_process_ms']:.1f} ms, through ds2-serve "
              f"(gRPC) {figures['grpc_ms']:.1f} ms: overhead {figures['grpc_overhead']:.2f}x (target <= 1.15x)")
        for batching, server in servers.items():
            runs[batching]["paced"] = paced = load_test(
                LoadTestConfig(server.address, streams=args.streams, requests=args.streams * args.rounds,
                               interval_seconds=args.seconds), utterances, seconds)
            print(f"\n[2] batching {batching}: {format_report(paced)}")
        for _ in range(2):
            for batching, server in servers.items():
                saturated = load_test(LoadTestConfig(server.address, streams=args.saturation_streams,
                                                     requests=args.saturation_requests), utterances, seconds)
                runs[batching]["saturation"].append(saturated)
                print(f"\n[3] batching {batching}: {format_report(saturated)}")
    finally:
        for server in servers.values():
            server.stop()

    single = figures["grpc_ms"]
    for batching, r in runs.items():
        p = r["paced"]
        figures[f"paced_batching_{batching}"] = {"p50_ms": p["latency_ms"]["p50"], "p98_ms": p["latency_ms"]["p98"],
                                                 "utterances_per_second": p["utterances_per_second"],
                                                 "batch_sizes": p["batch_sizes"], "errors": p["errors"]}
        figures[f"saturation_audio_seconds_per_second_batching_{batching}"] = round(statistics.mean(
            x["audio_seconds_per_second"] for x in r["saturation"]), 1)
    figures["saturation_speedup"] = round(figures["saturation_audio_seconds_per_second_batching_on"]
                                          / figures["saturation_audio_seconds_per_second_batching_off"], 2)
    figures["paced_p98_over_single"] = round(figures["paced_batching_on"]["p98_ms"] / single, 2)
    figures["load_average_before_after"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(f"\nsummary: gRPC overhead {figures['grpc_overhead']:.2f}x (<= 1.15); saturation batched/unbatched "
          f"{figures['saturation_speedup']:.2f}x (>= 2); p98 at {args.streams} paced streams / single-stream "
          f"{figures['paced_p98_over_single']:.2f}x (<= 2); load average {figures['load_average_before_after']}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
