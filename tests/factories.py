"""Small factories shared by the tests: manifests of generated clips (`deepspeech2.audio.speech_like_clip`: no data
download, no TTS), the offline model's log-probabilities, the modules a piece of code loads, and a local HTTP file
server with Range requests (for the downloads).

The tests import it as `factories` (pytest puts tests/ on the path); bench/ scripts put tests/ on theirs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from deepspeech2.audio import save_wav, speech_like_clip
from deepspeech2.data.manifest import Utterance, write_manifest

TEXTS = ("hello world", "the cat sat on the mat", "speech recognition", "it's a test", "deep speech two",
         "one two three four five six", "a quick brown fox", "jumps over the lazy dog")


def make_manifest(directory: str | os.PathLike, n: int = 4, min_seconds: float = 0.8, max_seconds: float = 2.0,
                  name: str = "manifest.jsonl", seed: int = 0) -> tuple[Path, list[Utterance]]:
    """Write `n` generated WAV clips and a manifest for them into `directory`."""
    directory = Path(directory)
    rng = np.random.default_rng(seed)
    utts = []
    for i in range(n):
        seconds = float(np.round(rng.uniform(min_seconds, max_seconds), 2))
        path = directory / "wav" / f"utt{i:03d}.wav"
        save_wav(path, speech_like_clip(seconds, seed=seed * 1000 + i))
        utts.append(Utterance(str(path), seconds, TEXTS[i % len(TEXTS)], speaker=f"spk{i % 2}", language="en"))
    manifest = directory / name
    write_manifest(manifest, utts)
    return manifest, utts


def make_training_data(directory: Path, n: int = 16, num_shards: int = 2) -> Path:
    """`directory` holding what training reads: `n` clips of 0.8-1.6 s in `num_shards` shards, the English vocabulary
    (`vocab.txt`) and the clips' feature statistics (`mean_std.npz`)."""
    from deepspeech2.data.shards import ShardConfig, make_shards
    from deepspeech2.features import FeatureConfig
    from deepspeech2.prepare.stats import compute_mean_std
    from deepspeech2.vocab import Vocabulary

    manifest, _ = make_manifest(directory, n=n, min_seconds=0.8, max_seconds=1.6)
    Vocabulary.english().save(directory / "vocab.txt")
    make_shards(manifest, Vocabulary.english(), ShardConfig(str(directory / "shards"), num_shards=num_shards),
                progress=False)
    compute_mean_std([manifest], FeatureConfig()).save(directory / "mean_std.npz")
    return directory


def bundle_log_probs(bundle, wave: np.ndarray) -> np.ndarray:
    """The offline model's log-probabilities `(steps, vocab_size)` on one waveform: the whole utterance at once,
    featurized as in training (the reference the streaming and serving tests compare with)."""
    import tensorflow as tf

    from deepspeech2.features import featurize

    features, frames = featurize(wave[None], [len(wave)], bundle.feature_config, bundle.normalizer)
    outputs = bundle.model({"features": features, "feature_lengths": frames}, training=False)
    return tf.nn.log_softmax(outputs["logits"])[0, :int(outputs["output_lengths"][0])].numpy()


def modules_loaded_by(code: str, prefixes: tuple[str, ...], timeout: float = 300) -> list[str]:
    """Run `code` in a fresh Python and return the loaded modules whose names start with one of `prefixes`.

    Raises:
        AssertionError: the code failed (its stderr's end is the message).
    """
    probe = code + f"\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith({tuple(prefixes)!r})))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return eval(out.stdout.strip().splitlines()[-1])  # noqa: S307  our own probe's printed list


class FileServer:
    """Python's http.server on 127.0.0.1 (a free port) serving the files under `root`, with HTTP Range requests
    (`bytes=N-`, answered 206 with Content-Range), in a thread; records each request as `(path, first byte asked,
    bytes sent)`. A context manager: `with FileServer(root) as server: server.url ...`."""

    def __init__(self, root: str | os.PathLike):
        import http.server
        import threading

        self.root, self.requests = Path(root), []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path = owner.root / self.path.lstrip("/")
                if not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                start = 0
                if self.headers.get("Range", "").startswith("bytes="):
                    start = int(self.headers["Range"][len("bytes="):].split("-")[0])
                    if start >= len(data):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                owner.requests.append((self.path, start, len(data) - start))  # before the client can have it all
                self.wfile.write(data[start:])

            def log_message(self, *args):  # quiet
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
