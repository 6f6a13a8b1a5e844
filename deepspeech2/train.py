"""Training: one `strategy.run` loop for every strategy (one device, all local GPUs, many machines).

Keras 3's `Model.fit` fails under MultiWorkerMirroredStrategy (keras-team/keras#20585), so this is a
custom loop: tf.data batches -> `strategy.run(replica_step)` -> CTC -> a Keras optimizer, with
`tf.train.CheckpointManager` checkpoints (model, optimizer, step, epoch and position in the epoch) and
`tf.summary` for TensorBoard. The flax `main.py` pattern: `bin/ds2_train.py` parses flags into a
`TrainConfig` and calls `train(config)`.

Work directory layout:
    checkpoints/   tf.train checkpoints, every `checkpoint_every_steps` and at each epoch end
    model/         the finished model bundle: model.keras + model_config.json + vocab.txt + mean_std.npz
                   + train_config.json (evaluation and export need nothing else)
    tensorboard/   train/ and dev/ event files
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from deepspeech2.data.augment import parse_augmentation
from deepspeech2.data.pipeline import PipelineConfig, count_infeasible, make_dataset
from deepspeech2.data.shards import load_index, read_shards
from deepspeech2.fileio import write_json
from deepspeech2.metrics import cer, wer
from deepspeech2.model import ModelConfig, build_model, greedy_decode, output_length
from deepspeech2.normalizer import Normalizer
from deepspeech2.vocab import Vocabulary

logger = logging.getLogger(__name__)

BENCHMARK_SKIP_STEPS = 10  # steps left out of the final throughput figure (tracing, warm-up)
MIXED_POLICIES = ("", "mixed_bfloat16", "mixed_float16")
OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs. Saved as `train_config.json` in the model bundle."""

    workdir: str  # checkpoints, TensorBoard logs and the model bundle go here
    train_shards: tuple[str, ...]  # shard folders (ds2-make-shards) to train on
    vocab_path: str  # vocabulary file (ds2-build-vocab); its size sets the softmax
    normalizer_path: str  # mean_std.npz (ds2-compute-stats); its feature config is the model's
    dev_shards: tuple[str, ...] = ()  # evaluated (greedy WER/CER) at the end of each epoch
    model: ModelConfig = field(default_factory=ModelConfig)  # architecture (vocab/feature dims are set here)
    model_name: str = "ds2-small"  # preset name, for logs and the benchmark line
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)  # batching and ordering
    augmentation_path: str = ""  # seed-format augmentation JSON; "" = none
    epochs: int = 20  # passes over the training data
    optimizer: str = "adam"  # "adam", or "sgd" with Nesterov momentum (DS2 §3.1)
    learning_rate: float = 5e-4  # peak learning rate, reached after warm-up
    momentum: float = 0.99  # sgd only (DS2 §3.1)
    warmup_steps: int = 500  # linear warm-up from 0
    lr_decay: float = 1 / 1.2  # multiply the learning rate by this after each epoch (DS2 §3.1 anneals by 1.2)
    clipnorm: float = 400.0  # global gradient-norm clip (0 = off)
    mixed_precision: str = ""  # "", "mixed_bfloat16" or "mixed_float16"
    jit_compile: bool = False  # XLA-compile the train step
    checkpoint_every_steps: int = 500  # also at each epoch's end
    keep_checkpoints: int = 3
    max_bad_batches: int = 5  # this many non-finite batches in a row stop the job
    log_every_steps: int = 10  # summaries and ips lines
    histograms: bool = False  # weight histograms in TensorBoard at each epoch
    num_examples: int = 3  # decoded dev examples written to TensorBoard as text
    init_model_path: str = ""  # fine-tune: start from this model bundle (layers matched by name and shape)
    benchmark_batch_size: int = 0  # > 0: override the batch size and log every step
    benchmark_max_step: int = 0  # > 0: stop after this many steps
    seed: int = 0
    verbose: int = 1  # 0 quiet, 1 progress bar per epoch, 2 one line per logged step

    def __post_init__(self):
        if not self.train_shards:
            raise ValueError("`train_shards` is empty; give at least one shard folder from ds2-make-shards")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"`optimizer` must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.mixed_precision not in MIXED_POLICIES:
            raise ValueError(f"`mixed_precision` must be one of {MIXED_POLICIES}, got {self.mixed_precision!r}")
        for name in ("epochs", "checkpoint_every_steps", "max_bad_batches", "log_every_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"`learning_rate` must be > 0, got {self.learning_rate!r}")
        if not 0 < self.lr_decay <= 1:
            raise ValueError(f"`lr_decay` must be in (0, 1], got {self.lr_decay!r}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["model"], d["pipeline"] = self.model.to_dict(), dataclasses.asdict(self.pipeline)
        return d


def sparse_ctc_loss(labels, label_lengths, logits, logit_lengths) -> tf.Tensor:
    """Per-utterance CTC loss through TF's C++ kernel with sparse labels (blank = 0).

    Same values as `deepspeech2.model.ctc_loss` (the backend-neutral `keras.ops` version), but ~25x
    faster on CPU (9 ms against 236 ms for 16 x 124 steps x 60 labels, forward and backward): the
    training loop is TF-only anyway, so it uses this one.
    """
    mask = tf.sequence_mask(label_lengths, tf.shape(labels)[1])
    indices = tf.where(mask)
    sparse = tf.SparseTensor(indices, tf.gather_nd(tf.cast(labels, tf.int32), indices),
                             tf.cast(tf.shape(labels), tf.int64))
    return tf.nn.ctc_loss(sparse, tf.cast(logits, tf.float32), None, logit_lengths, logits_time_major=False,
                          blank_index=0)


def select_strategy() -> tf.distribute.Strategy:
    """MultiWorkerMirrored when TF_CONFIG names a cluster, Mirrored over several GPUs, else one device."""
    if "cluster" in json.loads(os.environ.get("TF_CONFIG", "{}")):
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                             and "chief" not in resolver.cluster_spec().as_dict())


@keras.saving.register_keras_serializable(package="deepspeech2")
class WarmupExponentialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak`, then `peak * decay ** (step / steps_per_epoch)` (DS2 §3.1's per-epoch anneal)."""

    def __init__(self, peak, warmup_steps, steps_per_epoch, decay):
        self.peak, self.warmup_steps, self.steps_per_epoch, self.decay = peak, warmup_steps, steps_per_epoch, decay

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warm = keras.ops.minimum(1.0, (step + 1.0) / max(self.warmup_steps, 1))
        return self.peak * warm * keras.ops.power(self.decay, step / max(self.steps_per_epoch, 1))

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps, "steps_per_epoch": self.steps_per_epoch,
                "decay": self.decay}


def make_optimizer(config: TrainConfig, steps_per_epoch: int) -> keras.optimizers.LossScaleOptimizer:
    """Adam or Nesterov SGD with warm-up, per-epoch decay and clipping, wrapped in a loss-scale optimizer.

    The wrapper is what skips a step whose gradients are not finite, on every strategy; with fp16 it also
    scales the loss dynamically. For fp32/bf16 the scale starts at 1 (it only halves on a bad batch).
    """
    lr = WarmupExponentialDecay(config.learning_rate, config.warmup_steps, steps_per_epoch, config.lr_decay)
    clip = {"global_clipnorm": config.clipnorm} if config.clipnorm else {}
    if config.optimizer == "adam":
        inner = keras.optimizers.Adam(lr, **clip)
    else:
        inner = keras.optimizers.SGD(lr, momentum=config.momentum, nesterov=True, **clip)
    if config.mixed_precision == "mixed_float16":
        return keras.optimizers.LossScaleOptimizer(inner)
    return keras.optimizers.LossScaleOptimizer(inner, initial_scale=1.0, dynamic_growth_steps=1_000_000)


def init_from(model: keras.Model, path: str) -> int:
    """Copy weights from a saved model bundle (or .keras file) layer by layer where names and shapes match."""
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


def save_bundle(model: keras.Model, config: TrainConfig, vocab: Vocabulary, normalizer_path: str,
                out_dir: str | Path) -> Path:
    """Write the self-contained model bundle atomically (temp folder, then rename)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        model.save(tmp / "model.keras")
        write_json(tmp / "model_config.json", config.model.to_dict())
        write_json(tmp / "train_config.json", config.to_dict())
        vocab.save(tmp / "vocab.txt")
        shutil.copyfile(normalizer_path, tmp / "mean_std.npz")
        old = out_dir.with_name(f".{out_dir.name}.old")
        if out_dir.exists():
            os.replace(out_dir, old)
        os.replace(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


class _Preempted:
    """SIGTERM sets a flag; the loop checkpoints at the next step boundary and exits."""

    def __init__(self):
        self.flag = False
        self._previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        self.flag = True

    def restore(self):
        signal.signal(signal.SIGTERM, self._previous)


def train(config: TrainConfig) -> dict:
    """Train (or resume); returns the model and a summary: steps, epochs, losses, dev WER/CER, throughput.

    Raises:
        ValueError / FileNotFoundError: bad inputs, or `max_bad_batches` non-finite batches in a row.
    """
    previous_policy = keras.mixed_precision.global_policy()
    if config.mixed_precision:
        keras.mixed_precision.set_global_policy(config.mixed_precision)
    try:
        return _train(config)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)  # the policy is process-global


def _train(config: TrainConfig) -> dict:
    tf.random.set_seed(config.seed)
    vocab = Vocabulary.load(config.vocab_path)
    normalizer = Normalizer.load(config.normalizer_path)
    feature_config = normalizer.feature_config
    model_config = dataclasses.replace(config.model, vocab_size=vocab.size, feature_dim=feature_config.dim)
    config = dataclasses.replace(config, model=model_config)
    for d in config.train_shards + config.dev_shards:
        index = load_index(d)
        if index["vocabulary"] != vocab.tokens():
            raise ValueError(f"shards in `{d}` were written with another vocabulary than `{config.vocab_path}`; "
                             "re-run ds2-make-shards with this vocabulary")
    augmentation = parse_augmentation(config.augmentation_path or None)
    pipeline = config.pipeline
    if config.benchmark_batch_size:
        pipeline = dataclasses.replace(pipeline, batch_size=config.benchmark_batch_size, batch_frames=0)
    out_len = lambda n: output_length(model_config, n)  # noqa: E731

    strategy = select_strategy()
    chief = is_chief(strategy)
    workdir = Path(config.workdir)
    ckpt_dir = workdir / "checkpoints" if chief else Path(tempfile.mkdtemp(prefix="ds2-worker-ckpt-"))

    infeasible, total = count_infeasible(config.train_shards, feature_config, out_len, pipeline)
    if infeasible:
        logger.warning("%d of %d training utterances are too short for their transcripts at time stride %d "
                       "(CTC can't fit them); they are skipped", infeasible, total, model_config.time_stride)
    usable = total - infeasible
    if usable <= 0:
        raise ValueError(f"no usable training utterances in {list(config.train_shards)} ({infeasible} of {total} "
                         "CTC-infeasible or none within the duration limits)")
    steps_per_epoch = math.ceil(usable / pipeline.batch_size) if not pipeline.batch_frames else None

    with strategy.scope():
        model = build_model(model_config, name=config.model_name.replace("-", "_"))
        optimizer = make_optimizer(config, steps_per_epoch or max(1, usable // 16))
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        epoch_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
        position = tf.Variable(0, dtype=tf.int64, trainable=False, name="batch_in_epoch")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step, epoch=epoch_var,
                                     batch_in_epoch=position)
    manager = tf.train.CheckpointManager(checkpoint, str(ckpt_dir), max_to_keep=config.keep_checkpoints)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        logger.info("resumed from %s: step %d, epoch %d, batch %d", manager.latest_checkpoint, int(step.numpy()),
                    int(epoch_var.numpy()), int(position.numpy()))
        if config.verbose:
            print(f"resumed from {manager.latest_checkpoint}: step {int(step.numpy())}, epoch {int(epoch_var.numpy()) + 1}, "
                  f"batch {int(position.numpy())}")
    elif config.init_model_path:
        init_from(model, config.init_model_path)

    global_batch = pipeline.batch_size

    def replica_step(features, feature_lengths, labels, label_lengths):
        with tf.GradientTape() as tape:
            outputs = model({"features": features, "feature_lengths": feature_lengths}, training=True)
            per_utt = sparse_ctc_loss(labels, label_lengths, outputs["logits"], outputs["output_lengths"])
            # Mean over the GLOBAL batch: the optimizer sums gradients over replicas.
            ctx = tf.distribute.get_replica_context()
            n = ctx.all_reduce("sum", tf.cast(tf.shape(per_utt)[0], tf.float32))
            loss = tf.reduce_sum(per_utt) / n
            scaled = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, model.trainable_variables)
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads]) & tf.math.is_finite(loss)
        bad = ctx.all_reduce("sum", 1.0 - tf.cast(finite, tf.float32))
        grad_norm = tf.linalg.global_norm(grads) / tf.cast(optimizer.dynamic_scale, tf.float32)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # skipped when not finite
        return loss, bad, grad_norm, n

    def make_train_ds(epoch: int):
        return strategy.distribute_datasets_from_function(lambda ctx: make_dataset(
            config.train_shards, feature_config, normalizer, augmentation, pipeline, epoch=epoch,
            input_context=ctx, output_length=out_len))

    summary_dir = workdir / "tensorboard" if chief else Path(tempfile.mkdtemp(prefix="ds2-worker-tb-"))
    train_writer = tf.summary.create_file_writer(str(summary_dir / "train"))
    dev_writer = tf.summary.create_file_writer(str(summary_dir / "dev"))
    eval_fn = tf.function(lambda f, n: model({"features": f, "feature_lengths": n}, training=False),
                          reduce_retracing=True)
    preempted = _Preempted()
    handler = None
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        handler = tf.distribute.experimental.PreemptionCheckpointHandler(strategy.cluster_resolver, manager)

    timings, history = [], {"loss": [], "dev_wer": [], "dev_cer": [], "epochs_completed": 0}
    bad_in_row, skipped_batches = 0, 0
    fp_item = {"": "fp32", "mixed_bfloat16": "bf16", "mixed_float16": "fp16"}[config.mixed_precision]
    benchmark = bool(config.benchmark_batch_size or config.benchmark_max_step)  # log every step
    train_step = None
    stop = False
    try:
        while int(epoch_var.numpy()) < config.epochs and not stop:
            epoch = int(epoch_var.numpy())
            skip = int(position.numpy())
            ds = make_train_ds(epoch)
            if train_step is None:  # traced once: every epoch's batches have the same (unknown-dims) spec
                train_step = tf.function(lambda batch: strategy.run(replica_step, args=batch),
                                         input_signature=[ds.element_spec], jit_compile=config.jit_compile or None)
            iterator = iter(ds)
            for _ in range(skip):  # resume mid-epoch: the epoch's order is deterministic
                next(iterator)
            # Sorted epochs have a known batch count; bucketed ones don't (partial batches per bucket).
            sorted_epoch = epoch == 0 and pipeline.sortagrad
            bar = keras.utils.Progbar(steps_per_epoch if sorted_epoch else None,
                                      stateful_metrics=["loss", "lr", "ips"],
                                      verbose=1 if config.verbose == 1 and chief and not benchmark else 0)
            if config.verbose and chief:
                print(f"epoch {epoch + 1}/{config.epochs}" + (f" (resuming at batch {skip})" if skip else "")
                      + (" [SortaGrad: sorted by duration]" if epoch == 0 and pipeline.sortagrad else ""))
            t_last = time.perf_counter()
            for batch in iterator:
                loss, bad, grad_norm, n_utts = train_step(batch)
                loss = float(strategy.reduce("sum", loss, axis=None))
                bad = float(strategy.experimental_local_results(bad)[0])
                n_utts = float(strategy.experimental_local_results(n_utts)[0])  # global batch, all-reduced
                grad_norm = float(strategy.reduce("mean", grad_norm, axis=None))
                now = time.perf_counter()
                dt, t_last = now - t_last, now
                step.assign_add(1)
                position.assign_add(1)
                current = int(step.numpy())
                if bad:
                    bad_in_row += 1
                    skipped_batches += 1
                    logger.warning("step %d: non-finite loss/gradients (loss=%s); batch skipped (%d in a row)",
                                   current, loss, bad_in_row)
                    if bad_in_row >= config.max_bad_batches:
                        raise ValueError(f"{bad_in_row} non-finite batches in a row at step {current}: training "
                                         "diverged; lower --learning_rate or --clipnorm, or check the data "
                                         "with ds2-prepare validate")
                    continue
                bad_in_row = 0
                ips = n_utts / dt
                timings.append(ips)
                history["loss"].append(loss)
                lr = float(optimizer.inner_optimizer.learning_rate)
                bar.add(1, [("loss", loss), ("lr", lr), ("ips", ips)])
                if chief and (benchmark or current % config.log_every_steps == 0):
                    with train_writer.as_default(step=current):
                        tf.summary.scalar("loss", loss)
                        tf.summary.scalar("learning_rate", lr)
                        tf.summary.scalar("gradient_norm", grad_norm)
                        tf.summary.scalar("throughput_sent_per_sec", ips)
                    if config.verbose >= 2 or benchmark:
                        print(f"epoch: {epoch + 1}, step: {current}, loss: {loss:.4f}, lr: {lr:.3e}, "
                              f"grad_norm: {grad_norm:.2f}, batch_cost: {dt:.4f} s, ips: {ips:.3f} sent./sec",
                              flush=True)
                if current % config.checkpoint_every_steps == 0:
                    manager.save(checkpoint_number=current)
                if handler is not None:
                    handler.save_checkpoint_if_preempted()
                if preempted.flag:
                    manager.save(checkpoint_number=current)
                    print(f"SIGTERM: checkpointed step {current}; re-run the same command to resume", flush=True)
                    stop = True
                    break
                if config.benchmark_max_step and current >= config.benchmark_max_step:
                    stop = True
                    break
            if stop:
                break
            # Epoch done: evaluate, then advance the position before checkpointing so a restart
            # begins the next epoch.
            if config.dev_shards:
                dev_wer, dev_cer, examples = evaluate(eval_fn, config.dev_shards, feature_config, normalizer,
                                                      vocab, pipeline, config.num_examples)
                history["dev_wer"].append(dev_wer)
                history["dev_cer"].append(dev_cer)
                if chief:
                    with dev_writer.as_default(step=int(step.numpy())):
                        tf.summary.scalar("wer", dev_wer)
                        tf.summary.scalar("cer", dev_cer)
                        tf.summary.text("examples", "\n\n".join(
                            f"**ref:** {r}  \n**hyp:** {h}" for r, h in examples))
                if config.verbose and chief:
                    print(f"epoch {epoch + 1}: dev WER {dev_wer:.2%}, CER {dev_cer:.2%}")
            if chief:
                with train_writer.as_default(step=int(step.numpy())):
                    if augmentation:
                        _audio_summary(config.train_shards, augmentation, feature_config.sample_rate)
                    if config.histograms:
                        for w in model.weights:
                            tf.summary.histogram(w.path, w)
            epoch_var.assign_add(1)
            position.assign(0)
            history["epochs_completed"] = int(epoch_var.numpy())
            manager.save(checkpoint_number=int(step.numpy()))
            if chief:
                save_bundle(model, config, vocab, config.normalizer_path, workdir / "model")
    finally:
        preempted.restore()
        train_writer.flush()
        dev_writer.flush()
    measured = timings[BENCHMARK_SKIP_STEPS:] or timings
    result = {
        "model_name": config.model_name, "batch_size": global_batch, "fp_item": fp_item, "run_mode": "DP",
        "gpu_num": len(tf.config.list_logical_devices("GPU")) and strategy.num_replicas_in_sync,
        "FINAL_RESULT": round(float(np.mean(measured)), 3) if measured else 0.0, "UNIT": "sent./sec",
        "JOB_FAIL_FLAG": 0,
    }
    return {"benchmark": result, "step": int(step.numpy()), "epoch": int(epoch_var.numpy()), "skipped_batches": skipped_batches,
            "infeasible_utterances": infeasible, "model": model, **history}


def evaluate(eval_fn, shard_dirs, feature_config, normalizer, vocab, pipeline: PipelineConfig,
             num_examples: int = 3) -> tuple[float, float, list[tuple[str, str]]]:
    """Greedy-decode the shards; returns (WER, CER, a few (reference, hypothesis) pairs)."""
    refs, hyps = [], []
    ds = make_dataset(shard_dirs, feature_config, normalizer, None, pipeline, training=False, keep_text=True)
    for features, lengths, _, _, text in ds:
        outputs = eval_fn(features, lengths)
        for ids, ref in zip(greedy_decode(outputs["logits"], outputs["output_lengths"]), text.numpy()):
            refs.append(ref.decode("utf-8"))
            hyps.append(vocab.decode(ids))
    spaced = any(" " in r for r in refs)
    return wer(refs, hyps), cer(refs, hyps, ignore_spaces=not spaced), list(zip(refs, hyps))[:num_examples]


def _audio_summary(shard_dirs, augmentation, sample_rate: int) -> None:
    record = next(iter(read_shards([str(Path(shard_dirs[0]) / load_index(shard_dirs[0])["shards"][0]["path"])])))
    wav, length = augmentation.apply_waveform(record["audio"], record["num_samples"])
    tf.summary.audio("augmented_example", wav[None, :length, None], sample_rate, max_outputs=1)
