"""`train(config)` and `Trainer`: one training run, from set-up and restore to the replica step, the epoch loop
and each epoch's end (dev scores, bundles, checkpoints). The package docstring has the loop's design and the
work directory's layout."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import shutil
import time
from pathlib import Path

import keras
import tensorflow as tf

from deepspeech2.bundle import init_from, save_bundle
from deepspeech2.data.augment.config import parse_augmentation
from deepspeech2.data.pipeline import count_infeasible, fill_empty_batch, make_dataset
from deepspeech2.data.shards import load_index
from deepspeech2.features import Normalizer
from deepspeech2.fileio import exclusive_lock, write_json
from deepspeech2.geometry import min_input_frames
from deepspeech2.model import build_model
from deepspeech2.progress import step_bar
from deepspeech2.train.config import TrainConfig, resolve_model_config
from deepspeech2.train.ctc import masked_ctc_loss
from deepspeech2.train.dev import dev_scores
from deepspeech2.train import averaging, preflight
from deepspeech2.train.learning_curve import plot_learning_curve, read_epochs
from deepspeech2.train.precision import auto_precision, global_policy
from deepspeech2.train.resume import (check_data_order, check_model, check_workers_agree, data_order,
                                      prune_records, restore_checkpoint, restore_newest, write_records)
from deepspeech2.train.schedule import learning_rate, make_optimizer
from deepspeech2.train.summaries import benchmark_line, dev_summary, epoch_summary, log_step
from deepspeech2.train.strategy import (Preempted, gpu_problem, is_chief, is_chief_process, num_workers,
                                         select_strategy)
from deepspeech2.vocab import Vocabulary

logger = logging.getLogger(__name__)

FP16_INITIAL_SCALE = 2.0**15  # dynamic loss scaling for mixed_float16, as Keras's LossScaleOptimizer
FP16_GROWTH_STEPS = 2000  # finite steps in a row before the loss scale doubles


def train(config: TrainConfig, dry_run: bool = False) -> dict:
    """Train (or resume); returns the model and a summary: steps, epochs, losses, dev WER/CER, throughput.

    With `dry_run`, set the run up and time a few steps in a temporary workdir instead (`preflight.dry_run`):
    nothing of the workdir is read or written.

    Raises:
        ValueError / FileNotFoundError: bad inputs; a checkpoint to resume mid-epoch whose batch order changed
            (`data_order`; `restart_epoch` starts the epoch over instead); workers of a cluster that don't resume
            from the same checkpoint; or `max_bad_batches` non-finite batches in a row.
    """
    problem = gpu_problem()
    if problem and not config.allow_cpu:
        raise ValueError(f"{problem}; or pass --allow_cpu (`allow_cpu=True`) to train on the CPU")
    if config.mixed_precision == "auto":
        policy, device = auto_precision()
        config = dataclasses.replace(config, mixed_precision=policy)
        if config.verbose and is_chief_process():
            print(f"--mixed_precision auto: {policy or 'float32'} for {device} (bf16 only where the hardware "
                  "computes it natively)", flush=True)
    with global_policy(config.mixed_precision):
        if dry_run:
            return preflight.dry_run(config)
        # Two trainers on one workdir would interleave their checkpoints and TensorBoard steps: hold a lock
        # (the chief only: the other workers of a cluster write to temporary folders).
        with exclusive_lock(config.workdir, "a ds2-train") if is_chief_process() else contextlib.nullcontext():
            return Trainer(config).fit()


class Trainer:
    """One training run: the set-up and restore (`__init__`), the step, the epoch loop (`fit`), and the
    end-of-epoch evaluation and bundles."""

    def __init__(self, config: TrainConfig):
        keras.utils.set_random_seed(config.seed)  # weight initialization, and TF's global seed
        self._read_inputs(config)
        self._place_on_devices()
        self._plan_epochs()
        with self.strategy.scope():
            self._build_model_and_state()
        self._restore_or_start()
        self._trace_functions()
        self._start_records()
        if self.config.verbose and self.chief:
            print("\n".join(preflight.describe(self)), flush=True)

    def _read_inputs(self, config: TrainConfig) -> None:
        """The vocabulary and the normalizer, the model config sized to them, the shards checked against the
        vocabulary, the augmentation, and the pipeline (with a benchmark's batch size)."""
        self.vocab = Vocabulary.load(config.vocab_path)
        self.normalizer = Normalizer.load(config.normalizer_path)
        self.feature_config = self.normalizer.feature_config
        config = dataclasses.replace(config, model=resolve_model_config(config.model, self.feature_config,
                                                                         self.vocab))
        for d in config.train_shards + config.dev_shards:
            if load_index(d)["vocabulary"] != self.vocab.tokens():
                raise ValueError(f"shards in `{d}` were written with another vocabulary than `{config.vocab_path}`; "
                                 "re-run ds2-make-shards with this vocabulary")
        self.augmentation = parse_augmentation(config.augmentation_path or None)
        pipeline = config.pipeline
        if config.benchmark.batch_size:
            pipeline = dataclasses.replace(pipeline, batch_size=config.benchmark.batch_size, batch_frames=0)
        self.config, self.pipeline = config, pipeline
        self.min_frames = min_input_frames(config.model)  # a replica's empty batch is filled up to this

    def _place_on_devices(self) -> None:
        """The distribution strategy, whether this worker is the chief, and the folders its checkpoints go to."""
        config = self.config
        self.strategy = select_strategy()
        self.chief = is_chief(self.strategy)
        if config.jit_compile and self.strategy.num_replicas_in_sync > 1:
            raise ValueError("`jit_compile` compiles the model inside each replica, where the synchronized "
                             "BatchNorm's cross-replica sums can't run; use it with one device")
        if config.max_train_minutes and isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            raise ValueError(f"`max_train_minutes`={config.max_train_minutes} needs one machine: each worker's "
                             "clock would end its loop at a different step, and the others would wait forever")
        self.workdir = Path(config.workdir)
        # TF's multi-worker checkpoint layout: every worker saves (saving a distributed variable may need its
        # peers), the chief into checkpoints/ and the others each into a folder of their own that nobody reads;
        # every worker restores from checkpoints/, which must be on a file system they all read.
        self.ckpt_dir = self.workdir / "checkpoints"
        self.write_dir = self.ckpt_dir
        if not self.chief:
            self.write_dir = self.ckpt_dir / f"workertemp_{self.strategy.cluster_resolver.task_id}"
            shutil.rmtree(self.write_dir, ignore_errors=True)  # a killed run's

    def _plan_epochs(self) -> None:
        """From the shard indexes: the utterances CTC can't fit (skipped), the sorted first epoch's steps, and
        what orders an epoch's batches (`data_order`, checked when resuming mid-epoch)."""
        config, pipeline = self.config, self.pipeline
        self.infeasible, total = count_infeasible(config.train_shards, self.feature_config, config.model, pipeline)
        if self.infeasible:
            logger.warning("%d of %d training utterances are too short for their transcripts (CTC can't fit "
                           "them at the model's time stride %d); they are skipped", self.infeasible, total,
                           config.model.time_stride)
        if total - self.infeasible <= 0:
            raise ValueError(f"no usable training utterances in {list(config.train_shards)} ({self.infeasible} "
                             f"of {total} CTC-infeasible or none within the duration limits)")
        # Batches by count and a sorted first epoch: the first epoch's step count is known.
        self.sorted_steps = math.ceil((total - self.infeasible) / pipeline.batch_size) \
            if not pipeline.batch_frames else None
        self.data_order = data_order(pipeline, config.train_shards, self.feature_config, config.augmentation_path,
                                     total - self.infeasible, self.strategy.num_replicas_in_sync,
                                     num_workers(self.strategy))

    def _build_model_and_state(self) -> None:
        """The model, its optimizer, and the loop's state as variables a checkpoint saves (in the strategy's
        scope)."""
        config = self.config
        self.model = build_model(config.model, name=config.model_name.replace("-", "_"))
        self.optimizer = make_optimizer(config.optimization)
        self.optimizer.build(self.model.trainable_variables)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
        self.position = tf.Variable(0, dtype=tf.int64, trainable=False, name="batch_in_epoch")
        # The best dev error so far, by the vocabulary's metric (WER; CER without spaces), under the name the
        # checkpoints hold it by, so that every checkpoint ds2-train writes restores.
        self.best_error = tf.Variable(math.inf, dtype=tf.float64, trainable=False, name="best_dev_wer")
        fp16 = config.mixed_precision == "mixed_float16"
        self.loss_scale = tf.Variable(FP16_INITIAL_SCALE if fp16 else 1.0, trainable=False, name="loss_scale")
        self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="finite_steps_in_a_row")
        # Shuffled, length-bucketed epochs have no batch count known in advance: the previous epoch's
        # count is the progress bar's target.
        self.epoch_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="steps_of_last_epoch")
        # `ema_decay`: a moving average of every floating-point model variable (BatchNorm's statistics too).
        self.ema_sources = [v for v in self.model.variables if v.dtype in ("float32", "float64")] \
            if config.ema_decay else []
        self.ema = [tf.Variable(tf.identity(v.value), trainable=False, name="ema") for v in self.ema_sources]

    def _restore_or_start(self) -> None:
        """Resume from the newest readable checkpoint, or start from `init_model_path`'s weights (or new ones);
        then check that a cluster's workers all start from the same place."""
        config = self.config
        self.checkpoint = self._make_checkpoint(ema=bool(self.ema))
        self.manager = tf.train.CheckpointManager(self.checkpoint, str(self.write_dir),
                                                  max_to_keep=config.checkpoints.keep if self.chief else 1)
        latest = tf.train.latest_checkpoint(str(self.ckpt_dir))
        if latest:
            self._resume(latest)
        elif config.init_model_path:
            init_from(self.model, config.init_model_path)
            averaging.restart(self.ema, self.ema_sources)
        place = (int(self.step.numpy()), int(self.epoch.numpy()), int(self.position.numpy()))
        check_workers_agree(self.strategy, place, self.data_order, self.ckpt_dir)

    def _trace_functions(self) -> None:
        forward = lambda f, n: self.model({"features": f, "feature_lengths": n}, training=True)  # noqa: E731
        # XLA compiles the model's forward and backward pass; the sparse CTC (no XLA kernel) and the
        # update stay outside it.
        self.forward = tf.function(forward, jit_compile=True) if self.config.jit_compile else forward
        self.eval_fn = tf.function(lambda f, n: self.model({"features": f, "feature_lengths": n}, training=False),
                                   reduce_retracing=True)
        self.train_step = None  # traced on the first batch: every epoch's batches have the same spec

    def _start_records(self) -> None:
        """TensorBoard's writers (the chief's), and this run's records: losses, timings, the epochs so far."""
        done = int(self.epoch.numpy())
        if self.chief and done < self.config.epochs:
            self.train_writer = tf.summary.create_file_writer(str(self.workdir / "tensorboard" / "train"))
            self.dev_writer = tf.summary.create_file_writer(str(self.workdir / "tensorboard" / "dev"))
        else:  # only the chief's summaries are kept; a re-run of a finished job writes none (no empty event files)
            self.train_writer = self.dev_writer = tf.summary.create_noop_writer()
        # Per applied step: loss, learning rate, global gradient norm (before clipping); per epoch: dev WER/CER.
        self.history = {"loss": [], "lr": [], "grad_norm": [], "dev_wer": [], "dev_cer": [],
                        "epochs_completed": done}
        self.timings: list[float] = []  # utterances per second of each applied step
        self.step_seconds: list[float] = []  # each step's time, applied or skipped
        self.skipped_batches = 0
        # Epoch records of earlier runs of this workdir (resume), up to the checkpoint's epoch.
        self.epochs = [e for e in read_epochs(self.workdir) if e["epoch"] <= done] if self.chief else []
        self.epoch_loss = [0.0, 0]  # this epoch's (sum, count) of applied steps' losses
        # The loss within the epoch for the learning curve: (batch in epoch, mean loss) of each block of
        # `log_every_steps` applied steps, and the block being summed.
        self.loss_blocks: list[tuple[int, float]] = []
        self.loss_block = [0.0, 0]

    def _make_checkpoint(self, ema: bool) -> tf.train.Checkpoint:
        """What a checkpoint holds: the model, optimizer and loop state, and (`ema`) the weights' moving average.

        Every model variable is also saved by its path, besides the model: TF's checkpoint doesn't follow the
        Python lists in which Keras layers keep sublayers and weights (the conv front end's convs and BatchNorms,
        the RNNs' recurrent kernels). The optimizer brings the trainable ones back, but the front end's BN moving
        statistics would restart from 0 and 1 on resume, and the model evaluate as untrained until they
        re-converged."""
        extra = {"ema": {v.path: e for v, e in zip(self.ema_sources, self.ema)}} if ema else {}
        return tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.step,
                                   model_variables={v.path: v for v in self.model.variables},
                                   epoch=self.epoch, batch_in_epoch=self.position, best_dev_wer=self.best_error,
                                   loss_scale=self.loss_scale, finite_steps_in_a_row=self.good_steps,
                                   steps_of_last_epoch=self.epoch_steps, **extra)

    # -- resume -----------------------------------------------------------------------------------------

    def _resume(self, latest: str) -> None:
        """Restore the newest checkpoint that can be read, `latest` first, then the older ones kept beside it (a
        truncated or damaged file: a disk that filled, a copy cut short), saying so in one line. A checkpoint of
        another model (`check_model`) is refused unless `restart_epoch` or `init_model_path` asks to keep its
        weights. Mid-epoch, the epoch goes on at the checkpoint's batch only if its batches still come in the order
        they were trained in (`data_order`); with `restart_epoch` the epoch starts over at batch 0 instead.

        Raises:
            ValueError: the model changed, and neither `restart_epoch` nor `init_model_path` is set; no checkpoint
                can be read; mid-epoch, what orders the epoch's batches changed, and `restart_epoch` is off.
        """
        config = self.config
        path, problems = restore_newest(self.ckpt_dir, latest, self._check_model, self._restore)
        if problems and self.chief:
            message = f"checkpoint {problems[0]}; resumed from {Path(path).name}, the newest one that could be read"
            logger.warning(message)
            if config.verbose:
                print(f"warning: {message}", flush=True)
        step, epoch, batch = (int(v.numpy()) for v in (self.step, self.epoch, self.position))
        logger.info("resumed from %s: step %d, epoch %d, batch %d", path, step, epoch, batch)
        if config.verbose:
            print(f"resumed from {path}: step {step}, epoch {epoch + 1}, batch {batch}", flush=True)
        if not batch:
            return
        if config.restart_epoch:
            self.position.assign(0)
            if config.verbose and self.chief:
                print(f"--restart_epoch: epoch {epoch + 1} starts over (the checkpoint stopped at its batch {batch})",
                      flush=True)
            return
        check_data_order(path, self.data_order, epoch, batch)

    def _check_model(self, path: str) -> None:
        """Refuse to resume `path` as another model than the one it was trained as (`check_model`), unless the run
        asks to keep the checkpoint's weights; then say so."""
        keep = bool(self.config.restart_epoch or self.config.init_model_path)
        changed = check_model(path, self.config.model.to_dict(), keep_weights=keep)
        if changed and self.config.verbose and self.chief:
            print(f"warning: {Path(path).name} was trained as another model ({', '.join(changed)}); its weights "
                  "are loaded into this one, as asked", flush=True)

    def _restore(self, path: str) -> None:
        if self.ema and not any(name.startswith("ema/") for name, _ in tf.train.list_variables(path)):
            # A checkpoint of a run without `ema_decay`: the average starts from the restored weights.
            restore_checkpoint(self._make_checkpoint(ema=False), path)
            averaging.restart(self.ema, self.ema_sources)
            logger.warning("%s has no moving average of the weights (`ema_decay` was off): it starts from the "
                           "restored weights", path)
        else:
            restore_checkpoint(self.checkpoint, path)

    def _save_checkpoint(self, step: int) -> None:
        """Checkpoint `step`, and (the chief) its records beside it: what orders this epoch's batches, and the model's
        config. The records are written first, so a checkpoint never lacks them; those whose checkpoint didn't
        finish go with the next save."""
        if self.chief:
            write_records(self.write_dir, step, self.data_order, self.config.model.to_dict())
        self.manager.save(checkpoint_number=step)
        if self.chief:
            prune_records(self.write_dir, self.manager.checkpoints)

    # -- the step ---------------------------------------------------------------------------------------

    def _replica_step(self, features, feature_lengths, labels, label_lengths, stop):
        """One replica's share of a step; returns the global loss, finiteness, gradient norm, batch size, and
        whether any worker was asked to stop (`stop`: this worker's SIGTERM flag, 0 or 1)."""
        context = tf.distribute.get_replica_context()
        variables = self.model.trainable_variables
        # The forward pass updates BN's moving statistics; keep them, to restore them if the batch is skipped.
        saved = [tf.identity(v.value) for v in self.model.non_trainable_variables]
        features, feature_lengths, labels, label_lengths = fill_empty_batch(
            features, feature_lengths, labels, label_lengths, self.min_frames)
        rows = feature_lengths > 0  # the utterances; filler rows have no frames and add nothing below
        global_batch = context.all_reduce("sum", tf.reduce_sum(tf.cast(rows, tf.float32)))
        scale = tf.identity(self.loss_scale)
        with tf.GradientTape() as tape:
            outputs = self.forward(features, feature_lengths)
            per_utt = masked_ctc_loss(labels, label_lengths, outputs["logits"], outputs["output_lengths"], rows)
            # this replica's share of the global batch's mean (a step of filler alone has a loss of 0)
            loss = tf.reduce_sum(per_utt) / tf.maximum(global_batch, 1.0)
            scaled = loss * scale
        grads = tape.gradient(scaled, variables)
        # The global batch's gradient (and loss), summed here, so that every replica holds the same values
        # and every decision below comes out the same on all of them.
        stop = tf.identity(stop)  # on this replica's device, as the all-reduce wants (an input has none)
        *grads, loss, stop = context.all_reduce("sum", [*grads, loss, stop])
        grads = [g / scale for g in grads]
        finite = tf.math.is_finite(loss) & tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
        norm = tf.linalg.global_norm(grads)
        if self.config.optimization.clipnorm:
            grads, _ = tf.clip_by_global_norm(grads, self.config.optimization.clipnorm, use_norm=norm)
        context.merge_call(self._apply_or_skip, args=(grads, finite, saved))
        return loss, finite, norm, global_batch, stop

    def _apply_or_skip(self, strategy, grads, finite, saved):
        """Cross-replica: apply the update on every replica, or skip it on every replica."""
        finite = strategy.experimental_local_results(finite)[0]  # the same on every replica (all-reduced)
        lr = learning_rate(self.config, self.step, self.epoch)
        fp16 = self.config.mixed_precision == "mixed_float16"

        def apply():
            for grad, variable in zip(grads, self.model.trainable_variables):
                strategy.extended.update(variable.value, self._update_variable, args=(grad, lr), group=False)
            self.optimizer.iterations.assign_add(1)
            if self.ema:  # TF's ExponentialMovingAverage with num_updates: a lower decay in the first steps
                t = tf.cast(self.optimizer.iterations, tf.float32)
                decay = tf.minimum(self.config.ema_decay, (1.0 + t) / (10.0 + t))
                for shadow, variable in zip(self.ema, self.ema_sources):
                    strategy.extended.update(shadow, averaging.ema_update, args=(variable.value, decay), group=False)
            if fp16:  # dynamic loss scaling: double the scale after FP16_GROWTH_STEPS finite steps
                grow = self.good_steps + 1 >= FP16_GROWTH_STEPS
                self.loss_scale.assign(tf.where(grow, self.loss_scale * 2.0, self.loss_scale))
                self.good_steps.assign(tf.where(grow, tf.zeros_like(self.good_steps), self.good_steps + 1))
            return tf.constant(True)

        def skip():
            for variable, value in zip(self.model.non_trainable_variables, saved):
                strategy.extended.update(variable.value, lambda v, x: v.assign(x), args=(value,), group=False)
            if fp16:  # the scale overflowed fp16: halve it
                self.loss_scale.assign(tf.maximum(self.loss_scale / 2.0, 1.0))
                self.good_steps.assign(0)
            return tf.constant(False)

        tf.cond(finite, apply, skip)

    def _update_variable(self, variable, grad, lr):
        return self.optimizer.update_step(grad, variable, lr)

    # -- the loop ---------------------------------------------------------------------------------------

    def _dataset(self, epoch: int):
        def dataset(context):
            return make_dataset(self.config.train_shards, self.feature_config, self.normalizer, self.augmentation,
                                self.pipeline, epoch=epoch, input_context=context, model_config=self.config.model)

        if isinstance(self.strategy, tf.distribute.OneDeviceStrategy):
            # The batches as they are (strategy.run places them). tf.distribute's wrapper adds an iterator of
            # its own, and destroying it at the end of an epoch waited on tf.data's autotuning thread: 35-50 s
            # between epochs of the tiny recipe on 2 CPU cores.
            return dataset(None)
        return self.strategy.distribute_datasets_from_function(dataset)

    def fit(self) -> dict:
        config = self.config
        if int(self.epoch.numpy()) >= config.epochs and config.verbose and self.chief:
            print(f"{self.workdir} is already trained to epoch {int(self.epoch.numpy())} (--epochs {config.epochs}); "
                  "nothing to do")
        preempted = Preempted()
        self.deadline = time.perf_counter() + 60 * config.max_train_minutes if config.max_train_minutes else None
        self.out_of_time = False
        try:
            while int(self.epoch.numpy()) < config.epochs:
                if self._run_epoch(int(self.epoch.numpy()), preempted):
                    if self.out_of_time:
                        self._end_epoch(int(self.epoch.numpy()), finished=False)
                    break
                self._end_epoch(int(self.epoch.numpy()))
            if config.average_epochs > 1 and self.chief and int(self.epoch.numpy()) >= config.epochs:
                self._average()
        finally:
            preempted.restore()
            self.train_writer.flush()
            self.dev_writer.flush()
            if not self.chief:  # saves nobody reads
                shutil.rmtree(self.write_dir, ignore_errors=True)
        return {"benchmark": self.benchmark_result(), "step": int(self.step.numpy()),
                "epoch": int(self.epoch.numpy()), "skipped_batches": self.skipped_batches,
                "infeasible_utterances": self.infeasible, "best_dev_error": float(self.best_error.numpy()),
                "best_dev_metric": self.vocab.metric,
                "model": self.model, **self.history}

    def _run_epoch(self, epoch: int, preempted: Preempted) -> bool:
        """Train one epoch (from the saved position when resuming); returns True when the job must stop."""
        config, chief = self.config, self.chief
        skip = int(self.position.numpy())
        ds = self._dataset(epoch)
        if self.train_step is None:
            self.train_step = tf.function(
                lambda batch, stop: self.strategy.run(self._replica_step, args=(*batch, stop)),
                input_signature=[ds.element_spec, tf.TensorSpec([], tf.float32)])
        iterator = iter(ds)
        for _ in range(skip):  # resume mid-epoch: the epoch's order is deterministic
            next(iterator)
        benchmark = config.benchmark.enabled  # log every step
        sorted_epoch = epoch == 0 and self.pipeline.sortagrad
        target = self.sorted_steps if sorted_epoch else int(self.epoch_steps.numpy()) or None
        if config.verbose and chief:  # before the bar, which a terminal draws at once
            print(f"epoch {epoch + 1}/{config.epochs}" + (f" (resuming at batch {skip})" if skip else "")
                  + (" [SortaGrad: sorted by duration]" if sorted_epoch else ""))
        bar = step_bar(target, f"epoch {epoch + 1}", config.verbose == 1 and chief and not benchmark)
        bar.update(skip)
        t_epoch = time.perf_counter()
        bad_in_row = 0
        t_last = time.perf_counter()
        for batch in iterator:
            lr = learning_rate(config, int(self.step.numpy()), epoch)  # the rate this step applies
            loss, finite, grad_norm, n_utts, stop = (
                float(self.strategy.experimental_local_results(x)[0])
                for x in self.train_step(batch, tf.constant(float(preempted.flag))))
            now = time.perf_counter()
            dt, t_last = now - t_last, now
            self.step_seconds.append(dt)
            self.step.assign_add(1)
            self.position.assign_add(1)
            current = int(self.step.numpy())
            if not finite:
                self.skipped_batches += 1
                if config.mixed_precision == "mixed_float16" and math.isfinite(loss):
                    logger.info("step %d: fp16 gradient overflow; batch skipped, loss scale now %g", current,
                                float(self.loss_scale.numpy()))
                else:
                    bad_in_row += 1
                    logger.warning("step %d: non-finite loss/gradients (loss=%s); batch skipped (%d in a row)",
                                   current, loss, bad_in_row)
                    if bad_in_row >= config.max_bad_batches:
                        raise ValueError(f"{bad_in_row} non-finite batches in a row at step {current}: training "
                                         "diverged; lower --learning_rate or --clipnorm, or check the data "
                                         "with ds2-prepare validate")
            else:
                bad_in_row = 0
                ips = n_utts / dt
                self.timings.append(ips)
                self.history["loss"].append(loss)
                self.epoch_loss = [self.epoch_loss[0] + loss, self.epoch_loss[1] + 1]
                self.loss_block = [self.loss_block[0] + loss, self.loss_block[1] + 1]
                if self.loss_block[1] >= config.log_every_steps:
                    self._close_loss_block()
                self.history["lr"].append(lr)
                self.history["grad_norm"].append(grad_norm)
                bar.update(int(self.position.numpy()), [("loss", loss), ("lr", lr), ("ips", ips)])
                if chief and (benchmark or current % config.log_every_steps == 0):
                    log_step(self.train_writer, config.verbose, benchmark, epoch, current, loss, lr, grad_norm, dt, ips)
            if stop or current % config.checkpoints.every_steps == 0:
                self._save_checkpoint(current)
            if stop:  # a SIGTERM here or on another worker before this step: every worker stops after it
                print(f"SIGTERM: checkpointed step {current}; re-run the same command to resume", flush=True)
                return True
            if config.benchmark.max_step and current >= config.benchmark.max_step:
                return True
            if self.deadline is not None and time.perf_counter() >= self.deadline:
                self.out_of_time = True
                bar.update(int(self.position.numpy()), finalize=True)
                self.epoch_seconds = time.perf_counter() - t_epoch
                if config.verbose and chief:
                    print(f"--max_train_minutes {config.max_train_minutes:g} used up at step {current} (epoch "
                          f"{epoch + 1}, batch {int(self.position.numpy())})", flush=True)
                return True
        bar.update(int(self.position.numpy()), finalize=True)  # ends the bar's line: results go on their own
        self.epoch_steps.assign(self.position)
        self.epoch_seconds = time.perf_counter() - t_epoch
        return False

    def _close_loss_block(self) -> None:
        """Add the block of steps summed so far to the epoch's loss curve, at the batch it ended on."""
        total, count = self.loss_block
        if count:
            self.loss_blocks.append((int(self.position.numpy()), total / count))
        self.loss_block = [0.0, 0]

    def _end_epoch(self, epoch: int, finished: bool = True) -> None:
        """Evaluate on dev, write the bundles (last/, and model/ when the dev error is the best so far), then
        advance the epoch and checkpoint, so a restart begins the next epoch.

        An unfinished epoch (the time budget ran out) is evaluated and saved the same way, its record marked
        "partial", but the epoch is not advanced: a restart goes on from the checkpoint's batch.

        With `ema_decay`, dev is scored and the bundles saved with the weights' moving average; the weights as
        trained are scored too, for the record (`dev_wer_trained`, `dev_cer_trained` in epochs.json)."""
        config, chief, step = self.config, self.chief, int(self.step.numpy())
        dev_wer = dev_error = None
        trained = {}
        if self.ema:
            if config.dev_shards:
                wer, cer, _ = dev_scores(self.eval_fn, config.dev_shards, self.feature_config, self.normalizer,
                                         self.vocab, self.pipeline)
                trained = {"dev_wer_trained": wer, "dev_cer_trained": cer}
            averaging.swap(self.ema, self.ema_sources)
        if config.dev_shards:
            dev_wer, dev_cer, examples = dev_scores(self.eval_fn, config.dev_shards, self.feature_config,
                                                    self.normalizer, self.vocab, self.pipeline, config.num_examples)
            self.history["dev_wer"].append(dev_wer)
            self.history["dev_cer"].append(dev_cer)
            dev_error = dev_wer if self.vocab.metric == "wer" else dev_cer
            if chief:
                dev_summary(self.dev_writer, step, dev_wer, dev_cer, examples)
            if config.verbose and chief:
                print(f"epoch {epoch + 1}: dev WER {dev_wer:.2%}, CER {dev_cer:.2%}" + (
                    f" (the weights' moving average; as trained: WER {trained['dev_wer_trained']:.2%}, CER "
                    f"{trained['dev_cer_trained']:.2%})" if trained else ""), flush=True)
        if chief:
            epoch_summary(self.train_writer, step, config.train_shards, self.augmentation,
                          self.feature_config.sample_rate, self.model.weights if config.histograms else None)
            self._save(self.workdir / "last")
            if dev_error is None or dev_error < float(self.best_error.numpy()):
                self._save(self.workdir / "model")
            loss_sum, count = self.epoch_loss
            self._close_loss_block()
            batches = max(int(self.position.numpy()), 1)  # x: epochs done at the block's last batch
            curve = [[round(epoch + min(b / batches, 1.0), 4), round(v, 4)] for b, v in self.loss_blocks]
            self.epochs.append({"epoch": epoch + 1, "step": step, "train_loss": loss_sum / count if count else None,
                                "dev_wer": dev_wer, "dev_cer": self.history["dev_cer"][-1] if dev_wer is not None
                                else None, "seconds": round(getattr(self, "epoch_seconds", 0.0), 1),
                                "learning_rate": learning_rate(config, step, epoch), "loss_curve": curve,
                                **trained, **({} if finished else {"partial": True})})
            write_json(self.workdir / "epochs.json", self.epochs)
            plot_learning_curve(self.epochs, self.workdir / "learning_curve.png")
            if finished and config.average_epochs > 1:  # for `_average`
                averaging.save_snapshot(self.model.variables, self.workdir / "epochs", epoch + 1, config.average_epochs)
        self.epoch_loss, self.loss_blocks, self.loss_block = [0.0, 0], [], [0.0, 0]
        if dev_error is not None:
            self.best_error.assign(min(dev_error, float(self.best_error.numpy())))
        if self.ema:
            averaging.swap(self.ema, self.ema_sources)  # training goes on from the weights as trained
        if finished:
            self.epoch.assign_add(1)
            self.position.assign(0)
            self.history["epochs_completed"] = int(self.epoch.numpy())
        self._save_checkpoint(step)

    def _average(self) -> None:
        """Set the model to the mean weights of the last `average_epochs` epochs (`averaging.assign_mean`), score
        them on dev, write averaged/ and average.json, and make them model/ if they beat the best epoch; the model
        then gets the last epoch's weights back."""
        config = self.config
        paths = averaging.snapshots_to_average(self.workdir / "epochs", config.average_epochs,
                                               self.workdir / "average.json")
        if not paths:
            return
        epochs = averaging.snapshot_epochs(paths)
        last = [v.numpy() for v in self.model.variables]
        averaging.assign_mean(self.model.variables, paths)
        record = {"epochs": epochs, "dev_wer": None, "dev_cer": None, "kept_as_model": True}
        best = float(self.best_error.numpy())
        if config.dev_shards:
            record["dev_wer"], record["dev_cer"], _ = dev_scores(self.eval_fn, config.dev_shards,
                                                                 self.feature_config, self.normalizer, self.vocab,
                                                                 self.pipeline)
            error = record["dev_wer"] if self.vocab.metric == "wer" else record["dev_cer"]
            record["kept_as_model"] = error < best
            record["best_epoch_dev_error"] = best
        self._save(self.workdir / "averaged")
        if record["kept_as_model"]:
            self._save(self.workdir / "model")
        if config.verbose:
            scores = f"dev WER {record['dev_wer']:.2%}, CER {record['dev_cer']:.2%}" if config.dev_shards else "no dev"
            print(f"average of epochs {epochs[0]}-{epochs[-1]}: {scores}; "
                  f"{'kept as model/' if record['kept_as_model'] else 'model/ keeps the best epoch'}", flush=True)
        write_json(self.workdir / "average.json", record)
        for v, value in zip(self.model.variables, last):
            v.assign(value)

    def _save(self, path: Path) -> None:
        save_bundle(path, self.model, self.config.model, self.vocab, self.normalizer, self.config.to_dict())

    def benchmark_result(self) -> dict:
        """PaddleSpeech's benchmark line (`summaries.benchmark_line`)."""
        return benchmark_line(self.config.model_name, self.pipeline.batch_size, self.config.mixed_precision,
                              self.strategy.num_replicas_in_sync, self.timings)
