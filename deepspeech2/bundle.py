"""A trained model bundle: one folder with everything evaluation, inference and export need.

    model.keras          the Keras model (weights and architecture)
    model_config.json    its ModelConfig
    feature_config.json  the FeatureConfig of its input features (also inside mean_std.npz)
    mean_std.npz         the normalizer statistics (`deepspeech2.features.Normalizer`)
    vocab.txt            the output vocabulary (id 0 = CTC blank)
    train_config.json    how it was trained (informational; loading never needs the trainer)

`ds2-train` writes `workdir/model/` (the epoch with the best dev WER, DS2 §5's model selection) and
`workdir/last/` (the last epoch). Decoding, `ds2-eval` and export load them with `load_bundle`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import keras

from deepspeech2.features import FeatureConfig, Normalizer
from deepspeech2.fileio import durable_replace, make_parent, remove_stale_temps, temp_prefix, write_json
from deepspeech2.model import deepspeech2 as _graph  # noqa: F401  registers the layers load_model reads
from deepspeech2.model_config import ModelConfig
from deepspeech2.vocab import Vocabulary


logger = logging.getLogger(__name__)

FILES = ("model.keras", "model_config.json", "feature_config.json", "mean_std.npz", "vocab.txt",
         "train_config.json")


@dataclass(frozen=True, eq=False)
class Bundle:
    """A loaded model bundle."""

    path: Path  # the bundle folder
    model: keras.Model  # inputs {"features", "feature_lengths"}, outputs {"logits", "output_lengths"}
    model_config: ModelConfig
    feature_config: FeatureConfig
    normalizer: Normalizer  # its feature_config equals `feature_config`
    vocab: Vocabulary
    train_config: dict  # the trainer's TrainConfig as saved (a dict: loading never imports the trainer)


def save_bundle(out_dir: str | os.PathLike, model: keras.Model, model_config: ModelConfig, vocab: Vocabulary,
                normalizer: Normalizer, train_config: dict | None = None) -> Path:
    """Write a bundle folder atomically: a temp folder next to it, renamed into place.

    A crash leaves either the previous bundle or the new one, never a mix: between the two renames the previous
    one is `.<name>.old`, which the next `save_bundle` or `load_bundle` puts back (`recover_bundle`). The temp
    folder a killed save leaves (`deepspeech2.fileio.temp_prefix`) goes at the next save into the same folder.

    Args:
        out_dir: the bundle folder to (re)write.
        model: the Keras model built from `model_config`.
        model_config: its architecture.
        vocab: the output vocabulary (`vocab.size == model_config.vocab_size`).
        normalizer: the input statistics (their feature config is the model's).
        train_config: how it was trained, as a JSON-able dict.

    Returns:
        The bundle folder.
    """
    out_dir = Path(out_dir)
    make_parent(out_dir)
    recover_bundle(out_dir)
    remove_stale_temps(out_dir.parent)  # a killed save's temp folder holds a whole model
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(out_dir), dir=out_dir.parent))
    try:
        model.save(tmp / "model.keras")
        write_json(tmp / "model_config.json", model_config.to_dict())
        write_json(tmp / "feature_config.json", normalizer.feature_config.to_dict())
        normalizer.save(tmp / "mean_std.npz")
        vocab.save(tmp / "vocab.txt")
        write_json(tmp / "train_config.json", train_config or {})
        old = _old(out_dir)
        shutil.rmtree(old, ignore_errors=True)  # a bundle is in place (recover_bundle): this is a leftover
        if out_dir.exists():
            os.replace(out_dir, old)
        durable_replace(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as e:  # a full disk names no file, or one inside the temp folder: name the bundle
        if e.errno is not None and (e.filename is None or str(e.filename).startswith(str(tmp))):
            raise OSError(e.errno, e.strerror, str(out_dir)) from e
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _old(out_dir: Path) -> Path:
    return out_dir.with_name(f".{out_dir.name}.old")


def recover_bundle(path: str | os.PathLike) -> bool:
    """Put a bundle back that a crash in `save_bundle` left as `.<name>.old` (the previous one moved aside, the
    new one not yet in place). Returns True when it did."""
    path = Path(path)
    old = _old(path)
    if path.exists() or not old.is_dir():
        return False
    os.replace(old, path)
    logger.warning("restored the model bundle `%s` from `%s`, left there by an interrupted save", path, old)
    return True


def load_bundle(path: str | os.PathLike) -> Bundle:
    """Load a bundle folder written by `save_bundle` (e.g. a ds2-train workdir's `model/`).

    Raises:
        FileNotFoundError: the folder or one of its files is missing.
        ValueError: the files don't agree with each other (vocabulary size, feature config or input size).
    """
    path = Path(path)
    recover_bundle(path)
    if not path.is_dir():
        raise FileNotFoundError(f"model bundle `{path}` is not a folder; point at a ds2-train workdir's model/ "
                                "(or last/) folder")
    missing = [name for name in FILES if not (path / name).exists()]
    if missing:
        raise FileNotFoundError(f"model bundle `{path}` lacks {missing}; it was not written by ds2-train "
                                "(or an old version: re-export it)")
    model_config = ModelConfig.from_dict(_read_json(path / "model_config.json"))
    feature_config = FeatureConfig.from_dict(_read_json(path / "feature_config.json"))
    normalizer = Normalizer.load(path / "mean_std.npz")
    vocab = Vocabulary.load(path / "vocab.txt")
    if normalizer.feature_config != feature_config:
        raise ValueError(f"`{path}`: mean_std.npz was computed for {normalizer.feature_config}, but "
                         f"feature_config.json says {feature_config}")
    if (model_config.feature_kind, model_config.feature_dim) != (feature_config.kind, feature_config.dim):
        raise ValueError(f"`{path}`: the model takes {model_config.feature_dim} {model_config.feature_kind} "
                         f"features, but feature_config.json gives {feature_config.dim} {feature_config.kind}")
    if vocab.size != model_config.vocab_size:
        raise ValueError(f"`{path}`: vocab.txt has {vocab.size} ids but the model outputs "
                         f"{model_config.vocab_size}")
    model = keras.saving.load_model(path / "model.keras", compile=False)
    return Bundle(path=path, model=model, model_config=model_config, feature_config=feature_config,
                  normalizer=normalizer, vocab=vocab, train_config=_read_json(path / "train_config.json"))


def init_from(model: keras.Model, path: str | os.PathLike) -> int:
    """Copy weights from a bundle (or a .keras file) layer by layer where names and shapes match.

    For fine-tuning (`ds2-train --init_model_path`): e.g. a new vocabulary keeps every layer but the
    output layer. Returns the number of layers copied.

    Raises:
        FileNotFoundError: no model.keras there.
    """
    src_path = Path(path) / "model.keras" if Path(path).is_dir() else Path(path)
    if not src_path.exists():
        raise FileNotFoundError(f"`init_model_path` {path} has no model.keras; point it at a ds2-train "
                                "workdir's model/ folder or a .keras file")
    src = {layer.name: layer for layer in keras.saving.load_model(src_path, compile=False).layers}
    copied = 0
    for layer in model.layers:
        other = src.get(layer.name)
        if other is None or not layer.weights:
            continue
        if [w.shape for w in layer.get_weights()] == [w.shape for w in other.get_weights()]:
            layer.set_weights(other.get_weights())
            copied += 1
        else:
            logger.warning("init_model_path: %s has other shapes there; left freshly initialized", layer.name)
    logger.info("initialized %d layers from %s", copied, src_path)
    return copied


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"`{path}` is not valid JSON: {e}") from None
