"""Weight averaging: the exponential moving average of the weights kept while training (`ema_decay`), and the
mean of the last epochs' weights (`average_epochs`, checkpoint averaging as in ESPnet and PaddleSpeech)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import tensorflow as tf

from deepspeech2.fileio import atomic_write

logger = logging.getLogger(__name__)


def ema_update(shadow, value, decay):
    """One step of the moving average: `shadow` moves `1 - decay` of the way to `value`."""
    return shadow.assign(decay * shadow + (1.0 - decay) * value)


def restart(shadows: list[tf.Variable], variables: list) -> None:
    """Start the averages `shadows` over from the current values of `variables`."""
    for shadow, variable in zip(shadows, variables):
        shadow.assign(variable.value)


def swap(shadows: list[tf.Variable], variables: list) -> None:
    """Exchange the values of `variables` (Keras variables) and `shadows` (twice: back as they were)."""
    for shadow, variable in zip(shadows, variables):
        weights = tf.identity(variable.value)
        variable.assign(shadow)
        shadow.assign(weights)


def save_snapshot(variables: list, folder: Path, epoch: int, keep: int) -> None:
    """Write `variables`' values as folder/epoch-NNNN.npz, and delete all but the newest `keep` snapshots."""
    with atomic_write(folder / f"epoch-{epoch:04d}.npz", "wb") as f:
        np.savez(f, *[v.numpy() for v in variables])
    for old in sorted(folder.glob("epoch-*.npz"))[:-keep]:
        old.unlink()


def snapshots_to_average(folder: Path, last: int, done: Path) -> list[Path]:
    """The newest `last` snapshots in `folder`, oldest first; none when `done` (average.json) records the same
    epochs already (a re-run of a finished job), or when fewer than two are there (with a warning)."""
    paths = sorted(folder.glob("epoch-*.npz"))[-last:]
    if done.exists() and json.loads(done.read_text(encoding="utf-8")).get("epochs") == snapshot_epochs(paths):
        return []
    if len(paths) < 2:
        logger.warning("no averaging: %d epoch snapshot(s) in %s (the run began before --average_epochs was set?)",
                       len(paths), folder)
        return []
    return paths


def snapshot_epochs(paths: list[Path]) -> list[int]:
    """The epochs (1-based) of the snapshots `paths`."""
    return [int(p.stem.split("-")[1]) for p in paths]


def assign_mean(variables: list, paths: list[Path]) -> None:
    """Set each of `variables` to its mean over the snapshots `paths` (floating-point variables, BatchNorm's
    moving statistics too, as ESPnet does; any other dtype takes the newest snapshot's value)."""
    loaded = [np.load(p) for p in paths]
    for i, v in enumerate(variables):
        values = [s[f"arr_{i}"] for s in loaded]
        v.assign(np.mean(values, axis=0).astype(values[0].dtype) if np.issubdtype(values[0].dtype, np.floating)
                 else values[-1])
