r"""Benchmark: a model bundle as TFLite (float32, dynamic-range, int8) against its float SavedModel: size on disk,
RTF of the features and the acoustic model on one core, WER/CER greedy and with the LM.

    .venv/bin/python bench/tflite.py --model_dir runs/e23/model --manifest data/x23/tiny/test.clean.jsonl \
        --calibration_manifest data/x23/tiny/train.clean.jsonl --lm data/x23/tiny/lm/tiny3.bin \
        --tune results/e23/tune.json --out_dir runs/e23/tflite
    .venv/bin/python bench/tflite.py --layers --model_dir runs/e23/model --manifest data/x23/tiny/dev.clean.jsonl \
        --calibration_manifest data/x23/tiny/train.clean.jsonl --out_dir runs/e23/tflite

The TFLite models are written by `deepspeech2_export.tflite.export_tflite` (what `ds2-export --quantize` runs) to
--out_dir/ds2.{float,dynamic,int8}.tflite, so `ds2-infer --tflite` reproduces any row. Two more int8 rows on request:
--float_layers rnn0 (`ds2-export --quantize int8 --float_layers rnn0`: those layers in float32 inside the int8 file,
ds2.int8.float-rnn0.tflite) and --unrepaired (the converter's int8 file before `requantize_copies`,
ds2.int8.unrepaired.tflite: the int8 row before that repair, for comparison on the same run). The SavedModel by
`export_model` (`ds2-export`) into a temporary folder, its size being saved_model.pb and variables/ (--reuse keeps
the .tflite files already there). Every utterance goes through alone (batch 1: the TFLite models take one
utterance per call) via `deepspeech2.inference.compute_log_probs`, each utterance through every model in turn
(a shared machine's load moves over minutes; round robin gives every model the same), after one warm-up
utterance, with TensorFlow and TFLite on one thread each; RTF = seconds in features + acoustic model / audio
seconds. The beam search is ds2-eval's (DecoderConfig's defaults, --beam_size, alpha and beta from --tune).
"Keras float32" is the bundle's model run in float32: a model trained under mixed_bfloat16 computes in bf16 in the
SavedModel, the TFLite models in float32.

--layers asks which part loses in int8: the float32 model cut into its stages (the conv front end, each RNN layer,
the output layer), each stage a TFLite model of its own in one mode, chained; int8 stages calibrated on the float
model's activations at their inputs and repaired as `export_tflite`'s int8 files are (`requantize_copies`). Greedy
WER/CER on --manifest (use dev: the test split stays unseen) and the share of steps whose argmax equals the float
model's.

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SIGNATURE = "serving_default"


def one_thread() -> None:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def saved_model_size(folder: Path) -> int:
    return (folder / "saved_model.pb").stat().st_size + sum(p.stat().st_size for p in (folder / "variables").iterdir())


def saved_model_forward(folder: Path):
    run = tf.saved_model.load(str(folder)).signatures[SIGNATURE]

    def forward(waveforms, lengths):
        out = run(waveforms=tf.constant(waveforms), lengths=tf.constant(lengths))
        return out["log_probs"], out["output_lengths"]

    return forward


def score(bundle, references, log_probs, decoders) -> dict:
    from deepspeech2.metrics import cer, wer

    out = {}
    for name, decoder in decoders.items():
        hyps = decoder.decode_utterances(log_probs)
        out[f"wer_{name}"] = wer(references, hyps, spaced=bundle.vocab.spaced)
        out[f"cer_{name}"] = cer(references, hyps, spaced=bundle.vocab.spaced)
    return out


def table(args) -> dict:
    from deepspeech2.bundle import load_bundle
    from deepspeech2.data.manifest import read_manifest
    from deepspeech2.decode import Decoder, DecoderConfig
    from deepspeech2.inference import acoustic_model, compute_log_probs
    from deepspeech2_export.saved_model import ExportConfig, export_model
    from deepspeech2_export.tflite import TFLiteConfig, export_tflite, float32_model, tflite_acoustic_model

    bundle = load_bundle(args.model_dir)
    utterances = read_manifest(args.manifest)
    references = [" ".join(u.text.split()) for u in utterances]
    alpha, beta = args.alpha, args.beta
    if args.tune:
        tune = json.loads(Path(args.tune).read_text())
        alpha, beta = tune["best_alpha"], tune["best_beta"]
    beam = DecoderConfig(kind="beam", lm_path=args.lm, alpha=alpha, beta=beta, beam_size=args.beam_size)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, t0 = {}, time.time()
    load = [round(os.getloadavg()[0], 2)]
    with tempfile.TemporaryDirectory() as tmp, Decoder(DecoderConfig(kind="greedy"), bundle.vocab) as greedy, \
            Decoder(beam, bundle.vocab) as lm:
        version = export_model(ExportConfig(args.model_dir, tmp))
        variants = {"SavedModel (float)": (saved_model_size(version), saved_model_forward(version)),
                    "Keras float32": (None, acoustic_model(dataclasses.replace(bundle, model=float32_model(bundle))))}
        tflite = [(f"TFLite {mode}", f"ds2.{mode}.tflite", mode, (), True) for mode in ("float", "dynamic", "int8")]
        if args.float_layers:
            tflite.append((f"TFLite int8, {'+'.join(args.float_layers)} float32",
                           f"ds2.int8.float-{'+'.join(args.float_layers)}.tflite", "int8", args.float_layers, True))
        if args.unrepaired:
            tflite.append(("TFLite int8, unrepaired", "ds2.int8.unrepaired.tflite", "int8", (), False))
        for name, file, mode, float_layers, repair in tflite:
            path = out_dir / file
            if not (args.reuse and path.is_file()):
                export_tflite(TFLiteConfig(args.model_dir, str(path), quantize=mode,
                                           calibration_manifest=args.calibration_manifest if mode == "int8" else None,
                                           calibration_utterances=args.calibration_utterances,
                                           float_layers=float_layers), repair=repair)
            variants[name] = (path.stat().st_size, tflite_acoustic_model(path, bundle, num_threads=1))
        # Round robin, one utterance through every variant in turn: a shared machine's load changes over minutes,
        # and every variant then sees the same.
        log_probs = {name: [] for name in variants}
        seconds = dict.fromkeys(variants, 0.0)
        audio = 0.0
        for name, (_, forward) in variants.items():
            compute_log_probs(bundle, utterances[:1], batch_size=1, progress=False, forward=forward)  # warm-up
        for u in utterances:
            for name, (_, forward) in variants.items():
                acoustic = compute_log_probs(bundle, [u], batch_size=1, progress=False, forward=forward)
                assert not acoustic.skipped, acoustic.skipped
                log_probs[name].append(acoustic.log_probs[0])
                seconds[name] += acoustic.model_seconds
            audio += acoustic.audio_seconds
            load.append(round(os.getloadavg()[0], 2))
        for name, (size, _) in variants.items():
            rows[name] = {"bytes": size, "rtf": seconds[name] / audio,
                          **score(bundle, references, log_probs[name], {"greedy": greedy, "lm": lm})}
            print(f"  {name}: {rows[name]}", file=sys.stderr, flush=True)
        shutil.rmtree(version, ignore_errors=True)
    print(f"{'model':<28} {'size':>9} {'RTF':>7} {'WER greedy':>11} {'CER greedy':>11} {'WER + LM':>9} {'CER + LM':>9}")
    for name, r in rows.items():
        size = "-" if r["bytes"] is None else f"{r['bytes'] / 1e6:.1f} MB"
        print(f"{name:<28} {size:>9} {r['rtf']:>7.4f} {100 * r['wer_greedy']:>10.1f}% {100 * r['cer_greedy']:>10.1f}% "
              f"{100 * r['wer_lm']:>8.1f}% {100 * r['cer_lm']:>8.1f}%")
    return {"rows": rows, "utterances": len(utterances), "alpha": alpha, "beta": beta, "beam_size": args.beam_size,
            "load_average_1min": [min(load), float(np.median(load)), max(load)], "seconds": round(time.time() - t0, 1)}


def stages(model, dim: int) -> list[tuple[str, object, list]]:
    """The float32 model's stages as `(name, tf.function, variables)`: the front end `(features, feature_lengths)
    -> (x, lengths)`, each RNN `(x, lengths) -> x`, the head `x -> log_probs`. Only the layers the demo's model has
    (conv front end, RNN layers, output layer)."""
    names = [layer.name for layer in model.layers if layer.weights]
    assert names[0] == "frontend" and names[-1] == "logits" and all(n.startswith("rnn") for n in names[1:-1]), names
    frontend, head = model.get_layer("frontend"), model.get_layer("logits")
    out = []

    @tf.function(input_signature=[tf.TensorSpec([1, None, dim], tf.float32, name="features"),
                                  tf.TensorSpec([1], tf.int32, name="feature_lengths")])
    def front(features, feature_lengths):
        x, lengths = frontend(features, feature_lengths)
        return {"x": x, "lengths": lengths}

    out.append(("frontend", front, frontend.variables))
    width = frontend.output_dim(dim)
    for name in names[1:-1]:
        layer = model.get_layer(name)

        def rnn(x, lengths, layer=layer):
            return {"x": layer(x, lengths)}

        spec = [tf.TensorSpec([1, None, width], tf.float32, name="x"), tf.TensorSpec([1], tf.int32, name="lengths")]
        out.append((name, tf.function(rnn, input_signature=spec), layer.variables))
        width = layer.units

    @tf.function(input_signature=[tf.TensorSpec([1, None, width], tf.float32, name="x")])
    def logits(x):
        return {"log_probs": tf.nn.log_softmax(head(x))}

    out.append(("logits", logits, head.variables))
    return out


def run_stage(runner, name, inputs):
    """One stage on `{features, feature_lengths}` or `{x, lengths}`; returns `{x, lengths}` or `{log_probs}`."""
    if name == "frontend":
        return {k: np.asarray(v) for k, v in runner(features=inputs["features"],
                                                     feature_lengths=inputs["feature_lengths"]).items()}
    if name == "logits":
        return {k: np.asarray(v) for k, v in runner(x=inputs["x"]).items()}
    return {"x": np.asarray(runner(x=inputs["x"], lengths=inputs["lengths"])["x"]), "lengths": inputs["lengths"]}


LAYER_CONFIGS = {  # name: {stage: mode}; stages not named run in float32 TFLite
    "all float32": {},
    "all int8": {"*": "int8"},
    "int8 front end only": {"frontend": "int8"},
    "int8 rnn0 only": {"rnn0": "int8"},
    "int8 rnn1 only": {"rnn1": "int8"},
    "int8 rnn2 only": {"rnn2": "int8"},
    "int8 output layer only": {"logits": "int8"},
    "int8 but the RNNs (float32)": {"frontend": "int8", "logits": "int8"},
    "int8 but the RNNs (dynamic)": {"frontend": "int8", "logits": "int8", "rnn*": "dynamic"},
    "all dynamic": {"*": "dynamic"},
}


def layers(args) -> dict:
    from deepspeech2.bundle import load_bundle
    from deepspeech2.data.manifest import load_utterance, read_manifest
    from deepspeech2.decode import Decoder, DecoderConfig
    from deepspeech2.features import featurize
    from deepspeech2.metrics import cer, wer
    from deepspeech2_export.tflite import calibration_features, convert_function, float32_model, interpreter

    t0 = time.time()
    bundle = load_bundle(args.model_dir)
    model = float32_model(bundle)
    parts = stages(model, bundle.feature_config.dim)
    # Each stage's inputs on the calibration audio, from the float32 Keras stages.
    calibration = {name: [] for name, _, _ in parts}
    for inputs in calibration_features(bundle, args.calibration_manifest, args.calibration_utterances):
        for name, function, _ in parts:
            calibration[name].append(inputs)
            inputs = {**inputs, **run_stage(function, name, inputs)}
    out_dir = Path(args.out_dir) / "stages"
    out_dir.mkdir(parents=True, exist_ok=True)
    runners = {}

    def runner(name, mode):
        if (name, mode) not in runners:
            function, variables = next((f, v) for n, f, v in parts if n == name)
            keys = [spec.name for spec in function.input_signature]
            data = convert_function(function, variables, mode, lambda: ({k: x[k] for k in keys}
                                                                        for x in calibration[name]))
            path = out_dir / f"{name}.{mode}.tflite"
            path.write_bytes(data)
            runners[name, mode] = interpreter(path, num_threads=1).get_signature_runner(SIGNATURE)
            print(f"  converted {name} {mode}: {len(data) / 1e6:.2f} MB", file=sys.stderr, flush=True)
        return runners[name, mode]

    def mode_of(config, name):
        return config.get(name, config.get("rnn*" if name.startswith("rnn") else "", config.get("*", "float")))

    utterances = read_manifest(args.manifest)
    references = [" ".join(u.text.split()) for u in utterances]
    features = []
    for u in utterances:
        wave = load_utterance(u, sample_rate=bundle.feature_config.sample_rate)
        x, n = featurize(wave[None], np.array([len(wave)], np.int32), bundle.feature_config, bundle.normalizer)
        features.append({"features": x.numpy(), "feature_lengths": n.numpy()})
    rows, float_argmax = {}, None
    with Decoder(DecoderConfig(kind="greedy"), bundle.vocab) as greedy:
        for config_name, config in LAYER_CONFIGS.items():
            log_probs = []
            for inputs in features:
                for name, _, _ in parts:
                    inputs = {**inputs, **run_stage(runner(name, mode_of(config, name)), name, inputs)}
                log_probs.append(inputs["log_probs"][0, :int(inputs["lengths"][0])])
            argmax = np.concatenate([lp.argmax(-1) for lp in log_probs])
            float_argmax = argmax if float_argmax is None else float_argmax
            hyps = greedy.decode_utterances(log_probs)
            rows[config_name] = {"wer_greedy": wer(references, hyps, spaced=bundle.vocab.spaced),
                                 "cer_greedy": cer(references, hyps, spaced=bundle.vocab.spaced),
                                 "argmax_agreement": float(np.mean(argmax == float_argmax))}
            print(f"  {config_name}: {rows[config_name]}", file=sys.stderr, flush=True)
    print(f"{'stages':<30} {'WER greedy':>11} {'CER greedy':>11} {'argmax = float':>15}")
    for name, r in rows.items():
        print(f"{name:<30} {100 * r['wer_greedy']:>10.1f}% {100 * r['cer_greedy']:>10.1f}% "
              f"{100 * r['argmax_agreement']:>14.1f}%")
    return {"layers": rows, "utterances": len(utterances), "seconds": round(time.time() - t0, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="Model bundle.")
    parser.add_argument("--manifest", required=True, help="Utterances to score (test; dev for --layers).")
    parser.add_argument("--calibration_manifest", required=True, help="int8 calibration audio (train or dev).")
    parser.add_argument("--calibration_utterances", type=int, default=100, help="A random sample of this many.")
    parser.add_argument("--out_dir", required=True, help="Where the .tflite files go.")
    parser.add_argument("--lm", help="KenLM model for the beam search (not --layers).")
    parser.add_argument("--tune", help="ds2-tune's JSON: alpha and beta (best_alpha, best_beta).")
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--beta", type=float, default=2.0)
    parser.add_argument("--beam_size", type=int, default=100)
    parser.add_argument("--layers", action="store_true", help="Which stage loses in int8 (greedy, no LM).")
    parser.add_argument("--reuse", action="store_true", help="Use the .tflite files already in --out_dir.")
    parser.add_argument("--float_layers", type=lambda text: tuple(filter(None, text.split(","))), default=(),
                        help="Add a row: int8 with these layers (comma-separated, e.g. rnn0) in float32.")
    parser.add_argument("--unrepaired", action="store_true",
                        help="Add a row: the converter's int8 file without the REVERSE_V2 repair.")
    args = parser.parse_args()
    if not args.layers and not args.lm:
        parser.error("--lm is needed for the table (or give --layers)")
    one_thread()
    print(json.dumps(layers(args) if args.layers else table(args)))


if __name__ == "__main__":
    main()
