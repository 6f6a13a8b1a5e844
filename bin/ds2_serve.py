r"""Serve an exported model over TF Serving's gRPC API (PredictionService, ModelService), with Batch Dispatch.

    ds2-serve --model_base_path runs/tiny/export/ds2                       # 127.0.0.1:8500, batching on
    ds2-serve --model_base_path runs/tiny/export/ds2 --port 0 --port_file /tmp/ds2.port
    ds2-serve --model_base_path runs/tiny/export/ds2 --batching_parameters_file serving/batching_parameters.txt
    ds2-serve --model_base_path runs/tiny/export/ds2 --noenable_batching --lm data/tiny/lm/tiny3.bin

Any TF Serving client works unchanged (ds2-client is one): GetModelMetadata lists the signatures
(serving_default: waveforms + lengths; transcribe_wav: WAV bytes), Predict runs them. Concurrent requests
are merged into one forward pass, padded to the longest (DS2 §7.1's Batch Dispatch, with TF Serving's
max_batch_size, batch_timeout_micros, num_batch_threads, max_enqueued_batches; an idle server runs a request
at once, and the timeout only lets a batch fill while another is running). The newest version under
--model_base_path is served and newer ones are picked up as ds2-export writes them. A request with the
extra input `nbest` (an int) also gets the beam decoder's n-best (outputs nbest_transcripts, nbest_scores);
the decoder is the one ds2-export recorded, unless decoder flags are given here (it decodes in the
request's thread: --decode_workers doesn't apply). Streaming models also have stream_step: with the state
in each request (as stock TF Serving serves it), or in a session the server keeps (extra inputs `session_id`
and `sequence`: an empty id opens one and the response names the id the server issued; a repeated `sequence`
gets the stored answer), answering its transcript so far (session_transcripts: the LM beam search's best,
advanced with each step, when there is an LM; its final on the final step);
steps of concurrent streams are batched together. A session carries at most --max_stream_seconds of audio
(OUT_OF_RANGE past it) and all sessions together at most --max_stream_memory_mb (RESOURCE_EXHAUSTED). A
request still queued at its deadline is dropped. Binds 127.0.0.1 unless --host says otherwise; the port has
no authentication unless --ssl_config_file (TLS; client certificates with client_verify) or a proxy in front
gives it (docs/serving.md, "TLS and authentication"). SIGTERM finishes the requests in flight, then exits.
"""

import sys

from absl import flags

try:
    from . import _decoding
    from ._flags import from_flags
except ImportError:  # python bin/ds2_serve.py
    import _decoding
    from _flags import from_flags

flags.DEFINE_string("model_base_path", None, "The model's folder of versions (ds2-export's EXPORT_DIR/MODEL_NAME).")
flags.DEFINE_string("model_name", "", "The name clients ask for; default: the base path's folder name.")
flags.DEFINE_string("host", "127.0.0.1", "Address to listen on (0.0.0.0: every interface; the port has no "
                    "authentication unless --ssl_config_file sets client_verify).")
flags.DEFINE_string("ssl_config_file", "", "TF Serving's SSLConfig text file (server_key, server_cert, custom_ca, "
                    "client_verify): serve TLS, and with client_verify accept only clients with a certificate.")
flags.DEFINE_integer("port", 8500, "gRPC port; 0 picks a free one (see --port_file).")
flags.DEFINE_string("port_file", "", "Write the port here once serving.")
flags.DEFINE_bool("enable_batching", True, "Merge concurrent requests into one forward pass.")
flags.DEFINE_string("batching_parameters_file", "", "TF Serving's batching parameters file (replaces "
                    "--max_batch_size, --batch_timeout_micros, --num_batch_threads, --max_enqueued_batches).")
flags.DEFINE_integer("max_batch_size", 16, "Utterances per forward pass at most.")
flags.DEFINE_integer("batch_timeout_micros", 20000, "While another batch runs, how long a batch that isn't full "
                     "waits for more; an idle server runs a request at once.")
flags.DEFINE_integer("num_batch_threads", 0, "Batches run at the same time; 0: one per CPU core.")
flags.DEFINE_integer("max_enqueued_batches", 8, "Queue bound in batches; more is refused (RESOURCE_EXHAUSTED).")
flags.DEFINE_bool("batch_wait_when_idle", False, "TF Serving's rule: a batch waits --batch_timeout_micros to fill "
                  "even when the server is idle.")
flags.DEFINE_integer("max_message_bytes", 32 << 20, "Largest request or response.")
flags.DEFINE_integer("max_concurrent_requests", 64, "Predict requests handled at once; more: RESOURCE_EXHAUSTED.")
flags.DEFINE_integer("max_batch_samples", 1_920_000, "Padded samples (rows x the longest) one forward pass carries "
                     "at most (1920000: 2 minutes at 16 kHz); a request over it runs as several passes.")
flags.DEFINE_float("max_search_seconds", 30.0, "CPU seconds one request's beam searches (nbest, words) may take; "
                   "more: RESOURCE_EXHAUSTED.")
flags.DEFINE_integer("max_connections", 256, "Client connections at once; more are closed at once (UNAVAILABLE).")
flags.DEFINE_float("connection_idle_seconds", 300.0, "A connection with no request in flight this long is closed.")
flags.DEFINE_float("connection_age_seconds", 3600.0, "A connection is closed (its requests finishing first) after "
                   "this long; clients reconnect.")
flags.DEFINE_float("file_system_poll_wait_seconds", 1.0, "How often to look for a new version; 0: never.")
flags.DEFINE_float("grace_seconds", 30.0, "On SIGTERM, how long requests in flight may take to finish.")
flags.DEFINE_integer("max_streams", 256, "Streaming sessions held at once; more: RESOURCE_EXHAUSTED.")
flags.DEFINE_integer("max_streams_per_client", 32, "Streaming sessions held at once for one client address; more: "
                     "RESOURCE_EXHAUSTED.")
flags.DEFINE_float("stream_idle_seconds", 60.0, "A streaming session unused this long, or whose client has kept it "
                   "waiting this much longer than its chunks last, is forgotten.")
flags.DEFINE_float("max_stream_seconds", 60.0, "Most audio one streaming session may carry; a chunk past it is "
                   "refused (OUT_OF_RANGE).")
flags.DEFINE_integer("max_stream_memory_mb", 1024, "Most memory the streaming sessions' states and LM beam searches "
                     "may take together; a new session or step past it is refused (RESOURCE_EXHAUSTED).")
_decoding.define_flags(kind="beam")
flags.adopt_module_key_flags(_decoding)  # --help lists them with this command's own
flags.mark_flags_as_required(["model_base_path"])
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        sys.exit(f"ds2-serve: error: unexpected arguments {argv[1:]}")
    try:
        from deepspeech2_serving.batching import BatchingConfig
        from deepspeech2_serving.server import ServeConfig, serve

        batching = None
        if FLAGS.batching_parameters_file and FLAGS.enable_batching:
            with open(FLAGS.batching_parameters_file, encoding="utf-8") as f:
                batching = BatchingConfig.from_text(f.read(), wait_when_idle=FLAGS.batch_wait_when_idle)
        elif FLAGS.enable_batching:
            # --max_batch_size, --batch_timeout_micros, --num_batch_threads, --max_enqueued_batches by field name
            batching = from_flags(BatchingConfig, wait_when_idle=FLAGS.batch_wait_when_idle)
        # Every other flag named after a field of ServeConfig sets it; these four are named otherwise.
        config = from_flags(ServeConfig, batching=batching, decoder=_decoding.override(FLAGS),
                            poll_seconds=FLAGS.file_system_poll_wait_seconds,
                            max_stream_memory_bytes=FLAGS.max_stream_memory_mb << 20)
        serve(config)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-serve: error: {e}")


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
