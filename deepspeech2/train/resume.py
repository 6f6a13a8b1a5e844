"""Resuming: restoring a checkpoint, and the records saved beside each one (checkpoints/ckpt-N<suffix>.json): what
fixes the order of an epoch's batches (`data_order`), so that a resume mid-epoch can tell whether it would skip the
batches it trained on, and the model's config, so that a resume can tell whether it would load the weights into
another model."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import tensorflow as tf

from deepspeech2.data.pipeline import PipelineConfig
from deepspeech2.data.shards import load_index
from deepspeech2.features import FeatureConfig

logger = logging.getLogger(__name__)

DATA_ORDER_SUFFIX = ".data_order.json"  # beside each checkpoint: checkpoints/ckpt-N.data_order.json
MODEL_SUFFIX = ".model_config.json"  # beside each checkpoint: the ModelConfig it was trained as
RECORD_SUFFIXES = (DATA_ORDER_SUFFIX, MODEL_SUFFIX)


def data_order(pipeline: PipelineConfig, train_shards, feature_config: FeatureConfig, augmentation_path: str,
               usable_utterances: int, replicas: int, workers: int) -> dict:
    """What fixes the order of an epoch's batches, besides the epoch number: resuming mid-epoch skips the
    checkpoint's batches of the rebuilt epoch, which is only right when none of these changed.

    `make_dataset` merges the duration-sorted shards (SortaGrad's first epoch) or shuffles blocks of them with
    `seed` + epoch, splits the files over the workers, drops utterances by duration and CTC feasibility (the
    model's time stride; `usable_utterances` counts what is left), buckets them by feature frames, and batches
    them by `batch_size` over the replicas or by `batch_frames` per replica. Waveform augmentation (speed
    perturbation) changes lengths, hence buckets and feasibility.

    Args:
        pipeline: the pipeline the epoch is read with (after `benchmark_batch_size`).
        train_shards: the shard folders; their indexes give the files, record counts and durations.
        feature_config: its window and hop turn durations into the frames buckets and `batch_frames` count.
        augmentation_path: `TrainConfig.augmentation_path`: a file, a JSON string or "".
        usable_utterances: utterances left after the duration and CTC-feasibility filters.
        replicas: `num_replicas_in_sync`.
        workers: input pipelines (the workers of a cluster; 1 on one machine).

    Returns:
        A flat dict of JSON values, with strings free of commas so that a change reads on one line.
    """
    entries = [(Path(s["path"]).name, s["count"], s.get("durations")) for d in train_shards
               for s in load_index(d)["shards"]]
    shards = hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:12]
    augmentation = "none"
    if augmentation_path:
        path = Path(augmentation_path)
        text = path.read_bytes() if path.is_file() else augmentation_path.encode()
        augmentation = f"sha256 {hashlib.sha256(text).hexdigest()[:12]}"
    return {
        "batch_size": None if pipeline.batch_frames else pipeline.batch_size,  # batch_frames overrides it
        "batch_frames": pipeline.batch_frames, "seed": pipeline.seed, "sortagrad": pipeline.sortagrad,
        "num_buckets": pipeline.num_buckets, "shuffle_buffer": pipeline.shuffle_buffer,
        "shuffle_block": pipeline.shuffle_block, "min_duration": pipeline.min_duration,
        "max_duration": pipeline.max_duration, "drop_remainder": pipeline.drop_remainder,
        "replicas": replicas, "workers": workers,
        "shards": f"{len(entries)} files of {sum(e[1] for e in entries)} utterances (sha256 {shards})",
        "usable_utterances": usable_utterances,
        "frames": f"{feature_config.window_ms:g} ms windows every {feature_config.hop_ms:g} ms at "
                  f"{feature_config.sample_rate} Hz",
        "augmentation": augmentation,
    }


def restore_checkpoint(checkpoint: tf.train.Checkpoint, path: str) -> None:
    """Restore a training checkpoint. One written before the model's variables were saved by path lacks the
    front end's BN statistics: it still resumes, with a warning."""
    checkpoint.restore(path).assert_existing_objects_matched()
    if not any(name.startswith("model_variables/") for name, _ in tf.train.list_variables(path)):
        logger.warning("%s is from an older ds2-train that didn't save every model variable: the BatchNorm "
                       "statistics of the conv front end restart from their initial values and re-converge "
                       "during the next epoch", path)


def read_record(checkpoint: str, suffix: str) -> dict | None:
    """The record saved beside `checkpoint` (`suffix`: one of `RECORD_SUFFIXES`); None without one (an older
    ds2-train) or when unreadable."""
    try:
        return json.loads(Path(checkpoint + suffix).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def changes(saved: dict, current: dict) -> list[str]:
    """What changed between a record saved beside a checkpoint and the current one, a "key old -> new" each."""
    current = json.loads(json.dumps(current))  # tuples as the saved JSON has them: lists
    return [f"{key} {_show(saved[key])} -> {_show(value)}" for key, value in current.items()
            if key in saved and saved[key] != value]


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)
