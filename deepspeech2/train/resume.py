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
from deepspeech2.fileio import write_json

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
    """Restore a training checkpoint. One without the model's variables by path (`model_variables/`) lacks the
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


def restore_newest(ckpt_dir: Path, latest: str, check, restore) -> tuple[str, list[str]]:
    """Restore the newest checkpoint of `ckpt_dir` that can be read: `latest` first, then the older ones kept beside
    it (a truncated or damaged file: a disk that filled, a copy cut short).

    Args:
        check: called with each path before it is restored; what it raises is not caught (`check_model`).
        restore: restores a path; whatever it raises marks that checkpoint unreadable.

    Returns:
        The path restored, and the problems of the newer ones, "name: error" each.

    Raises:
        ValueError: no checkpoint can be read.
    """
    state = tf.train.get_checkpoint_state(str(ckpt_dir))
    older = [p for p in (state.all_model_checkpoint_paths if state else []) if p != latest]
    problems = []
    for path in [latest] + older[::-1]:
        check(path)
        try:
            restore(path)
        except Exception as e:  # TF's reader raises OpErrors, IndexError, ValueError, AssertionError...
            problems.append(f"{Path(path).name}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
            continue
        return path, problems
    raise ValueError(f"no checkpoint in `{ckpt_dir}` can be read ({'; '.join(problems)}): restore one from a "
                     "backup, or move the folder away to train from the start")


def write_records(folder: Path, step: int, order: dict, model: dict) -> None:
    """Write checkpoint `step`'s records (`data_order`, the model's config) into `folder`. Written before the
    checkpoint, so that a checkpoint never lacks them; `prune_records` deletes those of an unfinished one."""
    write_json(folder / f"ckpt-{step}{DATA_ORDER_SUFFIX}", order)
    write_json(folder / f"ckpt-{step}{MODEL_SUFFIX}", model)


def prune_records(folder: Path, checkpoints: list[str]) -> None:
    """Delete the records in `folder` of every checkpoint but `checkpoints` (the ones the manager keeps)."""
    kept = {Path(p).name + suffix for p in checkpoints for suffix in RECORD_SUFFIXES}
    for suffix in RECORD_SUFFIXES:
        for record in folder.glob(f"ckpt-*{suffix}"):
            if record.name not in kept:
                record.unlink(missing_ok=True)


def check_model(checkpoint: str, model: dict, keep_weights: bool) -> list[str]:
    """What changed in the model (`ModelConfig.to_dict()`) since `checkpoint` was trained, a "key old -> new" each
    ([] without a record).

    Raises:
        ValueError: the model changed and `keep_weights` (`restart_epoch` or `init_model_path`) is off: weights
            trained for one model would silently go on training as another (a feature switched off, a layer
            resized), a model that is neither.
    """
    saved = read_record(checkpoint, MODEL_SUFFIX)
    changed = changes(saved, model) if saved is not None else []
    if changed and not keep_weights:
        raise ValueError(
            f"checkpoint {Path(checkpoint).name} was trained as another model: {', '.join(changed)}; resuming it as "
            f"this one would train a model that is neither. Resume with the model settings it was trained with; to "
            f"start this model from its weights, pass --restart_epoch or --init_model_path; to train it from the "
            f"start, use another --workdir")
    return changed


def check_data_order(checkpoint: str, order: dict, epoch: int, batch: int) -> None:
    """Resuming `checkpoint` at `batch` of `epoch` (0-based) skips that many batches of the rebuilt epoch: refuse
    it when what orders them (`data_order`) changed since; warn when the checkpoint has no record of it.

    Raises:
        ValueError: the order changed (`restart_epoch` starts the epoch over instead).
    """
    saved = read_record(checkpoint, DATA_ORDER_SUFFIX)
    if saved is None:
        logger.warning("%s has no readable %s (written by an older ds2-train?): resuming at batch %d assumes "
                       "the epoch's batches come in the same order", checkpoint, DATA_ORDER_SUFFIX, batch)
        return
    changed = changes(saved, order)
    if changed:
        raise ValueError(
            f"checkpoint {Path(checkpoint).name} stopped at batch {batch} of epoch {epoch + 1}, and what orders that "
            f"epoch's batches has changed since: {', '.join(changed)}; resuming there would skip {batch} batches "
            f"of another order. To keep the weights and optimizer and start epoch {epoch + 1} over, pass "
            f"--restart_epoch (`restart_epoch=True`); to go on at batch {batch}, resume with the old settings")


def check_workers_agree(strategy: tf.distribute.Strategy, place: tuple[int, int, int], order: dict,
                        ckpt_dir: Path) -> None:
    """Refuse to start a cluster whose workers resume from different places (`place`: step, epoch, batch) or
    order their data differently: a worker that found no checkpoint (a workdir not on a file system they all
    read) or got other flags would train other weights than its peers, or wait for them forever.

    Raises:
        ValueError: the workers disagree (nothing is checked on one machine).
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return
    digest = int(hashlib.sha256(json.dumps(order, sort_keys=True).encode()).hexdigest()[:15], 16)
    mine = tf.constant([[*place, digest]], tf.int64)
    gather = tf.function(lambda: strategy.run(lambda: tf.distribute.get_replica_context().all_gather(mine, axis=0)))
    rows = strategy.experimental_local_results(gather())[0].numpy()  # (replicas, 4)
    if (rows != rows[:1]).any():
        places = sorted({f"step {s} (epoch {e + 1}, batch {b})" for s, e, b, _ in rows.tolist()})
        raise ValueError(
            f"the workers of this cluster don't agree on where to resume ({'; '.join(places)}) or on what "
            f"orders the batches ({len(set(rows[:, 3].tolist()))} different data settings): every worker "
            f"must read the chief's `{ckpt_dir}` (put the workdir on a file system they all share) and "
            "get the same flags")


def changes(saved: dict, current: dict) -> list[str]:
    """What changed between a record saved beside a checkpoint and the current one, a "key old -> new" each."""
    current = json.loads(json.dumps(current))  # tuples as the saved JSON has them: lists
    return [f"{key} {_show(saved[key])} -> {_show(value)}" for key, value in current.items()
            if key in saved and saved[key] != value]


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)
