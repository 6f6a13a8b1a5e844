"""The PaddlePaddle DS2 JSON format of an augmentation config (a list of `{"type", "params", "prob"}`) parsed
into an `Augmentation`; `Augmentation.to_config` writes it back."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from deepspeech2.audio import SAMPLE_RATE
from deepspeech2.data.augment.augmentation import Augmentation
from deepspeech2.data.augment.features import VTLP, SpecAugment
from deepspeech2.data.augment.params import param_names
from deepspeech2.data.augment.waveform import (BayesianNormalization, Equalizer, ImpulseResponse, NoisePerturb,
                                               ShiftPerturb, SpeedPerturb, Telephone, VolumePerturb)

TYPES = ("volume", "speed", "shift", "noise", "impulse", "eq", "bayesian_normal", "telephone", "specaugment",
         "vtlp")


def _component_class(kind: str):
    if kind == "volume":
        return VolumePerturb
    if kind == "speed":
        return SpeedPerturb
    if kind == "shift":
        return ShiftPerturb
    if kind == "noise":
        return NoisePerturb
    if kind == "impulse":
        return ImpulseResponse
    if kind == "eq":
        return Equalizer
    if kind == "bayesian_normal":
        return BayesianNormalization
    if kind == "telephone":
        return Telephone
    if kind == "specaugment":
        return SpecAugment
    if kind == "vtlp":
        return VTLP
    return None


def parse_augmentation(config: list | str | os.PathLike | None,
                       sample_rate: int = SAMPLE_RATE) -> Augmentation:
    """Build the pipeline from the seed's JSON format.

    Args:
        config: the list of entries; a JSON string of it; or the path of a JSON file holding it.
            None, "" or [] give an empty pipeline.
        sample_rate: Hz of the waveforms the pipeline will see.

    Returns:
        an Augmentation.

    Raises:
        ValueError: bad JSON, an unknown `type`, unknown or missing params, or a bad value; the message
            names the entry's index, its type and the key.
        FileNotFoundError: the config file or a noise/impulse manifest doesn't exist.
    """
    where = "augmentation config"
    if config is None or (isinstance(config, str) and not config.strip()):
        return Augmentation()
    if isinstance(config, (str, os.PathLike)):
        text = str(config)
        if not (isinstance(config, str) and text.lstrip().startswith(("[", "{"))):
            path = Path(config)
            if not path.exists():
                raise FileNotFoundError(f"augmentation config `{path}` does not exist")
            where, text = f"augmentation config `{path}`", path.read_text(encoding="utf-8")
        try:
            config = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") \
                from None
    if not isinstance(config, list):
        raise ValueError(f"{where}: expected a JSON list of {{\"type\", \"params\", \"prob\"}} objects, "
                         f"got {type(config).__name__}")
    waveform, feature = [], []
    for i, entry in enumerate(config):
        component = _parse_entry(entry, f"{where}, entry {i}", sample_rate)
        (feature if isinstance(component, (SpecAugment, VTLP)) else waveform).append(component)
    return Augmentation(tuple(waveform), tuple(feature))


def _parse_entry(entry, where: str, sample_rate: int):
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object with `type`, `params` and `prob`, got {entry!r}")
    unknown = sorted(set(entry) - {"type", "params", "prob"})
    missing = [k for k in ("type", "params", "prob") if k not in entry]
    if unknown or missing:
        raise ValueError(f"{where}: " + (f"unknown key(s) {unknown}" if unknown else
                                         f"missing key(s) {missing}") +
                         "; each entry is {\"type\": ..., \"params\": {...}, \"prob\": p}")
    kind, params = entry["type"], entry["params"]
    cls = _component_class(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"{where}: unknown augmentation type {kind!r}; accepted: {', '.join(TYPES)}")
    where = f"{where} (`{kind}`)"
    if not isinstance(params, dict):
        raise ValueError(f"{where}: `params` must be an object, got {params!r}")
    names, required = param_names(cls)
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown param(s) {unknown}; accepted: {names}")
    missing = [k for k in required if k not in params]
    if missing:
        raise ValueError(f"{where}: missing param(s) {missing}; required: {required}, accepted: {names}")
    extra = {"sample_rate": sample_rate} if "sample_rate" in {f.name for f in dataclasses.fields(cls)} \
        else {}
    try:
        return cls(**params, prob=entry["prob"], **extra)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{where}: {e} (relative paths resolve against the working directory "
                                f"{os.getcwd()})") from None
