"""How waveforms become features (`FeatureConfig`) and how many frames they give (`num_frames`): the feature
settings without TensorFlow, for code that only needs lengths and dimensions (`deepspeech2.model_config`,
`deepspeech2.geometry`, `data/`). The features themselves are computed in `deepspeech2.features`.

Frame count convention (the seed's, and what streaming wants): only frames that lie completely inside
the audio, `num_frames = 1 + (samples - window) // hop` (0 when shorter than one window). So the valid
frames of an utterance never depend on how much padding its batch has.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

from deepspeech2 import configs
from deepspeech2.audio import SAMPLE_RATE

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
    def from_dict(cls, d: dict) -> FeatureConfig:
        """Inverse of `to_dict`. Raises ValueError on a key that is not a field."""
        return configs.from_dict(cls, d)


def num_frames(num_samples, config: FeatureConfig):
    """Frames `compute_features` yields for `num_samples` samples: 1 + (n - window) // hop, or 0.

    The one frame-count rule: a number gives an int, an int tensor of any shape and backend (inside tf.data:
    `features.frame_lengths`) its frame counts elementwise, with operators only, so no tensor library is imported.
    """
    if isinstance(num_samples, numbers.Real):
        num_samples = int(num_samples)
    frames = 1 + (num_samples - config.window_length) // config.hop_length
    # (frames + |frames|) / 2 is max(frames, 0) for a tensor too
    return max(frames, 0) if isinstance(frames, int) else (frames + abs(frames)) // 2
