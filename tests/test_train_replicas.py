"""Training on several replicas (logical CPU devices, MirroredStrategy) and on two real workers
(MultiWorkerMirroredStrategy over localhost), each against a single-device run: the step, BatchNorm's and the
moving average's statistics, batches that don't divide over the replicas, empty and non-finite batches, the
schedule, and workers killed, restarted or stopped."""

import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from deepspeech2.data.pipeline import PipelineConfig
from deepspeech2.data.shards import load_index
from deepspeech2.features import FeatureConfig
from deepspeech2.model_config import TINY

from factories import make_training_data


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_training_data(tmp_path_factory.mktemp("train_data"))


# -- several replicas: 2 logical CPU devices, configured in a fresh process --------------------------------

_REPLICAS = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
    from deepspeech2.data.pipeline import PipelineConfig, make_dataset
    from deepspeech2.model_config import TINY
    import deepspeech2.train.trainer as T
    from deepspeech2.train.config import BenchmarkConfig, OptimizationConfig

    data, out, scenario = sys.argv[1:4]
    ADAM = OptimizationConfig(warmup_steps=1, learning_rate=1e-2)
    # SGD: its update is linear in the gradient (Adam's m / sqrt(v) would turn float noise on a ~0 gradient into
    # a full-size step), so the weights compare as tightly as the gradients do.
    SGD = OptimizationConfig(warmup_steps=1, learning_rate=1e-2, clipnorm=0.5, optimizer="sgd")

    def trainer(workdir, mirrored, **kw):  # mirrored: over that many replicas (True: 2)
        devices = [f"/cpu:{i}" for i in range(int(mirrored) + (mirrored is True))]
        T.select_strategy = ((lambda: tf.distribute.MirroredStrategy(devices)) if mirrored
                             else (lambda: tf.distribute.OneDeviceStrategy("/cpu:0")))
        kw.setdefault("pipeline", PipelineConfig(batch_size=8, num_buckets=0))
        kw.setdefault("optimization", ADAM)
        config = T.TrainConfig(workdir=workdir, train_shards=(data + "/shards",), vocab_path=data + "/vocab.txt",
                               normalizer_path=data + "/mean_std.npz", model=TINY, model_name="tiny",
                               verbose=0, seed=3, **kw)
        return T.Trainer(config)

    def replicas_of(model):  # every weight as its copy on each replica
        return [[np.array(x) for x in getattr(w.value, "values", (w.value,))] for w in model.weights]

    result = {}
    if scenario == "one_step":
        for mirrored in (False, True):
            t = trainer(out + f"/run{int(mirrored)}", mirrored, epochs=1, benchmark=BenchmarkConfig(max_step=1),
                        optimization=SGD)
            t.fit()
            result[f"weights{int(mirrored)}"] = [[r.tolist() for r in w] for w in replicas_of(t.model)]
            result[f"names"] = [w.path for w in t.model.weights]
            result[f"grad_norm{int(mirrored)}"] = t.history["grad_norm"]
            result[f"loss{int(mirrored)}"] = t.history["loss"]
    elif scenario == "ema":
        for mirrored in (False, True):
            t = trainer(out + f"/run{int(mirrored)}", mirrored, epochs=1, optimization=SGD, ema_decay=0.5)
            t.fit()  # two steps; the bundles are saved with the average swapped in, then swapped back
            result[f"ema{int(mirrored)}"] = [[np.array(x).tolist() for x in getattr(e, "values", (e,))]
                                             for e in t.ema]
            result[f"weights{int(mirrored)}"] = [[r.tolist() for r in w] for w in replicas_of(t.model)]
    elif scenario == "nan_on_one_replica":
        real = T.masked_ctc_loss
        def poisoned(*args):  # NaN on replica 1's half of the batch only
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            return real(*args) * tf.where(tf.equal(replica, 1), np.float32(np.nan), np.float32(1.0))
        T.masked_ctc_loss = poisoned
        t = trainer(out + "/run", True, epochs=1, benchmark=BenchmarkConfig(max_step=1), max_bad_batches=5)
        before = replicas_of(t.model)
        t.fit()
        after = replicas_of(t.model)
        result["skipped"] = t.skipped_batches
        result["unchanged"] = all(np.array_equal(a, b) for wa, wb in zip(before, after) for a, b in zip(wa, wb))
        result["replicas_identical"] = all(np.array_equal(w[0], r) for w in after for r in w)
    elif scenario.startswith("every_step_on"):
        # Epochs (SortaGrad's sorted one, then shuffled in 2 buckets) of 16 utterances in global batches of 6:
        # their last batches hold 4 utterances, and the buckets' last ones fewer, which don't divide over 3
        # replicas (nor always over 2).
        replicas, epochs = (int(x) for x in scenario.split("_")[-2:])
        for r in (0, replicas):
            t = trainer(out + f"/run{r}", r, epochs=epochs, optimization=SGD,
                        pipeline=PipelineConfig(batch_size=6, num_buckets=2))
            t.fit()
            result[f"loss{r}"] = t.history["loss"]
            result[f"weights{r}"] = [[x.tolist() for x in w] for w in replicas_of(t.model)]
            result[f"steps{r}"] = int(t.step.numpy())
    elif scenario == "empty_batch_on_one_replica":
        # What tf.distribute hands the replicas of a worker whose data ended before its peers': no rows and no
        # frames. The step trains on the other replica's batch as one device would.
        for r in (0, 2):
            t = trainer(out + f"/run{r}", r, epochs=1, optimization=SGD)
            batch = next(iter(make_dataset(t.config.train_shards, t.feature_config, t.normalizer, None, t.pipeline,
                                           model_config=t.config.model)))
            empty = (tf.zeros((0, 0, batch[0].shape[-1])), tf.zeros((0,), tf.int32), tf.zeros((0, 0), tf.int32),
                     tf.zeros((0,), tf.int32))
            if r:
                batch = t.strategy.experimental_distribute_values_from_function(
                    lambda context: batch if context.replica_id_in_sync_group == 0 else empty)
            step = tf.function(lambda *b: t.strategy.run(t._replica_step, args=(*b, tf.constant(0.0))))
            result[f"loss{r}"] = [float(t.strategy.experimental_local_results(step(*batch)[0])[0])]
            result[f"weights{r}"] = [[x.tolist() for x in w] for w in replicas_of(t.model)]
    elif scenario == "anneal_per_epoch":
        t = trainer(out + "/run", True, epochs=2, optimization=OptimizationConfig(warmup_steps=1, learning_rate=1e-2,
                                                                                lr_decay=0.5),
                    pipeline=PipelineConfig(batch_frames=800, num_buckets=2))
        t.fit()
        result["lr"] = t.history["lr"]
        result["steps"] = int(t.step.numpy())
    json.dump(result, open(out + "/result.json", "w"))
""")


def _run_replicas(data, tmp_path, scenario):
    out = subprocess.run([sys.executable, "-c", _REPLICAS, str(data), str(tmp_path), scenario],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads((tmp_path / "result.json").read_text())


def test_mirrored_step_equals_single_device_step(data, tmp_path):
    result = _run_replicas(data, tmp_path, "one_step")
    assert result["grad_norm0"][0] > 0.5  # the clip is active
    np.testing.assert_allclose(result["grad_norm1"], result["grad_norm0"], rtol=1e-4)  # the true global norm
    np.testing.assert_allclose(result["loss1"], result["loss0"], rtol=1e-5)
    for name, single, mirrored in zip(result["names"], result["weights0"], result["weights1"]):
        assert len(mirrored) == 2
        # Every weight, BN moving statistics included (they saw both replicas' halves of the batch), is
        # the single-device value, on both replicas.
        for copy in mirrored:
            np.testing.assert_allclose(copy, single[0], rtol=1e-4, atol=1e-6, err_msg=name)


def test_mirrored_ema_equals_single_device_ema(data, tmp_path):
    result = _run_replicas(data, tmp_path, "ema")
    assert len(result["ema0"]) == len(result["ema1"]) > 0
    for single, mirrored in zip(result["ema0"] + result["weights0"], result["ema1"] + result["weights1"]):
        assert len(mirrored) == 2
        for copy in mirrored:  # on both replicas
            np.testing.assert_allclose(copy, single[0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("replicas, epochs", [(2, 2), (3, 1)])
def test_every_step_trains_on_every_replica_count(data, tmp_path, replicas, epochs):
    """Epochs whose batches don't divide over the replicas end as they do on one device: every step's loss and
    every weight, on every replica, equal a single-device run over the same batches. (3 replicas: the sorted
    epoch's last batch of 4 leaves the third replica filler alone.)"""
    result = _run_replicas(data, tmp_path, f"every_step_on_{replicas}_{epochs}")
    assert result[f"steps{replicas}"] == result["steps0"] >= 3 * epochs  # 6, 6, 4; the second epoch bucketed
    np.testing.assert_allclose(result[f"loss{replicas}"], result["loss0"], rtol=1e-4)
    for single, mirrored in zip(result["weights0"], result[f"weights{replicas}"]):
        assert len(mirrored) == replicas
        for copy in mirrored:
            np.testing.assert_allclose(copy, single[0], rtol=1e-4, atol=1e-5)


def test_an_empty_batch_on_one_replica_adds_nothing(data, tmp_path):
    result = _run_replicas(data, tmp_path, "empty_batch_on_one_replica")
    np.testing.assert_allclose(result["loss2"], result["loss0"], rtol=1e-5)
    for single, mirrored in zip(result["weights0"], result["weights2"]):
        for copy in mirrored:
            np.testing.assert_allclose(copy, single[0], rtol=1e-4, atol=1e-6)


def test_nan_on_one_replica_skips_the_step_on_all(data, tmp_path):
    result = _run_replicas(data, tmp_path, "nan_on_one_replica")
    assert result == {"skipped": 1, "unchanged": True, "replicas_identical": True}


def test_anneal_follows_the_epoch_with_batch_frames_and_two_replicas(data, tmp_path):
    result = _run_replicas(data, tmp_path, "anneal_per_epoch")
    lrs = result["lr"]
    assert len(lrs) == result["steps"] > 2
    first_epoch = lrs[: len(lrs) // 2]  # both epochs have the same batches, in another order
    np.testing.assert_allclose(first_epoch, 1e-2, rtol=1e-6)
    np.testing.assert_allclose(lrs[len(lrs) // 2:], 0.5e-2, rtol=1e-6)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two worker processes
def test_two_workers_stay_identical(data, tmp_path):
    ports = [_free_port(), _free_port()]
    script = textwrap.dedent(f"""
        import sys, numpy as np
        from deepspeech2.data.pipeline import PipelineConfig
        from deepspeech2.model_config import TINY
        from deepspeech2.train.config import OptimizationConfig, TrainConfig
        from deepspeech2.train.trainer import train
        d = {str(data)!r}
        config = TrainConfig(workdir={str(tmp_path / 'run')!r}, train_shards=(d + "/shards",),
                             vocab_path=d + "/vocab.txt", normalizer_path=d + "/mean_std.npz", model=TINY,
                             model_name="tiny", pipeline=PipelineConfig(batch_size=4, num_buckets=0,
                             drop_remainder=True), epochs=1, optimization=OptimizationConfig(warmup_steps=1),
                             verbose=0)
        result = train(config)
        np.save(sys.argv[1], np.concatenate([w.numpy().ravel() for w in result["model"].weights]))
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
    # Synchronous SGD with synchronized BatchNorm: every weight, the moving statistics included, is
    # bit-identical on both workers.
    w0, w1 = np.load(tmp_path / "w0.npy"), np.load(tmp_path / "w1.npy")
    np.testing.assert_array_equal(w0, w1)
    assert "steps 4" in outs[0][0]  # each worker reads 1 of 2 shards: 8 utterances, 2 per replica
    assert (tmp_path / "run" / "model" / "model.keras").exists()  # only the chief writes the bundle


_WORKER = textwrap.dedent("""
    import sys, numpy as np
    from deepspeech2.data.pipeline import PipelineConfig
    from deepspeech2.model_config import TINY
    from deepspeech2.train.config import CheckpointConfig, OptimizationConfig, TrainConfig
    from deepspeech2.train.trainer import train
    d, workdir, out, *batch = sys.argv[1:]
    pipeline = (PipelineConfig(batch_size=int(batch[0]), num_buckets=2) if batch
                else PipelineConfig(batch_size=2, num_buckets=0, drop_remainder=True))
    config = TrainConfig(workdir=workdir, train_shards=(d + "/shards",), vocab_path=d + "/vocab.txt",
                         normalizer_path=d + "/mean_std.npz", model=TINY, model_name="tiny", pipeline=pipeline,
                         epochs=1 + bool(batch), optimization=OptimizationConfig(warmup_steps=1),
                         checkpoints=CheckpointConfig(every_steps=1), verbose=1)
    result = train(config)
    np.save(out, np.concatenate([w.numpy().ravel() for w in result["model"].weights]))
    print("steps", result["step"], flush=True)
""")


def _start_workers(data, workdir, outs, *extra):
    ports = [_free_port(), _free_port()]
    procs = []
    for i, out in enumerate(outs):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                                                     "task": {"type": "worker", "index": i}}))
        procs.append(subprocess.Popen([sys.executable, "-c", _WORKER, str(data), str(workdir), str(out), *extra],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def _finish(procs, timeout=240):
    try:
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:  # a worker left waiting on a dead peer's collective
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out[-2000:] + err[-3000:]
    return [out for out, _ in outs]


@pytest.mark.slow
def test_two_workers_with_uneven_shards_train_to_the_end_of_their_epochs(tmp_path):
    """Three shards over two workers: one reads twice the other's utterances, so for half of each epoch the
    other's replica gets tf.distribute's empty batches. Both finish both epochs, at the same step, with the same
    weights, the steps the shard indexes plan (the longer worker's)."""
    d = make_training_data(tmp_path / "data", n=18, num_shards=3)
    outs = [tmp_path / "w0.npy", tmp_path / "w1.npy"]
    done = _finish(_start_workers(d, tmp_path / "run", outs, "4"), timeout=400)
    from deepspeech2.data.pipeline import epoch_steps
    plan = [epoch_steps([str(d / "shards")], FeatureConfig(), dataclasses.replace(TINY, vocab_size=29),
                        PipelineConfig(batch_size=4, num_buckets=2), sorted_epoch=s, pipelines=2) for s in (True, False)]
    counts = [sum(1 for s in load_index(d / "shards")["shards"][w::2] for _ in s["durations"]) for w in (0, 1)]
    assert counts == [12, 6]  # uneven: 6 utterances a shard, two shards on worker 0
    for out in done:
        assert f"steps {sum(plan)}" in out, out[-2000:]
    w0, w1 = np.load(outs[0]), np.load(outs[1])
    np.testing.assert_array_equal(w0, w1)
    assert np.isfinite(w0).all()


@pytest.mark.slow
def test_two_workers_killed_and_restarted_resume_from_the_chiefs_checkpoint(data, tmp_path):
    whole = _finish(_start_workers(data, tmp_path / "whole", [tmp_path / "whole0.npy", tmp_path / "whole1.npy"]))
    assert all("steps 8" in out for out in whole)  # 8 utterances a worker, 1 a replica a step
    run, outs = tmp_path / "run", [tmp_path / "w0.npy", tmp_path / "w1.npy"]
    procs = _start_workers(data, run, outs)
    state = run / "checkpoints" / "checkpoint"
    deadline = time.time() + 240
    while time.time() < deadline and not re.search(r'^model_checkpoint_path: "ckpt-([2-9])"',
                                                   state.read_text() if state.exists() else "", flags=re.M):
        time.sleep(0.05)
    for p in procs:  # mid epoch, both at once, as a machine failure would
        p.kill()
        p.wait()
    saved = int(re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', state.read_text(), flags=re.M).group(1))
    assert 2 <= saved < 8
    resumed = _finish(_start_workers(data, run, outs))
    for out in resumed:  # both from the chief's checkpoint, at the same step
        assert f"resumed from {run / 'checkpoints' / f'ckpt-{saved}'}: step {saved}, epoch 1, batch {saved}" in out
        assert "steps 8" in out
    w0, w1 = np.load(outs[0]), np.load(outs[1])
    np.testing.assert_array_equal(w0, w1)
    np.testing.assert_allclose(w0, np.load(tmp_path / "whole0.npy"), rtol=1e-5, atol=1e-6)
    assert not (run / "checkpoints" / "workertemp_1").exists()  # the other worker's saves, removed at its end


@pytest.mark.slow
def test_sigterm_on_one_worker_stops_both_after_the_same_step(data, tmp_path):
    run = tmp_path / "run"
    procs = _start_workers(data, run, [tmp_path / "w0.npy", tmp_path / "w1.npy"])
    state = run / "checkpoints" / "checkpoint"
    deadline = time.time() + 240
    while time.time() < deadline and not re.search(r'^model_checkpoint_path: "ckpt-([2-9])"',
                                                   state.read_text() if state.exists() else "", flags=re.M):
        time.sleep(0.05)
    procs[1].send_signal(signal.SIGTERM)  # the other worker only: the step's all-reduce tells the chief
    outs = _finish(procs)
    stopped = [re.search(r"SIGTERM: checkpointed step (\d+);", out) for out in outs]
    assert all(stopped), outs
    step = int(stopped[0].group(1))
    assert int(stopped[1].group(1)) == step < 8 and f"steps {step}" in outs[0] and f"steps {step}" in outs[1]
    assert f'model_checkpoint_path: "ckpt-{step}"' in state.read_text()  # the chief's, which both resume from
