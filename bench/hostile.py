r"""Benchmark: ds2-serve under hostile requests mixed with normal ones (docs/serving.md, "What one request, one
client and one connection may cost").

    .venv/bin/python bench/hostile.py                                       # the model make demo exports
    .venv/bin/python bench/hostile.py --model_base_path runs/tiny/export/ds2 --seconds 60

One ds2-serve subprocess on a free loopback port, with its default limits; all traffic goes to 127.0.0.1.
 1. The normal clients alone for --baseline_seconds, in closed loops: greedy WAVs of 2-5 s (three clients), an
    n-best of a 3 s WAV, and (for a streaming export) a live stream at real time.
 2. What one request may cost, alone: the largest greedy request (--max_batch_size utterances at the export's
    longest), its time and what it adds to the server's RSS; the largest n-best request (the same with the most
    hotwords a request may add), which the server stops at --max_search_seconds of CPU; and the hostile shapes (one
    20 s WAV filled to [100] and [2000] rows, options of 4M values from one), each refused unread.
 3. The soak, --seconds long: the normal clients again, while hostile clients send those shapes, the largest
    n-best (two clients), requests they abandon after 0.5 s, keep-alive streams (10 ms every 0.5 s from one client
    opening as many as it may) and raw connections that never speak, past --max_connections. The server's RSS and
    open file descriptors are sampled every 0.25 s.
Prints the figures: the normal requests' p50/p99/max latency alone and under the soak, their errors, the hostile
requests' status codes, the server's RSS (start, peak, median, end) and file descriptors; then one JSON line.
Every client is bounded in time; the run stops by itself.
"""

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2  # noqa: E402
from tensorflow_serving.apis import (get_model_status_pb2, model_service_pb2_grpc,  # noqa: E402
                                    prediction_service_pb2_grpc)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/serve.py: the server subprocess, the bundle
from serve import Server, untrained_bundle  # noqa: E402

from deepspeech2.audio import speech_like_clip  # noqa: E402
from deepspeech2_export.requests import predict_request, wav_bytes  # noqa: E402
from deepspeech2_serving.checks import MAX_HOTWORD_WORDS  # noqa: E402
from deepspeech2_serving.client import channel, stream_request, wav_request  # noqa: E402
from deepspeech2_serving.versions import latest_version  # noqa: E402

RATE = 16000
TIMEOUT = 120.0  # seconds any one request may take before the client gives up (a bound, not a measurement)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def filled(dtype, dims, **values) -> tensor_pb2.TensorProto:
    """A TensorProto whose shape `dims` is filled from the values given (TensorFlow repeats the last one)."""
    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims])
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, **values)


def with_input(request, key, value):
    request.inputs[key].CopyFrom(value if isinstance(value, tensor_pb2.TensorProto) else tf.make_tensor_proto(value))
    return request


def hotwords() -> np.ndarray:
    """The most a request may add: MAX_HOTWORD_WORDS words, one per hotword."""
    words = [f"{a}{b}{c}" for a in "bcdfg" for b in "aeiou" for c in "klmnprst"]
    return np.array([w.encode() for w in words[:MAX_HOTWORD_WORDS]], object)


class Requests:
    """The requests of one model: normal ones and hostile ones."""

    def __init__(self, model: str, max_seconds: float, rows: int):
        self.model = model
        self.normal_wavs = [wav_bytes(speech_like_clip(2 + 3 * (i % 4) / 3, seed=i), RATE) for i in range(8)]
        self.nbest_wav = wav_bytes(speech_like_clip(3.0, seed=20), RATE)
        self.longest = wav_bytes(speech_like_clip(max_seconds - 0.1, seed=21), RATE)
        self.twenty = wav_bytes(speech_like_clip(min(20.0, max_seconds - 0.1), seed=22), RATE)
        self.rows = rows

    def largest(self, nbest: int = 0):
        request = predict_request(self.model, "transcribe_wav", {"wav": np.array([self.longest] * self.rows, object)})
        if nbest:
            with_input(request, "nbest", np.int32(nbest))
            with_input(request, "hotwords", hotwords())
        return request

    def shapes(self) -> list:
        """Tiny requests that would be large once read: one 20 s WAV filled to [100] and [2000] rows; options of 4M
        values from one."""
        out = []
        for rows in (100, 2000):
            request = predict_request(self.model, "transcribe_wav", {"wav": np.array([self.twenty], object)})
            out.append(with_input(request, "wav", filled(types_pb2.DT_STRING, [rows], string_val=[self.twenty])))
        for key, proto in (("nbest", filled(types_pb2.DT_INT32, [4 << 20], int_val=[1])),
                           ("words", filled(types_pb2.DT_INT32, [4 << 20], int_val=[1])),
                           ("hotwords", filled(types_pb2.DT_STRING, [4 << 20], string_val=[b"one"]))):
            out.append(with_input(wav_request(self.model, self.normal_wavs[0], nbest=1), key, proto))
        return out


def call(stub, request, timeout=TIMEOUT) -> tuple[str, float, str]:
    """(status code name, seconds, details) of one Predict."""
    start = time.monotonic()
    try:
        stub.Predict(request, timeout=timeout)
        return "OK", time.monotonic() - start, ""
    except grpc.RpcError as e:
        return e.code().name, time.monotonic() - start, e.details() or ""


def one_request_costs(server: Server, stub, requests: Requests) -> dict:
    """Phase 1: each worst case alone, with the RSS before and at its peak."""
    out = {}
    for name, request in (("largest_greedy", requests.largest()), ("largest_nbest", requests.largest(nbest=3))):
        before, peak, done = rss_bytes(server.proc.pid), [0], threading.Event()

        def sample():
            while not done.wait(0.05):
                peak[0] = max(peak[0], rss_bytes(server.proc.pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        code, seconds, details = call(stub, request)
        done.set()
        sampler.join()
        out[name] = {"code": code, "seconds": round(seconds, 2), "rss_added_mb": round((peak[0] - before) / 2**20, 1),
                     "details": details[:160]}
    for i, request in enumerate(requests.shapes()):
        code, seconds, details = call(stub, request)
        out[f"hostile_shape_{i}"] = {"code": code, "seconds": round(seconds, 3), "details_chars": len(details),
                                     "wire_bytes": request.ByteSize()}
    return out


class Soak:
    """Phase 2: normal and hostile clients together for `seconds`."""

    def __init__(self, server: Server, requests: Requests, seconds: float, max_connections: int, streaming: bool,
                 hostile: bool = True):
        self.server, self.requests, self.seconds = server, requests, seconds
        self.streaming = streaming  # the export has stream_step: a live stream and keep-alive sessions too
        self.with_hostile = hostile  # False: the normal clients alone (the baseline)
        self.max_connections = max_connections
        self.end = time.monotonic() + seconds
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = {"greedy": [], "nbest": [], "stream_step": []}
        self.normal_errors: Counter = Counter()
        self.hostile: Counter = Counter()
        self.rss: list[int] = []
        self.fds: list[int] = []  # the server's open file descriptors (its sockets among them)
        self.channel = channel(server.address, 64 << 20)
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def running(self) -> bool:
        return time.monotonic() < self.end

    def normal(self, kind: str, make) -> None:
        k = 0
        while self.running():
            code, seconds, details = call(self.stub, make(k))
            with self.lock:
                if code == "OK":
                    self.latency[kind].append(seconds)
                else:
                    self.normal_errors[f"{kind} {code}: {details[:80]}"] += 1
            k += 1

    def live_stream(self) -> None:
        """One stream at real time: 100 ms chunks every 100 ms, a new session every 5 s."""
        wave = speech_like_clip(5.0, seed=30)
        while self.running():
            session = ""
            for k in range(50):
                start = time.monotonic()
                code, seconds, details = "OK", 0.0, ""
                try:
                    response = self.stub.Predict(stream_request(self.requests.model, wave[k * 1600:(k + 1) * 1600],
                                                                k == 49, session, k), timeout=TIMEOUT)
                    session = tf.make_ndarray(response.outputs["session_id"])[0].decode()
                    seconds = time.monotonic() - start
                except grpc.RpcError as e:
                    code, details = e.code().name, e.details() or ""
                with self.lock:
                    if code == "OK":
                        self.latency["stream_step"].append(seconds)
                    else:
                        self.normal_errors[f"stream_step {code}: {details[:80]}"] += 1
                if code != "OK":
                    break
                time.sleep(max(0.0, 0.1 - (time.monotonic() - start)))

    def hostile_requests(self, make, timeout=TIMEOUT, pause=0.0) -> None:
        while self.running():
            code, _, _ = call(self.stub, make(), timeout)
            with self.lock:
                self.hostile[f"{make.__name__} {code}"] += 1
            time.sleep(pause)

    def keep_alive_streams(self) -> None:
        """One client opening as many sessions as it may and keeping each alive with 10 ms every 0.5 s."""
        tick, sessions = np.zeros(160, np.float32), {}
        while self.running():
            try:
                response = self.stub.Predict(stream_request(self.requests.model, tick, False), timeout=TIMEOUT)
                sessions[tf.make_ndarray(response.outputs["session_id"])[0].decode()] = 0
                code = "opened"
            except grpc.RpcError as e:
                code = f"open {e.code().name}"
            with self.lock:
                self.hostile[f"keep_alive {code}"] += 1
            for session in list(sessions):
                sessions[session] += 1
                try:
                    self.stub.Predict(stream_request(self.requests.model, tick, False, session, sessions[session]),
                                      timeout=TIMEOUT)
                except grpc.RpcError as e:
                    with self.lock:
                        self.hostile[f"keep_alive step {e.code().name}"] += 1
                    del sessions[session]
            time.sleep(0.5)

    def idle_connections(self) -> None:
        """Raw TCP connections that never speak, past --max_connections; closed at the end."""
        held = []
        while self.running() and len(held) < self.max_connections + 64:
            try:
                held.append(socket.create_connection(("127.0.0.1", int(self.server.address.rsplit(":", 1)[1])), 5))
            except OSError:
                break
            time.sleep(0.01)
        with self.lock:
            self.hostile[f"raw connections opened {len(held)}"] += 1
        while self.running():
            time.sleep(0.25)
        for s in held:
            s.close()

    def sample_rss(self) -> None:
        while self.running():
            self.rss.append(rss_bytes(self.server.proc.pid))
            self.fds.append(len(os.listdir(f"/proc/{self.server.proc.pid}/fd")))
            time.sleep(0.25)

    def run(self) -> None:
        r = self.requests
        shapes = r.shapes()

        def hostile_shape():
            return shapes[np.random.randint(len(shapes))]

        def largest_nbest():
            return r.largest(nbest=3)

        def abandoned():
            return wav_request(r.model, r.longest, nbest=3)

        threads = [threading.Thread(target=self.normal, args=("greedy", lambda k: wav_request(
                       r.model, r.normal_wavs[k % len(r.normal_wavs)]))) for _ in range(3)]
        threads += [threading.Thread(target=self.normal, args=("nbest", lambda k: wav_request(
                        r.model, r.nbest_wav, nbest=3))), threading.Thread(target=self.sample_rss)]
        if self.streaming:
            threads.append(threading.Thread(target=self.live_stream))
        if self.with_hostile:
            threads += [threading.Thread(target=self.hostile_requests, args=(hostile_shape,), kwargs={"pause": 0.05}),
                        threading.Thread(target=self.hostile_requests, args=(largest_nbest,)),
                        threading.Thread(target=self.hostile_requests, args=(largest_nbest,)),
                        threading.Thread(target=self.hostile_requests, args=(abandoned, 0.5)),
                        threading.Thread(target=self.idle_connections)]
            if self.streaming:
                threads.append(threading.Thread(target=self.keep_alive_streams))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.channel.close()


def percentile(values, q) -> float:
    return round(1000 * float(np.percentile(values, q)), 1) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--model_base_path", default="runs/tiny/export/ds2", help="the export to serve")
    ap.add_argument("--untrained", default="", help="no export: serve this preset with random weights instead")
    ap.add_argument("--seconds", type=float, default=60.0, help="the soak's length")
    ap.add_argument("--baseline_seconds", type=float, default=20.0, help="the normal clients alone, first")
    ap.add_argument("--max_connections", type=int, default=256, help="ds2-serve's --max_connections (the default)")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ds2-hostile-") as tmp:
        tmp = Path(tmp)
        base, source = Path(args.model_base_path), args.model_base_path
        if args.untrained or latest_version(base) is None:
            from deepspeech2_export.saved_model import ExportConfig, export_model

            export_model(ExportConfig(str(untrained_bundle(args.untrained or "tiny", tmp)), str(tmp / "export")))
            base, source = tmp / "export" / "ds2", f"untrained {args.untrained or 'tiny'}"
        info = json.loads((base / str(latest_version(base)) / "assets.extra" / "export.json").read_text())
        max_seconds = info["max_samples"] / info["sample_rate"]
        server = Server(base, tmp, "--max_connections", str(args.max_connections))
        try:
            ch = channel(server.address, 64 << 20)
            stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
            requests = Requests(base.name, max_seconds, rows=16)
            call(stub, wav_request(base.name, requests.normal_wavs[0], nbest=1))  # warm: first n-best
            rss_start = rss_bytes(server.proc.pid)
            streaming = bool(info.get("streaming"))
            baseline = Soak(server, requests, args.baseline_seconds, args.max_connections, streaming, hostile=False)
            baseline.run()
            costs = one_request_costs(server, stub, requests)
            soak = Soak(server, requests, args.seconds, args.max_connections, streaming)
            soak.run()
            status = model_service_pb2_grpc.ModelServiceStub(ch).GetModelStatus(
                get_model_status_pb2.GetModelStatusRequest(model_spec={"name": base.name}), timeout=30)
            rss_end = rss_bytes(server.proc.pid)
            ch.close()
        finally:
            server.stop()
    load_after = os.getloadavg()[0]
    def latencies(run: Soak) -> dict:
        return {kind: {"count": len(v), "p50_ms": percentile(v, 50), "p99_ms": percentile(v, 99),
                       "max_ms": percentile(v, 100)} for kind, v in run.latency.items() if v}

    latency, alone = latencies(soak), latencies(baseline)
    result = {"model": source, "max_audio_seconds": max_seconds,
              "soak_seconds": args.seconds, "one_request": costs, "normal_latency_alone": alone,
              "normal_latency": latency,
              "normal_errors": dict(soak.normal_errors), "hostile": dict(sorted(soak.hostile.items())),
              "rss_mb": {"start": round(rss_start / 2**20, 1), "peak": round(max(soak.rss) / 2**20, 1),
                         "median": round(statistics.median(soak.rss) / 2**20, 1), "end": round(rss_end / 2**20, 1)},
              "open_fds_peak": max(soak.fds),
              "status_after": len(status.model_version_status), "load_average": [load_before, load_after],
              "cpus": os.cpu_count()}
    print(f"model: {source} (max {max_seconds:g} s per utterance); {os.cpu_count()} CPUs, load average "
          f"{load_before:.1f} before, {load_after:.1f} after")
    print("one request, alone:")
    for name, c in costs.items():
        print(f"  {name:18s} {c}")
    for title, table in ((f"normal requests alone ({args.baseline_seconds:g} s):", alone),
                         (f"soak of {args.seconds:g} s, normal requests while the hostile ones ran:", latency)):
        print(title)
        for kind, v in table.items():
            print(f"  {kind:12s} {v['count']:5d} answered  p50 {v['p50_ms']:8.1f} ms  p99 {v['p99_ms']:8.1f} ms  "
                  f"max {v['max_ms']:8.1f} ms")
    print(f"  normal errors: {dict(soak.normal_errors) or 'none'}")
    print("hostile requests by outcome:")
    for key, n in sorted(soak.hostile.items()):
        print(f"  {key}: {n}")
    print(f"server RSS (MB): {result['rss_mb']}; open file descriptors at most {result['open_fds_peak']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
