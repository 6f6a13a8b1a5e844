"""The waveform components: each takes one utterance's `(wav, length)` and returns it changed (seed:
data_utils/augmentor/). `volume`, `speed`, `shift`, `noise`, `impulse`, `bayesian_normal` are the seed's; `eq` (a
random smooth equalizer) and `telephone` (the G.711 phone line of `deepspeech2.data.telephone`) are ours.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import ClassVar

import tensorflow as tf

from deepspeech2.audio import SAMPLE_RATE
from deepspeech2.data.augment.banks import IMPULSE_TAIL_DB, Bank
from deepspeech2.data.augment.draws import draw, randint, scale
from deepspeech2.data.augment.fft import SPEED_RESAMPLE_PAD, change_speed, fft_convolve, fft_size, rfft
from deepspeech2.data.augment.params import check_number, check_prob, check_range
from deepspeech2.data.telephone import TELEPHONE_RATE, telephone

MEAN_SQUARE_FLOOR = 1e-10  # -100 dBFS, below 16-bit quantization noise: the power of "silence"


def _pad_to(x: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
    return tf.pad(x, [[0, n - tf.shape(x)[0]]])


def _sum_square(x: tf.Tensor) -> tf.Tensor:
    # One fused pass over x (EuclideanNorm), where reduce_sum(square(x)) makes two.
    return tf.square(tf.math.reduce_euclidean_norm(x))


def _mean_square(x: tf.Tensor, length: tf.Tensor) -> tf.Tensor:
    return _sum_square(x) / tf.cast(tf.maximum(length, 1), tf.float32)


@dataclass(frozen=True)
class VolumePerturb:
    """Random gain, uniform in dB (seed: VolumePerturbAugmentor)."""

    type: ClassVar[str] = "volume"
    num_draws: ClassVar[int] = 1  # uniforms `apply` takes: the gain
    min_gain_dBFS: float  # lowest gain, dB
    max_gain_dBFS: float  # highest gain, dB
    prob: float = 1.0  # chance this component fires for an utterance

    def __post_init__(self):
        check_prob(self.prob)
        check_range("min_gain_dBFS", self.min_gain_dBFS, "max_gain_dBFS", self.max_gain_dBFS)

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        gain_db = scale(u[0], self.min_gain_dBFS, self.max_gain_dBFS)
        return _pad_to(wav[:length] * tf.pow(10.0, gain_db / 20.0), tf.shape(wav)[0]), length


@dataclass(frozen=True)
class SpeedPerturb:
    """Speed perturbation by resampling: duration / rate, pitch * rate (seed: SpeedPerturbAugmentor).

    The rate drawn uniformly in [min_speed_rate, max_speed_rate] is quantized to a ratio of FFT sizes,
    within 0.25% and inside the range (see `change_speed`).
    """

    type: ClassVar[str] = "speed"
    num_draws: ClassVar[int] = 1  # uniforms `apply` takes: the rate
    min_speed_rate: float  # slowest rate (> 0); e.g. 0.9 makes an utterance 11% longer
    max_speed_rate: float  # fastest rate
    prob: float = 1.0

    def __post_init__(self):
        check_prob(self.prob)
        check_range("min_speed_rate", self.min_speed_rate, "max_speed_rate", self.max_speed_rate,
                     low=0.0, low_open=True)

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return change_speed(wav, length, scale(u[0], self.min_speed_rate, self.max_speed_rate),
                            self.min_speed_rate, self.max_speed_rate)


@dataclass(frozen=True)
class ShiftPerturb:
    """Time shift padded with silence, length unchanged (seed: ShiftPerturbAugmentor).

    A positive shift advances the audio (drops its start), a negative one delays it.
    """

    type: ClassVar[str] = "shift"
    num_draws: ClassVar[int] = 1  # uniforms `apply` takes: the shift
    min_shift_ms: float  # most negative shift, milliseconds
    max_shift_ms: float  # most positive shift, milliseconds
    prob: float = 1.0
    sample_rate: int = SAMPLE_RATE  # Hz; set by parse_augmentation, not by the JSON

    def __post_init__(self):
        check_prob(self.prob)
        check_range("min_shift_ms", self.min_shift_ms, "max_shift_ms", self.max_shift_ms)

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        shift_ms = scale(u[0], self.min_shift_ms, self.max_shift_ms)
        shift = tf.cast(shift_ms * self.sample_rate / 1000.0, tf.int32)  # truncates toward 0, as the seed
        return shift_samples(wav, length, shift), length


def shift_samples(wav: tf.Tensor, length: tf.Tensor, shift: tf.Tensor) -> tf.Tensor:
    """`out[t] = wav[t + shift]` inside [0, length), zero elsewhere.

    Args:
        wav: float32 (samples,).
        length: int32 scalar, valid samples.
        shift: int32 scalar; > 0 advances, < 0 delays.
    Returns:
        float32 (samples,).
    """
    total = tf.shape(wav)[0]
    count = tf.maximum(length - tf.abs(shift), 0)  # samples that stay inside [0, length)
    src = tf.maximum(shift, 0)
    dst = tf.minimum(tf.maximum(-shift, 0), total)
    return tf.pad(wav[src:src + count], [[dst, total - dst - count]])


@dataclass(frozen=True)
class NoisePerturb:
    """Add a random stretch of a random noise clip at a random SNR (seed: NoisePerturbAugmentor).

    The SNR is measured over the valid samples of the utterance and of the noise stretch added to it; a
    clip shorter than the utterance is looped.
    """

    type: ClassVar[str] = "noise"
    num_draws: ClassVar[int] = 3  # uniforms `apply` takes: the clip, where in it, the SNR
    noise_manifest_path: str  # manifest of noise clips (text may be ""); relative to the working directory
    min_snr_dB: float  # lowest signal-to-noise ratio, dB
    max_snr_dB: float  # highest signal-to-noise ratio, dB
    prob: float = 1.0
    sample_rate: int = SAMPLE_RATE  # Hz; clips are resampled to it when loaded
    bank: Bank = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        check_prob(self.prob)
        check_range("min_snr_dB", self.min_snr_dB, "max_snr_dB", self.max_snr_dB)
        if not isinstance(self.noise_manifest_path, (str, os.PathLike)):
            raise ValueError(f"`noise_manifest_path` must be a path, got {self.noise_manifest_path!r}")
        object.__setattr__(self, "bank", Bank(str(self.noise_manifest_path), self.sample_rate, "noise"))

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        length = tf.cast(length, tf.int32)
        x = wav[:length]
        u_clip, u_start, u_snr = tf.unstack(u, num=3)
        samples, offset, n = self.bank.pick(u_clip)
        # A longer clip: a random stretch inside it (the seed), a plain slice. A shorter one: loop it from a
        # random phase (a gather).
        start = randint(u_start, tf.where(n >= length, n - length, n - 1))
        noise = tf.cond(n >= length, lambda: samples[offset + start:offset + start + length],
                        lambda: tf.gather(samples, offset + (start + tf.range(length)) % n))
        snr_db = scale(u_snr, self.min_snr_dB, self.max_snr_dB)
        noise_power = _mean_square(noise, length)
        gain = tf.sqrt(_mean_square(x, length) / tf.maximum(noise_power, MEAN_SQUARE_FLOOR)
                       / tf.pow(10.0, snr_db / 10.0))
        gain = tf.where(noise_power > MEAN_SQUARE_FLOOR, gain, 0.0)  # a silent clip adds nothing
        return _pad_to(x + gain * noise, tf.shape(wav)[0]), length


@dataclass(frozen=True)
class ImpulseResponse:
    """Convolve with a random impulse response (seed: ImpulseResponseAugmentor).

    Keeps the length: the output is aligned on the IR's peak (the direct path), so words stay where they
    were, and is rescaled to the input's RMS over the valid samples. IRs are cut when loaded where their
    remaining energy is `IMPULSE_TAIL_DB` down (`trim_tail`): what follows is inaudible, and shorter IRs
    mean smaller FFTs.
    """

    type: ClassVar[str] = "impulse"
    num_draws: ClassVar[int] = 1  # uniforms `apply` takes: the IR
    impulse_manifest_path: str  # manifest of impulse responses; relative to the working directory
    prob: float = 1.0
    sample_rate: int = SAMPLE_RATE  # Hz; IRs are resampled to it when loaded
    bank: Bank = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        check_prob(self.prob)
        if not isinstance(self.impulse_manifest_path, (str, os.PathLike)):
            raise ValueError(f"`impulse_manifest_path` must be a path, got {self.impulse_manifest_path!r}")
        bank = Bank(str(self.impulse_manifest_path), self.sample_rate, "impulse", tail_db=IMPULSE_TAIL_DB)
        object.__setattr__(self, "bank", bank)

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        samples, offset, n = self.bank.pick(u[0])
        return convolve(wav, length, samples[offset:offset + n]), length


def convolve(wav: tf.Tensor, length: tf.Tensor, impulse: tf.Tensor) -> tf.Tensor:
    """Reverberate `wav` with `impulse`, keeping its length, alignment and RMS.

    `out = c * np.convolve(wav[:length], impulse)[peak:peak + length]`, where `peak = argmax |impulse|`
    and `c` restores the input's RMS.

    Args:
        wav: float32 (samples,).
        length: int32 scalar, valid samples.
        impulse: float32 (taps,).
    Returns:
        float32 (samples,), zero from `length` on.
    """
    length = tf.cast(length, tf.int32)
    x = wav[:length]
    peak = tf.argmax(tf.abs(impulse), output_type=tf.int32)
    y = fft_convolve(x, impulse, length, peak)
    gain = tf.sqrt(_sum_square(x) / tf.maximum(_sum_square(y), 1e-20))
    return _pad_to(y * gain, tf.shape(wav)[0])


@dataclass(frozen=True)
class Equalizer:
    """A random smooth equalizer (ours): the gain in dB over frequency is a random curve, so one voice's
    spectral balance (its tilt and broad resonances, what a microphone, a room or another voice quality
    changes) varies from utterance to utterance while its formants stay where they are (that is `vtlp`).

    The curve is a sum of `num_bands` cosines over the mel scale from 0 Hz to Nyquist, band k (1..num_bands)
    having k half-periods, with amplitudes uniform in [-max_gain_dB, max_gain_dB] / num_bands: it stays
    within +-max_gain_dB, and band 1 alone is a tilt. Applied as one zero-phase filter over the whole
    utterance (zero-padded by `SPEED_RESAMPLE_PAD` to a 7-smooth FFT size, so the short impulse response of a
    smooth curve does not wrap around), then rescaled to the input's RMS: the level is `volume`'s business.
    """

    type: ClassVar[str] = "eq"
    max_gain_dB: float = 6.0  # the curve's largest excursion either way, dB
    num_bands: int = 4  # cosines in the curve: 1 is a tilt; more make it wavier
    prob: float = 1.0
    sample_rate: int = SAMPLE_RATE  # Hz; sets where Nyquist falls on the mel scale

    def __post_init__(self):
        check_prob(self.prob)
        check_number("max_gain_dB", self.max_gain_dB, low=0.0, high=40.0)
        check_number("num_bands", self.num_bands, low=1, high=32, integer=True)

    @property
    def num_draws(self) -> int:
        """Uniforms `apply` takes: one amplitude per band."""
        return self.num_bands

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        length = tf.cast(length, tf.int32)
        x = wav[:length]
        n = fft_size(length + SPEED_RESAMPLE_PAD)
        bins = n // 2 + 1
        hz = tf.cast(tf.range(bins), tf.float32) * (self.sample_rate / tf.cast(n, tf.float32))
        gain_db = tf.linalg.matvec(equalizer_basis(hz, self.num_bands, self.sample_rate),
                                   (2.0 * u - 1.0) * (self.max_gain_dB / self.num_bands), transpose_a=True)
        gain = tf.cast(tf.pow(10.0, gain_db / 20.0), tf.complex64)
        y = tf.raw_ops.IRFFT(input=rfft(x, n) * gain, fft_length=tf.reshape(n, [1]))[:length]
        y = y * tf.sqrt(_sum_square(x) / tf.maximum(_sum_square(y), 1e-20))
        return _pad_to(y, tf.shape(wav)[0]), length


def equalizer_basis(hz: tf.Tensor, num_bands: int, sample_rate: int) -> tf.Tensor:
    """`Equalizer`'s curves: float32 (num_bands, len(hz)), row k-1 = cos(k * pi * mel(hz) / mel(Nyquist)).
    The mel scale's constant cancels in the ratio: mel(f) / mel(Nyquist) = ln(1 + f/700) / ln(1 + Nyquist/700)."""
    position = tf.math.log1p(hz / 700.0) / math.log1p(sample_rate / 2.0 / 700.0)
    k = tf.range(1, num_bands + 1, dtype=tf.float32)[:, None]
    return tf.cos(math.pi * k * position[None, :])


@dataclass(frozen=True)
class BayesianNormalization:
    """Causal online gain normalization (seed: AudioSegment.normalize_online_bayesian).

    The mean square is estimated sample by sample with a prior worth `prior_samples` samples at
    `prior_db`; each sample gets the gain `target_db - 10 log10(estimate)`. For the first `startup_delay`
    seconds the estimate at the end of that delay is used.
    """

    type: ClassVar[str] = "bayesian_normal"
    num_draws: ClassVar[int] = 0  # deterministic: `apply` takes no uniforms
    target_db: float  # target RMS, dBFS
    prior_db: float  # prior RMS estimate, dBFS
    prior_samples: float  # prior strength, in samples (>= 0)
    startup_delay: float = 0.0  # seconds of statistics gathered before the gain starts to move
    prob: float = 1.0
    sample_rate: int = SAMPLE_RATE  # Hz; converts startup_delay to samples

    def __post_init__(self):
        check_prob(self.prob)
        check_number("target_db", self.target_db)
        check_number("prior_db", self.prior_db)
        check_number("prior_samples", self.prior_samples, low=0.0)
        check_number("startup_delay", self.startup_delay, low=0.0)

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, None)

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u) -> tuple[tf.Tensor, tf.Tensor]:
        del u
        length = tf.cast(length, tf.int32)
        x = tf.cast(wav[:length], tf.float64)  # float64: a running sum over minutes of audio
        startup = tf.minimum(length - 1, int(self.sample_rate * self.startup_delay))
        idx = tf.maximum(tf.range(length), startup)  # before the startup index, use the statistics at it
        cumsum = tf.gather(tf.cumsum(tf.square(x)), idx)
        count = tf.cast(idx + 1, tf.float64)
        prior_sum = 10.0 ** (self.prior_db / 10.0) * self.prior_samples
        mean_square = (cumsum + prior_sum) / (count + float(self.prior_samples))
        mean_square = tf.maximum(mean_square, 1e-30)  # only bites where the seed gives inf (no prior, zeros)
        gain_db = self.target_db - 10.0 * tf.math.log(mean_square) / math.log(10.0)
        y = tf.cast(x * tf.pow(tf.constant(10.0, tf.float64), gain_db / 20.0), tf.float32)
        return _pad_to(y, tf.shape(wav)[0]), length


@dataclass(frozen=True)
class Telephone:
    """The utterance as heard over a phone (ours): `deepspeech2.data.telephone.telephone`, the channel `ds2-eval
    --channel g711` scores with (8 kHz, 300-3400 Hz, G.711 μ-law, back to the model's rate, same length), so a
    model can learn phone audio at its own rate. Deterministic: its only draw is `prob`'s coin.

    The numpy channel runs through `tf.numpy_function` (one copy of the rule, not a second one in TF ops); it
    holds Python's GIL for about 3 ms per second of audio.
    """

    type: ClassVar[str] = "telephone"
    num_draws: ClassVar[int] = 0  # deterministic: `apply` takes no uniforms
    prob: float = 1.0
    sample_rate: int = SAMPLE_RATE  # Hz of the waveforms; set by parse_augmentation, not by the JSON

    def __post_init__(self):
        check_prob(self.prob)
        if self.sample_rate < TELEPHONE_RATE:
            raise ValueError(f"`sample_rate` must be >= {TELEPHONE_RATE} Hz for the phone line, got "
                             f"{self.sample_rate!r}")

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, None)

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u) -> tuple[tf.Tensor, tf.Tensor]:
        del u
        length = tf.cast(length, tf.int32)
        heard = tf.numpy_function(lambda x: telephone(x, self.sample_rate), [wav[:length]], tf.float32,
                                  stateful=False)
        return _pad_to(tf.reshape(heard, [length]), tf.shape(wav)[0]), length
