"""Per-bin feature normalization (z-score) as an in-graph transform, and its `mean_std.npz` file.

The statistics are estimated by `deepspeech2.data.stats.compute_mean_std` (ds2-compute-stats). They travel
with the model: `mean_std.npz` holds them together with the FeatureConfig (as JSON) they were computed with.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from deepspeech2.features import FeatureConfig
from deepspeech2.fileio import atomic_write

STD_FLOOR = 1e-3  # std is floored here when applied, so a (near-)constant bin can't blow up to huge values
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
