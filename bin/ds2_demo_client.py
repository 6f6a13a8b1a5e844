r"""Stream an audio file to ds2-demo at real-time pace, printing the partial transcripts as they come.

    ds2-demo-client recording.wav                                # ds2-demo on 127.0.0.1:8000
    ds2-demo-client --server 127.0.0.1:8123 --speed 0 recording.flac

The terminal twin of the demo page: the file (any format soundfile reads, resampled to the server's rate)
goes over the page's WebSocket protocol in --chunk_ms chunks, paced like a live microphone (--speed 2: twice
as fast, 0: as fast as possible). Each new partial transcript is printed as it arrives, then the final one
and the latency from the end of the audio to the final transcript (here and on the server) and the server's
real-time factor. Exit status 1 if the server can't be reached or refuses the audio.
"""

import sys

from absl import flags

try:
    from ._flags import from_flags
except ImportError:  # python bin/ds2_demo_client.py
    from _flags import from_flags

flags.DEFINE_string("server", "127.0.0.1:8000", "host:port of ds2-demo (or a ws:// URL).")
flags.DEFINE_float("chunk_ms", 100.0, "Audio per message, in milliseconds.")
flags.DEFINE_float("speed", 1.0, "1: real time; 2: twice as fast; 0: as fast as possible.")
flags.DEFINE_float("timeout", 60.0, "Seconds to wait for the server.")
flags.DEFINE_bool("words", False, "Also print the final transcript's words, tab-separated: start and end (s), "
                  "confidence, word (a ds2-demo with an LM gives them).")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) != 2:
        sys.exit("ds2-demo-client: error: give one audio file (ds2-demo-client FILE.wav)")
    try:
        from deepspeech2_serving.demo_client import DemoClientConfig, DemoError, format_words, stream_file

        # --server, --chunk_ms and --speed by field name.
        config = from_flags(DemoClientConfig, file=argv[1], timeout_seconds=FLAGS.timeout)
        result = stream_file(config, on_partial=lambda text: print(f"partial: {text}", flush=True))
    except (ValueError, FileNotFoundError, ConnectionError, DemoError) as e:
        sys.exit(f"ds2-demo-client: error: {e}")
    print(f"final: {result.text}")
    if FLAGS.words:
        print(format_words(result))
    print(f"latency {result.latency_ms:.0f} ms (server {result.server_latency_ms:.0f} ms), real-time factor "
          f"{result.rtf:.3f}, {result.audio_seconds:.2f} s of audio, decoder {result.decoder}")


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
