r"""Transcribe WAV files on a TF Serving server (ds2-serve or tensorflow_model_server) over gRPC.

    ds2-client --server localhost:8500 recording.wav other.wav
    ds2-client --server localhost:8500 --model_name ds2 --nbest 5 recording.wav
    ds2-client --server localhost:8500 --manifest data/tiny/test.clean.jsonl --num_samples 3 --json out.json

Uses the standard PredictionServiceStub: GetModelMetadata to find the `transcribe_wav` signature, then one
Predict per file (sent concurrently, so ds2-serve batches them; each file is read when it is sent, so long
lists don't fill memory). WAV files must be at the model's sample rate (16 kHz); the server says so
otherwise. Prints one `FILE<TAB>transcript` line per input, in order, as soon as it is ready, as ds2-infer
does; for manifest lines the reference follows on its own line. --nbest N (ds2-serve only) asks
for the beam decoder's N best hypotheses, printed as `  #k<TAB>score<TAB>text` lines. A file that fails gets
`FILE<TAB>error: ...` and the others are still transcribed; the exit status is 1 if any input failed.
"""

import sys

from absl import flags

try:
    from . import _inputs
    from ._flags import from_flags
except ImportError:  # python bin/ds2_client.py
    import _inputs
    from _flags import from_flags

flags.DEFINE_string("server", "localhost:8500", "host:port of the gRPC server.")
flags.DEFINE_string("model_name", "ds2", "The model to ask for.")
_inputs.define_flags()
flags.adopt_module_key_flags(_inputs)  # --help lists them with this command's own
flags.DEFINE_integer("nbest", 0, "Also ask for the N best hypotheses of the server's beam decoder (ds2-serve).")
flags.DEFINE_float("timeout", 60.0, "Seconds per request.")
flags.DEFINE_string("json", "", "Also write the results (and latencies) as JSON here.")
FLAGS = flags.FLAGS


def main(argv):
    files = _inputs.files("ds2-client", argv, FLAGS)
    try:
        from deepspeech2.fileio import write_json
        from deepspeech2_serving.client import ClientConfig, format_results, results_json, transcribe

        # --server, --model_name, --num_samples, --seed and --nbest by field name.
        config = from_flags(ClientConfig, files=files, manifest=FLAGS.manifest or "", timeout_seconds=FLAGS.timeout)
        results = []
        for result in transcribe(config):  # printed as they come
            results.append(result)
            print(format_results([result]), flush=True)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-client: error: {e}")
    summary = results_json(config, results)
    if FLAGS.json:
        write_json(FLAGS.json, summary)
    _inputs.exit_status(summary["failed"])


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
