"""Model bundles: save/load round trip, consistency checks, and fine-tuning initialization."""

import dataclasses
import os
import json

import numpy as np
import pytest

from deepspeech2.bundle import init_from, load_bundle, save_bundle
from deepspeech2.features import FeatureConfig, Normalizer
from deepspeech2.model import build_model
from deepspeech2.model_config import TINY
from deepspeech2.vocab import Vocabulary


def _normalizer(config=FeatureConfig()):
    rng = np.random.default_rng(0)
    return Normalizer(rng.normal(size=config.dim).astype(np.float32), rng.uniform(1, 2, config.dim).astype(np.float32),
                      config)


def test_round_trip(tmp_path):
    model = build_model(TINY)
    save_bundle(tmp_path / "b", model, TINY, Vocabulary.english(), _normalizer(), {"epochs": 3})
    bundle = load_bundle(tmp_path / "b")
    assert bundle.model_config == TINY and bundle.feature_config == FeatureConfig()
    assert bundle.vocab.tokens() == Vocabulary.english().tokens() and bundle.train_config == {"epochs": 3}
    np.testing.assert_array_equal(bundle.normalizer.mean, _normalizer().mean)
    x = np.random.default_rng(1).normal(size=(2, 50, 161)).astype(np.float32)
    n = np.array([50, 31], np.int32)
    np.testing.assert_allclose(bundle.model({"features": x, "feature_lengths": n})["logits"],
                               model({"features": x, "feature_lengths": n})["logits"], atol=1e-6)
    # Rewriting replaces the folder whole and leaves no temp folders behind.
    save_bundle(tmp_path / "b", model, TINY, Vocabulary.english(), _normalizer(), {"epochs": 4})
    assert load_bundle(tmp_path / "b").train_config == {"epochs": 4}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_train_config_is_a_record_in_either_layout(tmp_path):
    """train_config.json is how the model was trained, read back as it was written and never into a TrainConfig: a
    bundle of the flat layout (before the optimizer's, checkpoints' and benchmark's fields had configs of their own)
    loads as well as one of the nested layout TrainConfig.to_dict() writes now."""
    from deepspeech2.train.config import OptimizationConfig, TrainConfig

    nested = TrainConfig(workdir="w", train_shards=("s",), vocab_path="v", normalizer_path="n",
                         optimization=OptimizationConfig(learning_rate=1e-3)).to_dict()
    assert nested["optimization"]["learning_rate"] == 1e-3 and nested["checkpoints"]["every_steps"] == 500
    assert "learning_rate" not in nested and nested["benchmark"] == {"batch_size": 0, "max_step": 0}
    flat = {"epochs": 3, "learning_rate": 1e-3, "lr_schedule": "exponential", "checkpoint_every_steps": 500,
            "keep_checkpoints": 3, "benchmark_max_step": 0, "pipeline": {"batch_size": 16}}
    for record in (flat, nested):
        save_bundle(tmp_path / "b", build_model(TINY), TINY, Vocabulary.english(), _normalizer(), record)
        assert load_bundle(tmp_path / "b").train_config == json.loads(json.dumps(record))


def test_inconsistent_bundles_are_refused(tmp_path):
    model = build_model(TINY)
    save_bundle(tmp_path / "b", model, TINY, Vocabulary.english(), _normalizer(), {})
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_bundle(tmp_path / "nowhere")
    (tmp_path / "b" / "model_config.json").write_text(json.dumps(dataclasses.replace(TINY, vocab_size=40).to_dict()))
    with pytest.raises(ValueError, match="vocab.txt has 29 ids but the model outputs 40"):
        load_bundle(tmp_path / "b")
    save_bundle(tmp_path / "c", model, TINY, Vocabulary.english(), _normalizer(), {})
    (tmp_path / "c" / "feature_config.json").write_text(json.dumps(FeatureConfig(kind="logmel").to_dict()))
    with pytest.raises(ValueError, match="mean_std.npz was computed for"):
        load_bundle(tmp_path / "c")
    (tmp_path / "c" / "vocab.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"lacks \['vocab.txt'\]"):
        load_bundle(tmp_path / "c")


def test_init_model_path_copies_matching_layers(tmp_path):
    source = build_model(TINY)
    source.save(tmp_path / "src.keras")
    other_vocab = build_model(dataclasses.replace(TINY, vocab_size=40))  # the output layer can't be copied
    copied = init_from(other_vocab, str(tmp_path / "src.keras"))
    assert copied == len([layer for layer in source.layers if layer.weights]) - 1
    for layer in other_vocab.layers:
        if layer.weights and layer.name != "logits":
            for a, b in zip(layer.get_weights(), source.get_layer(layer.name).get_weights()):
                np.testing.assert_array_equal(a, b)
    with pytest.raises(FileNotFoundError, match="model.keras"):
        init_from(other_vocab, str(tmp_path / "nowhere"))


def test_a_save_cut_between_its_two_renames_is_recovered(tmp_path, monkeypatch):
    """The previous bundle is moved aside, then the new one moved in: a crash between the two leaves only
    `.b.old`. The next load (or save) puts it back instead of finding nothing (or deleting it)."""
    import deepspeech2.bundle as bundle_module

    model = build_model(TINY)
    save_bundle(tmp_path / "b", model, TINY, Vocabulary.english(), _normalizer(), {"epochs": 1})
    real_replace = os.replace

    def replace(src, dst):  # the second rename of the save (temp folder -> b) fails
        if str(dst) == str(tmp_path / "b") and ".b.old" not in str(src):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="No space left"):
        save_bundle(tmp_path / "b", model, TINY, Vocabulary.english(), _normalizer(), {"epochs": 2})
    monkeypatch.setattr(os, "replace", real_replace)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".b.old"]  # the state a crash there leaves
    assert load_bundle(tmp_path / "b").train_config == {"epochs": 1}  # restored, not lost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]
    real_replace(tmp_path / "b", tmp_path / ".b.old")  # again, and this time a save comes first
    save_bundle(tmp_path / "b", model, TINY, Vocabulary.english(), _normalizer(), {"epochs": 3})
    assert load_bundle(tmp_path / "b").train_config == {"epochs": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]
    assert not bundle_module.recover_bundle(tmp_path / "b")  # nothing to recover


def test_a_killed_save_leaves_nothing_behind_after_the_next(tmp_path):
    """`kill -9` in the middle of save_bundle leaves its temp folder; the next save into the same folder removes it."""
    import signal
    import subprocess
    import sys

    save_bundle(tmp_path / "b", build_model(TINY), TINY, Vocabulary.english(), _normalizer())
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys\n"
        "from deepspeech2.bundle import save_bundle\n"
        "class Killed:\n"
        "    def save(self, path):\n"
        "        open(path, 'wb').write(b'half a model')\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "save_bundle(sys.argv[1], Killed(), None, None, None)\n"), str(tmp_path / "b")])
    assert killed.returncode == -signal.SIGKILL
    assert len([p for p in tmp_path.iterdir() if p.name.startswith(".b.")]) == 1
    save_bundle(tmp_path / "b", build_model(TINY), TINY, Vocabulary.english(), _normalizer(), {"epochs": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"] and load_bundle(tmp_path / "b").train_config == {"epochs": 2}
