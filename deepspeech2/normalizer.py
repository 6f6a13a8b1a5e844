"""Per-bin feature normalization (z-score), with stats estimated on a random sample of the training set.

As in the PaddlePaddle DS2 seed's `compute_mean_std.py`: mean and standard deviation per feature bin over
the frames of N randomly sampled utterances. The stats travel with the model: `mean_std.npz` holds them
together with the FeatureConfig (as JSON) they were computed with.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from deepspeech2.audio import load_audio
from deepspeech2.data.manifest import read_manifests
from deepspeech2.features import FeatureConfig, compute_features
from deepspeech2.fileio import atomic_write

logger = logging.getLogger(__name__)

STD_FLOOR = 1e-3  # std is floored here when applied, so a (near-)constant bin can't blow up to huge values
NUM_SAMPLES = 2000  # utterances sampled for the stats (PaddlePaddle DS2 seed default)
BATCH_SIZE = 16  # utterances per compute_features call while estimating stats
_NPZ_KEYS = ("mean", "std", "feature_config", "num_utterances", "num_frames", "num_skipped")


@dataclass(frozen=True, eq=False)
class Normalizer:
    """Per-bin mean/std of the features, and the FeatureConfig they belong to."""

    mean: np.ndarray  # float32 (dim,), per-bin mean over valid frames
    std: np.ndarray  # float32 (dim,), per-bin standard deviation (floored at STD_FLOOR in `apply`)
    feature_config: FeatureConfig  # how the features were computed; a model must use the same
    num_utterances: int = 0  # utterances the stats were computed over (0: unknown)
    num_frames: int = 0  # valid frames the stats were computed over (0: unknown)
    num_skipped: int = 0  # sampled utterances skipped as unreadable or shorter than one window

    def __post_init__(self):
        dim = self.feature_config.dim
        for name in ("mean", "std"):
            value = np.asarray(getattr(self, name), dtype=np.float32)
            if value.shape != (dim,):
                raise ValueError(f"`{name}` must have shape ({dim},) for {self.feature_config.kind} features, "
                                 f"got {value.shape}")
            if not np.all(np.isfinite(value)):
                raise ValueError(f"`{name}` has non-finite values")
            object.__setattr__(self, name, value)
        if np.any(self.std < 0):
            raise ValueError("`std` has negative values")

    @property
    def dim(self) -> int:
        return self.feature_config.dim

    def apply(self, features, frame_lengths) -> tf.Tensor:
        """Z-score features in TF: `(x - mean) / max(std, STD_FLOOR)`, frames past the lengths kept at 0.

        Args:
            features: float32 (batch, frames, dim), or (frames, dim) with a scalar length.
            frame_lengths: int (batch,) valid frames per row (a scalar for one utterance).

        Returns:
            float32 tensor of the same shape.
        """
        features = tf.convert_to_tensor(features, tf.float32)
        scale = (1.0 / np.maximum(self.std, STD_FLOOR)).astype(np.float32)
        normalized = (features - self.mean) * scale
        mask = tf.sequence_mask(frame_lengths, tf.shape(features)[-2], dtype=tf.float32)  # (batch, frames)
        return normalized * mask[..., None]

    def save(self, path: str | os.PathLike) -> None:
        """Write `mean_std.npz` (atomically), the FeatureConfig included as JSON."""
        with atomic_write(path, "wb") as f:
            np.savez(f, mean=self.mean, std=self.std,
                     feature_config=np.array(json.dumps(self.feature_config.to_dict())),
                     num_utterances=np.int64(self.num_utterances), num_frames=np.int64(self.num_frames),
                     num_skipped=np.int64(self.num_skipped))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Normalizer":
        """Read a file written by `save`.

        Raises:
            FileNotFoundError: no such file.
            ValueError: not a stats file, or its contents are inconsistent.
        """
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"normalizer stats `{path}` do not exist; create them with ds2-compute-stats")
        try:
            with np.load(path, allow_pickle=False) as npz:
                data = {k: npz[k] for k in npz.files}
        except Exception as e:
            raise ValueError(f"`{path}` is not a readable .npz file: {e}") from None
        missing = [k for k in _NPZ_KEYS if k not in data]
        if missing:
            raise ValueError(f"`{path}` lacks {missing}; recreate it with ds2-compute-stats")
        try:
            config = FeatureConfig.from_dict(json.loads(str(data["feature_config"])))
            return cls(mean=data["mean"], std=data["std"], feature_config=config,
                       num_utterances=int(data["num_utterances"]), num_frames=int(data["num_frames"]),
                       num_skipped=int(data["num_skipped"]))
        except (ValueError, TypeError) as e:
            raise ValueError(f"`{path}`: {e}") from None


def compute_mean_std(
    manifest_paths: Sequence[str | os.PathLike],
    feature_config: FeatureConfig,
    num_samples: int | None = NUM_SAMPLES,
    seed: int = 0,
    batch_size: int = BATCH_SIZE,
) -> Normalizer:
    """Estimate per-bin feature mean and std over `num_samples` randomly chosen utterances.

    Unreadable utterances (missing, corrupt, segment outside the file) and ones shorter than one window
    are skipped, logged and counted in `Normalizer.num_skipped`; they never abort the run.

    Args:
        manifest_paths: JSON-lines manifests; their utterances are pooled.
        feature_config: the features to compute.
        num_samples: utterances to sample without replacement (seeded); None or more than available = all.
        seed: sampling seed.
        batch_size: utterances per compute_features call.

    Returns:
        the Normalizer.

    Raises:
        FileNotFoundError: a manifest doesn't exist.
        ValueError: a bad manifest line, bad arguments, or no usable audio at all.
    """
    if num_samples is not None and num_samples < 1:
        raise ValueError(f"`num_samples` must be >= 1 (or None for all), got {num_samples!r}")
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1, got {batch_size!r}")
    if not manifest_paths:
        raise ValueError("`manifest_paths` is empty; give at least one manifest")
    utts = read_manifests(manifest_paths)
    if not utts:
        raise ValueError(f"manifests {[str(p) for p in manifest_paths]} contain no utterances")
    if num_samples is not None and num_samples < len(utts):
        chosen = np.random.default_rng(seed).choice(len(utts), size=num_samples, replace=False)
        utts = [utts[i] for i in chosen]
    utts.sort(key=lambda u: u.duration)  # similar lengths per batch -> little padding; stats don't care

    features_fn = tf.function(
        lambda w, n: _batch_moments(*compute_features(w, n, feature_config)),
        input_signature=[tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.int32)])
    count, mean, m2 = 0, np.zeros(feature_config.dim), np.zeros(feature_config.dim)
    used, skipped, batch = 0, 0, []

    def flush():
        nonlocal count, mean, m2
        lengths = np.array([len(w) for w in batch], np.int32)
        padded = np.zeros((len(batch), lengths.max()), np.float32)
        for i, w in enumerate(batch):
            padded[i, :len(w)] = w
        n_b, mean_b, m2_b = (t.numpy() for t in features_fn(padded, lengths))
        # Chan et al.'s parallel combination of (count, mean, M2): stable, unlike sum of squares.
        total = count + n_b
        delta = mean_b - mean
        mean = mean + delta * (n_b / total)
        m2 = m2 + m2_b + delta**2 * (count * n_b / total)
        count = total
        batch.clear()

    min_samples = feature_config.window_length
    for u in tqdm(utts, desc="mean/std", unit="utt"):
        try:
            wav = load_audio(u.audio_filepath, offset=u.offset, duration=u.duration or None,
                             sample_rate=feature_config.sample_rate)
        except Exception as e:  # noqa: BLE001 - one bad file must never kill the job
            skipped += 1
            logger.warning("skipping %s: %s", u.audio_filepath, e)
            continue
        if len(wav) < min_samples:
            skipped += 1
            logger.warning("skipping %s: %d samples, shorter than one %d-sample window",
                           u.audio_filepath, len(wav), min_samples)
            continue
        batch.append(wav)
        used += 1
        if len(batch) == batch_size:
            flush()
    if batch:
        flush()
    if count == 0:
        raise ValueError(f"no usable audio among the {len(utts)} sampled utterances "
                         f"({skipped} skipped); check the manifests' audio paths")
    logger.info("mean/std over %d utterances (%d frames); %d skipped", used, count, skipped)
    return Normalizer(mean=mean.astype(np.float32), std=np.sqrt(m2 / count).astype(np.float32),
                      feature_config=feature_config, num_utterances=used, num_frames=int(count),
                      num_skipped=skipped)


def _batch_moments(features: tf.Tensor, frame_lengths: tf.Tensor):
    """(count, mean, M2) in float64 over the valid frames of a (batch, frames, dim) batch."""
    mask = tf.sequence_mask(frame_lengths, tf.shape(features)[1], dtype=tf.float64)[..., None]
    x = tf.cast(features, tf.float64)
    count = tf.reduce_sum(mask)
    mean = tf.reduce_sum(x * mask, axis=[0, 1]) / count
    m2 = tf.reduce_sum(tf.square(x - mean) * mask, axis=[0, 1])
    return count, mean, m2
