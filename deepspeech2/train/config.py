"""`TrainConfig`: everything one training run needs, checked when it is made, with the optimizer and its
learning-rate schedule (`OptimizationConfig`), the checkpoints (`CheckpointConfig`) and a benchmark run's limits
(`BenchmarkConfig`) each in a config of its own. Saved as `train_config.json` in the model bundle. And the model
config a run builds: sized to the vocabulary, checked against the features (`resolve_model_config`)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

from deepspeech2.data.pipeline import PipelineConfig
from deepspeech2.features import FeatureConfig
from deepspeech2.model_config import ModelConfig
from deepspeech2.vocab import Vocabulary

logger = logging.getLogger(__name__)

MIXED_POLICIES = ("", "mixed_bfloat16", "mixed_float16", "auto")
OPTIMIZERS = ("adam", "sgd")
LR_SCHEDULES = ("exponential", "cosine")


@dataclass(frozen=True)
class OptimizationConfig:
    """The optimizer, its learning-rate schedule (`deepspeech2.train.schedule`) and the gradient clip."""

    optimizer: str = "adam"  # "adam", or "sgd" with Nesterov momentum (DS2 §3.1)
    learning_rate: float = 5e-4  # peak learning rate, reached after warm-up
    momentum: float = 0.99  # sgd only (DS2 §3.1)
    warmup_steps: int = 500  # linear warm-up from 0
    lr_schedule: str = "exponential"  # "exponential": times `lr_decay` an epoch (DS2); "cosine": a half cosine
    # from the peak in the first epoch to `lr_final` times it in the last (`TrainConfig.epochs` sets its length)
    lr_decay: float = 1 / 1.2  # exponential: multiply the learning rate by this after each epoch (DS2 §3.1: 1.2)
    lr_final: float = 0.02  # cosine: the last epoch's rate as a fraction of the peak
    clipnorm: float = 400.0  # global gradient-norm clip (0 = off)

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"`optimizer` must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"`learning_rate` must be > 0, got {self.learning_rate!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"`lr_schedule` must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if not 0 < self.lr_decay <= 1:
            raise ValueError(f"`lr_decay` must be in (0, 1], got {self.lr_decay!r}")
        if not 0 <= self.lr_final <= 1:
            raise ValueError(f"`lr_final` must be in [0, 1], got {self.lr_final!r}")


@dataclass(frozen=True)
class CheckpointConfig:
    """How often the run is checkpointed (also at each epoch's end), and how many checkpoints are kept."""

    every_steps: int = 500  # ds2-train --checkpoint_every_steps
    keep: int = 3  # the newest this many; a damaged newest one is skipped for the next (`Trainer._resume`)

    def __post_init__(self):
        if self.every_steps < 1:
            raise ValueError(f"`every_steps` (--checkpoint_every_steps) must be >= 1, got {self.every_steps!r}")
        if self.keep < 1:
            raise ValueError(f"`keep` must be >= 1, got {self.keep!r}")


@dataclass(frozen=True)
class BenchmarkConfig:
    """A run cut short to measure throughput (ds2-train --benchmark_*; bench/train.py, PaddleSpeech's format)."""

    batch_size: int = 0  # > 0: override the batch size (by count, not frames) and log every step
    max_step: int = 0  # > 0: stop after this many steps (and log every step)

    def __post_init__(self):
        if self.batch_size < 0 or self.max_step < 0:
            raise ValueError(f"`batch_size` and `max_step` (--benchmark_batch_size, --benchmark_max_step) must be >= 0 "
                             f"(0 = off), got {self.batch_size!r}, {self.max_step!r}")

    @property
    def enabled(self) -> bool:
        return bool(self.batch_size or self.max_step)


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
    optimization: OptimizationConfig = field(default_factory=OptimizationConfig)  # optimizer, learning rate, clip
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)  # off by default
    augmentation_path: str = ""  # seed-format augmentation JSON; "" = none
    epochs: int = 20  # passes over the training data
    mixed_precision: str = ""  # "", "mixed_bfloat16", "mixed_float16" or "auto" (`resolve_mixed_precision`)
    jit_compile: bool = False  # XLA-compile the train step
    max_bad_batches: int = 5  # this many non-finite batches in a row stop the job
    log_every_steps: int = 10  # summaries and ips lines
    histograms: bool = False  # weight histograms in TensorBoard at each epoch
    num_examples: int = 3  # decoded dev examples written to TensorBoard as text
    init_model_path: str = ""  # fine-tune: start from this model bundle (layers matched by name and shape)
    restart_epoch: bool = False  # resume the checkpoint's weights, optimizer and step, but start its epoch over
    # at batch 0: needed to resume mid-epoch after a change to what orders the batches (`data_order`)
    max_train_minutes: float = 0.0  # > 0: a wall-clock budget; the step that uses it up is the last, then dev
    # is evaluated and the bundles saved as at an epoch end (bench/ablations.py gives each variant the same)
    average_epochs: int = 0  # > 1: after the last epoch, average the weights of the last this many epochs
    ema_decay: float = 0.0  # > 0: also keep an exponential moving average of the weights (decay per step, at most
    # (1 + t) / (10 + t) at step t: over T steps any decay above 1 - 9/T averages the same, about the last tenth of
    # the steps); dev is scored, and the bundles saved, with the averaged weights
    allow_cpu: bool = False  # train on the CPU of a machine whose NVIDIA GPU TensorFlow can't use (else an error)
    seed: int = 0
    verbose: int = 1  # 0 quiet, 1 progress bar per epoch, 2 one line per logged step

    def __post_init__(self):
        if not self.train_shards:
            raise ValueError("`train_shards` is empty; give at least one shard folder from ds2-make-shards")
        if self.mixed_precision not in MIXED_POLICIES:
            raise ValueError(f"`mixed_precision` must be one of {MIXED_POLICIES}, got {self.mixed_precision!r}")
        for name in ("epochs", "max_bad_batches", "log_every_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)!r}")
        if self.average_epochs < 0 or self.average_epochs > self.epochs:
            raise ValueError(f"`average_epochs` must be in [0, epochs={self.epochs}] (0 or 1: no averaging), got "
                             f"{self.average_epochs!r}")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"`ema_decay` must be in [0, 1) (0 = off; 0.99-0.9999 usual), got {self.ema_decay!r}")
        if not self.max_train_minutes >= 0:
            raise ValueError(f"`max_train_minutes` must be >= 0 (0 = no budget), got {self.max_train_minutes!r}")

    def to_dict(self) -> dict:
        """The config as JSON-able values: each nested config a dict of its own (`train_config.json`)."""
        d = dataclasses.asdict(self)
        d["model"] = self.model.to_dict()
        return d


def resolve_model_config(model: ModelConfig, feature_config: FeatureConfig, vocab: Vocabulary) -> ModelConfig:
    """The model config with the vocabulary's size, after checking it takes these features.

    Raises:
        ValueError: the model is built for another feature kind or size than the normalizer's stats.
    """
    if (model.feature_kind, model.feature_dim) != (feature_config.kind, feature_config.dim):
        raise ValueError(
            f"the model takes {model.feature_dim}-dim `{model.feature_kind}` features but the normalizer stats "
            f"are for {feature_config.dim}-dim `{feature_config.kind}` features; recompute the stats with "
            f"`ds2-compute-stats --feature {model.feature_kind}`, or build the model for these features with "
            f"--model_overrides '{{\"feature_kind\": \"{feature_config.kind}\", \"feature_dim\": "
            f"{feature_config.dim}}}'")
    if model.vocab_size != vocab.size:
        logger.info("output layer sized to the vocabulary: %d ids", vocab.size)
    return dataclasses.replace(model, vocab_size=vocab.size)
