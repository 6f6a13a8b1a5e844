"""Train a DeepSpeech2 model (or resume one: re-run the same command).

    ds2-train --flagfile=examples/tiny/tiny.flags
    ds2-train --flagfile=examples/librispeech/en.flags --workdir runs/en

Every local GPU trains (MirroredStrategy); on a cluster, start the same command on every machine with TF_CONFIG
set (MultiWorkerMirroredStrategy; examples/librispeech/README.md). It says first what it will run on: the
devices, the precision, the global batch, the steps of an epoch and the recurrent kernel. --dry_run says that,
times a few steps and estimates an epoch's time, without touching --workdir.
"""

import dataclasses
import json
import logging
import sys

from absl import flags

from deepspeech2.data.pipeline import PipelineConfig
from deepspeech2.model_config import PRESETS, load_model_config
from deepspeech2.train.config import (LR_SCHEDULES, MIXED_POLICIES, OPTIMIZERS, BenchmarkConfig, CheckpointConfig,
                                      OptimizationConfig, TrainConfig)
from deepspeech2.train.trainer import train

try:
    from ._flags import default, from_flags
except ImportError:  # python bin/ds2_train.py
    from _flags import default, from_flags

T, P, O = TrainConfig, PipelineConfig, OptimizationConfig
flags.DEFINE_string("workdir", None, "Checkpoints, TensorBoard logs and the model bundle.")
flags.DEFINE_list("train_shards", None, "Training shard folders (ds2-make-shards).")
flags.DEFINE_list("dev_shards", default(T, "dev_shards"), "Dev shard folders, greedy WER/CER each epoch.")
flags.DEFINE_string("vocab", None, "Vocabulary file.")
flags.DEFINE_string("mean_std", None, "Normalizer stats (ds2-compute-stats); they fix the features.")
flags.DEFINE_string("augmentation", "", "Augmentation JSON (seed format).")
flags.DEFINE_string("model", "ds2-small", "Model: a preset (tiny, ds2-small, ds2-paper-en, ds2-streaming, ds1) "
                    "or a model_config.json (or a bundle folder holding one).")
flags.DEFINE_string("model_overrides", "{}", 'JSON of ModelConfig fields to change, e.g. {"rnn_layers": 5}; '
                    '{"feature_kind": "logmel", "feature_dim": 80} builds the model for log-mel stats.')
flags.DEFINE_integer("epochs", default(T, "epochs"), "Epochs.")
flags.DEFINE_integer("batch_size", default(P, "batch_size"), "Global batch size (utterances), split over replicas.")
flags.DEFINE_integer("batch_frames", default(P, "batch_frames"), "If > 0, batch by padded frames instead: the "
                     "global budget of a step, split over the replicas (a replica holds about batch_frames / "
                     "replicas).")
flags.DEFINE_float("min_duration", default(P, "min_duration"), "Drop shorter utterances (s).")
flags.DEFINE_float("max_duration", default(P, "max_duration"), "Drop longer utterances (s).")
flags.DEFINE_bool("sortagrad", default(P, "sortagrad"), "First epoch sorted by duration (DS2 §3.1).")
flags.DEFINE_integer("num_buckets", default(P, "num_buckets"), "Length buckets for shuffled epochs (0 = none).")
flags.DEFINE_enum("optimizer", default(O, "optimizer"), list(OPTIMIZERS), "adam, or sgd (Nesterov momentum).")
flags.DEFINE_float("learning_rate", default(O, "learning_rate"), "Peak learning rate.")
flags.DEFINE_integer("warmup_steps", default(O, "warmup_steps"), "Linear warm-up steps.")
flags.DEFINE_enum("lr_schedule", default(O, "lr_schedule"), list(LR_SCHEDULES),
                  "Per-epoch anneal after warm-up: 'exponential' (times --lr_decay an epoch, DS2) or 'cosine' "
                  "(a half cosine from the peak in the first epoch to --lr_final times it in the last).")
flags.DEFINE_float("lr_decay", default(O, "lr_decay"), "exponential: the per-epoch learning-rate factor.")
flags.DEFINE_float("lr_final", default(O, "lr_final"), "cosine: the last epoch's rate as a fraction of the peak.")
flags.DEFINE_float("clipnorm", default(O, "clipnorm"), "Global gradient-norm clip (0 = off).")
flags.DEFINE_enum("mixed_precision", default(T, "mixed_precision"), list(MIXED_POLICIES),
                  "Mixed-precision policy ('' = float32). 'auto': bf16 on GPUs of compute capability 8+ and on "
                  "CPUs with AVX512-BF16/AMX, fp16 on older tensor-core GPUs, float32 elsewhere (a CPU without "
                  "bf16 instructions emulates them: 1.75x slower on an AVX2 EPYC).")
flags.DEFINE_bool("jit_compile", default(T, "jit_compile"), "XLA-compile the model's forward and backward pass "
                  "(one device).")
flags.DEFINE_integer("checkpoint_every_steps", default(CheckpointConfig, "every_steps"), "Checkpoint interval.")
flags.DEFINE_integer("log_every_steps", default(T, "log_every_steps"), "Summary/log interval.")
flags.DEFINE_bool("histograms", default(T, "histograms"), "Weight histograms in TensorBoard.")
flags.DEFINE_string("init_model_path", default(T, "init_model_path"), "Fine-tune from this model bundle.")
flags.DEFINE_bool("restart_epoch", default(T, "restart_epoch"), "Resume the checkpoint's weights, optimizer and "
                  "step but start its epoch over at batch 0: needed to resume mid-epoch after a change to the batch "
                  "size, --batch_frames, seed, shards or replica count.")
flags.DEFINE_integer("benchmark_batch_size", default(BenchmarkConfig, "batch_size"), "Benchmark: override the "
                     "batch size, log every step.")
flags.DEFINE_integer("benchmark_max_step", default(BenchmarkConfig, "max_step"), "Benchmark: stop after this many "
                     "steps.")
flags.DEFINE_float("max_train_minutes", default(T, "max_train_minutes"), "Wall-clock budget: end training after "
                   "the step that uses it up, with a dev evaluation and bundles as at an epoch end (0 = none).")
flags.DEFINE_integer("average_epochs", default(T, "average_epochs"), "After the last epoch, average the weights of "
                     "the last N epochs (N > 1; checkpoint averaging as in ESPnet and PaddleSpeech) into averaged/, "
                     "and make them model/ when they score better on dev than the best epoch.")
flags.DEFINE_float("ema_decay", default(T, "ema_decay"), "Keep an exponential moving average of the weights, with "
                   "this decay per step (at most (1 + t) / (10 + t) at step t; 0 = off), and score dev and save the "
                   "bundles with it.")
flags.DEFINE_bool("allow_cpu", default(T, "allow_cpu"), "Train on the CPU even where an NVIDIA driver is installed "
                  "and TensorFlow sees no GPU (else that stops the job, saying why).")
flags.DEFINE_bool("dry_run", False, "Print what the run would use (devices, precision, global batch, steps an "
                  "epoch, recurrent kernel), time a few steps and estimate an epoch's time; --workdir is untouched.")
flags.DEFINE_integer("seed", default(T, "seed"), "Seed of the weight initialization, the shuffles and the "
                     "augmentation.")
flags.DEFINE_integer("verbose", default(T, "verbose"), "0 quiet, 1 progress bar, 2 a line per logged step.")
flags.mark_flags_as_required(["workdir", "train_shards", "vocab", "mean_std"])
F = flags.FLAGS


def main(argv):
    del argv
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        model = dataclasses.replace(load_model_config(F.model), **json.loads(F.model_overrides))
        # Every flag named after a field of these configs sets it (--seed both the run's and the pipeline's);
        # the flags the configs name otherwise are given here.
        config = from_flags(
            TrainConfig, model=model, model_name=F.model if F.model in PRESETS else "custom", vocab_path=F.vocab,
            normalizer_path=F.mean_std, augmentation_path=F.augmentation, pipeline=from_flags(PipelineConfig),
            optimization=from_flags(OptimizationConfig), checkpoints=from_flags(CheckpointConfig, "checkpoint_"),
            benchmark=from_flags(BenchmarkConfig, "benchmark_"))
        result = train(config, dry_run=F.dry_run)
    except (ValueError, FileNotFoundError, TypeError, json.JSONDecodeError) as e:
        print(json.dumps({"model_name": F.model, "JOB_FAIL_FLAG": 1}))
        sys.exit(f"ds2-train: error: {e}")
    if F.dry_run:
        print("\n".join(result["lines"]))
        epoch = result["epoch_seconds"]
        epoch = f"{epoch / 60:.1f} min" if epoch >= 120 else f"{epoch:.0f} s"
        print(f"step: {result['step_seconds']:.3f} s (mean of {result['timed_steps']} timed steps of a shuffled "
              f"epoch); an epoch: ~{epoch} ({result['steps_per_epoch']} steps)")
        print(json.dumps({k: v for k, v in result.items() if k != "lines"}))
        return
    print(json.dumps(result["benchmark"]))


def run():
    """absl's app.run with --help showing this module's docstring and flags (the console script gets here through
    its launcher in deepspeech2_cli, which has quieted TensorFlow first)."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_x.py
        from _app import run as run_app
    run_app(main)


if __name__ == "__main__":
    run()
