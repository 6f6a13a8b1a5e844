r"""Live transcription in the browser: a web page sends your microphone (or a file) to a model.

    ds2-demo --model_dir runs/tiny-streaming/export/ds2          # an export; open http://127.0.0.1:8000/
    ds2-demo --model_dir runs/tiny-streaming/model --port 0 --port_file /tmp/demo.port   # a bundle (exported first)
    ds2-demo --model_dir runs/tiny-streaming/export/ds2 --lm data/tiny/lm/tiny3.bin --alpha 0.5 --beta 2

Hold the button (or the space bar) while you speak: the page downsamples the microphone to 16 kHz in an
AudioWorklet and sends 16-bit PCM over a WebSocket. A streaming model (unidirectional RNNs, e.g.
ds2-streaming: the export has a stream_step signature) shows partial transcripts while you speak (with an LM,
the beam search's best so far: it runs as the audio arrives) and the final one when you release; any other
model (e.g. make demo's bidirectional one) is push to talk: the whole utterance is transcribed on release. The
latency and the real-time factor come with the final transcript. A file can be uploaded instead. The steps of
all users are batched together. The final transcript uses
the decoder the export recorded (ds2-export --lm ...) unless decoder flags are given here. Binds 127.0.0.1
unless --host says otherwise; SIGTERM or Ctrl-C stops it. Only the page's own origin may open the WebSocket
(--allowed_origins adds others), idle connections close after --idle_seconds, and each client address gets
--max_streams_per_client connections (docs/streaming.md, "Web demo limits").
"""

import dataclasses
import sys
import tempfile
from pathlib import Path

from absl import flags

try:
    from . import _decoding
    from ._flags import from_flags
except ImportError:  # python bin/ds2_demo.py
    import _decoding
    from _flags import from_flags

flags.DEFINE_string("model_dir", None, "An export (ds2-export's EXPORT_DIR/MODEL_NAME, or one version folder) or a "
                    "model bundle (exported to a temporary folder at start).")
flags.DEFINE_string("host", "127.0.0.1", "Address to listen on (0.0.0.0: every interface).")
flags.DEFINE_integer("port", 8000, "HTTP and WebSocket port; 0 picks a free one (see --port_file).")
flags.DEFINE_string("port_file", "", "Write the port here once serving.")
flags.DEFINE_integer("max_streams", 32, "WebSocket connections at once, all clients together.")
flags.DEFINE_integer("max_streams_per_client", 4, "WebSocket connections at once from one client address.")
flags.DEFINE_list("allowed_origins", [], "Origins (scheme://host[:port], comma-separated) whose pages may open the "
                  "WebSocket besides the page's own, e.g. https://demo.example.org behind a proxy; pages of other "
                  "origins get HTTP 403.")
flags.DEFINE_float("idle_seconds", 300.0, "Close a WebSocket that sent nothing this long (0: never).")
flags.DEFINE_float("max_seconds", 60.0, "Longest utterance.")
flags.DEFINE_integer("max_batch_size", 16, "Streams per forward pass at most.")
flags.DEFINE_integer("batch_timeout_micros", 5000, "While another batch runs, how long a batch waits for more streams.")
_decoding.define_flags(kind="beam")
flags.adopt_module_key_flags(_decoding)  # --help lists them with this command's own
flags.mark_flags_as_required(["model_dir"])
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        sys.exit(f"ds2-demo: error: unexpected arguments {argv[1:]}")
    try:
        from deepspeech2_serving.batching import BatchingConfig
        from deepspeech2_serving.demo import DemoConfig, serve

        # Every flag named after a field of DemoConfig (or of its BatchingConfig) sets it.
        config = from_flags(DemoConfig, decoder=_decoding.override(FLAGS), batching=from_flags(BatchingConfig))
        with tempfile.TemporaryDirectory(prefix="ds2-demo-") as scratch:
            if (Path(config.model_dir) / "model.keras").is_file():  # a bundle: the demo serves exports only
                from deepspeech2_export.saved_model import ExportConfig, export_model

                version = export_model(ExportConfig(config.model_dir, scratch))
                config = dataclasses.replace(config, model_dir=str(version))
            serve(config)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-demo: error: {e}")


def run():
    """absl's app.run with --help showing this module's docstring and flags (the console script gets here through
    its launcher in deepspeech2_cli, which has quieted TensorFlow first)."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_x.py
        from _app import run as run_app
    run_app(main)


if __name__ == "__main__":
    run()
