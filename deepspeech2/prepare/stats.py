"""Feature statistics for the normalizer: per-bin mean and std over sampled training utterances.

As in the PaddlePaddle DS2 seed's `compute_mean_std.py`: mean and standard deviation per feature bin over
the frames of N randomly sampled utterances (ds2-compute-stats). The result is a `Normalizer`, saved as
`mean_std.npz` with the FeatureConfig it was computed for.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from deepspeech2.audio import MAX_DURATION
from deepspeech2.data.manifest import TooLongError, load_utterance, read_manifests
from deepspeech2.features import FeatureConfig, Normalizer, compute_features
from deepspeech2.progress import progress_bar

logger = logging.getLogger(__name__)

NUM_SAMPLES = 2000  # utterances sampled for the stats (PaddlePaddle DS2 seed default)
BATCH_SIZE = 16  # utterances per compute_features call while estimating stats


def compute_mean_std(
    manifest_paths: Sequence[str | os.PathLike],
    feature_config: FeatureConfig,
    num_samples: int | None = NUM_SAMPLES,
    seed: int = 0,
    batch_size: int = BATCH_SIZE,
    max_duration: float | None = MAX_DURATION,
) -> Normalizer:
    """Estimate per-bin feature mean and std over `num_samples` randomly chosen utterances.

    Utterances make-shards would skip for their audio (missing, corrupt, offset/duration that disagree with
    it: `deepspeech2.data.manifest.duration_mismatch`), ones longer than `max_duration` (training drops them;
    judged by the header, never decoded) and ones shorter than one window are skipped, logged and counted in
    `Normalizer.num_skipped`; they never abort the run.

    Args:
        manifest_paths: JSON-lines manifests; their utterances are pooled.
        feature_config: the features to compute.
        num_samples: utterances to sample without replacement (seeded); None or more than available = all.
        seed: sampling seed.
        batch_size: utterances per compute_features call.
        max_duration: seconds; longer utterances are skipped (None: none are).

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
    if max_duration is not None and not max_duration > 0:
        raise ValueError(f"`max_duration` must be > 0 (or None: no limit), got {max_duration!r}")
    if not manifest_paths:
        raise ValueError("`manifest_paths` is empty; give at least one manifest")
    utts = _sample(manifest_paths, num_samples, seed)
    moments = _Moments(feature_config)
    used, skipped, too_long, batch = 0, 0, 0, []
    for u in progress_bar(utts, desc="mean/std", unit="utt"):
        wav, over = _usable_audio(u, feature_config, max_duration)
        if wav is None:
            skipped += 1
            too_long += over
            continue
        batch.append(wav)
        used += 1
        if len(batch) == batch_size:
            moments.add(batch)
            batch.clear()
    if batch:
        moments.add(batch)
    count, mean, m2 = moments.count, moments.mean, moments.m2
    if count == 0:
        raise ValueError(f"no usable audio among the {len(utts)} sampled utterances "
                         f"({skipped} skipped); check the manifests' audio paths")
    logger.info("mean/std over %d utterances (%d frames); %d skipped, %d of them longer than %s s", used, count,
                skipped, too_long, max_duration)
    return Normalizer(mean=mean.astype(np.float32), std=np.sqrt(m2 / count).astype(np.float32),
                      feature_config=feature_config, num_utterances=used, num_frames=int(count),
                      num_skipped=skipped)


def _sample(manifest_paths: Sequence[str | os.PathLike], num_samples: int | None, seed: int) -> list:
    """The manifests' utterances, `num_samples` of them chosen at random (seeded), shortest first."""
    utts = read_manifests(manifest_paths)
    if not utts:
        raise ValueError(f"manifests {[str(p) for p in manifest_paths]} contain no utterances")
    if num_samples is not None and num_samples < len(utts):
        chosen = np.random.default_rng(seed).choice(len(utts), size=num_samples, replace=False)
        utts = [utts[i] for i in chosen]
    utts.sort(key=lambda u: u.duration)  # similar lengths per batch -> little padding; stats don't care
    return utts


def _usable_audio(u, feature_config: FeatureConfig, max_duration: float | None) -> tuple[np.ndarray | None, bool]:
    """`(waveform, False)` of an utterance the statistics can use, else `(None, whether it was too long)`, with
    a warning that says why it is skipped."""
    try:
        wav = load_utterance(u, feature_config.sample_rate, max_seconds=max_duration)  # as make-shards stores it
    except TooLongError as e:
        logger.warning("skipping %s (training drops it too)", e)
        return None, True
    except Exception as e:  # noqa: BLE001 - one bad file must never kill the job
        logger.warning("skipping %s: %s", u.audio_filepath, e)
        return None, False
    min_samples = feature_config.window_length
    if len(wav) < min_samples:
        logger.warning("skipping %s: %d samples, shorter than one %d-sample window",
                       u.audio_filepath, len(wav), min_samples)
        return None, False
    return wav, False


class _Moments:
    """Per-bin feature (count, mean, M2) over the batches added so far."""

    def __init__(self, feature_config: FeatureConfig):
        self._features = tf.function(
            lambda w, n: _batch_moments(*compute_features(w, n, feature_config)),
            input_signature=[tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.int32)])
        self.count, self.mean, self.m2 = 0, np.zeros(feature_config.dim), np.zeros(feature_config.dim)

    def add(self, batch: list[np.ndarray]) -> None:
        lengths = np.array([len(w) for w in batch], np.int32)
        padded = np.zeros((len(batch), lengths.max()), np.float32)
        for i, w in enumerate(batch):
            padded[i, :len(w)] = w
        n_b, mean_b, m2_b = (t.numpy() for t in self._features(padded, lengths))
        # Chan et al.'s parallel combination of (count, mean, M2): stable, unlike sum of squares.
        total = self.count + n_b
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (n_b / total)
        self.m2 = self.m2 + m2_b + delta**2 * (self.count * n_b / total)
        self.count = total


def _batch_moments(features: tf.Tensor, frame_lengths: tf.Tensor):
    """(count, mean, M2) in float64 over the valid frames of a (batch, frames, dim) batch."""
    mask = tf.sequence_mask(frame_lengths, tf.shape(features)[1], dtype=tf.float64)[..., None]
    x = tf.cast(features, tf.float64)
    count = tf.reduce_sum(mask)
    mean = tf.reduce_sum(x * mask, axis=[0, 1]) / count
    m2 = tf.reduce_sum(tf.square(x - mean) * mask, axis=[0, 1])
    return count, mean, m2
