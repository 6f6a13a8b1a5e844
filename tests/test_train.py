"""Training: the library entry point, non-finite batches, resume after SIGKILL, and two real workers."""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.data.pipeline import PipelineConfig
from deepspeech2.data.shards import ShardConfig, make_shards
from deepspeech2.features import FeatureConfig
from deepspeech2.model import TINY
from deepspeech2.normalizer import compute_mean_std
from deepspeech2.testing import make_manifest
from deepspeech2.train import TrainConfig, train
from deepspeech2.vocab import Vocabulary

NOISE = ("WARNING", "I0000", "E0000", "W0000")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("train_data")
    manifest, _ = make_manifest(d, n=16, min_seconds=0.8, max_seconds=1.6)
    Vocabulary.english().save(d / "vocab.txt")
    make_shards(manifest, Vocabulary.english(), ShardConfig(str(d / "shards"), num_shards=2), progress=False)
    compute_mean_std([manifest], FeatureConfig()).save(d / "mean_std.npz")
    return d


def _config(data, workdir, **kw):
    kw.setdefault("pipeline", PipelineConfig(batch_size=4, num_buckets=0))
    kw.setdefault("model", TINY)
    return TrainConfig(workdir=str(workdir), train_shards=(str(data / "shards"),), dev_shards=(str(data / "shards"),),
                       vocab_path=str(data / "vocab.txt"), normalizer_path=str(data / "mean_std.npz"),
                       model_name="tiny", warmup_steps=1, learning_rate=1e-3, verbose=0, **kw)


def test_train_two_epochs_writes_bundle(data, tmp_path):
    result = train(_config(data, tmp_path / "run", epochs=2))
    assert result["epoch"] == 2 and result["step"] == 8  # 16 utterances / 4, twice
    assert len(result["dev_wer"]) == 2 and all(np.isfinite(result["loss"]))
    bundle = tmp_path / "run" / "model"
    assert sorted(p.name for p in bundle.iterdir()) == ["mean_std.npz", "model.keras", "model_config.json",
                                                        "train_config.json", "vocab.txt"]
    model = keras.saving.load_model(bundle / "model.keras")
    x = np.random.default_rng(0).normal(size=(2, 120, 161)).astype(np.float32)
    n = np.array([120, 90], np.int32)
    np.testing.assert_allclose(model({"features": x, "feature_lengths": n})["logits"],
                               result["model"]({"features": x, "feature_lengths": n})["logits"], atol=1e-5)
    assert json.loads((bundle / "model_config.json").read_text())["vocab_size"] == 29
    events = list((tmp_path / "run" / "tensorboard").rglob("events.out.tfevents.*"))
    assert {p.parent.name for p in events} == {"train", "dev"}


def test_sparse_ctc_matches_tf_and_keras_reference():
    from deepspeech2.model import ctc_loss
    from deepspeech2.train import sparse_ctc_loss

    rng = np.random.default_rng()
    logits = rng.normal(size=(4, 30, 29)).astype(np.float32)
    labels = rng.integers(1, 29, (4, 10)).astype(np.int32)
    label_lengths = np.array([10, 7, 3, 1], np.int32)
    logit_lengths = np.array([30, 25, 12, 5], np.int32)
    labels[np.arange(10)[None] >= label_lengths[:, None]] = 0
    ours = sparse_ctc_loss(labels, label_lengths, logits, logit_lengths).numpy()
    np.testing.assert_allclose(ours, ctc_loss(labels, label_lengths, logits, logit_lengths), rtol=1e-4)
    dense = tf.nn.ctc_loss(labels, logits, label_lengths, logit_lengths, logits_time_major=False, blank_index=0)
    np.testing.assert_allclose(ours, dense.numpy(), rtol=1e-4)


def test_bf16_mixed_precision(data, tmp_path):
    result = train(_config(data, tmp_path / "run", epochs=1, mixed_precision="mixed_bfloat16"))
    assert result["benchmark"]["fp_item"] == "bf16" and all(np.isfinite(result["loss"]))
    assert result["model"].get_layer("logits").compute_dtype == "float32"  # CTC sees fp32 logits
    assert any(w.dtype == "float32" for w in result["model"].weights)  # fp32 master weights
    assert keras.mixed_precision.global_policy().name == "float32"  # restored for the rest of the process


def test_non_finite_batches_are_skipped_then_stop_the_job(data, tmp_path, monkeypatch):
    import deepspeech2.train as train_module

    real = train_module.sparse_ctc_loss
    def poisoned(*args):  # every loss is NaN
        return real(*args) * tf.constant(np.nan)

    monkeypatch.setattr(train_module, "sparse_ctc_loss", poisoned)
    with pytest.raises(ValueError, match="3 non-finite batches in a row"):
        train(_config(data, tmp_path / "run", epochs=1, max_bad_batches=3))


def test_infeasible_utterances_are_counted(data, tmp_path):
    model = dataclasses.replace(TINY, conv_strides=((8, 4),), conv_kernel_sizes=((8, 5),))
    result = train(_config(data, tmp_path / "run", epochs=1, model=model))
    assert 0 < result["infeasible_utterances"] < 16
    assert result["step"] == -(-(16 - result["infeasible_utterances"]) // 4)  # they never reach a batch


def _cli(data, workdir, *extra):
    return [sys.executable, "bin/ds2_train.py", f"--workdir={workdir}", f"--train_shards={data / 'shards'}",
            f"--vocab={data / 'vocab.txt'}", f"--mean_std={data / 'mean_std.npz'}", "--model=tiny",
            "--batch_size=2", "--num_buckets=0", "--warmup_steps=1", "--verbose=2", "--log_every_steps=1", *extra]


def test_sigkill_mid_epoch_then_resume(data, tmp_path):
    workdir = tmp_path / "run"
    cmd = _cli(data, workdir, "--epochs=2", "--checkpoint_every_steps=1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((workdir / "checkpoints").glob("ckpt-3.index")):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # mid epoch 1 (8 steps an epoch)
    proc.wait()
    saved = max(int(p.name[5:-6]) for p in (workdir / "checkpoints").glob("ckpt-*.index"))
    assert 3 <= saved < 8
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


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_workers_stay_identical(data, tmp_path):
    ports = [_free_port(), _free_port()]
    script = textwrap.dedent(f"""
        import sys, numpy as np
        from deepspeech2.data.pipeline import PipelineConfig
        from deepspeech2.model import TINY
        from deepspeech2.train import TrainConfig, train
        d = {str(data)!r}
        config = TrainConfig(workdir={str(tmp_path / 'run')!r}, train_shards=(d + "/shards",),
                             vocab_path=d + "/vocab.txt", normalizer_path=d + "/mean_std.npz", model=TINY,
                             model_name="tiny", pipeline=PipelineConfig(batch_size=4, num_buckets=0,
                             drop_remainder=True), epochs=1, warmup_steps=1, verbose=0)
        result = train(config)
        np.save(sys.argv[1], np.concatenate([w.numpy().ravel() for w in result["model"].trainable_weights]))
        print("steps", result["step"])
    """)
    procs = []
    for i in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                                                     "task": {"type": "worker", "index": i}}))
        procs.append(subprocess.Popen([sys.executable, "-c", script, str(tmp_path / f"w{i}.npy")], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    # Synchronous SGD: every trainable weight is bit-identical on both workers. (BatchNorm moving
    # statistics are per-replica estimates, as with Keras's unsynchronized BatchNormalization.)
    w0, w1 = np.load(tmp_path / "w0.npy"), np.load(tmp_path / "w1.npy")
    np.testing.assert_array_equal(w0, w1)
    assert "steps 4" in outs[0][0]  # each worker reads 1 of 2 shards: 8 utterances, 2 per replica
    assert (tmp_path / "run" / "model" / "model.keras").exists()  # only the chief writes the bundle


def test_init_model_path_copies_matching_layers(data, tmp_path):
    from deepspeech2.model import build_model
    from deepspeech2.train import init_from

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
