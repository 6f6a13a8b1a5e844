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

Frame count convention (the seed's, and what streaming wants): only frames that lie completely inside
the audio, `num_frames = 1 + (samples - window) // hop` (0 when shorter than one window). So the valid
frames of an utterance never depend on how much padding its batch has.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from deepspeech2.audio import SAMPLE_RATE

if TYPE_CHECKING:  # normalizer.py imports this module; at run time we only call `normalizer.apply`
    from deepspeech2.normalizer import Normalizer

WINDOW_MS = 20.0  # DS2 §3 / PaddlePaddle DS2 seed: 20 ms windows -> 320 samples at 16 kHz
HOP_MS = 10.0  # 10 ms hop -> 160 samples, 100 frames per second
NUM_LINEAR_BINS = int(SAMPLE_RATE * WINDOW_MS / 1000) // 2 + 1  # rfft of 320 samples -> 161 bins
LOG_EPS = 1e-10  # added before log; below the power of 16-bit quantization noise (~1e-8 per bin)
N_MELS = 80  # log-mel bins (the common modern choice; DS2 itself uses linear spectrograms)
N_MFCC = 26  # cepstra per frame (DeepSpeech 1 notebook, `numcep=26`)
MFCC_CONTEXT = 9  # frames of context each side (DeepSpeech 1 notebook, `numcontext=9`)
KINDS = ("linear", "logmel", "mfcc")
PITCH_FMIN = 70.0  # Hz: lowest pitch the pitch-gram reads (its longest lag; must fit in the window)
PITCH_FMAX = 400.0  # Hz: highest pitch (shortest lag)
PITCH_MIN_OVERLAP = 0.25  # the longest lag leaves at least this share of the window to correlate
PITCH_BALLAST = 1e-4  # added to the NCCF's energy product, so near-silent frames read ~0 (Kaldi's ballast)


@dataclass(frozen=True)
class FeatureConfig:
    """How waveforms become features. Saved as JSON next to the model and inside `mean_std.npz`."""

    kind: str = "linear"  # "linear" (DS2), "logmel" or "mfcc" (DS1)
    sample_rate: int = SAMPLE_RATE  # Hz of the input waveforms
    window_ms: float = WINDOW_MS  # STFT window; rounded to whole samples
    hop_ms: float = HOP_MS  # STFT hop; rounded to whole samples
    n_mels: int = N_MELS  # mel filters ("logmel" output dim; filters under the DCT for "mfcc")
    mel_fmin: float = 20.0  # Hz, lower edge of the lowest mel filter
    mel_fmax: float | None = None  # Hz, upper edge of the highest mel filter; None = Nyquist
    n_mfcc: int = N_MFCC  # cepstra kept per frame ("mfcc" only)
    mfcc_context: int = MFCC_CONTEXT  # frames stacked each side ("mfcc" only; 0 = none)
    eps: float = LOG_EPS  # log(power + eps)
    pitch_bins: int = 0  # pitch-gram dims appended to each frame (0 = none; 32 is a semitone apart)
    pitch_fmin: float = PITCH_FMIN  # Hz, lowest pitch in the pitch-gram
    pitch_fmax: float = PITCH_FMAX  # Hz, highest pitch in the pitch-gram

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}, got {self.kind!r}")
        if isinstance(self.sample_rate, bool) or not isinstance(self.sample_rate, int) or self.sample_rate <= 0:
            raise ValueError(f"`sample_rate` must be a positive int (Hz), got {self.sample_rate!r}")
        if not self.window_ms > 0 or self.window_length < 2:
            raise ValueError(f"`window_ms` must give at least 2 samples, got {self.window_ms!r}")
        if not 0 < self.hop_ms <= self.window_ms or self.hop_length < 1:
            raise ValueError(f"`hop_ms` must be in (0, window_ms={self.window_ms}], got {self.hop_ms!r}")
        for name in ("n_mels", "n_mfcc"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive int, got {value!r}")
        if self.n_mfcc > self.n_mels:
            raise ValueError(f"`n_mfcc` ({self.n_mfcc}) must not exceed `n_mels` ({self.n_mels})")
        if isinstance(self.mfcc_context, bool) or not isinstance(self.mfcc_context, int) or self.mfcc_context < 0:
            raise ValueError(f"`mfcc_context` must be a non-negative int, got {self.mfcc_context!r}")
        nyquist = self.sample_rate / 2
        fmax = nyquist if self.mel_fmax is None else self.mel_fmax
        if not 0 <= self.mel_fmin < fmax <= nyquist:
            raise ValueError(f"need 0 <= `mel_fmin` < `mel_fmax` <= {nyquist} Hz (Nyquist), "
                             f"got mel_fmin={self.mel_fmin!r}, mel_fmax={self.mel_fmax!r}")
        if not self.eps > 0:
            raise ValueError(f"`eps` must be > 0, got {self.eps!r}")
        if isinstance(self.pitch_bins, bool) or not isinstance(self.pitch_bins, int) or self.pitch_bins < 0:
            raise ValueError(f"`pitch_bins` must be a non-negative int, got {self.pitch_bins!r}")
        if self.pitch_bins:
            if not 0 < self.pitch_fmin < self.pitch_fmax <= nyquist / 2:
                raise ValueError(f"need 0 < `pitch_fmin` < `pitch_fmax` <= {nyquist / 2} Hz (a quarter of the "
                                 f"sample rate), got pitch_fmin={self.pitch_fmin!r}, pitch_fmax={self.pitch_fmax!r}")
            longest = self.sample_rate / self.pitch_fmin
            if longest > (1 - PITCH_MIN_OVERLAP) * self.window_length:
                raise ValueError(
                    f"`pitch_fmin` {self.pitch_fmin} Hz is a lag of {longest:.0f} samples, too long for the "
                    f"{self.window_length}-sample window (at most {1 - PITCH_MIN_OVERLAP:.0%} of it); raise "
                    f"`pitch_fmin` to >= {self.sample_rate / ((1 - PITCH_MIN_OVERLAP) * self.window_length):.1f} "
                    f"Hz or lengthen `window_ms`")

    @property
    def window_length(self) -> int:
        """STFT window in samples (320 for 20 ms at 16 kHz)."""
        return int(round(self.sample_rate * self.window_ms / 1000))

    @property
    def hop_length(self) -> int:
        """STFT hop in samples (160 for 10 ms at 16 kHz)."""
        return int(round(self.sample_rate * self.hop_ms / 1000))

    @property
    def n_fft(self) -> int:
        """FFT size: the window itself, unpadded, as in the seed."""
        return self.window_length

    @property
    def num_bins(self) -> int:
        """Linear spectrogram bins, n_fft // 2 + 1 (161 at 16 kHz / 20 ms)."""
        return self.n_fft // 2 + 1

    @property
    def spectral_dim(self) -> int:
        """Dims of the spectral features (the first ones of each frame; the pitch-gram follows them)."""
        if self.kind == "linear":
            return self.num_bins
        if self.kind == "logmel":
            return self.n_mels
        return self.n_mfcc * (2 * self.mfcc_context + 1)

    @property
    def dim(self) -> int:
        """Feature dimension of `compute_features`' output: spectral dims, then `pitch_bins`."""
        return self.spectral_dim + self.pitch_bins

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "FeatureConfig":
        """Inverse of `to_dict`. Raises ValueError on a key that is not a field."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown FeatureConfig key(s) {unknown}; valid keys are {sorted(names)}")
        return cls(**d)


def num_frames(num_samples: int, config: FeatureConfig) -> int:
    """Frames `compute_features` yields for `num_samples` samples: 1 + (n - window) // hop, or 0."""
    return max(0, 1 + (int(num_samples) - config.window_length) // config.hop_length)


def frame_lengths(lengths: tf.Tensor, config: FeatureConfig) -> tf.Tensor:
    """TF version of `num_frames`: int32 tensor of sample counts (any shape) -> int32 frame counts."""
    lengths = tf.cast(lengths, tf.int32)
    return tf.maximum(0, 1 + (lengths - config.window_length) // config.hop_length)


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
