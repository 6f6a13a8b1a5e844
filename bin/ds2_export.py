r"""Export a trained model as a SavedModel for TF Serving (a new version under EXPORT_DIR/MODEL_NAME/).

    ds2-export --model_dir runs/tiny/model --export_dir runs/tiny/export
    ds2-export --model_dir runs/tiny/model --export_dir runs/tiny/export --model_name ds2 \
        --lm data/tiny/lm/tiny3.bin --alpha 0.5 --beta 2 --beam_size 100
    saved_model_cli show --dir runs/tiny/export/ds2/1 --all
    ds2-export --model_dir runs/tiny/model --export_dir runs/tiny/export --quantize int8 \
        --calibration_manifest data/tiny/train.clean.jsonl   # -> runs/tiny/export/ds2.int8.tflite
    ds2-export --model_dir runs/tiny/model --export_dir runs/tiny/export --quantize int8 \
        --calibration_manifest data/tiny/train.clean.jsonl --float_layers rnn0   # rnn0 in float32 inside

Signatures: `serving_default` (float32 waveforms [batch, samples] + int32 lengths [batch]) and
`transcribe_wav` (WAV file bytes [batch]), both giving log_probs, output_lengths and greedy transcripts;
features, normalization and the greedy decoding run inside the graph, with stock TensorFlow ops only.
The version (one more than the newest there, or --version) is written to a temporary folder and renamed,
so a server watching the folder never sees half of it. assets.extra/ gets the vocabulary, the configs, the
normalizer stats and TF Serving warm-up requests; with --lm, the beam decoder settings and the LM's word
list. The decoder flags record the beam decoder ds2-serve runs for requests that ask for the n-best or for
words (--decoder greedy records none); --words_config (bench/words.py's JSON for this model and LM) the shifts and
calibration of the word times and confidences it gives (assets.extra/words.json; without it: none). Prints the
version folder.

--quantize float|dynamic|int8 writes a TFLite model instead, EXPORT_DIR/MODEL_NAME.QUANTIZE.tflite (replaced if
there): the acoustic model for one utterance per call, its features computed outside (ds2-infer --tflite runs
it with the bundle's). float: float32; dynamic: int8 weights; int8: full-integer, its activation ranges
calibrated on --calibration_utterances of --calibration_manifest (training or dev audio, never test);
--float_layers keeps the named layers (e.g. rnn0; the model's layers with weights) in float32 inside the int8 file.
Prints the file. TF Serving has no use for a quantized SavedModel here (README, "A small model").
"""

import sys

from absl import flags

try:
    from . import _decoding
    from ._flags import from_flags
except ImportError:  # python bin/ds2_export.py
    import _decoding
    from _flags import from_flags

flags.DEFINE_string("model_dir", None, "Model bundle folder (a ds2-train workdir's model/).")
flags.DEFINE_string("export_dir", None, "Model root; the version goes to EXPORT_DIR/MODEL_NAME/<version>/.")
flags.DEFINE_string("model_name", "ds2", "The model's name: its folder, and what clients ask for.")
flags.DEFINE_integer("version", 0, "Version number; 0: one more than the newest there. Never overwrites.")
flags.DEFINE_float("max_audio_seconds", 60.0, "Longer utterances are refused with INVALID_ARGUMENT.")
flags.DEFINE_enum("quantize", None, ["float", "dynamic", "int8"], "Write a TFLite model instead of the "
                  "SavedModel: float32, int8 weights (dynamic) or full-integer (int8).")
flags.DEFINE_string("calibration_manifest", None, "--quantize int8: the training or dev manifest whose audio sets "
                    "the activation ranges.")
flags.DEFINE_integer("calibration_utterances", 100, "--quantize int8: calibrate on a random sample of this many.")
flags.DEFINE_list("float_layers", [], "--quantize int8: the model's layers to keep in float32 inside the int8 file, "
                  "comma-separated (e.g. rnn0).")
flags.DEFINE_string("words_config", None, "The word config JSON (time shifts, confidence calibration) of this model "
                    "and LM, from bench/words.py, for ds2-serve's word times and confidences.")
_decoding.define_flags(kind="beam")
flags.adopt_module_key_flags(_decoding)  # --help lists them with this command's own
flags.mark_flags_as_required(["model_dir", "export_dir"])
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        sys.exit(f"ds2-export: error: unexpected arguments {argv[1:]}")
    try:
        if FLAGS.quantize:
            if FLAGS.lm:
                raise ValueError("a TFLite model records no decoder: give --lm and the decoder flags to ds2-infer")
            if FLAGS.words_config:
                raise ValueError("a TFLite model records no word config: give --words_config to ds2-infer --words")
            from deepspeech2_export.tflite import TFLiteConfig, export_tflite

            # --model_dir, --quantize, --calibration_manifest, ... by field name.
            out_path = f"{FLAGS.export_dir}/{FLAGS.model_name}.{FLAGS.quantize}.tflite"
            print(export_tflite(from_flags(TFLiteConfig, out_path=out_path)))
            return
        if FLAGS.float_layers:
            raise ValueError("--float_layers is for a TFLite model: give --quantize int8")
        from deepspeech2.decode.words import WordConfig
        from deepspeech2_export.saved_model import ExportConfig, export_model

        # The beam decoder (with --lm, its LM) ds2-serve runs for n-best requests; --decoder greedy records none.
        decoder = _decoding.config(FLAGS)
        # --model_dir, --export_dir, --model_name, --version and --max_audio_seconds by field name.
        config = from_flags(ExportConfig, decoder=decoder if decoder.kind == "beam" else None,
                            words=WordConfig.load(FLAGS.words_config) if FLAGS.words_config else None)
        path = export_model(config)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"ds2-export: error: {e}")
    print(path)


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
