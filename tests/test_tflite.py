"""TFLite export (export/tflite.py): the float, dynamic-range and int8 models of a tiny bundle against its Keras
model, the int8 file's REVERSE_V2 repair, layers kept in float32 inside an int8 file, a bundle trained in bfloat16,
ds2-export --quantize and ds2-infer --tflite end to end, and the errors."""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import jiwer
import keras
import numpy as np
import pytest
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

from deepspeech2.audio import load_audio
from deepspeech2.bundle import load_bundle, save_bundle
from deepspeech2.data.manifest import read_manifest
from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.features import FeatureConfig, featurize
from deepspeech2.inference import compute_log_probs, transcribe
from deepspeech2.model import build_model
from deepspeech2.model_config import TINY, ModelConfig
from deepspeech2.prepare.stats import compute_mean_std
from deepspeech2.vocab import Vocabulary
from deepspeech2_export.tflite import TFLiteConfig, export_tflite, read_metadata, tflite_acoustic_model

from factories import make_manifest

VENV_BIN = Path(sys.executable).parent
EN = Vocabulary.english()
MODES = ("float", "dynamic", "int8")


def writing_model(config, seed=0):
    """An untrained model that writes characters: its head scaled up and the blank pushed down, so the greedy
    transcripts have letters to compare (an untrained head's argmax is the blank almost everywhere)."""
    keras.utils.set_random_seed(seed)
    model = build_model(config)
    head = model.get_layer("logits")
    kernel, bias = head.get_weights()
    head.set_weights([kernel * 8.0, bias - 2.0 * (np.arange(config.vocab_size) == 0)])
    return model


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Eight generated clips: the dev manifest (statistics and int8 calibration) and four more to transcribe."""
    d = tmp_path_factory.mktemp("data")
    dev, _ = make_manifest(d, n=8, name="dev.jsonl", max_seconds=2.5)
    clips, _ = make_manifest(d / "clips", n=4, name="clips.jsonl", seed=1)
    return dev, clips


@pytest.fixture(scope="module")
def bundle_dir(data, tmp_path_factory):
    dev, _ = data
    stats = compute_mean_std([dev], FeatureConfig())
    return save_bundle(tmp_path_factory.mktemp("bundle") / "model", writing_model(TINY), TINY, EN, stats)


@pytest.fixture(scope="module")
def exported(bundle_dir, data, tmp_path_factory):
    """{mode: .tflite path} for the three modes, int8 calibrated on the dev clips."""
    out = tmp_path_factory.mktemp("tflite")
    return {mode: export_tflite(TFLiteConfig(str(bundle_dir), str(out / f"ds2.{mode}.tflite"), quantize=mode,
                                             calibration_manifest=str(data[0]) if mode == "int8" else None))
            for mode in MODES}


@pytest.fixture(scope="module")
def int8_variants(bundle_dir, data, tmp_path_factory):
    """The int8 model with rnn0 in float32 (`float_layers`), and the converter's int8 file before the repair."""
    out = tmp_path_factory.mktemp("int8")
    config = TFLiteConfig(str(bundle_dir), str(out / "rnn0.tflite"), quantize="int8", calibration_manifest=str(data[0]),
                          float_layers=("rnn0",))
    return {"rnn0 float": export_tflite(config),
            "unrepaired": export_tflite(dataclasses.replace(config, out_path=str(out / "unrepaired.tflite"),
                                                            float_layers=()), repair=False)}


def ops(path):
    """`(op name, subgraph name, output tensor names, output types, input types)` of every op in the file."""
    model = flatbuffer_utils.read_model(str(path))
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    out = []
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            tensors = [subgraph.tensors[i] for i in op.outputs]
            out.append((names[max(code.builtinCode, code.deprecatedBuiltinCode)], subgraph.name.decode(),
                        [t.name.decode() for t in tensors], [types[t.type] for t in tensors],
                        [types[subgraph.tensors[i].type] for i in op.inputs if i >= 0]))
    return out


def keras_log_probs(bundle, utterances):
    """Each utterance alone through featurize + the Keras model: the reference."""
    return compute_log_probs(bundle, utterances, batch_size=1, progress=False).log_probs


def greedy(bundle, log_probs):
    return Decoder(DecoderConfig(kind="greedy"), bundle.vocab).decode_utterances(log_probs)


def test_float_tflite_equals_the_keras_model(bundle_dir, data, exported):
    bundle = load_bundle(bundle_dir)
    utterances = read_manifest(data[1])
    reference = keras_log_probs(bundle, utterances)
    # A batch of four of different lengths: the runner featurizes them together and runs each on its own frames.
    got = compute_log_probs(bundle, utterances, batch_size=4, progress=False,
                            forward=tflite_acoustic_model(exported["float"], bundle)).log_probs
    for ours, theirs in zip(got, reference):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, atol=1e-4)
    texts = greedy(bundle, reference)
    assert greedy(bundle, got) == texts and all(texts)


# Bounds from this tiny model's figures with a margin: dynamic agrees on 0.99 of the steps, moves no probability
# by more than 0.012 and its transcripts are 4% CER from the float model's; int8 agrees on 0.96, moves up to 0.07,
# 8% CER (before the REVERSE_V2 repair, `requantize_copies`: 0.69, 0.43 and 48%).
@pytest.mark.parametrize("mode, min_agreement, max_shift, max_cer", [("dynamic", 0.95, 0.05, 0.1),
                                                                     ("int8", 0.9, 0.15, 0.15)])
def test_quantized_models_stay_close_to_the_keras_model(bundle_dir, data, exported, mode, min_agreement, max_shift,
                                                        max_cer):
    """Per-step argmax agreement, the largest change of a probability, and the greedy transcripts' character error
    rate against the float Keras model's."""
    bundle = load_bundle(bundle_dir)
    utterances = read_manifest(data[0]) + read_manifest(data[1])
    reference = keras_log_probs(bundle, utterances)
    got = compute_log_probs(bundle, utterances, progress=False,
                            forward=tflite_acoustic_model(exported[mode], bundle)).log_probs
    agreement = np.mean(np.concatenate([a.argmax(-1) == b.argmax(-1) for a, b in zip(got, reference)]))
    assert agreement >= min_agreement
    assert max(np.abs(np.exp(a) - np.exp(b)).max() for a, b in zip(got, reference)) < max_shift
    assert jiwer.cer(greedy(bundle, reference), greedy(bundle, got)) <= max_cer


def test_int8_reversals_are_requantized(bundle_dir, data, exported, int8_variants):
    """The converter gives REVERSE_V2 (the backward direction's time flip) an output scale of its own, which TFLite's
    kernel does not apply: the repaired file rescales with a QUANTIZE op after it, and is the closer to the float
    model for it."""
    def reversals(path):
        model = flatbuffer_utils.read_model(str(path))
        out = []
        for subgraph in model.subgraphs:
            for op in subgraph.operators:
                code = model.operatorCodes[op.opcodeIndex]
                if max(code.builtinCode, code.deprecatedBuiltinCode) == schema.BuiltinOperator.REVERSE_V2:
                    source, result = subgraph.tensors[op.inputs[0]], subgraph.tensors[op.outputs[0]]
                    if result.type == schema.TensorType.INT8:
                        out.append((list(source.quantization.scale), list(source.quantization.zeroPoint)) ==
                                   (list(result.quantization.scale), list(result.quantization.zeroPoint)))
        return out

    # Three flips per bidirectional layer: its inputs and its mask (those two mis-scaled), and its outputs back.
    assert reversals(exported["int8"]) == [True] * 6
    assert reversals(int8_variants["unrepaired"]).count(False) == 4
    requantized = read_metadata(exported["int8"])["requantized"]
    assert len(requantized) == 4 and all("ReverseV2" in name for name in requantized)
    assert read_metadata(int8_variants["unrepaired"])["requantized"] == []
    requantize = [op for op in ops(exported["int8"]) if op[0] == "QUANTIZE" and op[4] == ["INT8"]]
    assert sorted(name for op in requantize for name in op[2]) == sorted(requantized)
    bundle = load_bundle(bundle_dir)
    utterances = read_manifest(data[0]) + read_manifest(data[1])
    reference = keras_log_probs(bundle, utterances)
    errors = {name: np.mean([np.abs(np.exp(a) - np.exp(b)).mean() for a, b in zip(
        compute_log_probs(bundle, utterances, progress=False, forward=tflite_acoustic_model(path, bundle)).log_probs,
        reference)]) for name, path in (("repaired", exported["int8"]), ("unrepaired", int8_variants["unrepaired"]))}
    assert errors["repaired"] < 0.5 * errors["unrepaired"], errors


def test_float_layers_stay_float_inside_the_int8_file(bundle_dir, data, exported, int8_variants):
    """`float_layers=("rnn0",)`: every op in rnn0's name scope (its time loops' too) computes in float32, the other
    layers' matmuls in int8, and the log-probabilities are closer to the float model's than full int8's."""
    path = int8_variants["rnn0 float"]
    info = read_metadata(path)
    assert info["quantize"] == "int8" and info["float_layers"] == ["rnn0"]
    assert info["requantized"] and not any("rnn0" in name for name in info["requantized"])

    def layer(op):
        return next((m.group(1) for m in map(re.compile(r"(?:^|/)(frontend|rnn\d|logits)(?:_\d+)?/").search, op[2])
                     if m), None)

    listed = ops(path)
    rnn0 = [op for op in listed if layer(op) == "rnn0"]
    assert len(rnn0) > 20 and any(op[1] != "main" for op in rnn0)  # the loop bodies' ops are named for the layer
    # No int8 in or out, but for the quantize op at the layer's edge that hands its output to the int8 rnn1.
    assert not [op for op in rnn0 if op[0] not in ("QUANTIZE", "DEQUANTIZE") and "INT8" in op[3] + op[4]]
    matmuls = {name: [op for op in listed if layer(op) == name and op[0] in ("FULLY_CONNECTED", "CONV_2D")]
               for name in ("frontend", "rnn0", "rnn1", "logits")}
    assert all(op[3] == ["FLOAT32"] and set(op[4]) == {"FLOAT32"} for op in matmuls["rnn0"]) and matmuls["rnn0"]
    for name in ("frontend", "rnn1", "logits"):
        assert matmuls[name] and all(op[3] == ["INT8"] and op[4][:2] == ["INT8", "INT8"] for op in matmuls[name])
    assert path.stat().st_size > exported["int8"].stat().st_size  # rnn0's weights stay float32

    bundle = load_bundle(bundle_dir)
    utterances = read_manifest(data[0]) + read_manifest(data[1])
    reference = keras_log_probs(bundle, utterances)
    errors = {name: np.mean([np.abs(a - b).mean() for a, b in zip(
        compute_log_probs(bundle, utterances, progress=False, forward=tflite_acoustic_model(p, bundle)).log_probs,
        reference)]) for name, p in (("int8", exported["int8"]), ("rnn0 float", path))}
    assert errors["rnn0 float"] < errors["int8"], errors


def test_float_layers_must_be_layers_of_the_model(bundle_dir, data, tmp_path):
    config = TFLiteConfig(str(bundle_dir), str(tmp_path / "x.tflite"), quantize="int8",
                          calibration_manifest=str(data[0]), float_layers=("rnn0", "rnn7"))
    with pytest.raises(ValueError, match=r"^`float_layers` 'rnn7': not a layer of the model with weights; its "
                                         r"layers: frontend, rnn0, rnn1, logits$"):
        export_tflite(config)
    assert not (tmp_path / "x.tflite").exists()


def test_quantized_files_are_smaller_and_record_how_they_were_made(bundle_dir, data, exported):
    sizes = {mode: path.stat().st_size for mode, path in exported.items()}
    # TINY's 30 k parameters are a small part of its file (the graph: three while loops per layer), so the
    # 4x of int8 weights shows as less here; the demo's model goes from 17.2 to 4.6 MB.
    assert sizes["dynamic"] < 0.75 * sizes["float"] and sizes["int8"] < 0.75 * sizes["float"]
    info = {mode: read_metadata(path) for mode, path in exported.items()}
    assert [info[m]["quantize"] for m in MODES] == list(MODES)
    assert info["float"]["calibration"] is None
    assert info["int8"]["calibration"] == {"manifest": str(data[0]), "utterances": 100, "seed": 0}
    assert [info[m]["float_layers"] for m in MODES] == [[], [], []]
    assert info["float"]["requantized"] == info["dynamic"]["requantized"] == [] and info["int8"]["requantized"]
    assert info["int8"]["vocab"] == EN.tokens() and ModelConfig.from_dict(info["int8"]["model_config"]) == TINY


def test_a_bfloat16_bundle_converts_to_float32(data, tmp_path):
    """A bundle trained under mixed_bfloat16 (the demo's, on CPUs with AVX512-BF16) computes in bf16, which TFLite
    has no kernels for: the export runs its weights in float32."""
    dev, clips = data
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        bf16 = writing_model(TINY, seed=1)
    finally:
        keras.config.set_dtype_policy(previous)
    path = save_bundle(tmp_path / "model", bf16, TINY, EN, compute_mean_std([dev], FeatureConfig()))
    tflite = export_tflite(TFLiteConfig(str(path), str(tmp_path / "bf16.tflite")))
    bundle = load_bundle(path)
    float32 = build_model(TINY)
    float32.set_weights(bundle.model.get_weights())
    utterances = read_manifest(clips)
    got = compute_log_probs(bundle, utterances, progress=False, forward=tflite_acoustic_model(tflite, bundle))
    for ours, u in zip(got.log_probs, utterances):
        wave = load_audio(u.audio_filepath)
        features, frames = featurize(wave[None], [len(wave)], bundle.feature_config, bundle.normalizer)
        out = float32({"features": features, "feature_lengths": frames}, training=False)
        reference = keras.ops.log_softmax(out["logits"])[0, :int(out["output_lengths"][0])]
        np.testing.assert_allclose(ours, np.asarray(reference), atol=1e-4)


def test_config_errors():
    with pytest.raises(ValueError, match=r"`quantize` must be one of .*'int4'"):
        TFLiteConfig("m", "x.tflite", quantize="int4")
    with pytest.raises(ValueError, match="`calibration_manifest`"):
        TFLiteConfig("m", "x.tflite", quantize="int8")
    with pytest.raises(ValueError, match="looks like a test split"):
        TFLiteConfig("m", "x.tflite", quantize="int8", calibration_manifest="data/tiny/test.clean.jsonl")
    with pytest.raises(ValueError, match="for `quantize` 'int8' only"):
        TFLiteConfig("m", "x.tflite", quantize="dynamic", calibration_manifest="dev.jsonl")
    with pytest.raises(ValueError, match=r"`out_path` must be a \.tflite file, got 'x.onnx'"):
        TFLiteConfig("m", "x.onnx")
    with pytest.raises(ValueError, match=r"`calibration_utterances` must be an int >= 1, got 0"):
        TFLiteConfig("m", "x.tflite", calibration_utterances=0)
    with pytest.raises(ValueError, match=r"`float_layers` is for `quantize` 'int8' only, got quantize='dynamic'"):
        TFLiteConfig("m", "x.tflite", quantize="dynamic", float_layers=("rnn0",))
    for bad in ("rnn0", ("rnn0", "rnn0"), ("",), (None,)):
        with pytest.raises(ValueError, match=r"`float_layers` must be a list of distinct layer names"):
            TFLiteConfig("m", "x.tflite", quantize="int8", calibration_manifest="dev.jsonl", float_layers=bad)
    assert TFLiteConfig("m", "x.tflite", quantize="int8", calibration_manifest="dev.jsonl",
                        float_layers=["rnn0", "rnn1"]).float_layers == ("rnn0", "rnn1")


def test_runner_refuses_other_files(bundle_dir, data, exported, tmp_path):
    bundle = load_bundle(bundle_dir)
    with pytest.raises(FileNotFoundError, match="nope.tflite"):
        tflite_acoustic_model(tmp_path / "nope.tflite", bundle)
    (tmp_path / "junk.tflite").write_bytes(b"not a flatbuffer at all")
    with pytest.raises(ValueError, match="is not a TFLite model"):
        tflite_acoustic_model(tmp_path / "junk.tflite", bundle)
    other = save_bundle(tmp_path / "other", writing_model(dataclasses.replace(TINY, rnn_units=8)),
                        dataclasses.replace(TINY, rnn_units=8), EN, bundle.normalizer)
    with pytest.raises(ValueError, match="another model_config than the bundle"):
        tflite_acoustic_model(exported["float"], load_bundle(other))


def _cli(*argv):
    """A ds2-* command as a user runs it: without the test session's TF_CPP_MIN_LOG_LEVEL."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "DS2_TF_LOGS")}
    return subprocess.run([str(VENV_BIN / argv[0]), *map(str, argv[1:])], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.mark.slow  # the CLIs around what the tests above check in-process
def test_ds2_export_quantize_and_ds2_infer_tflite(bundle_dir, data, tmp_path, hello_world_lm):
    dev, clips = data
    out = _cli("ds2-export", "--model_dir", bundle_dir, "--export_dir", tmp_path, "--model_name", "en",
               "--quantize", "dynamic")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == str(tmp_path / "en.dynamic.tflite") and out.stderr == ""
    assert read_metadata(tmp_path / "en.dynamic.tflite")["quantize"] == "dynamic"

    # The LM beam search through ds2-infer --tflite: the transcripts of the library run with the same model.
    infer = _cli("ds2-infer", "--model_dir", bundle_dir, "--tflite", tmp_path / "en.dynamic.tflite", "--manifest",
                 clips, "--decoder", "beam", "--lm", hello_world_lm, "--alpha", "0.5", "--beta", "1",
                 "--beam_size", "8")
    assert infer.returncode == 0, infer.stderr[-2000:]
    # No interpreter deprecation warning, no "INFO: Created TensorFlow Lite XNNPACK delegate" (KenLM's own lines
    # about reading an ARPA file stay).
    assert not re.search(r"XNNPACK|deprecated|TensorFlow Lite|[IWE]0000 ", infer.stderr), infer.stderr
    bundle = load_bundle(bundle_dir)
    config = DecoderConfig(kind="beam", lm_path=str(hello_world_lm), alpha=0.5, beta=1.0, beam_size=8)
    with Decoder(config, bundle.vocab) as decoder:
        expected = transcribe(bundle, read_manifest(clips), decoder,
                              forward=tflite_acoustic_model(tmp_path / "en.dynamic.tflite", bundle))
    printed = [line.split("\t", 1)[1] for line in infer.stdout.splitlines() if "\t" in line]
    assert printed == [t.text for t in expected] and any(printed)

    bad = _cli("ds2-export", "--model_dir", bundle_dir, "--export_dir", tmp_path, "--quantize", "int4")
    assert bad.returncode != 0
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("ds2-export: error: ") and "int4" in line
    bad = _cli("ds2-export", "--model_dir", bundle_dir, "--export_dir", tmp_path, "--quantize", "int8",
               "--calibration_manifest", dev, "--float_layers", "rnn0,gru0")
    assert bad.returncode != 0 and not (tmp_path / "ds2.int8.tflite").exists()
    [line] = bad.stderr.strip().splitlines()
    assert line == ("ds2-export: error: `float_layers` 'gru0': not a layer of the model with weights; its layers: "
                    "frontend, rnn0, rnn1, logits")
    missing = _cli("ds2-infer", "--model_dir", bundle_dir, "--tflite", tmp_path / "nope.tflite", clips)
    assert missing.returncode != 0
    [line] = missing.stderr.strip().splitlines()
    assert line.startswith("ds2-infer: error: ") and "nope.tflite" in line
