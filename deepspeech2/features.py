"""Acoustic features from waveforms, as one pure TF graph used by training, evaluation, export and serving.

Three kinds, all computed from the same STFT (a 20 ms Hann window every 10 ms, no edge padding):
    linear  log power spectrogram, n_fft = window -> 161 bins at 16 kHz (DS2 §3; the PaddlePaddle DS2
            seed's `_compute_linear_specgram`)
    logmel  log of an HTK-mel filterbank (triangles in mel space, peak 1, DC bin excluded, exactly
            `tf.signal.linear_to_mel_weight_matrix`) applied to the power spectrum
    mfcc    DCT-II of the log-mel spectrum, first `n_mfcc` coefficients, scaled like
            `tf.signal.mfccs_from_log_mel_spectrograms`, with +-`mfcc_context` neighbouring frames
            stacked (DeepSpeech 1 notebook: 26 cepstra x 19 frames = 494 dims)

Any kind can take `pitch_bins` more dims: a pitch-gram, the normalized cross-correlation function (NCCF, the
periodicity measure under Kaldi's and RAPT's pitch trackers) of each frame's raw samples, read at
`pitch_bins` log-spaced lags from 1/pitch_fmax to 1/pitch_fmin. A voiced frame shows a ridge at its
period that moves with the pitch contour; unvoiced frames stay low. Tonal languages need it: with a 20 ms
window the spectrogram's 50 Hz bins do not resolve the harmonics of a voice under ~150 Hz, so the F0
contour that carries a Mandarin tone is nearly invisible in it. The NCCF is taken inside each analysis
window, so frame counts, batching and streaming are unchanged.

Only frames that lie completely inside the audio count (`num_frames`, with the settings in
`deepspeech2.feature_config`, which needs no TensorFlow). `featurize` then z-scores them per bin with the
`Normalizer` whose statistics ds2-compute-stats estimated; they travel with the model as `mean_std.npz`.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

# The settings are re-exported: `deepspeech2.features` is where callers find everything about features.
from deepspeech2.feature_config import (HOP_MS, KINDS, LOG_EPS, MFCC_CONTEXT, N_MELS, N_MFCC, NUM_LINEAR_BINS,
                                        PITCH_FMAX, PITCH_FMIN, PITCH_MIN_OVERLAP, WINDOW_MS, FeatureConfig,
                                        num_frames)
from deepspeech2.fileio import atomic_write

PITCH_BALLAST = 1e-4  # added to the NCCF's energy product, so near-silent frames read ~0 (Kaldi's ballast)
STD_FLOOR = 1e-3  # std is floored here when applied, so a (near-)constant bin can't blow up to huge values
_NPZ_KEYS = ("mean", "std", "feature_config", "num_utterances", "num_frames", "num_skipped")


def frame_lengths(lengths: tf.Tensor, config: FeatureConfig) -> tf.Tensor:
    """`num_frames` of a tensor of sample counts (any shape, any int dtype), as int32 frame counts."""
    return num_frames(tf.cast(lengths, tf.int32), config)


@functools.lru_cache(maxsize=None)
def mel_filterbank(config: FeatureConfig) -> np.ndarray:
    """HTK-mel triangular filters, float32 (num_bins, n_mels); same values as
    `tf.signal.linear_to_mel_weight_matrix` (triangles in mel space, peak 1, DC row zero)."""

    def hz_to_mel(f):
        return 1127.0 * np.log1p(np.asarray(f, np.float64) / 700.0)

    fmax = config.sample_rate / 2 if config.mel_fmax is None else config.mel_fmax
    bin_mel = hz_to_mel(np.linspace(0.0, config.sample_rate / 2, config.num_bins))[1:, None]  # (bins-1, 1)
    edges = np.linspace(hz_to_mel(config.mel_fmin), hz_to_mel(fmax), config.n_mels + 2)
    lower, center, upper = edges[:-2], edges[1:-1], edges[2:]
    rising = (bin_mel - lower) / (center - lower)
    falling = (upper - bin_mel) / (upper - center)
    weights = np.maximum(0.0, np.minimum(rising, falling))
    return np.pad(weights, [[1, 0], [0, 0]]).astype(np.float32)


@functools.lru_cache(maxsize=None)
def dct_matrix(n_mels: int, n_mfcc: int) -> np.ndarray:
    """DCT-II as a matrix, float32 (n_mels, n_mfcc), scaled like `tf.signal.mfccs_from_log_mel_spectrograms`
    (unnormalized DCT-II times 1/sqrt(2 * n_mels)). A matmul for 26 of n_mels outputs beats a full FFT DCT."""
    n = np.arange(n_mels)[:, None]
    k = np.arange(n_mfcc)[None, :]
    return (2.0 * np.cos(np.pi * k * (2 * n + 1) / (2 * n_mels)) / np.sqrt(2.0 * n_mels)).astype(np.float32)


def _power(spectrum: tf.Tensor) -> tf.Tensor:
    """|spectrum|^2 as real^2 + imag^2: much cheaper than abs(.)^2 (no sqrt), and exactly the power."""
    return tf.math.square(tf.math.real(spectrum)) + tf.math.square(tf.math.imag(spectrum))


@functools.lru_cache(maxsize=None)
def pitch_lags(config: FeatureConfig) -> tuple[int, np.ndarray]:
    """The pitch-gram's lags: `(first, weights)`. Bin j reads the NCCF at the fractional lag
    sample_rate / f_j, f_j log-spaced from pitch_fmax down to pitch_fmin, by linear interpolation between
    integer lags: `nccf[..., first:first + len(weights)] @ weights`, weights float32 (lags, pitch_bins)."""
    freqs = np.geomspace(config.pitch_fmax, config.pitch_fmin, config.pitch_bins)
    lags = config.sample_rate / freqs  # increasing
    first, last = int(np.floor(lags[0])), int(np.floor(lags[-1])) + 1
    weights = np.zeros((last - first + 1, config.pitch_bins), np.float64)
    base = np.floor(lags).astype(int) - first
    frac = lags - np.floor(lags)
    weights[base, np.arange(config.pitch_bins)] = 1.0 - frac
    weights[base + 1, np.arange(config.pitch_bins)] += frac
    return first, weights.astype(np.float32)


def pitch_gram(frames: tf.Tensor, config: FeatureConfig) -> tf.Tensor:
    """NCCF of each raw frame at the pitch-gram's lags: (..., window) -> (..., pitch_bins), in [-1, 1].

    NCCF(l) = sum_n x[n] x[n+l] / sqrt(sum_n x[n]^2 * sum_n x[n+l]^2 + ballast), sums over the
    window - l products inside the frame, x with its mean removed; the correlations come from one FFT.
    """
    window = config.window_length
    first, weights = pitch_lags(config)
    n_lags = weights.shape[0]
    x = frames - tf.reduce_mean(frames, axis=-1, keepdims=True)
    # Zero-padded to twice the window: no circular wrap for lags < window (padded here: RFFT's own padding
    # fails on some batch shapes).
    power = _power(tf.signal.rfft(tf.concat([x, tf.zeros_like(x)], axis=-1)))
    corr = tf.signal.irfft(tf.complex(power, tf.zeros_like(power)))[..., first:first + n_lags]
    # The energies of the two overlapping parts, sum x[0 .. window-1-l]^2 and sum x[l .. window-1]^2, as one
    # matmul with 0/1 masks (several times faster than a cumsum and gathers).
    lag = np.arange(first, first + n_lags)
    n = np.arange(window)[:, None]
    masks = np.concatenate([n < window - lag, n >= lag], axis=1).astype(np.float32)  # (window, 2 * lags)
    head, tail = tf.split(tf.linalg.matmul(tf.math.square(x), masks), 2, axis=-1)
    nccf = corr / tf.math.sqrt(head * tail + PITCH_BALLAST * (window - lag) ** 2 / window ** 2)
    return tf.linalg.matmul(nccf, weights)


def _time_mask(features: tf.Tensor, frame_lengths_: tf.Tensor) -> tf.Tensor:
    mask = tf.sequence_mask(frame_lengths_, tf.shape(features)[1], dtype=features.dtype)  # (B, T)
    return features * mask[:, :, None]


def compute_features(waveforms, lengths, config: FeatureConfig) -> tuple[tf.Tensor, tf.Tensor]:
    """Waveforms -> features, as TF ops (works eagerly, in tf.function, tf.data and SavedModels).

    Args:
        waveforms: float32 (batch, samples), zero-padded; or one utterance (samples,).
        lengths: int (batch,) valid samples per row; or a scalar for one utterance.
        config: the feature settings.

    Returns:
        features: float32 (batch, frames, config.dim), frames past each row's length set to 0;
            frames = num_frames(padded samples) of the batch. (frames, dim) for one utterance.
        frame_lengths: int32 (batch,) = num_frames(lengths); a scalar for one utterance.
    """
    waveforms = tf.convert_to_tensor(waveforms, tf.float32)
    lengths = tf.cast(lengths, tf.int32)
    if waveforms.shape.rank == 1:
        feats, n = compute_features(waveforms[None], lengths[None], config)
        return feats[0], n[0]
    if waveforms.shape.rank != 2:
        raise ValueError(f"`waveforms` must be (batch, samples) or (samples,), got shape {waveforms.shape}")
    n_frames = frame_lengths(lengths, config)

    # Only whole frames (no edge padding), so valid frames never see the batch's padding.
    raw = tf.signal.frame(waveforms, config.window_length, config.hop_length)  # (B, T, window)
    frames = raw * tf.signal.hann_window(config.window_length, periodic=True)  # periodic Hann, as tf.signal.stft
    power = _power(tf.signal.rfft(frames, [config.n_fft]))  # (B, T, num_bins)

    if config.kind == "linear":
        feats = tf.math.log(power + config.eps)  # (B, T, num_bins)
    else:
        mel = tf.linalg.matmul(power, mel_filterbank(config))  # (B, T, n_mels)
        feats = tf.math.log(mel + config.eps)
        if config.kind == "mfcc":
            feats = tf.linalg.matmul(feats, dct_matrix(config.n_mels, config.n_mfcc))  # (B, T, n_mfcc)
            c = config.mfcc_context
            if c:
                # Zero the frames past each utterance first, so the context at its end is zeros
                # whatever the batch padding; then stack [t-C .. t+C] per frame.
                feats = _time_mask(feats, n_frames)
                padded = tf.pad(feats, [[0, 0], [c, c], [0, 0]])  # (B, T + 2C, n_mfcc)
                stacked = tf.signal.frame(padded, 2 * c + 1, 1, axis=1)  # (B, T, 2C+1, n_mfcc)
                shape = tf.shape(feats)
                feats = tf.reshape(stacked, [shape[0], shape[1], config.spectral_dim])
    if config.pitch_bins:
        feats = tf.concat([feats, pitch_gram(raw, config)], axis=-1)
    return _time_mask(feats, n_frames), n_frames


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


def featurize(waveforms, lengths, feature_config: FeatureConfig,
              normalizer: Normalizer | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """Waveforms -> model inputs: `compute_features`, then `normalizer.apply` when given. Pure TF ops, the
    same in the input pipeline, evaluation, export and serving.

    Args:
        waveforms: float32 (batch, samples), zero-padded; or one utterance (samples,).
        lengths: int (batch,) valid samples per row; or a scalar for one utterance.
        feature_config: the feature settings.
        normalizer: z-score stats computed for `feature_config`; None leaves the features unnormalized.

    Returns:
        features: float32 (batch, frames, feature_config.dim), zero past each row's length; (frames, dim)
            for one utterance.
        frame_lengths: int32 (batch,) valid frames; a scalar for one utterance.

    Raises:
        ValueError: the normalizer was computed for other features.
    """
    if normalizer is not None and normalizer.feature_config != feature_config:
        raise ValueError(f"the normalizer was computed for {normalizer.feature_config} but `feature_config` is "
                         f"{feature_config}; recompute it with ds2-compute-stats")
    features, n = compute_features(waveforms, lengths, feature_config)
    if normalizer is not None:
        features = normalizer.apply(features, n)
    return features, n
