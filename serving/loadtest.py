r"""Load test: N concurrent streams of utterances against a TF Serving server, for a bounded number of requests.

    .venv/bin/python serving/loadtest.py --server 127.0.0.1:8500 --streams 10 --requests 100 --interval 5
    .venv/bin/python serving/loadtest.py --server 127.0.0.1:8500 --streams 16 --requests 200 data/tiny/wav/*.wav
    .venv/bin/python -m deepspeech2_serving.loadtest --server 127.0.0.1:8500 --manifest data/tiny/test.clean.jsonl

Two ways to load the server:
    --interval 0   closed loop: each stream sends its next utterance as soon as the previous answer arrives
                   (the server's saturation throughput)
    --interval T   open loop, DS2 §7.1's setting: each stream sends an utterance every T seconds whatever the
                   server does (T = the utterance length is real-time pace), streams starting at random phases
Reports throughput (utterances and audio seconds per second), latency percentiles (p50, p98, p99) and, from
ds2-serve's `ds2-batch-size` trailing metadata, the share of requests served in batches of each size (the
paper's Figure 5); errors are counted by gRPC status. Without files or a manifest, the utterances are
`--seconds` long synthetic speech-like clips. Prints a summary, then the report as one JSON line.
"""

from __future__ import annotations

import argparse
import collections
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
import numpy as np

from deepspeech2_serving.client import channel, wav_request

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class LoadTestConfig:
    """The load: how many streams, how many requests in all, and their pace."""

    server: str = "127.0.0.1:8500"  # host:port
    model_name: str = "ds2"
    streams: int = 10  # concurrent clients
    requests: int = 100  # requests in all (the test stops after them)
    interval_seconds: float = 0.0  # 0: closed loop; > 0: each stream sends one utterance every this many seconds
    timeout_seconds: float = 60.0  # per request
    seed: int = 0  # stream phases (open loop) and which utterance each request sends

    def __post_init__(self):
        if self.streams < 1 or self.requests < 1:
            raise ValueError(f"`streams` and `requests` must be >= 1, got {self.streams!r}, {self.requests!r}")
        if self.interval_seconds < 0 or not self.timeout_seconds > 0:
            raise ValueError(f"`interval_seconds` must be >= 0 and `timeout_seconds` > 0, got "
                             f"{self.interval_seconds!r}, {self.timeout_seconds!r}")


@dataclass
class _Record:
    latency: float
    seconds: float  # audio
    code: str  # "OK" or the gRPC status name
    batch_size: int | None


def _batch_size(call) -> int | None:
    for key, value in call.trailing_metadata() or ():
        if key == "ds2-batch-size":
            return int(value)
    return None


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def load_test(config: LoadTestConfig, utterances: Sequence[bytes], seconds: Sequence[float]) -> dict:
    """Run the load and report it.

    Args:
        config: the load.
        utterances: WAV files' bytes (at the model's sample rate); request i sends one of them at random.
        seconds: each utterance's duration.

    Returns:
        A JSON-able report: `utterances_per_second`, `audio_seconds_per_second`, `latency_ms` (p50, p98,
        p99, mean, max; successful requests), `errors` by status, `batch_sizes` (batch size -> requests)
        and the config.
    """
    if not utterances or len(utterances) != len(seconds):
        raise ValueError(f"need one duration per utterance and at least one, got {len(utterances)} utterances "
                         f"and {len(seconds)} durations")
    rng = np.random.default_rng(config.seed)
    picks = rng.integers(len(utterances), size=config.requests)
    requests = [wav_request(config.model_name, utterances[i]) for i in picks]
    records: list[_Record] = []
    lock = threading.Lock()
    with channel(config.server) as ch:
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        grpc.channel_ready_future(ch).result(timeout=config.timeout_seconds)
        start = time.perf_counter()
        if config.interval_seconds > 0:
            _open_loop(config, stub, requests, [seconds[i] for i in picks], records, lock, rng)
        else:
            _closed_loop(config, stub, requests, [seconds[i] for i in picks], records, lock)
        wall = time.perf_counter() - start
    ok = [r for r in records if r.code == "OK"]
    latencies = [1000 * r.latency for r in ok]
    sizes = collections.Counter(r.batch_size for r in ok if r.batch_size is not None)
    return {
        "mode": "open loop" if config.interval_seconds > 0 else "closed loop", "streams": config.streams,
        "interval_seconds": config.interval_seconds, "requests": len(records), "ok": len(ok),
        "errors": dict(collections.Counter(r.code for r in records if r.code != "OK")),
        "wall_seconds": round(wall, 3), "utterances_per_second": round(len(ok) / wall, 3),
        "audio_seconds_per_second": round(sum(r.seconds for r in ok) / wall, 3),
        "latency_ms": {name: None if v is None else round(v, 1) for name, v in (
            ("p50", percentile(latencies, 50)), ("p98", percentile(latencies, 98)),
            ("p99", percentile(latencies, 99)), ("mean", float(np.mean(latencies)) if latencies else None),
            ("max", max(latencies, default=None)))},
        "batch_sizes": {str(k): v for k, v in sorted(sizes.items())},
    }


def _closed_loop(config, stub, requests, seconds, records, lock) -> None:
    counter = iter(range(len(requests)))

    def stream():
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            start = time.perf_counter()
            try:
                _, call = stub.Predict.with_call(requests[i], timeout=config.timeout_seconds)
                record = _Record(time.perf_counter() - start, seconds[i], "OK", _batch_size(call))
            except grpc.RpcError as e:
                record = _Record(time.perf_counter() - start, seconds[i], e.code().name, None)
            with lock:
                records.append(record)

    threads = [threading.Thread(target=stream, daemon=True) for _ in range(config.streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _open_loop(config, stub, requests, seconds, records, lock, rng) -> None:
    # Stream s sends at phase_s + k * interval; the requests go out in time order, whatever came back.
    phases = rng.uniform(0, config.interval_seconds, size=config.streams)
    rounds = -(-len(requests) // config.streams)
    times = sorted(p + k * config.interval_seconds for k in range(rounds) for p in phases)[:len(requests)]
    done = threading.Semaphore(0)

    def finished(future, sent, i):
        try:
            future.result()
            record = _Record(time.perf_counter() - sent, seconds[i], "OK", _batch_size(future))
        except grpc.RpcError as e:
            record = _Record(time.perf_counter() - sent, seconds[i], e.code().name, None)
        with lock:
            records.append(record)
        done.release()

    start = time.perf_counter()
    for i, at in enumerate(times):
        delay = start + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        sent = time.perf_counter()
        future = stub.Predict.future(requests[i], timeout=config.timeout_seconds)
        future.add_done_callback(lambda f, sent=sent, i=i: finished(f, sent, i))
    for _ in times:
        done.acquire()


def format_report(report: dict) -> str:
    """A few readable lines: throughput, latency, errors and the batch-size histogram (DS2 Figure 5)."""
    lat = report["latency_ms"]
    lines = [f"{report['mode']}, {report['streams']} streams"
             + (f" every {report['interval_seconds']:g} s" if report["interval_seconds"] else "")
             + f": {report['ok']}/{report['requests']} ok in {report['wall_seconds']:.1f} s, "
             f"{report['utterances_per_second']:.2f} utterances/s, {report['audio_seconds_per_second']:.1f} audio-s/s",
             f"latency ms: p50 {lat['p50']}  p98 {lat['p98']}  p99 {lat['p99']}  max {lat['max']}"]
    if report["errors"]:
        lines.append("errors: " + ", ".join(f"{k} {v}" for k, v in report["errors"].items()))
    total = sum(report["batch_sizes"].values())
    if total:
        lines.append("requests by batch size (DS2 Figure 5):")
        for size, count in report["batch_sizes"].items():
            lines.append(f"  {size:>3}  {count / total:6.1%}  {'#' * round(40 * count / total)}")
    return "\n".join(lines)


def synthetic_utterances(seconds: float, count: int = 8) -> tuple[list[bytes], list[float]]:
    """`count` different speech-like clips of `seconds` each, as WAV bytes at 16 kHz."""
    from deepspeech2.audio import speech_like_clip
    from deepspeech2_export.requests import wav_bytes

    return [wav_bytes(speech_like_clip(seconds, seed=i), SAMPLE_RATE) for i in range(count)], [seconds] * count


def file_utterances(paths: Sequence[str]) -> tuple[list[bytes], list[float]]:
    """Audio files as WAV bytes (FLAC and the like decoded first), and their durations."""
    import soundfile as sf

    from deepspeech2_export.requests import as_wav_bytes

    data, seconds = [], []
    for path in paths:
        info = sf.info(path)
        with open(path, "rb") as f:
            data.append(as_wav_bytes(f.read()))
        seconds.append(info.frames / info.samplerate)
    return data, seconds


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("files", nargs="*", help="audio files to send (16 kHz), as WAV; default: synthetic clips")
    ap.add_argument("--server", default=LoadTestConfig.server)
    ap.add_argument("--model_name", default=LoadTestConfig.model_name)
    ap.add_argument("--streams", type=int, default=LoadTestConfig.streams, help="concurrent streams")
    ap.add_argument("--requests", type=int, default=LoadTestConfig.requests, help="requests in all")
    ap.add_argument("--interval", type=float, default=0.0,
                    help="open loop: seconds between a stream's requests; 0: closed loop")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of the synthetic clips")
    ap.add_argument("--manifest", help="send the (whole-file) lines of this manifest")
    ap.add_argument("--timeout", type=float, default=LoadTestConfig.timeout_seconds)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    config = LoadTestConfig(server=args.server, model_name=args.model_name, streams=args.streams,
                            requests=args.requests, interval_seconds=args.interval, timeout_seconds=args.timeout,
                            seed=args.seed)
    if args.manifest:
        from deepspeech2.data.manifest import read_manifest

        utterances, seconds = file_utterances([u.audio_filepath for u in read_manifest(args.manifest)])
    elif args.files:
        utterances, seconds = file_utterances(args.files)
    else:
        utterances, seconds = synthetic_utterances(args.seconds)
    report = load_test(config, utterances, seconds)
    print(format_report(report))
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
