"""Training on one device: the library entry point, non-finite batches, the model bundles, the command line, and
resume (after SIGKILL too). Several replicas and workers: test_train_replicas.py; the learning-rate schedule:
test_schedule.py; the CTC loss: test_ctc.py."""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.bundle import load_bundle
from deepspeech2.data.pipeline import PipelineConfig
from deepspeech2.features import FeatureConfig
from deepspeech2.model_config import DS1, TINY
from deepspeech2.train import precision
from deepspeech2.train.config import BenchmarkConfig, CheckpointConfig, OptimizationConfig, TrainConfig
import deepspeech2.train.trainer as train_module
from deepspeech2.train.trainer import Trainer, train

from factories import make_training_data

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_training_data(tmp_path_factory.mktemp("train_data"))


FAST = OptimizationConfig(warmup_steps=1, learning_rate=1e-3)  # the tiny model learns within two epochs


def _config(data, workdir, **kw):
    kw.setdefault("pipeline", PipelineConfig(batch_size=4, num_buckets=0))
    kw.setdefault("model", TINY)
    kw.setdefault("dev_shards", (str(data / "shards"),))
    kw.setdefault("optimization", FAST)
    return TrainConfig(workdir=str(workdir), train_shards=(str(data / "shards"),),
                       vocab_path=str(data / "vocab.txt"), normalizer_path=str(data / "mean_std.npz"),
                       model_name="tiny", verbose=0, **kw)


def _weights(model):
    return [w.numpy().copy() for w in model.weights]


def test_train_two_epochs_writes_bundles(data, tmp_path):
    result = train(_config(data, tmp_path / "run", epochs=2))
    assert result["epoch"] == 2 and result["step"] == 8  # 16 utterances / 4, twice
    assert len(result["dev_wer"]) == 2 and len(result["loss"]) == 8
    assert result["best_dev_error"] == min(result["dev_wer"]) and result["best_dev_metric"] == "wer"
    for name in ("model", "last"):
        bundle = load_bundle(tmp_path / "run" / name)
        assert sorted(p.name for p in bundle.path.iterdir()) == sorted(
            ["feature_config.json", "mean_std.npz", "model.keras", "model_config.json", "train_config.json",
             "vocab.txt"])
        assert bundle.model_config.vocab_size == bundle.vocab.size == 29
        assert bundle.feature_config == FeatureConfig()
        assert bundle.train_config["epochs"] == 2
    x = np.random.default_rng(0).normal(size=(2, 120, 161)).astype(np.float32)
    n = np.array([120, 90], np.int32)
    last = load_bundle(tmp_path / "run" / "last").model
    np.testing.assert_allclose(last({"features": x, "feature_lengths": n})["logits"],
                               result["model"]({"features": x, "feature_lengths": n})["logits"], atol=1e-5)
    events = list((tmp_path / "run" / "tensorboard").rglob("events.out.tfevents.*"))
    assert {p.parent.name for p in events} == {"train", "dev"}
    epochs = json.loads((tmp_path / "run" / "epochs.json").read_text())
    assert [e["epoch"] for e in epochs] == [1, 2] and [e["dev_wer"] for e in epochs] == result["dev_wer"]
    assert epochs[0]["train_loss"] == pytest.approx(np.mean(result["loss"][:4]))
    assert (tmp_path / "run" / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_learning_curve_has_the_loss_within_each_epoch(data, tmp_path):
    # 4 steps an epoch in blocks of 3: a block of 3 and the flushed last step, at epochs done 0.75 and 1.
    result = train(_config(data, tmp_path / "run", epochs=2, log_every_steps=3))
    epochs = json.loads((tmp_path / "run" / "epochs.json").read_text())
    loss = result["loss"]
    expected = [[[0.75, np.mean(loss[0:3])], [1.0, loss[3]]], [[1.75, np.mean(loss[4:7])], [2.0, loss[7]]]]
    for record, want in zip(epochs, expected):
        assert [c[0] for c in record["loss_curve"]] == [w[0] for w in want]
        assert [c[1] for c in record["loss_curve"]] == pytest.approx([w[1] for w in want], abs=1e-3)


def test_model_is_the_best_dev_epoch_and_last_the_last(data, tmp_path, monkeypatch):

    wers = iter([0.6, 0.4, 0.5])  # epoch 2 is the best; epoch 3 is worse
    monkeypatch.setattr(train_module, "dev_scores", lambda *a, **k: (next(wers), 0.1, []))
    run = tmp_path / "run"
    train(_config(data, run, epochs=2))
    epoch2 = _weights(load_bundle(run / "last").model)
    np.testing.assert_array_equal(epoch2[0], _weights(load_bundle(run / "model").model)[0])
    result = train(_config(data, run, epochs=3))  # resumes: the best WER so far comes from the checkpoint
    assert result["best_dev_error"] == pytest.approx(0.4)
    best, last = _weights(load_bundle(run / "model").model), _weights(load_bundle(run / "last").model)
    for a, b in zip(best, epoch2):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(last, epoch2))


def test_without_spaces_the_model_is_the_best_dev_cer_epoch(data, tmp_path, monkeypatch):
    # Mandarin: a sentence is one "word", so WER ties at ~100% while CER falls; the best CER must win.
    from deepspeech2.vocab import Vocabulary

    monkeypatch.setattr(Vocabulary, "spaced", property(lambda self: False))
    scores = iter([(0.95, 0.5), (0.95, 0.3), (0.95, 0.4)])  # epoch 2 has the best CER
    monkeypatch.setattr(train_module, "dev_scores", lambda *a, **k: (*next(scores), []))
    run = tmp_path / "run"
    result = train(_config(data, run, epochs=2))
    epoch2 = _weights(load_bundle(run / "last").model)
    result = train(_config(data, run, epochs=3))
    assert result["best_dev_metric"] == "cer" and result["best_dev_error"] == pytest.approx(0.3)
    for a, b in zip(_weights(load_bundle(run / "model").model), epoch2):
        np.testing.assert_array_equal(a, b)


def _record_last_bundles(monkeypatch) -> list[dict]:
    """Each epoch's weights, as the trainer writes them to last/."""
    last, save = [], Trainer._save

    def recording_save(self, path):
        if path.name == "last":
            last.append({w.path: w.numpy().copy() for w in self.model.weights})
        save(self, path)

    monkeypatch.setattr(Trainer, "_save", recording_save)
    return last


def _bundle_weights(path) -> dict:
    return {w.path: w.numpy() for w in load_bundle(path).model.weights}


def test_average_epochs_is_the_mean_of_the_last_epochs_weights(data, tmp_path, monkeypatch):
    last = _record_last_bundles(monkeypatch)
    run = tmp_path / "run"
    result = train(_config(data, run, epochs=3, average_epochs=2))
    assert sorted(p.name for p in (run / "epochs").iterdir()) == ["epoch-0002.npz", "epoch-0003.npz"]
    averaged = _bundle_weights(run / "averaged")
    assert sorted(averaged) == sorted(last[2]) and any("moving_mean" in p for p in averaged)
    for path, value in averaged.items():  # BN statistics too
        np.testing.assert_allclose(value, (last[1][path] + last[2][path]) / 2, rtol=1e-6, atol=1e-7, err_msg=path)
    for w in result["model"].weights:  # the trainer's model holds the last epoch's weights again
        np.testing.assert_array_equal(w.numpy(), last[2][w.path], err_msg=w.path)
    record = json.loads((run / "average.json").read_text())
    assert record["epochs"] == [2, 3] and 0 <= record["dev_cer"] <= record["dev_wer"] + 1


@pytest.mark.parametrize("average_wer, kept", [(0.45, False), (0.3, True)])
def test_averaged_weights_become_the_model_only_when_better_on_dev(data, tmp_path, monkeypatch, average_wer, kept):
    last = _record_last_bundles(monkeypatch)
    # epochs 1-2, the average of 1-2; resumed: epoch 3, the average of 2-3 (epoch 2's weights from disk)
    wers = iter([0.6, 0.4, 0.7, 0.5, average_wer])
    monkeypatch.setattr(train_module, "dev_scores", lambda *a, **k: (next(wers), 0.1, []))
    run = tmp_path / "run"
    train(_config(data, run, epochs=2, average_epochs=2))
    assert json.loads((run / "average.json").read_text())["epochs"] == [1, 2]
    train(_config(data, run, epochs=3, average_epochs=2))
    record = json.loads((run / "average.json").read_text())
    assert record == {"epochs": [2, 3], "dev_wer": average_wer, "dev_cer": 0.1, "kept_as_model": kept,
                      "best_epoch_dev_error": 0.4}
    averaged, model = _bundle_weights(run / "averaged"), _bundle_weights(run / "model")
    for path, value in averaged.items():
        np.testing.assert_allclose(value, (last[1][path] + last[2][path]) / 2, rtol=1e-6, atol=1e-7, err_msg=path)
        np.testing.assert_array_equal(model[path], value if kept else last[1][path], err_msg=path)


def test_average_epochs_is_checked(data, tmp_path):
    with pytest.raises(ValueError, match="average_epochs"):
        _config(data, tmp_path, epochs=2, average_epochs=3)


def _checkpoint_values(path, prefix) -> dict:
    """{variable path: value} of a training checkpoint's `prefix` dict (model_variables, ema)."""
    reader = tf.train.load_checkpoint(path)
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    return {name[len(prefix) + 1:-len(suffix)].replace(".S", "/"): reader.get_tensor(name)
            for name, _ in tf.train.list_variables(path) if name.startswith(prefix + "/") and name.endswith(suffix)}


def test_ema_is_the_moving_average_of_each_steps_weights(data, tmp_path):
    # Every step checkpointed: the weights as trained at each step, and their average, checked against the
    # recurrence in numpy; the bundles hold the average, and training went on from the weights as trained.
    run, decay = tmp_path / "run", 0.5
    result = train(_config(data, run, epochs=2, ema_decay=decay,
                           checkpoints=CheckpointConfig(every_steps=1, keep=100)))
    steps = {int(p.name.split("-")[1].split(".")[0]) for p in (run / "checkpoints").glob("ckpt-*.index")}
    assert steps == set(range(1, 9))
    path = lambda t: str(run / "checkpoints" / f"ckpt-{t}")  # noqa: E731
    ema = _checkpoint_values(path(1), "ema")
    assert ema and any("moving_mean" in p for p in ema)  # BatchNorm's statistics too
    for t in range(2, 9):
        weights, expected = _checkpoint_values(path(t), "model_variables"), {}
        d = min(decay, (1 + t) / (10 + t))
        for p, value in ema.items():
            expected[p] = d * value + (1 - d) * weights[p]
        ema = _checkpoint_values(path(t), "ema")
        for p, value in expected.items():
            np.testing.assert_allclose(ema[p], value, rtol=1e-5, atol=1e-6, err_msg=f"step {t}: {p}")
    for p, value in _bundle_weights(run / "last").items():
        np.testing.assert_allclose(value, ema[p], rtol=1e-6, atol=1e-7, err_msg=p)
    for w in result["model"].weights:  # the trainer's model holds the weights as trained
        np.testing.assert_array_equal(w.numpy(), weights[w.path], err_msg=w.path)
    epochs = json.loads((run / "epochs.json").read_text())
    assert [e["dev_cer"] for e in epochs] == result["dev_cer"]  # the average's scores
    assert all(e["dev_cer_trained"] >= 0 and e["dev_wer_trained"] >= 0 for e in epochs)


def test_ema_starts_from_the_weights_of_a_checkpoint_without_one(data, tmp_path):
    run = tmp_path / "run"
    train(_config(data, run, epochs=1))
    trainer = Trainer(_config(data, run, epochs=2, ema_decay=0.9))
    weights = {w.path: w.numpy() for w in trainer.model.weights}
    assert len(trainer.ema) == len(weights)
    for shadow, variable in zip(trainer.ema, trainer.ema_sources):
        np.testing.assert_array_equal(shadow.numpy(), weights[variable.path], err_msg=variable.path)


@pytest.mark.parametrize("decay", [-0.1, 1.0])
def test_ema_decay_is_checked(decay):
    with pytest.raises(ValueError, match="ema_decay"):
        TrainConfig(workdir="w", train_shards=("s",), vocab_path="v", normalizer_path="n", ema_decay=decay)


def test_resume_restores_every_model_variable(data, tmp_path):
    # The conv front end's BN moving statistics too: the optimizer tracks only trainable variables, and TF's
    # checkpoint doesn't follow the Python lists the front end keeps its layers in.
    run = tmp_path / "run"
    train(_config(data, run, epochs=1))
    saved = {w.path: w.numpy() for w in load_bundle(run / "last").model.weights}  # the checkpoint's step
    assert any(p.startswith("frontend/") and "moving_mean" in p and np.any(v != 0) for p, v in saved.items())
    resumed = Trainer(_config(data, run, epochs=2)).model
    assert sorted(w.path for w in resumed.weights) == sorted(saved)
    for w in resumed.weights:
        np.testing.assert_array_equal(w.numpy(), saved[w.path], err_msg=w.path)


def test_time_budget_ends_after_a_step_with_bundles_and_a_partial_record(data, tmp_path):
    run = tmp_path / "run"
    result = train(_config(data, run, epochs=3, max_train_minutes=1e-9))  # used up by the first step
    assert result["step"] == 1 and result["epoch"] == 0 and len(result["dev_wer"]) == 1
    for name in ("model", "last"):
        assert load_bundle(run / name).train_config["max_train_minutes"] == 1e-9
    epochs = json.loads((run / "epochs.json").read_text())
    assert len(epochs) == 1 and epochs[0]["partial"] and epochs[0]["step"] == 1
    assert epochs[0]["dev_wer"] == result["dev_wer"][0]
    result = train(_config(data, run, epochs=1))  # no budget: goes on from batch 1 and ends the epoch
    assert result["step"] == 4 and result["epoch"] == 1
    epochs = json.loads((run / "epochs.json").read_text())
    assert [(e["epoch"], e["step"], e.get("partial", False)) for e in epochs] == [(1, 4, False)]


def test_time_budget_is_checked():
    with pytest.raises(ValueError, match="max_train_minutes"):
        TrainConfig(workdir="w", train_shards=("s",), vocab_path="v", normalizer_path="n", max_train_minutes=-1)


def test_bf16_mixed_precision(data, tmp_path):
    fp32 = train(_config(data, tmp_path / "fp32", epochs=1, benchmark=BenchmarkConfig(max_step=2), dev_shards=()))
    result = train(_config(data, tmp_path / "bf16", epochs=1, mixed_precision="mixed_bfloat16",
                           benchmark=BenchmarkConfig(max_step=2), dev_shards=()))
    model = result["model"]
    assert result["benchmark"]["fp_item"] == "bf16"
    assert model.get_layer("rnn0").input_projection.compute_dtype == "bfloat16"  # matmuls in bf16
    assert model.get_layer("logits").compute_dtype == "float32"  # CTC sees fp32 logits
    assert {w.dtype for w in model.trainable_weights} == {"float32"}  # fp32 master weights
    # Same seed, same data: the bf16 loss is the fp32 loss within bf16 rounding.
    np.testing.assert_allclose(result["loss"], fp32["loss"], rtol=0.03)
    assert keras.mixed_precision.global_policy().name == "float32"  # restored for the rest of the process


@pytest.mark.parametrize("cpu_flags, gpus, expected", [
    ({"avx2", "fma"}, [], ""),  # AVX2 only: bf16 would be emulated, float32 is faster
    ({"avx512f", "avx512_bf16"}, [], "mixed_bfloat16"),
    ({"avx512f", "amx_bf16", "amx_tile"}, [], "mixed_bfloat16"),
    ({"avx512f"}, [], ""),  # AVX-512 without its bf16 extension
    ({"avx2"}, [(9, 0)], "mixed_bfloat16"),  # a GPU decides, whatever the host CPU
    ({"avx2"}, [(7, 5)], "mixed_float16"),  # Turing: fp16 tensor cores, no bf16
    ({"avx512_bf16"}, [(8, 0), (6, 1)], ""),  # the oldest GPU decides: a Pascal has neither
])
def test_auto_mixed_precision_picks_what_the_hardware_computes(cpu_flags, gpus, expected):
    assert precision.resolve_mixed_precision("auto", cpu_flags, gpus) == expected
    for policy in ("", "mixed_bfloat16", "mixed_float16"):  # an explicit policy is kept as given
        assert precision.resolve_mixed_precision(policy, cpu_flags, gpus) == policy
    with pytest.raises(ValueError, match="mixed_precision"):
        precision.resolve_mixed_precision("bf16", cpu_flags, gpus)


def test_auto_mixed_precision_trains_with_this_machines_policy(data, tmp_path, capsys):
    expected = precision.resolve_mixed_precision("auto")  # this machine's CPU flags, as the trainer reads
    config = dataclasses.replace(_config(data, tmp_path / "auto", epochs=1, mixed_precision="auto",
                                         dev_shards=()), verbose=1)
    result = train(config)
    assert result["benchmark"]["fp_item"] == {"": "fp32", "mixed_bfloat16": "bf16"}[expected]
    assert f"--mixed_precision auto: {expected or 'float32'}" in capsys.readouterr().out
    saved = json.loads((tmp_path / "auto" / "last" / "train_config.json").read_text())
    assert saved["mixed_precision"] == expected  # the bundle records the policy it trained with


def test_non_finite_batches_are_skipped_then_stop_the_job(data, tmp_path, monkeypatch):

    real = train_module.masked_ctc_loss

    def poisoned(*args):  # every loss is NaN
        return real(*args) * tf.constant(np.nan)

    monkeypatch.setattr(train_module, "masked_ctc_loss", poisoned)
    trainer = Trainer(_config(data, tmp_path / "run", epochs=1, max_bad_batches=3))
    before = _weights(trainer.model)
    with pytest.raises(ValueError, match="3 non-finite batches in a row"):
        trainer.fit()
    assert trainer.skipped_batches == 3
    # Nothing moved: neither the weights nor BatchNorm's moving statistics (updated in the forward pass).
    for a, b in zip(before, _weights(trainer.model)):
        np.testing.assert_array_equal(a, b)


def test_jit_compile_step_matches_eager_step(data, tmp_path):
    kw = dict(epochs=1, benchmark=BenchmarkConfig(max_step=1), dev_shards=(),
              optimization=dataclasses.replace(FAST, optimizer="sgd"))  # SGD: see the mirrored test
    plain = train(_config(data, tmp_path / "plain", **kw))
    jit = train(_config(data, tmp_path / "jit", jit_compile=True, **kw))
    np.testing.assert_allclose(jit["loss"], plain["loss"], rtol=1e-4)
    for a, b in zip(_weights(jit["model"]), _weights(plain["model"])):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def test_seed_fixes_initial_weights(data, tmp_path):
    a = Trainer(_config(data, tmp_path / "a", seed=7))
    b = Trainer(_config(data, tmp_path / "b", seed=7))
    c = Trainer(_config(data, tmp_path / "c", seed=8))
    for x, y in zip(_weights(a.model), _weights(b.model)):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(_weights(a.model), _weights(c.model)))


def test_model_refuses_stats_of_other_features(data, tmp_path):
    with pytest.raises(ValueError, match=r"494-dim `mfcc` features .* 161-dim `linear`.*--feature mfcc"):
        Trainer(_config(data, tmp_path / "run", model=DS1))


def test_infeasible_utterances_are_counted(data, tmp_path):
    model = dataclasses.replace(TINY, conv_strides=((8, 4),), conv_kernel_sizes=((8, 5),))
    result = train(_config(data, tmp_path / "run", epochs=1, model=model, dev_shards=()))
    assert 0 < result["infeasible_utterances"] < 16
    assert result["step"] == -(-(16 - result["infeasible_utterances"]) // 4)  # they never reach a batch


def test_workdir_is_locked_and_checked(data, tmp_path, capsys):
    from deepspeech2.fileio import exclusive_lock

    run = tmp_path / "run"
    with exclusive_lock(run, "a test"):
        with pytest.raises(ValueError, match=f"`{run}` is in use by PID {os.getpid()}"):
            train(_config(data, run, epochs=1))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        train(_config(data, tmp_path / "file", epochs=1))
    first = train(_config(data, run, epochs=1, dev_shards=()))  # the lock was released
    events = sorted((run / "tensorboard").rglob("events.out.tfevents.*"))
    config = dataclasses.replace(_config(data, run, epochs=1, dev_shards=()), verbose=1)
    again = train(config)
    assert again["step"] == first["step"] and again["loss"] == []
    assert f"{run} is already trained to epoch 1 (--epochs 1); nothing to do" in capsys.readouterr().out
    assert sorted((run / "tensorboard").rglob("events.out.tfevents.*")) == events  # no new, empty event files


# -- the devices: a GPU TensorFlow can't use, the preflight, --dry_run ------------------------------------------

NVIDIA_VERSION = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
                  "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


def test_a_gpu_tensorflow_cannot_use_stops_training_unless_allowed(data, tmp_path, monkeypatch, capsys):
    from deepspeech2.train import strategy

    proc = tmp_path / "proc_driver_nvidia"  # what /proc/driver/nvidia holds where the driver is loaded
    proc.mkdir()
    (proc / "version").write_text(NVIDIA_VERSION)
    assert strategy.nvidia_driver(proc) == "535.104.05"
    assert strategy.gpu_problem("535.104.05", gpus=["a GPU"]) is None  # TensorFlow sees it: nothing to say
    assert strategy.gpu_problem(None, gpus=[]) is None  # no driver: a CPU machine
    monkeypatch.setattr(strategy, "NVIDIA_PROC", proc)
    with pytest.raises(ValueError, match=r"an NVIDIA driver \(535\.104\.05\) is installed but TensorFlow sees no "
                                         r"GPU: .*tensorflow\[and-cuda\]==.*--allow_cpu"):
        train(_config(data, tmp_path / "run", epochs=1))
    assert not (tmp_path / "run").exists()
    result = train(dataclasses.replace(_config(data, tmp_path / "run", epochs=1, dev_shards=(), allow_cpu=True,
                                               mixed_precision="auto"), verbose=1))
    assert result["epoch"] == 1
    assert "for this CPU" in capsys.readouterr().out  # "auto" says which device it chose for


def test_the_run_says_what_it_will_use_before_the_first_step(data, tmp_path, capsys):
    train(dataclasses.replace(_config(data, tmp_path / "run", epochs=1, dev_shards=(),
                                      pipeline=PipelineConfig(batch_size=6, num_buckets=2)), verbose=1))
    out = capsys.readouterr().out
    assert "devices: 1 replica on 1 worker (OneDeviceStrategy): 1 x CPU here" in out
    assert "precision: float32" in out and "global batch: 6 utterances\n" in out
    assert "steps: 3 steps in the first (sorted) epoch, 4 in the others" in out  # 16 utterances; 2 buckets later
    from deepspeech2.model import fused_cpu

    kernel = "the fused CPU GRU" if fused_cpu.supports("float32") else "gru time loop"  # built by make deps
    assert f"recurrent layers: {kernel}" in out
    assert out.index("recurrent layers") < out.index("epoch 1/1")


def test_dry_run_times_steps_and_leaves_the_workdir_alone(data, tmp_path):
    out = subprocess.run(_cli(data, tmp_path / "run", "--dry_run", "--verbose=1"), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert not (tmp_path / "run").exists()
    lines = out.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    assert figures["steps_per_epoch"] == 8 and figures["timed_steps"] > 0  # 16 utterances, batches of 2
    assert figures["epoch_seconds"] == pytest.approx(8 * figures["step_seconds"])
    assert any(line.startswith("devices: 1 replica") for line in lines)
    assert any(line.startswith("step: ") and "an epoch: ~" in line for line in lines)


# -- the command line -----------------------------------------------------------------------------------

def _cli(data, workdir, *extra):
    return [sys.executable, str(REPO / "bin" / "ds2_train.py"), f"--workdir={workdir}",
            f"--train_shards={data / 'shards'}", f"--vocab={data / 'vocab.txt'}", f"--mean_std={data / 'mean_std.npz'}",
            "--model=tiny", "--batch_size=2", "--num_buckets=0", "--warmup_steps=1", "--verbose=2",
            "--log_every_steps=1", *extra]


@pytest.mark.slow  # two ds2-train processes; in-process resume: below
def test_sigkill_mid_epoch_then_resume(data, tmp_path):
    workdir = tmp_path / "run"
    cmd = _cli(data, workdir, "--epochs=2", "--checkpoint_every_steps=1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((workdir / "checkpoints").glob("ckpt-3.index")):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # mid epoch 1 (8 steps an epoch)
    proc.wait()
    # The checkpoint the trainer committed to (the "checkpoint" state file is updated after a checkpoint's files,
    # so a kill in between leaves the newest ckpt-N.index uncommitted, and resume rightly takes the one before).
    state = (workdir / "checkpoints" / "checkpoint").read_text()
    saved = int(re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', state, flags=re.M).group(1))
    assert 2 <= saved < 8
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"resumed from {workdir / 'checkpoints' / f'ckpt-{saved}'}: step {saved}, epoch 1, batch {saved}" \
        in out.stdout
    steps = [int(line.split("step: ")[1].split(",")[0]) for line in out.stdout.splitlines() if "ips:" in line]
    assert steps == list(range(saved + 1, 17))  # no lost or repeated batch, same step counter
    assert json.loads(out.stdout.strip().splitlines()[-1])["JOB_FAIL_FLAG"] == 0


def test_cli_errors_are_one_line(data, tmp_path):
    cmd = _cli(data, tmp_path / "run")
    cmd[4] = f"--vocab={tmp_path / 'missing.txt'}"
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1].startswith("ds2-train: error: vocabulary file")
    assert json.loads(out.stdout.strip().splitlines()[-1])["JOB_FAIL_FLAG"] == 1


# -- resuming: the data order, --restart_epoch, and two workers killed and restarted ------------------------

def _stop_mid_epoch(data, run, **kw):
    """Train 2 of the epoch's 4 batches with a checkpoint after each: the workdir a run killed there leaves."""
    return train(_config(data, run, epochs=1, benchmark=BenchmarkConfig(max_step=2),
                         checkpoints=CheckpointConfig(every_steps=1), dev_shards=(), **kw))


def test_resume_mid_epoch_equals_an_uninterrupted_run(data, tmp_path):
    whole = train(_config(data, tmp_path / "whole", epochs=1, dev_shards=()))
    run = tmp_path / "run"
    _stop_mid_epoch(data, run)
    # What fixes the epoch's batches is recorded beside each checkpoint.
    assert sorted(p.name for p in (run / "checkpoints").glob("*.data_order.json")) == \
        ["ckpt-1.data_order.json", "ckpt-2.data_order.json"]
    resumed = train(_config(data, run, epochs=1, dev_shards=()))  # the same settings: resumes at batch 2
    assert resumed["step"] == 4 and len(resumed["loss"]) == 2
    np.testing.assert_allclose(resumed["loss"], whole["loss"][2:], rtol=1e-5)
    for a, b in zip(_weights(resumed["model"]), _weights(whole["model"])):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_resume_refuses_a_changed_data_order_then_restart_epoch_trains(data, tmp_path):
    run = tmp_path / "run"
    _stop_mid_epoch(data, run)  # batches of 4, seed 0
    changed = PipelineConfig(batch_size=8, num_buckets=0, seed=1)
    with pytest.raises(ValueError, match=r"checkpoint ckpt-2 stopped at batch 2 of epoch 1, .*: batch_size 4 -> 8, "
                                         r"seed 0 -> 1; .*--restart_epoch") as refused:
        train(_config(data, run, epochs=1, dev_shards=(), pipeline=changed))
    assert "\n" not in str(refused.value)
    result = train(_config(data, run, epochs=1, dev_shards=(), pipeline=changed, restart_epoch=True))
    # The weights and step counter go on; the epoch starts over: all 16 utterances, in 2 batches of 8.
    assert result["step"] == 2 + 2 and result["epoch"] == 1 and len(result["loss"]) == 2
    order = json.loads((run / "checkpoints" / "ckpt-4.data_order.json").read_text())
    assert order["batch_size"] == 8 and order["seed"] == 1


@pytest.mark.slow  # three ds2-train processes; in-process: above
def test_cli_refuses_a_changed_data_order_in_one_line_and_restarts_the_epoch(data, tmp_path):
    run = tmp_path / "run"
    _stop_mid_epoch(data, run)  # batches of 4
    cmd = _cli(data, run, "--epochs=1", "--batch_size=8")
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode != 0
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith("ds2-train: error: checkpoint ckpt-2 stopped at batch 2 of epoch 1")
    assert "batch_size 4 -> 8" in line and "pass --restart_epoch" in line
    out = subprocess.run(cmd + ["--restart_epoch"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "--restart_epoch: epoch 1 starts over (the checkpoint stopped at its batch 2)" in out.stdout
    steps = [int(line.split("step: ")[1].split(",")[0]) for line in out.stdout.splitlines() if "ips:" in line]
    assert steps == [3, 4]  # 16 utterances in batches of 8, after the checkpoint's 2 steps


def test_a_truncated_latest_checkpoint_falls_back_to_the_one_before(data, tmp_path, caplog):
    """A disk that filled or a copy cut short: resume says so in one line and takes the newest readable one."""
    run = tmp_path / "run"
    _stop_mid_epoch(data, run)  # ckpt-1 and ckpt-2, batches of 4
    [latest] = (run / "checkpoints").glob("ckpt-2.data-*")
    latest.write_bytes(latest.read_bytes()[:100])
    result = train(_config(data, run, epochs=1, dev_shards=()))
    [warning] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("checkpoint ckpt-2: ")]
    assert warning.endswith("; resumed from ckpt-1, the newest one that could be read") and "\n" not in warning
    assert result["step"] == 4 and len(result["loss"]) == 3  # the batches after ckpt-1's, none lost


def test_resume_refuses_a_changed_model_in_one_line_unless_asked_to_keep_the_weights(data, tmp_path):
    """Weights trained as one model would go on training as another, a model that is neither."""
    run = tmp_path / "run"
    _stop_mid_epoch(data, run)
    assert json.loads((run / "checkpoints" / "ckpt-2.model_config.json").read_text())["utterance_cmn"] is False
    changed = dataclasses.replace(TINY, utterance_cmn=True)
    with pytest.raises(ValueError, match=r"^checkpoint ckpt-2 was trained as another model: utterance_cmn false -> "
                                         r"true; .*pass --restart_epoch or --init_model_path") as refused:
        train(_config(data, run, epochs=1, dev_shards=(), model=changed))
    assert "\n" not in str(refused.value)
    result = train(_config(data, run, epochs=1, dev_shards=(), model=changed, restart_epoch=True))
    assert result["step"] == 2 + 4  # the checkpoint's weights and steps, the epoch over
    assert json.loads((run / "checkpoints" / "ckpt-6.model_config.json").read_text())["utterance_cmn"] is True
