"""The tf.data input pipeline: shards -> (features, feature_lengths, labels, label_lengths) batches.

Per utterance, inside tf.data with parallel calls (no Python on the hot path):
    parse -> waveform augmentation -> features -> feature augmentation -> normalize
then, per epoch: order (SortaGrad's sorted first epoch, DS2 §3.1, or a shuffle) -> bucket by length
-> padded batches -> prefetch.

SortaGrad needs no global sort at run time: `make_shards` writes each shard sorted by duration and
lists the durations in its index, so the sorted epoch is a k-way merge of the shards, planned in Python
from the index and executed by `choose_from_datasets` (no audio is read to plan it).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from deepspeech2.data.augment import Augmentation
from deepspeech2.data.shards import load_index, parse_example
from deepspeech2.features import FeatureConfig, compute_features, num_frames
from deepspeech2.normalizer import Normalizer

AUTOTUNE = tf.data.AUTOTUNE


@dataclass(frozen=True)
class PipelineConfig:
    """Batching, ordering and filtering of the input pipeline."""

    batch_size: int = 16  # utterances per GLOBAL batch (split over replicas); ignored if batch_frames > 0
    batch_frames: int = 0  # > 0: batch by total padded frames per replica instead, so long utterances
    # come in smaller batches and memory stays bounded (batch = batch_frames // bucket's longest)
    min_duration: float = 0.0  # seconds; shorter utterances are dropped
    max_duration: float = 27.0  # seconds; longer utterances are dropped (memory)
    sortagrad: bool = True  # first epoch in increasing duration (DS2 §3.1), later ones shuffled
    num_buckets: int = 8  # length buckets for shuffled epochs (0: plain padded batches)
    shuffle_buffer: int = 512  # serialized records held for shuffling (~160 KB each for 5 s)
    seed: int = 0  # shuffles use seed + epoch, so an epoch's order is reproducible on resume
    drop_remainder: bool = False  # drop a last partial batch (set for multi-worker training)
    deterministic: bool = True  # keep the order fixed under parallel map (needed to resume mid-epoch)

    def __post_init__(self):
        if self.batch_size < 1:
            raise ValueError(f"`batch_size` must be >= 1, got {self.batch_size}")
        if self.batch_frames < 0:
            raise ValueError(f"`batch_frames` must be >= 0, got {self.batch_frames}")
        if not 0 <= self.min_duration < self.max_duration:
            raise ValueError(f"need 0 <= `min_duration` < `max_duration`, got {self.min_duration}, "
                             f"{self.max_duration}")
        if self.num_buckets < 0 or self.shuffle_buffer < 1:
            raise ValueError(f"`num_buckets` must be >= 0 and `shuffle_buffer` >= 1, got "
                             f"{self.num_buckets}, {self.shuffle_buffer}")


@dataclass(frozen=True)
class ShardSet:
    """The shard files of one or more shard folders, with their per-record durations (from the indexes)."""

    files: tuple[str, ...]
    durations: tuple[tuple[float, ...], ...]  # per file, in record order (ascending)

    @classmethod
    def load(cls, shard_dirs: Sequence[str]) -> "ShardSet":
        files, durations = [], []
        for d in shard_dirs:
            for s in load_index(d)["shards"]:
                if s["count"]:
                    files.append(str(Path(d) / s["path"]))
                    durations.append(tuple(s["durations"]))
        if not files:
            raise ValueError(f"no non-empty shards in {list(shard_dirs)}; write them with ds2-make-shards")
        return cls(tuple(files), tuple(durations))

    def select(self, num_pipelines: int, pipeline_id: int) -> "ShardSet":
        """This input pipeline's share of the files (multi-worker training shards by file)."""
        return ShardSet(self.files[pipeline_id::num_pipelines], self.durations[pipeline_id::num_pipelines])

    def percentiles(self) -> list[float]:
        all_durations = [d for ds in self.durations for d in ds]
        return np.percentile(all_durations, range(0, 101, 5)).tolist()

    def merge_order(self) -> np.ndarray:
        """For each record of the duration-sorted union, the index of the file it comes from."""
        merged = heapq.merge(*[[(d, i) for d in ds] for i, ds in enumerate(self.durations)])
        return np.fromiter((i for _, i in merged), dtype=np.int64)


def bucket_plan(percentiles: list[float], feature_config: FeatureConfig, config: PipelineConfig,
                per_replica_batch: int) -> tuple[list[int], list[int]]:
    """Bucket boundaries (feature frames) at equally spaced duration percentiles, and batch sizes."""
    n = config.num_buckets or 1
    secs = [percentiles[round(i * (len(percentiles) - 1) / n)] for i in range(1, n)] if percentiles else []
    boundaries = sorted({num_frames(int(s * feature_config.sample_rate), feature_config) + 1 for s in secs})
    boundaries = [b for b in boundaries if b > 1]
    if config.batch_frames:
        longest = num_frames(int(config.max_duration * feature_config.sample_rate * 1.2), feature_config)
        uppers = boundaries + [max(longest, boundaries[-1] + 1 if boundaries else 1)]
        sizes = [max(1, config.batch_frames // u) for u in uppers]
    else:
        sizes = [per_replica_batch] * (len(boundaries) + 1)
    return boundaries, sizes


def make_dataset(
    shard_dirs: Sequence[str],
    feature_config: FeatureConfig,
    normalizer: Normalizer | None = None,
    augmentation: Augmentation | None = None,
    config: PipelineConfig = PipelineConfig(),
    epoch: int = 0,
    training: bool = True,
    keep_text: bool = False,
    input_context: tf.distribute.InputContext | None = None,
    output_length: Callable[[tf.Tensor], tf.Tensor] | None = None,
) -> tf.data.Dataset:
    """Build one epoch of batches.

    Args:
        shard_dirs: folders written by `ds2-make-shards` (each with an index.json).
        feature_config: how to compute features (must match the normalizer's).
        normalizer: z-score stats; None leaves features unnormalized.
        augmentation: applied only when `training`.
        config: batching and ordering.
        epoch: 0-based epoch; with `config.sortagrad`, epoch 0 is sorted by duration.
        training: False gives evaluation order (sorted by duration: least padding) and no augmentation.
        keep_text: also yield the transcripts, (batch,) tf.string, as a fifth element.
        input_context: from `strategy.distribute_datasets_from_function`; shards files across input
            pipelines (workers) and sizes batches per replica.
        output_length: the model's feature frames -> output steps; when given, utterances whose labels
            can't fit (steps < labels + repeats, so CTC is infinite) are dropped. `count_infeasible` counts
            them from the shard indexes.

    Returns:
        A dataset of `(features, feature_lengths, labels, label_lengths[, text])` with shapes
        (batch, frames, dim) float32, (batch,) int32, (batch, labels) int32 (0-padded), (batch,) int32.
    """
    if normalizer is not None and normalizer.feature_config != feature_config:
        raise ValueError(f"the normalizer was computed for {normalizer.feature_config} but the pipeline uses "
                         f"{feature_config}; recompute it with ds2-compute-stats")
    shards = ShardSet.load(shard_dirs)
    sorted_epoch = not training or (config.sortagrad and epoch == 0)
    seed = config.seed + epoch
    batch = config.batch_size
    if input_context is not None:
        batch = input_context.get_per_replica_batch_size(config.batch_size)
        if input_context.num_input_pipelines > 1:
            if len(shards.files) < input_context.num_input_pipelines:
                raise ValueError(f"{len(shards.files)} shards cannot be split over "
                                 f"{input_context.num_input_pipelines} workers; re-run ds2-make-shards with "
                                 "--num_shards >= the number of workers")
            shards = shards.select(input_context.num_input_pipelines, input_context.input_pipeline_id)
    percentiles = shards.percentiles()

    if sorted_epoch:
        # k-way merge of the sorted shards into one sorted stream (SortaGrad's first epoch).
        ds = tf.data.Dataset.choose_from_datasets(
            [tf.data.TFRecordDataset(f) for f in shards.files],
            tf.data.Dataset.from_tensor_slices(shards.merge_order()))
    else:
        ds = tf.data.Dataset.from_tensor_slices(list(shards.files)).shuffle(len(shards.files), seed=seed)
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(len(shards.files), 16), block_length=1,
                           num_parallel_calls=AUTOTUNE, deterministic=True)
        ds = ds.shuffle(config.shuffle_buffer, seed=seed, reshuffle_each_iteration=False)
    ds = ds.map(parse_example, num_parallel_calls=AUTOTUNE, deterministic=config.deterministic)
    ds = ds.filter(lambda r: (r["duration"] >= config.min_duration) & (r["duration"] <= config.max_duration))

    augment = augmentation if training and augmentation else None

    def featurize(r):
        wav, length = r["audio"], r["num_samples"]
        if augment is not None:
            wav, length = augment.apply_waveform(wav, length)
        feats, n = compute_features(wav, length, feature_config)  # (frames, dim), ()
        if augment is not None:
            feats = augment.apply_features(feats, n)
        if normalizer is not None:
            feats = normalizer.apply(feats, n)
        out = (feats, n, r["labels"], tf.shape(r["labels"], out_type=tf.int32)[0])
        return out + (r["text"],) if keep_text else out

    ds = ds.map(featurize, num_parallel_calls=AUTOTUNE, deterministic=config.deterministic)
    ds = ds.filter(lambda feats, n, *_: n > 0)  # shorter than one analysis window
    if output_length is not None:
        ds = ds.filter(lambda feats, n, labels, *_: output_length(n) >= ctc_steps(labels))

    dim = feature_config.dim
    padded_shapes = ([None, dim], [], [None], []) + (([],) if keep_text else ())
    padding_values = (0.0, 0, 0, 0) + (("",) if keep_text else ())
    # A sorted epoch needs no buckets for count batches: neighbours already have similar lengths.
    if config.batch_frames or (config.num_buckets and not sorted_epoch):
        boundaries, sizes = bucket_plan(percentiles, feature_config, config, batch)
        ds = ds.bucket_by_sequence_length(
            lambda feats, n, *_: n, boundaries, sizes, padded_shapes=padded_shapes,
            padding_values=padding_values, drop_remainder=config.drop_remainder)
        if not sorted_epoch:  # buckets fill at different rates; mix the order of the finished batches too
            ds = ds.shuffle(64, seed=seed)
    else:
        ds = ds.padded_batch(batch, padded_shapes, padding_values, drop_remainder=config.drop_remainder)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    options.deterministic = config.deterministic
    # Parallelism comes from the parallel maps; one thread per op avoids oversubscribing the cores.
    options.threading.max_intra_op_parallelism = 1
    return ds.with_options(options).prefetch(AUTOTUNE)


def ctc_steps(labels: tf.Tensor) -> tf.Tensor:
    """CTC output steps needed for (labels,): one per label plus a blank between repeats."""
    repeats = tf.reduce_sum(tf.cast(tf.equal(labels[1:], labels[:-1]), tf.int32))
    return tf.size(labels, out_type=tf.int32) + repeats


def count_infeasible(shard_dirs: Sequence[str], feature_config: FeatureConfig, output_length: Callable,
                     config: PipelineConfig = PipelineConfig()) -> tuple[int, int]:
    """(utterances CTC can't fit, utterances in range) from the shard indexes alone (no audio read)."""
    bad = total = 0
    for d in shard_dirs:
        for s in load_index(d)["shards"]:
            for seconds, steps in zip(s["durations"], s["label_steps"]):
                if config.min_duration <= seconds <= config.max_duration:
                    total += 1
                    frames = num_frames(int(round(seconds * feature_config.sample_rate)), feature_config)
                    bad += int(output_length(frames)) < steps
    return bad, total


def padding_efficiency(dataset: tf.data.Dataset, max_batches: int | None = None) -> float:
    """Real frames / padded frames over the batches of `dataset` (1.0 = no padding)."""
    real = padded = 0
    for i, (feats, lengths, *_) in enumerate(dataset):
        if max_batches is not None and i >= max_batches:
            break
        real += int(tf.reduce_sum(lengths))
        padded += int(feats.shape[0]) * int(feats.shape[1])
    return real / padded if padded else math.nan
