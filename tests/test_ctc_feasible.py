"""One definition of "CTC can fit this utterance": the model's exact output steps against the label steps."""

import itertools
import json

import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.features import FeatureConfig, compute_features
from deepspeech2.geometry import ctc_feasible, ctc_label_steps, min_input_frames, output_length, output_steps
from deepspeech2.model import build_model
from deepspeech2.model_config import DS2_SMALL, PRESETS, ModelConfig, load_model_config

from factories import modules_loaded_by

FC = FeatureConfig()


def _shortest_path(labels) -> int:
    """Reference: the shortest CTC path is the labels with a blank inserted only between repeats."""
    path = []
    for i, c in enumerate(labels):
        if i and labels[i - 1] == c:
            path.append(0)
        path.append(c)
    return len(path)


def test_ctc_label_steps_brute_force():
    cases = [[], [5], [5, 5], [5, 5, 7], [1, 2, 1, 2], [3, 3, 3], [9, 4, 4, 4, 9, 9]]
    cases += [list(c) for c in itertools.product([1, 2], repeat=5)]
    for labels in cases:
        assert ctc_label_steps(labels) == _shortest_path(labels)
        assert ctc_label_steps(np.array(labels, np.int64)) == _shortest_path(labels)
        assert int(ctc_label_steps(tf.constant(labels, tf.int32))) == _shortest_path(labels)


def test_ctc_label_steps_counts_ids_not_characters():
    # Two different ids, whatever their text looks like (e.g. Mandarin characters): no blank between them.
    assert ctc_label_steps([412, 413]) == 2 and ctc_label_steps([412, 412]) == 3


SMALL = dict(rnn_layers=1, rnn_units=8)
CONFIGS = {
    "ds2-small front end": ModelConfig(**SMALL),  # two 3x3 "valid" convs, time stride 2 each
    "paper front end": ModelConfig(conv_filters=(4, 4, 4), conv_kernel_sizes=((11, 41), (11, 21), (11, 21)),
                                   conv_strides=((2, 2), (1, 2), (1, 2)), conv_padding="same", **SMALL),
    "stride 3, valid": ModelConfig(conv_filters=(4,), conv_kernel_sizes=((5, 5),), conv_strides=((3, 2),), **SMALL),
    "no conv": ModelConfig(conv_filters=(), conv_kernel_sizes=(), conv_strides=(), **SMALL),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_output_steps_match_the_model(name):
    # Reference: run the Keras model on features of that many samples and read its output lengths and the
    # time axis of its logits.
    config = CONFIGS[name]
    model = build_model(config)
    samples = [320, 479, 480, 800, 1121, 1600, 3999, 16000, 16160, 16321]
    wav = np.zeros((len(samples), max(samples)), np.float32)
    feats, frames = compute_features(wav, samples, FC)
    outputs = model({"features": feats, "feature_lengths": frames}, training=False)
    steps = [output_steps(config, FC, n) for n in samples]
    assert steps == outputs["output_lengths"].numpy().tolist()
    assert max(steps) == outputs["logits"].shape[1]
    assert output_steps(config, FC, tf.constant(samples)).numpy().tolist() == steps
    for n, s in zip(samples, steps):
        assert ctc_feasible(config, FC, n, s) and not ctc_feasible(config, FC, n, s + 1)
        assert bool(ctc_feasible(config, FC, tf.constant(n), tf.constant(s)))
        assert not bool(ctc_feasible(config, FC, tf.constant(n), tf.constant(s + 1)))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_min_input_frames_is_the_shortest_input_with_an_output(name):
    config = CONFIGS[name]
    model = build_model(config)
    frames = min_input_frames(config)
    run = lambda n: model({"features": np.zeros((1, n, FC.dim), np.float32),  # noqa: E731
                           "feature_lengths": np.array([n], np.int32)}, training=False)
    assert run(frames)["logits"].shape[1] == 1 and output_length(config, frames) == 1
    if frames > 1:  # one frame fewer: no step ("valid" convs fail on an input shorter than their kernel)
        assert output_length(config, frames - 1) == 0
        with pytest.raises(Exception):
            run(frames - 1)


def test_one_second_on_ds2_small():
    # The example: validate used ceil(99 frames / 4) = 25; the model gives (((99-3)//2+1)-3)//2+1 = 24.
    assert output_steps(DS2_SMALL, FC, 16000) == 24
    assert ctc_feasible(DS2_SMALL, FC, 16000, 24) and not ctc_feasible(DS2_SMALL, FC, 16000, 25)
    assert output_steps(DS2_SMALL, FC, 0) == 0 and not ctc_feasible(DS2_SMALL, FC, 0, 1)


def test_load_model_config(tmp_path):
    for name, config in PRESETS.items():
        assert load_model_config(name) == config
    custom = ModelConfig(conv_strides=((3, 2), (1, 2)), rnn_units=64)
    (tmp_path / "model_config.json").write_text(json.dumps(custom.to_dict()))
    assert load_model_config(str(tmp_path / "model_config.json")) == custom
    assert load_model_config(str(tmp_path)) == custom  # a bundle / workdir folder
    with pytest.raises(FileNotFoundError, match="nope.json"):
        load_model_config(str(tmp_path / "nope.json"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="without a model_config.json"):
        load_model_config(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="ds2-small"):  # names the presets
        load_model_config("ds2-smal")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON file"):
        load_model_config(str(tmp_path / "bad.json"))
    (tmp_path / "unknown.json").write_text(json.dumps({"rnn_unitz": 3}))
    with pytest.raises(ValueError, match="rnn_unitz"):
        load_model_config(str(tmp_path / "unknown.json"))


def test_geometry_and_configs_import_without_tensorflow():
    # data/ (validate, make-shards' checks), the decoders' clock and export/ take lengths from these modules.
    code = ("import deepspeech2.geometry, deepspeech2.model_config, deepspeech2.feature_config\n"
            "from deepspeech2.geometry import output_steps\n"
            "from deepspeech2.model_config import DS2_SMALL\n"
            "from deepspeech2.feature_config import FeatureConfig\n"
            "assert output_steps(DS2_SMALL, FeatureConfig(), 16000) == 24\n")
    assert modules_loaded_by(code, ("tensorflow", "keras", "jax", "torch"), timeout=120) == []
