"""A model bundle as a TensorFlow Lite model: float32, dynamic-range or full-integer (int8) quantized.

    ds2-export --model_dir runs/tiny/model --export_dir runs/tiny/export --quantize dynamic
        -> runs/tiny/export/ds2.dynamic.tflite
    ds2-export --model_dir runs/tiny/model --export_dir runs/tiny/export --quantize int8 \
        --calibration_manifest data/tiny/train.clean.jsonl      -> runs/tiny/export/ds2.int8.tflite
    ds2-infer --model_dir runs/tiny/model --tflite runs/tiny/export/ds2.dynamic.tflite --manifest ...

What is inside, and why (found with TF 2.21's converter on the demo's model; figures in docs/serving.md, "A small
model", and examples/tiny/RESULTS.md#tflite):

- The acoustic model and the log-softmax, as `serving_default(features (1, frames, dim) float32,
  feature_lengths (1,) int32) -> log_probs (1, steps, vocab) float32, output_lengths (1,) int32`. The features
  stay outside: TFLite's RFFT2D kernel takes power-of-two lengths only (`rfft2d.cc`: IsPowerOfTwo), and the
  model's window is 320 samples (20 ms, DS2 §3), so a graph holding `featurize` converts but fails when it
  is run. Padding the FFT to 512 would change the features the model was trained on, and a DFT written as a
  matmul would be a second copy of the STFT; `tflite_acoustic_model` runs `deepspeech2.features.featurize`
  (the bundle's features and normalizer) before the interpreter instead.
- One utterance per call (batch 1). The RNN time loops (`keras.ops.scan`) become TensorList ops, which the
  converter lowers to builtin WHILE loops only when each element's shape is static; with a free batch axis it
  asks for SELECT_TF_OPS (the Flex delegate: TensorFlow kernels inside TFLite). At batch 1 every op is a
  TFLite builtin; no unrolling or fixed maximum length is needed, the time axis stays free. The lowered loop
  carries each sequence as a whole tensor that every step slices and concatenates again, so its cost grows with
  the square of the length: on par with TensorFlow up to ~10 s of audio, 6x slower at 60 s.
- The model is rebuilt in float32 first: a bundle trained under mixed_bfloat16 computes in bf16, which TFLite
  has no kernels for. The float32 TFLite model matches the float32 Keras model to ~1e-5 in the log-probs.
- "dynamic": weights int8, activations float, quantized on the fly per op (no calibration data).
  "int8": every op in int8 (`TFLITE_BUILTINS_INT8`: the conversion fails rather than leave an op in float),
  activation ranges calibrated on `calibration_utterances` utterances of `calibration_manifest`: training or
  dev audio, never the test split. The inputs and outputs stay float32 (a quantize and a dequantize op at the
  edges), so one runner serves every mode.
- The int8 file is repaired after conversion (`requantize_copies`). TF 2.21's quantizer gives each REVERSE_V2
  (the backward GRU direction's time flip of its inputs and of the mask) an output scale and zero point of its
  own, while TFLite's kernel copies the int8 values as they are: the demo's model read its backward inputs
  shifted by +0.6 and the mask as 1.58 instead of 1 (21.0% WER with the LM on test against 17.6% for float;
  examples/tiny/RESULTS.md#tflite). Each such op writes in its input's scale and a QUANTIZE op (int8 -> int8)
  rescales to the output's: still every op in int8, and 17.8% (0.1 points from float).
- `float_layers` (int8 only): the named Keras layers stay float32 inside the int8 file (the converter's selective
  quantization, `tf.lite.experimental.QuantizationDebugger` with `denylisted_nodes`: every op the layer's name
  scope holds, those of its time loops included; a dequantize and a quantize op at its edges). The file then
  needs TFLite's float kernels too (TFLITE_BUILTINS beside TFLITE_BUILTINS_INT8), and the layer's weights stay
  float32. A lever for a layer that loses in int8; the demo's model, repaired, needs none
  (examples/tiny/RESULTS.md#tflite).

The export records how it was made in the file itself (TFLite metadata "deepspeech2", JSON: the quantization,
the calibration data, the float layers and the requantized tensors, the model, feature config and vocabulary), so
`tflite_acoustic_model` refuses a bundle it wasn't exported from.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import functools
import json
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

from deepspeech2.bundle import Bundle, load_bundle
from deepspeech2.data.manifest import load_utterance, read_manifest, sample_utterances
from deepspeech2.features import featurize
from deepspeech2.fileio import atomic_write
from deepspeech2.geometry import output_length
from deepspeech2.inference import MAX_SECONDS
from deepspeech2.model import build_model
from deepspeech2_export import FEATURE_LENGTHS, FEATURES, LOG_PROBS, OUTPUT_LENGTHS, SERVING_DEFAULT, TFLITE_METADATA

logger = logging.getLogger(__name__)

QUANTIZE_MODES = ("float", "dynamic", "int8")
# The TFLite guide's 100-500; 300 did no better on the demo's model (examples/tiny/RESULTS.md#tflite).
CALIBRATION_UTTERANCES = 100


@dataclass(frozen=True)
class TFLiteConfig:
    """Which bundle to convert, how, and where to."""

    model_dir: str  # the model bundle (a ds2-train workdir's model/)
    out_path: str  # the .tflite file to write (replaced atomically)
    quantize: str = "float"  # "float" (none), "dynamic" (int8 weights) or "int8" (full-integer, calibrated)
    calibration_manifest: str | None = None  # int8: the audio that sets the activation ranges (train or dev)
    calibration_utterances: int = CALIBRATION_UTTERANCES  # int8: a seeded random sample of this many
    seed: int = 0  # the sample's seed
    float_layers: tuple[str, ...] = ()  # int8: names of the model's layers kept in float32 inside the int8 file

    def __post_init__(self):
        if self.quantize not in QUANTIZE_MODES:
            raise ValueError(f"`quantize` must be one of {QUANTIZE_MODES}, got {self.quantize!r}")
        if not str(self.out_path).endswith(".tflite"):
            raise ValueError(f"`out_path` must be a .tflite file, got {self.out_path!r}")
        if isinstance(self.calibration_utterances, bool) or not isinstance(self.calibration_utterances, int) \
                or self.calibration_utterances < 1:
            raise ValueError(f"`calibration_utterances` must be an int >= 1, got {self.calibration_utterances!r}")
        if self.quantize == "int8":
            if not self.calibration_manifest:
                raise ValueError("`quantize` 'int8' calibrates its activation ranges on real audio: give "
                                 "`calibration_manifest` (a training or dev manifest)")
            if Path(self.calibration_manifest).name.lower().startswith("test"):
                raise ValueError(f"`calibration_manifest` {self.calibration_manifest!r} looks like a test split; "
                                 "calibrate on training or dev audio so the test figures stay unseen")
        elif self.calibration_manifest:
            raise ValueError(f"`calibration_manifest` is for `quantize` 'int8' only, got quantize={self.quantize!r}")
        layers = self.float_layers
        if isinstance(layers, str) or not isinstance(layers, (list, tuple)) \
                or not all(isinstance(name, str) and name for name in layers) or len(set(layers)) != len(layers):
            raise ValueError(f"`float_layers` must be a list of distinct layer names, got {layers!r}")
        if layers and self.quantize != "int8":
            raise ValueError(f"`float_layers` is for `quantize` 'int8' only, got quantize={self.quantize!r}")
        object.__setattr__(self, "float_layers", tuple(layers))


def float32_model(bundle: Bundle) -> keras.Model:
    """The bundle's model rebuilt under the float32 policy, with its weights (stored in float32 also under a
    mixed policy): TFLite has no bfloat16 kernels."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")
    try:
        model = build_model(bundle.model_config, name=bundle.model.name)
    finally:
        keras.config.set_dtype_policy(previous)
    model.set_weights(bundle.model.get_weights())
    return model


def calibration_features(bundle: Bundle, manifest: str | os.PathLike, num_utterances: int,
                         seed: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """The int8 converter's representative dataset: `{features: (1, frames, dim), feature_lengths: (1,)}` per
    utterance of a seeded sample of `manifest`, through `featurize` with the bundle's normalizer. Unreadable or
    over-long audio is skipped with a warning."""
    rate = bundle.feature_config.sample_rate
    for u in sample_utterances(read_manifest(manifest), num_utterances, seed):
        try:
            wave = load_utterance(u, sample_rate=rate, max_seconds=MAX_SECONDS)
        except (ValueError, FileNotFoundError) as e:
            logger.warning("calibration: skipping %s: %s", u.audio_filepath, e)
            continue
        features, frames = featurize(wave[None], np.array([len(wave)], np.int32), bundle.feature_config,
                                     bundle.normalizer)
        if int(output_length(bundle.model_config, int(frames[0]))) >= 1:
            yield {FEATURES: features.numpy(), FEATURE_LENGTHS: frames.numpy()}


def convert(bundle: Bundle, quantize: str = "float", calibration=None, float_layers=(), repair: bool = True) -> bytes:
    """The bundle's model and log-softmax as a TFLite flatbuffer (without the metadata `export_tflite` adds).

    Args:
        bundle: a loaded model bundle.
        quantize: one of `QUANTIZE_MODES`.
        calibration: for "int8", a callable returning an iterator of `{features, feature_lengths}` (batch 1).
        float_layers: for "int8", names of the model's layers (`layer_names`) to keep in float32.
        repair: for "int8", `requantize_copies` the file (False: the converter's file as it is).

    Returns:
        The .tflite file's bytes: `serving_default(features, feature_lengths) -> {log_probs, output_lengths}`.

    Raises:
        ValueError: a name in `float_layers` is not one of `layer_names(bundle.model)`.
    """
    model = float32_model(bundle)
    keep_float = layer_scopes(model, float_layers)

    @tf.function(input_signature=[tf.TensorSpec([1, None, bundle.feature_config.dim], tf.float32, name=FEATURES),
                                  tf.TensorSpec([1], tf.int32, name=FEATURE_LENGTHS)])
    def serving_default(features, feature_lengths):
        outputs = model({"features": features, "feature_lengths": feature_lengths}, training=False)
        return {LOG_PROBS: tf.nn.log_softmax(outputs["logits"]), OUTPUT_LENGTHS: outputs["output_lengths"]}

    return convert_function(serving_default, model.variables, quantize, calibration, keep_float, repair)


def layer_names(model: keras.Model) -> list[str]:
    """The names `float_layers` may give: the model's layers that hold weights, in order."""
    return [layer.name for layer in model.layers if layer.weights]


def layer_scopes(model: keras.Model, names) -> dict[str, Callable[[str], bool]] | None:
    """`{layer name: predicate}`, each true of the TFLite tensor names made inside that layer (None for no names):
    names with the layer's name scope, `.../<name>/...` or, as Keras 3 numbers a scope it enters again,
    `.../<name>_1/...` (unless `<name>_1` is another layer's name).

    Raises:
        ValueError: a name that is not one of `layer_names(model)`, naming those.
    """
    if not names:
        return None
    valid = layer_names(model)
    unknown = [name for name in names if name not in valid]
    if unknown:
        raise ValueError(f"`float_layers` {', '.join(map(repr, unknown))}: not a layer of the model with weights; "
                         f"its layers: {', '.join(valid)}")
    every = {layer.name for layer in model.layers}
    return {name: functools.partial(_in_scope, layer=name, others=frozenset(every - {name})) for name in names}


def _in_scope(tensor_name: str, layer: str, others: frozenset) -> bool:
    numbered = re.compile(re.escape(layer) + r"_\d+")
    return any(scope == layer or (scope not in others and numbered.fullmatch(scope))
               for part in tensor_name.split(";") for scope in part.split("/")[:-1])


def _denylist(flatbuffer: bytes, scopes: dict[str, Callable[[str], bool]]) -> tuple[bytes, dict[str, list[str]]]:
    """The calibrated model and `{layer: [node name]}` for `QuantizationDebugOptions(denylisted_nodes=...)`: the
    name of each op's output, in every subgraph, that a layer's scope holds.

    The quantizer matches an op by its MLIR location, which for an op of one output is that tensor's name and for
    one of several (SPLIT, SPLIT_V) a fused location no name matches: such an op would stay int8 inside a float
    layer, with a quantize and a dequantize op around it. Its outputs are given its first output's name, which
    fuses into that one name (the file's tensor names are labels only: the signature holds tensor indices)."""
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(flatbuffer))
    found = {layer: [] for layer in scopes}
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            outputs = [subgraph.tensors[i] for i in op.outputs if i >= 0]
            if not outputs:
                continue
            name = outputs[0].name.decode()
            for layer, scope in scopes.items():
                if scope(name):
                    found[layer].append(name)
                    for tensor in outputs[1:]:
                        tensor.name = outputs[0].name
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model)), found


def convert_function(function, variables, quantize: str = "float", calibration=None, float_scopes=None,
                     repair: bool = True) -> bytes:
    """A tf.function with an input signature (batch 1: see the module's docstring) as a TFLite flatbuffer whose
    signature `serving_default` has the function's input and output names.

    Args:
        function: the `tf.function`.
        variables: the Keras variables it reads (frozen into the file as constants).
        quantize: one of `QUANTIZE_MODES`.
        calibration: for "int8", a callable returning an iterator of `{input name: array}`.
        float_scopes: for "int8", `{name: predicate}` (`layer_scopes`): the ops whose output tensor name a
            predicate is true of stay in float32 (selective quantization).
        repair: for "int8", `requantize_copies` the file.

    Raises:
        ValueError: an unknown `quantize`, "int8" without `calibration`, `float_scopes` without "int8", or a scope
            that matches no op.
    """
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"`quantize` must be one of {QUANTIZE_MODES}, got {quantize!r}")
    if quantize == "int8" and calibration is None:
        raise ValueError("`quantize` 'int8' needs `calibration` (the representative dataset)")
    if float_scopes and quantize != "int8":
        raise ValueError(f"float layers are for `quantize` 'int8' only, got {quantize!r}")
    module = tf.Module()
    module.model_variables = [v.value for v in variables]
    # Through a SavedModel: the converter freezes its variables into constants and keeps the signature's names
    # (from_concrete_functions gives either no signature or, given the module, no weights).
    with tempfile.TemporaryDirectory() as folder:
        tf.saved_model.save(module, folder, signatures={SERVING_DEFAULT: function.get_concrete_function()})
        converter = tf.lite.TFLiteConverter.from_saved_model(folder)
        if quantize != "float":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "int8":
            converter.representative_dataset = calibration
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        with _no_interpreter_deprecation():  # the int8 calibrator runs the model in a tf.lite.Interpreter
            if not float_scopes:
                flatbuffer = converter.convert()
            else:
                flatbuffer = _selectively_quantized(converter, float_scopes)
    if quantize == "int8" and repair:
        flatbuffer, fixed = requantize_copies(flatbuffer)
        logger.info("int8: requantized the outputs of %d ops that copy int8 values: %s", len(fixed), fixed)
    return flatbuffer


def _selectively_quantized(converter, float_scopes) -> bytes:
    """The int8 model with the ops `float_scopes` holds left in float32: the TF guide's selective quantization
    (`QuantizationDebugger(converter=..., debug_options=QuantizationDebugOptions(denylisted_nodes=...))`). The
    node names are those of the calibrated model, so the debugger calibrates first and gets the list after."""
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.lite.OpsSet.TFLITE_BUILTINS]
    debugger = tf.lite.experimental.QuantizationDebugger(converter=converter)  # calibrates: calibrated_model
    calibrated, nodes = _denylist(debugger.calibrated_model, float_scopes)
    missing = [layer for layer, names in nodes.items() if not names]
    if missing:
        raise ValueError(f"`float_layers` {', '.join(map(repr, missing))}: no op of the converted model is in that "
                         "layer's name scope")
    debugger.calibrated_model = calibrated  # the same model and ranges, its multi-output ops named (`_denylist`)
    debugger.options = tf.lite.experimental.QuantizationDebugOptions(  # quantizes `calibrated_model` again
        denylisted_nodes=sorted({name for names in nodes.values() for name in names}))
    return debugger.get_nondebug_quantized_model()


# TFLite kernels that move int8 values without rescaling them (their output must have their input's scale and zero
# point), with the index of their data input.
_COPY_OPS = {schema.BuiltinOperator.REVERSE_V2: 0, schema.BuiltinOperator.TRANSPOSE: 0,
             schema.BuiltinOperator.RESHAPE: 0, schema.BuiltinOperator.SQUEEZE: 0,
             schema.BuiltinOperator.EXPAND_DIMS: 0, schema.BuiltinOperator.GATHER: 0, schema.BuiltinOperator.SLICE: 0,
             schema.BuiltinOperator.STRIDED_SLICE: 0, schema.BuiltinOperator.SPLIT: 1,
             schema.BuiltinOperator.SPLIT_V: 0, schema.BuiltinOperator.TILE: 0}


def _quantization(tensor) -> tuple | None:
    q = tensor.quantization
    if q is None or q.scale is None:
        return None
    return tuple(np.ravel(q.scale).tolist()), tuple(np.ravel(q.zeroPoint).tolist())


def requantize_copies(flatbuffer: bytes) -> tuple[bytes, list[str]]:
    """`flatbuffer` with every int8 op of `_COPY_OPS` whose output has another scale or zero point than its input
    writing in its input's instead, followed by a QUANTIZE op (int8 -> int8) that rescales into the output's.

    TF 2.21's quantizer does that to REVERSE_V2 (it constrains the other copy ops to one scale), and TFLite's
    kernel copies the values, so the output is read with the wrong scale: the demo's backward GRU inputs came out
    shifted by +0.6 and the mask read 1.58 instead of 1. Ops in float or with equal parameters are left alone.

    Returns:
        The repaired flatbuffer and the names of the tensors now computed by a requantization.
    """
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(flatbuffer))
    codes = model.operatorCodes
    builtin = [max(code.builtinCode, code.deprecatedBuiltinCode) for code in codes]
    quantize = builtin.index(schema.BuiltinOperator.QUANTIZE) if schema.BuiltinOperator.QUANTIZE in builtin else None
    fixed = []
    for subgraph in model.subgraphs:
        operators = []
        for op in subgraph.operators:
            operators.append(op)
            data = _COPY_OPS.get(builtin[op.opcodeIndex])
            if data is None:
                continue
            source = subgraph.tensors[op.inputs[data]]
            for k, index in enumerate(op.outputs):
                output = subgraph.tensors[index]
                if source.type != schema.TensorType.INT8 or output.type != schema.TensorType.INT8 \
                        or _quantization(source) == _quantization(output):
                    continue
                if quantize is None:  # QUANTIZE version 1: per-tensor int8 -> int8 (op_version.cc)
                    code = schema.OperatorCodeT()
                    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.QUANTIZE
                    code.version = 1
                    codes.append(code)
                    quantize = len(codes) - 1
                unscaled = copy.deepcopy(output)
                unscaled.name = output.name + b"/unscaled"
                unscaled.quantization = copy.deepcopy(source.quantization)
                model.buffers.append(schema.BufferT())
                unscaled.buffer = len(model.buffers) - 1
                subgraph.tensors.append(unscaled)
                op.outputs[k] = len(subgraph.tensors) - 1
                requantize = schema.OperatorT()
                requantize.opcodeIndex = quantize
                requantize.inputs, requantize.outputs = [len(subgraph.tensors) - 1], [index]
                requantize.builtinOptionsType = schema.BuiltinOptions.QuantizeOptions
                requantize.builtinOptions = schema.QuantizeOptionsT()
                operators.append(requantize)
                fixed.append(output.name.decode())
        subgraph.operators = operators
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model)), fixed


def with_metadata(flatbuffer: bytes, info: dict) -> bytes:
    """`flatbuffer` with `info` stored as JSON under the metadata name `TFLITE_METADATA`."""
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(flatbuffer))
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(json.dumps(info, ensure_ascii=False).encode(), np.uint8)
    model.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name, entry.buffer = TFLITE_METADATA, len(model.buffers) - 1
    model.metadata = [m for m in (model.metadata or []) if m.name != TFLITE_METADATA.encode()] + [entry]
    return flatbuffer_utils.convert_object_to_bytearray(model)


def read_metadata(path: str | os.PathLike) -> dict:
    """The `TFLITE_METADATA` JSON of a .tflite file written by `export_tflite`.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a TFLite model, or one without this package's metadata.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"`tflite` {path} does not exist; write one with ds2-export --quantize")
    data = path.read_bytes()
    if data[4:8] != b"TFL3":
        raise ValueError(f"`tflite` {path} is not a TFLite model (no TFL3 file identifier)")
    model = schema.Model.GetRootAs(data, 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() == TFLITE_METADATA.encode():
            return json.loads(model.Buffers(entry.Buffer()).DataAsNumpy().tobytes().decode())
    raise ValueError(f"`tflite` {path} has no {TFLITE_METADATA!r} metadata: it was not written by ds2-export")


def export_tflite(config: TFLiteConfig, repair: bool = True) -> Path:
    """Convert a model bundle to a TFLite model file, with how it was made stored inside (`read_metadata`).

    Args:
        config: what to convert, how, and where to.
        repair: for int8, `requantize_copies` the file (False writes the converter's file as it is: the
            comparison in bench/tflite.py).

    Returns:
        `config.out_path`.

    Raises:
        FileNotFoundError: the bundle or the calibration manifest is missing.
        ValueError: a bad bundle, a `float_layers` name the model lacks, or no usable calibration audio.
    """
    bundle = load_bundle(config.model_dir)
    layer_scopes(bundle.model, config.float_layers)  # the names, before the calibration
    calibration = None
    if config.quantize == "int8":
        manifest = config.calibration_manifest
        if not next(calibration_features(bundle, manifest, config.calibration_utterances, config.seed), None):
            raise ValueError(f"`calibration_manifest` {manifest}: no readable utterance long enough for the model")

        def calibration():
            return calibration_features(bundle, manifest, config.calibration_utterances, config.seed)

    flatbuffer = convert(bundle, config.quantize, calibration, config.float_layers, repair=False)
    requantized = []
    if config.quantize == "int8" and repair:
        flatbuffer, requantized = requantize_copies(flatbuffer)
    info = {
        "quantize": config.quantize,
        "float_layers": list(config.float_layers),  # int8: the layers left in float32
        "requantized": requantized,  # int8: the tensors `requantize_copies` rescales
        "calibration": None if calibration is None else {
            "manifest": str(config.calibration_manifest), "utterances": config.calibration_utterances,
            "seed": config.seed},
        "inputs": {FEATURES: ["1", "frames", bundle.feature_config.dim], FEATURE_LENGTHS: ["1"]},
        "outputs": {LOG_PROBS: ["1", "steps", bundle.vocab.size], OUTPUT_LENGTHS: ["1"]},
        "model_dir": str(bundle.path.resolve()), "model_config": bundle.model_config.to_dict(),
        "feature_config": bundle.feature_config.to_dict(), "vocab": bundle.vocab.tokens(),
        "exported_at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "tensorflow": tf.__version__,
    }
    with atomic_write(config.out_path, "wb") as f:
        f.write(with_metadata(flatbuffer, info))
    return Path(config.out_path)


def interpreter(path: str | os.PathLike, num_threads: int | None = None) -> tf.lite.Interpreter:
    """A TFLite interpreter for `path`, its tensors allocated (and its default XNNPACK delegate applied).

    TF 2.21 still ships `tf.lite.Interpreter` and warns that it moves to the `ai_edge_litert` package; these
    models hold builtin ops only, so `ai_edge_litert.interpreter.Interpreter` (same API) runs them too, if a
    later TF drops this one. The warning is silenced here: it says nothing a user of ds2-infer can act on. So is
    the "INFO: Created TensorFlow Lite XNNPACK delegate" line TFLite writes to file descriptor 2 when it applies
    the delegate (at the first allocation), unless TF_CPP_MIN_LOG_LEVEL lets TensorFlow's own INFO lines through.
    """
    with _no_interpreter_deprecation():
        try:
            loaded = tf.lite.Interpreter(model_path=str(path), num_threads=num_threads)
        except ValueError as e:
            raise ValueError(f"`tflite` {path} can't be loaded: {e}") from None
    quiet = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0").strip() not in ("", "0")
    with _fd2_to_devnull() if quiet else contextlib.nullcontext():
        loaded.allocate_tensors()
    return loaded


@contextlib.contextmanager
def _no_interpreter_deprecation():
    """Hides TF 2.21's warning that `tf.lite.Interpreter` moves to `ai_edge_litert` (see `interpreter`)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*tf\.lite\.Interpreter is deprecated")
        yield


@contextlib.contextmanager
def _fd2_to_devnull():
    """File descriptor 2 (C++ code's stderr) on /dev/null for the block; an error still raises in Python."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def tflite_acoustic_model(path: str | os.PathLike, bundle: Bundle, num_threads: int | None = None):
    """`(waveforms (batch, samples) float32, lengths (batch,) int32) -> (log_probs, output_lengths)`, as
    `deepspeech2.inference.acoustic_model`, with the TFLite model at `path` in place of the Keras model: the
    bundle's `featurize` for the whole batch, then the interpreter once per utterance over its own frames.
    NumPy out: `(batch, max steps, vocab)` float32 (zero past each length) and `(batch,)` int32.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a ds2-export TFLite model, or exported from another model than `bundle`'s.
    """
    info = read_metadata(path)
    for key, ours in (("model_config", bundle.model_config.to_dict()),
                      ("feature_config", bundle.feature_config.to_dict()), ("vocab", bundle.vocab.tokens())):
        if info.get(key) != json.loads(json.dumps(ours)):
            raise ValueError(f"`tflite` {path} was exported from a model with another {key} than the bundle "
                             f"`{bundle.path}` (it came from {info.get('model_dir')}); give that bundle")
    runner = interpreter(path, num_threads).get_signature_runner(SERVING_DEFAULT)
    vocab_size = bundle.vocab.size

    def forward(waveforms, lengths):
        features, frames = featurize(waveforms, lengths, bundle.feature_config, bundle.normalizer)
        features, frames = features.numpy(), frames.numpy()
        steps = [max(0, int(output_length(bundle.model_config, int(n)))) for n in frames]
        log_probs = np.zeros((len(steps), max(steps, default=0), vocab_size), np.float32)
        for i, n in enumerate(frames):
            if steps[i] < 1:  # too short for the conv front end: no output step, as the batched model gives
                continue
            out = runner(**{FEATURES: features[i:i + 1, :n], FEATURE_LENGTHS: frames[i:i + 1]})
            assert int(out[OUTPUT_LENGTHS][0]) == steps[i], (out[OUTPUT_LENGTHS], steps[i])
            log_probs[i, :steps[i]] = out[LOG_PROBS][0, :steps[i]]
        return log_probs, np.array(steps, np.int32)

    return forward
