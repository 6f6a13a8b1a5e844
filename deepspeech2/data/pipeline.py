"""The tf.data input pipeline: shards -> (features, feature_lengths, labels, label_lengths) batches.

Per utterance, inside tf.data with parallel calls (no Python on the hot path):
    parse -> waveform augmentation -> drop what CTC can't fit -> features -> normalize -> feature augmentation
then, per epoch: order (SortaGrad's sorted first epoch, DS2 §3.1, or a shuffle) -> bucket by length
-> padded batches -> (several replicas) each batch split into one batch per replica -> prefetch.

With several replicas a step's batches are the parts of one padded batch, so its replicas train on utterances of
the same bucket and the same padded length (no replica waits for a longer one), and every step has a batch for every
replica: a batch whose rows don't divide evenly is filled up with rows of no frames (`feature_lengths` 0, which
the loss and every layer ignore). tf.distribute would otherwise hand the spare replicas of an epoch's last step
an empty batch.

Both orders are planned in Python from the shard indexes, without reading audio. `make_shards` writes each
shard sorted by duration and lists the durations in its index, so:
- the sorted epoch is a k-way merge of the shards, executed by `choose_from_datasets`;
- a shuffled epoch reads small contiguous blocks of records (similar durations, since shards are sorted)
  from random places of random shards (`shuffle_plan`), several blocks at a time, then shuffles records
  and, after length bucketing, batches. Reading whole shards in a shuffled file order instead would make
  an epoch a few short-to-long sweeps, not the random order DS2 trains with after the first epoch.

Augmentation draws are stateless, keyed on (`PipelineConfig.seed`, epoch, input pipeline, the record's
position in this pipeline's epoch): each epoch and each worker draws anew, while rebuilding an epoch (to
resume it) replays its draws, whatever order the parallel maps run in. SpecAugment masks the normalized
features (as PaddleSpeech does), so a mask holds the per-bin mean, 0.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from deepspeech2.audio import MAX_DURATION
from deepspeech2.data.augment.augmentation import Augmentation
from deepspeech2.data.shards import load_index, parse_example, shard_problem
from deepspeech2.features import FeatureConfig, Normalizer, featurize, frame_lengths, num_frames
from deepspeech2.geometry import ctc_feasible, ctc_label_steps
from deepspeech2.model_config import ModelConfig

AUTOTUNE = tf.data.AUTOTUNE
BLOCKS_IN_FLIGHT = 16  # blocks a shuffled epoch reads at once, record by record in turn
# Shuffled epochs read blocks with `skip` unbuffered: skip then seeks past each record (two small reads),
# where a read buffer would be refilled for every record skipped (measured on 160 KB records: ~2 us
# against ~7 us per record skipped with TF's default 256 KB buffer).
BLOCK_READ_BUFFER = 0
PREFETCH_BATCHES = 2  # batches ready ahead of the training step


@dataclass(frozen=True)
class PipelineConfig:
    """Batching, ordering and filtering of the input pipeline."""

    batch_size: int = 16  # utterances per GLOBAL batch (split over replicas); ignored if batch_frames > 0
    batch_frames: int = 0  # > 0: batch by padded frames instead, so long utterances come in smaller batches and
    # memory stays bounded: a GLOBAL budget, split over the workers and their replicas like `batch_size` (each
    # step's batch = batch_frames // its bucket's longest utterance, in frames)
    min_duration: float = 0.0  # seconds; shorter utterances are dropped
    max_duration: float = MAX_DURATION  # seconds; longer utterances are dropped (memory); make-shards skips
    # them already unless its --max_duration was raised
    sortagrad: bool = True  # first epoch in increasing duration (DS2 §3.1), later ones shuffled
    num_buckets: int = 8  # length buckets for shuffled epochs (0: plain padded batches)
    shuffle_buffer: int = 512  # serialized records held for shuffling (~160 KB each for 5 s)
    shuffle_block: int = 16  # records a shuffled epoch reads in one contiguous block of a shard (their
    # durations are similar: shards are sorted); smaller is more random, larger reads fewer blocks
    seed: int = 0  # shuffles use seed + epoch, so an epoch's order is reproducible on resume; augmentation
    # draws are keyed on (seed, epoch, input pipeline, position in the epoch)
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
        if self.shuffle_block < 1:
            raise ValueError(f"`shuffle_block` must be >= 1, got {self.shuffle_block}")


@dataclass(frozen=True)
class ShardSet:
    """The shard files of one or more shard folders, with their per-record durations (from the indexes)."""

    files: tuple[str, ...]
    durations: tuple[tuple[float, ...], ...]  # per file, in record order (ascending)

    @classmethod
    def load(cls, shard_dirs: Sequence[str]) -> "ShardSet":
        """The shards of `shard_dirs`, as their indexes list them.

        Raises:
            FileNotFoundError: a folder doesn't exist.
            ValueError: a folder has no index (ds2-make-shards didn't finish), its files disagree with its index
                (`deepspeech2.data.shards.shard_problem`), or no shard holds a record.
        """
        files, durations = [], []
        for d in shard_dirs:
            index = load_index(d)
            problem = shard_problem(d, index)
            if problem:
                raise ValueError(problem)
            for s in index["shards"]:
                if s["count"]:
                    files.append(str(Path(d) / s["path"]))
                    durations.append(tuple(s["durations"]))
        if not files:
            raise ValueError(f"no non-empty shards in {list(shard_dirs)}; write them with ds2-make-shards")
        return cls(tuple(files), tuple(durations))

    def select(self, num_pipelines: int, pipeline_id: int) -> "ShardSet":
        """This input pipeline's share of the files (multi-worker training shards by file)."""
        return ShardSet(self.files[pipeline_id::num_pipelines], self.durations[pipeline_id::num_pipelines])

    @property
    def counts(self) -> list[int]:
        """Records per file."""
        return [len(ds) for ds in self.durations]

    def percentiles(self) -> list[float]:
        all_durations = [d for ds in self.durations for d in ds]
        return np.percentile(all_durations, range(0, 101, 5)).tolist()

    def merge_order(self) -> np.ndarray:
        """For each record of the duration-sorted union, the index of the file it comes from."""
        merged = heapq.merge(*[[(d, i) for d in ds] for i, ds in enumerate(self.durations)])
        return np.fromiter((i for _, i in merged), dtype=np.int64)


def shuffle_plan(counts: Sequence[int], block_size: int, seed: int) -> np.ndarray:
    """The reads of one shuffled epoch: every file cut into contiguous blocks, all blocks in a random order.

    Block boundaries start at a random phase per file, so the blocks themselves change from epoch to epoch.

    Args:
        counts: records per file.
        block_size: records per block (a file's first and last block may be shorter).
        seed: the epoch's seed; the same seed gives the same plan (resuming mid-epoch relies on it).

    Returns:
        int64 (num_blocks, 3): `(file index, first record, number of records)` per block, in reading order;
        together the blocks hold every record of every file exactly once.
    """
    rng = np.random.default_rng(seed)
    blocks = []
    for f, n in enumerate(counts):
        if n <= 0:
            continue
        starts = np.unique(np.r_[0, np.arange(rng.integers(block_size), n, block_size)])
        blocks.append(np.stack([np.full(len(starts), f), starts, np.diff(np.r_[starts, n])], axis=1))
    if not blocks:
        return np.zeros((0, 3), np.int64)
    plan = np.concatenate(blocks).astype(np.int64)
    return plan[rng.permutation(len(plan))]


def bucket_plan(percentiles: list[float], feature_config: FeatureConfig, config: PipelineConfig,
                batch: int, replicas: int = 1, pipelines: int = 1) -> tuple[list[int], list[int]]:
    """Bucket boundaries (feature frames) at equally spaced duration percentiles, and each bucket's batch size.

    Args:
        percentiles: this input pipeline's utterance durations at 0, 5, ..., 100%.
        feature_config: turns seconds into frames.
        config: `num_buckets`, `batch_frames`, `max_duration`.
        batch: utterances per batch of this input pipeline (all its replicas together), when batching by count.
        replicas: replicas this pipeline feeds; a `batch_frames` batch holds at least one utterance for each.
        pipelines: input pipelines (workers) sharing `batch_frames`, the global budget.

    Returns:
        `(boundaries, sizes)`: `len(sizes) == len(boundaries) + 1`.
    """
    n = config.num_buckets or 1
    secs = [percentiles[round(i * (len(percentiles) - 1) / n)] for i in range(1, n)] if percentiles else []
    boundaries = sorted({num_frames(int(s * feature_config.sample_rate), feature_config) + 1 for s in secs})
    boundaries = [b for b in boundaries if b > 1]
    if config.batch_frames:
        longest = num_frames(int(config.max_duration * feature_config.sample_rate * 1.2), feature_config)
        uppers = boundaries + [max(longest, boundaries[-1] + 1 if boundaries else 1)]
        budget = config.batch_frames // pipelines
        sizes = [max(replicas, budget // u) for u in uppers]
    else:
        sizes = [batch] * (len(boundaries) + 1)
    return boundaries, sizes


def split_over_replicas(batch: tuple, replicas: int) -> tf.data.Dataset:
    """One padded batch as `replicas` consecutive batches of equal shape: its rows in order, filled up to a
    multiple of `replicas` with rows of no frames (zeros, `feature_lengths` and `label_lengths` 0).

    Args:
        batch: `(features, feature_lengths, labels, label_lengths[, text])`, batch-major.
        replicas: parts to split into (tf.distribute hands consecutive elements to the replicas in turn).
    """
    rows = tf.shape(batch[0])[0]
    fill = (-rows) % replicas
    parts = []
    for x in batch:
        padding = [[0, fill]] + [[0, 0]] * (len(x.shape) - 1)
        x = tf.pad(x, padding, constant_values="" if x.dtype == tf.string else 0)
        parts.append(tf.reshape(x, tf.concat([[replicas, -1], tf.shape(x)[1:]], axis=0)))
    return tf.data.Dataset.from_tensor_slices(tuple(parts))


def fill_empty_batch(features, feature_lengths, labels, label_lengths, min_frames: int):
    """The batch, with one row of no frames added when it has none, and zero frames added up to `min_frames`, the
    shortest input the model takes.

    tf.distribute hands a replica an empty batch (no rows, often no frames) where a worker's data ends before its
    peers': the replica must still run the step, since every synchronized BatchNorm and the gradients' all-reduce
    wait for it; with the filler row it runs as usual and adds nothing. A batch with rows is returned as it is
    (`make_dataset` gives every step's replicas batches of one shape).
    """
    pad_rows = tf.maximum(1 - tf.shape(features)[0], 0)
    pad_frames = tf.maximum(min_frames - tf.shape(features)[1], 0)
    features = tf.pad(features, [[0, pad_rows], [0, pad_frames], [0, 0]])
    return (features, tf.pad(feature_lengths, [[0, pad_rows]]), tf.pad(labels, [[0, pad_rows], [0, 0]]),
            tf.pad(label_lengths, [[0, pad_rows]]))


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
    model_config: ModelConfig | None = None,
) -> tf.data.Dataset:
    """Build one epoch of batches.

    Args:
        shard_dirs: folders written by `ds2-make-shards` (each with an index.json).
        feature_config: how to compute features (must match the normalizer's).
        normalizer: z-score stats; None leaves features unnormalized.
        augmentation: applied only when `training`; its draws are a function of (`config.seed`, `epoch`, the
            input pipeline, the record's position in the epoch), so rebuilding an epoch replays them.
        config: batching and ordering.
        epoch: 0-based epoch; with `config.sortagrad`, epoch 0 is sorted by duration, later epochs (and all
            with `sortagrad` off) are shuffled with seed `config.seed + epoch`.
        training: False gives evaluation order (sorted by duration: least padding) and no augmentation.
        keep_text: also yield the transcripts, (batch,) tf.string, as a fifth element.
        input_context: from `strategy.distribute_datasets_from_function`; shards files across input
            pipelines (workers) and yields, for each step, one batch per replica of this pipeline
            (`split_over_replicas`).
        model_config: when given, utterances CTC can't fit through this model are dropped
            (`deepspeech2.geometry.ctc_feasible` on the audio after waveform augmentation, which may change
            its length). `count_infeasible` counts them from the shard indexes.

    Returns:
        A dataset of `(features, feature_lengths, labels, label_lengths[, text])` with shapes
        (batch, frames, dim) float32, (batch,) int32, (batch, labels) int32 (0-padded), (batch,) int32.
    """
    if normalizer is not None and normalizer.feature_config != feature_config:
        raise ValueError(f"the normalizer was computed for {normalizer.feature_config} but the pipeline uses "
                         f"{feature_config}; recompute it with ds2-compute-stats")
    shards = ShardSet.load(shard_dirs)
    share = _share(config, input_context)
    if share.pipelines > 1:
        if len(shards.files) < share.pipelines:
            raise ValueError(f"{len(shards.files)} shards cannot be split over {share.pipelines} workers; re-run "
                             "ds2-make-shards with --num_shards >= the number of workers")
        shards = shards.select(share.pipelines, share.pipeline_id)
    sorted_epoch = not training or (config.sortagrad and epoch == 0)
    seed = config.seed + epoch
    ds = _sorted_records(shards) if sorted_epoch else _shuffled_records(shards, config.shuffle_block,
                                                                        config.shuffle_buffer, seed)
    augment = augmentation if training and augmentation else None
    ds = _utterances(ds, feature_config, normalizer, augment, config, (config.seed, epoch, share.pipeline_id),
                     keep_text, model_config)
    ds = _batches(ds, shards.percentiles(), feature_config, config, share, sorted_epoch, seed, keep_text)
    return _with_options(ds, config.deterministic).prefetch(PREFETCH_BATCHES)


class _Share(NamedTuple):
    """This input pipeline's place among the others, and its part of the global batch."""

    pipeline_id: int  # which input pipeline (worker) this is
    pipelines: int  # input pipelines (workers) in all
    replicas: int  # replicas this pipeline feeds
    batch: int  # utterances per batch of this pipeline, all its replicas together (batching by count)


def _share(config: PipelineConfig, input_context: tf.distribute.InputContext | None) -> _Share:
    if input_context is None:
        return _Share(0, 1, 1, config.batch_size)
    pipelines = input_context.num_input_pipelines
    if not config.batch_frames and config.batch_size % pipelines:
        raise ValueError(f"`batch_size` {config.batch_size} is the global batch: it must divide evenly over the "
                         f"{pipelines} workers; give a multiple of {pipelines}")
    return _Share(input_context.input_pipeline_id, pipelines, input_context.num_replicas_in_sync // pipelines,
                  config.batch_size // pipelines)


def _sorted_records(shards: ShardSet) -> tf.data.Dataset:
    """The serialized records of `shards` in increasing duration: a k-way merge of the sorted shards into one
    sorted stream (SortaGrad's first epoch, and evaluation order)."""
    return tf.data.Dataset.choose_from_datasets([tf.data.TFRecordDataset(f) for f in shards.files],
                                                tf.data.Dataset.from_tensor_slices(shards.merge_order()))


def _shuffled_records(shards: ShardSet, block: int, buffer: int, seed: int) -> tf.data.Dataset:
    """The serialized records of `shards` in a shuffled order: blocks of `block` records at random places of
    random shards (`shuffle_plan`), `BLOCKS_IN_FLIGHT` of them read in turn, then shuffled in a `buffer`."""
    plan = shuffle_plan(shards.counts, block, seed)
    files = tf.constant(shards.files)

    def read_block(f, start, count):
        return tf.data.TFRecordDataset(tf.gather(files, f), buffer_size=BLOCK_READ_BUFFER).skip(start).take(count)

    ds = tf.data.Dataset.from_tensor_slices((plan[:, 0], plan[:, 1], plan[:, 2]))
    ds = ds.interleave(read_block, cycle_length=min(len(plan), BLOCKS_IN_FLIGHT), block_length=1,
                       num_parallel_calls=AUTOTUNE, deterministic=True)
    return ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=False)


def _utterances(records: tf.data.Dataset, feature_config: FeatureConfig, normalizer: Normalizer | None,
                augment: Augmentation | None, config: PipelineConfig, stream_key: tuple[int, int, int],
                keep_text: bool, model_config: ModelConfig | None) -> tf.data.Dataset:
    """Each record parsed, augmented (waveform), filtered (durations, CTC), featurized, normalized and augmented
    (features): `(features, feature_lengths, labels, label_lengths[, text])` per utterance.

    `stream_key` is (seed, epoch, input pipeline): with the record's position it keys its augmentation draws.
    """
    # A record's key for the augmentation draws is (this epoch and pipeline's stream, the record's position),
    # the position from `enumerate`, before the parallel maps, so the key stays with the record whatever
    # order they run in. Distinct keys are independent streams for the stateless (Philox) ops.
    hi, lo = (int(x) for x in np.random.SeedSequence(list(stream_key)).generate_state(2))
    stream = (hi << 31) | (lo >> 1)  # 63 bits: a non-negative int64

    def waveform(position, serialized):
        r = parse_example(serialized)
        wav, length = r["audio"], r["num_samples"]
        key = tf.stack([tf.constant(stream, tf.int64), position])  # (2,) int64
        if augment is not None:
            wav, length = augment.apply_waveform(wav, length, key)  # speed perturbation changes the length
        return {"audio": wav, "num_samples": length, "duration": r["duration"], "labels": r["labels"],
                "text": r["text"], "key": key}

    def usable(r):
        keep = (r["duration"] >= config.min_duration) & (r["duration"] <= config.max_duration)
        keep &= frame_lengths(r["num_samples"], feature_config) > 0  # shorter than one analysis window
        if model_config is not None:  # on the augmented length, by the one definition
            keep &= ctc_feasible(model_config, feature_config, r["num_samples"], ctc_label_steps(r["labels"]))
        return keep

    def features(r):
        feats, n = featurize(r["audio"], r["num_samples"], feature_config, normalizer)  # (frames, dim), ()
        if augment is not None:
            # On normalized features: a mask's 0 is the per-bin mean (masking raw log power with 0 and
            # normalizing after turned every mask into a loud broadband band).
            # VTLP and SpecAugment act on the spectral bins; a pitch-gram keeps its lags (speed perturbation
            # already moves the pitch).
            spectral, pitch = tf.split(feats, [feature_config.spectral_dim, feature_config.pitch_bins], -1)
            feats = tf.concat([augment.apply_features(spectral, n, r["key"]), pitch], axis=-1)
        out = (feats, n, r["labels"], tf.shape(r["labels"], out_type=tf.int32)[0])
        return out + (r["text"],) if keep_text else out

    ds = records.enumerate().map(waveform, num_parallel_calls=AUTOTUNE, deterministic=config.deterministic)
    ds = ds.filter(usable)
    return ds.map(features, num_parallel_calls=AUTOTUNE, deterministic=config.deterministic)


def _batches(utterances: tf.data.Dataset, percentiles: list[float], feature_config: FeatureConfig,
             config: PipelineConfig, share: _Share, sorted_epoch: bool, seed: int, keep_text: bool) -> tf.data.Dataset:
    """Padded batches: by length bucket (shuffled epochs, or `batch_frames`), else plain; with several replicas
    each batch split into one per replica (`split_over_replicas`)."""
    dim = feature_config.dim
    padded_shapes = ([None, dim], [], [None], []) + (([],) if keep_text else ())
    padding_values = (0.0, 0, 0, 0) + (("",) if keep_text else ())
    # A sorted epoch needs no buckets for count batches: neighbours already have similar lengths.
    if config.batch_frames or (config.num_buckets and not sorted_epoch):
        boundaries, sizes = bucket_plan(percentiles, feature_config, config, share.batch, share.replicas,
                                        share.pipelines)
        ds = utterances.bucket_by_sequence_length(
            lambda feats, n, *_: n, boundaries, sizes, padded_shapes=padded_shapes,
            padding_values=padding_values, drop_remainder=config.drop_remainder)
        if not sorted_epoch:  # buckets fill at different rates; mix the order of the finished batches too
            ds = ds.shuffle(64, seed=seed)
    else:
        ds = utterances.padded_batch(share.batch, padded_shapes, padding_values, drop_remainder=config.drop_remainder)
    if share.replicas > 1:
        ds = ds.flat_map(lambda *b: split_over_replicas(b, share.replicas))
    return ds


def _with_options(ds: tf.data.Dataset, deterministic: bool) -> tf.data.Dataset:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    options.deterministic = deterministic
    # Parallelism comes from the parallel maps; one thread per op avoids oversubscribing the cores.
    options.threading.max_intra_op_parallelism = 1
    # No autotuning model: AUTOTUNE parallelism is then the thread pool's size (one per core). Its background
    # optimizer competes with training for the cores, and an epoch's iterator can only be destroyed once
    # its pass is done: 35-45 s between epochs on 2 cores, a quarter of the tiny recipe's epoch. The
    # pipeline is not the bottleneck either way (it makes the tiny epoch in 3.5 s with or without it).
    options.autotune.enabled = False
    return ds.with_options(options)


def count_infeasible(shard_dirs: Sequence[str], feature_config: FeatureConfig, model_config: ModelConfig,
                     config: PipelineConfig = PipelineConfig()) -> tuple[int, int]:
    """Count, from the shard indexes alone (no audio read), the utterances `make_dataset` drops because
    CTC can't fit them through `model_config` (`deepspeech2.geometry.ctc_feasible`, as the pipeline's filter).

    Exact without waveform augmentation; speed perturbation changes lengths at run time.

    Returns:
        `(infeasible, total)`: utterances CTC can't fit, and utterances within the duration limits.

    Raises:
        ValueError: an index written by an older ds2-make-shards (no per-record samples and label steps).
    """
    bad = total = 0
    for d in shard_dirs:
        index = load_index(d)
        rate = index["sample_rate"]
        for s in index["shards"]:
            if "num_samples" not in s or "label_steps" not in s:
                raise ValueError(f"the index of `{d}` lacks per-record `num_samples` and `label_steps` (written "
                                 "by an older ds2-make-shards); re-run ds2-make-shards with the same arguments")
            for samples, steps in zip(s["num_samples"], s["label_steps"]):
                # The record's duration field is samples / rate: the pipeline's duration filter sees the same.
                if config.min_duration <= samples / rate <= config.max_duration:
                    total += 1
                    bad += not ctc_feasible(model_config, feature_config, samples, steps)
    return bad, total


def epoch_steps(shard_dirs: Sequence[str], feature_config: FeatureConfig, model_config: ModelConfig | None,
                config: PipelineConfig = PipelineConfig(), sorted_epoch: bool = True, pipelines: int = 1) -> int:
    """The steps of one epoch, planned from the shard indexes as `make_dataset` batches it (no audio read).

    Exact without waveform augmentation (speed perturbation moves utterances between buckets). On a cluster
    the epoch lasts as long as its longest worker's share; the others' replicas get empty batches meanwhile.

    Args:
        shard_dirs, feature_config, model_config, config: as `make_dataset` takes them (`model_config` None
            keeps the utterances CTC can't fit).
        sorted_epoch: SortaGrad's first epoch (or evaluation order), else a shuffled one.
        pipelines: workers, each with its share of the files (a worker's step is one batch split over its
            replicas, so their number doesn't change the count).
    """
    shards = ShardSet.load(shard_dirs)
    batch = config.batch_size // pipelines
    most = 0
    for worker in range(pipelines):
        mine = shards.select(pipelines, worker) if pipelines > 1 else shards
        files = set(mine.files)
        frames = []
        for d in shard_dirs:
            index = load_index(d)
            rate = index["sample_rate"]
            for s in index["shards"]:
                if str(Path(d) / s["path"]) not in files:
                    continue
                for samples, steps in zip(s["num_samples"], s["label_steps"]):
                    n = num_frames(samples, feature_config)
                    keep = config.min_duration <= samples / rate <= config.max_duration and n > 0
                    if model_config is not None:
                        keep = keep and ctc_feasible(model_config, feature_config, samples, steps)
                    if keep:
                        frames.append(n)
        if config.batch_frames or (config.num_buckets and not sorted_epoch):
            boundaries, sizes = bucket_plan(mine.percentiles(), feature_config, config, batch, 1, pipelines)
            counts = np.bincount(np.searchsorted(boundaries, frames, side="right"), minlength=len(sizes))
            steps = sum(c // size if config.drop_remainder else -(-c // size) for c, size in zip(counts, sizes))
        else:
            steps = len(frames) // batch if config.drop_remainder else -(-len(frames) // batch)
        most = max(most, int(steps))
    return most


def padding_efficiency(dataset: tf.data.Dataset, max_batches: int | None = None) -> float:
    """Real frames / padded frames over the batches of `dataset` (1.0 = no padding)."""
    real = padded = 0
    for i, (feats, lengths, *_) in enumerate(dataset):
        if max_batches is not None and i >= max_batches:
            break
        real += int(tf.reduce_sum(lengths))
        padded += int(feats.shape[0]) * int(feats.shape[1])
    return real / padded if padded else math.nan
