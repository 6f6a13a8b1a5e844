"""Training-time data augmentation as TF graph ops, configured by the PaddlePaddle DeepSpeech2 JSON format.

The config is a JSON list applied in order; every entry fires with probability `prob`, drawn afresh for
every utterance in every epoch:

    [{"type": "speed",  "params": {"min_speed_rate": 0.9, "max_speed_rate": 1.1}, "prob": 0.5},
     {"type": "noise",  "params": {"noise_manifest_path": "data/tiny/noise/noise.jsonl",
                                   "min_snr_dB": 10, "max_snr_dB": 30}, "prob": 0.5},
     {"type": "specaugment", "params": {"F": 27, "T": 40, "n_freq_masks": 2, "n_time_masks": 2},
      "prob": 1.0}]

examples/augmentation.example.json is the recipe for the tiny corpus (its noise and RIR manifests come
from `deepspeech2.data.noise.prepare_noise`). Types and params are the seed's (data_utils/augmentor/):
`volume`, `speed`, `shift`, `noise`, `impulse`, `bayesian_normal`, `eq` (ours: a random smooth
equalizer) and `telephone` (ours: the G.711 phone line of `deepspeech2.data.telephone`) act on the
waveform; `specaugment` and `vtlp` (ours: vocal tract length perturbation) act on the features and always
run after every waveform entry, whatever their place in the list. Relative manifest paths resolve against
the current working directory, as in the seed.

Draws are stateless (`tf.random.stateless_uniform`): a (2,) int key `seed` determines them all. The input
pipeline keys each record on (`PipelineConfig.seed`, epoch, input pipeline, position in the epoch), so
every epoch and every worker draws anew, an epoch rebuilt to resume it replays its draws, and parallel
calls can't reorder them. Stateful ops would not do: the trainer rebuilds the dataset every epoch, and a
rebuilt map function starts its stateful ops from the same op seeds, so every epoch (and every worker)
replayed the same draws. Without a seed (tests, interactive use) the draws are fresh on every call.

Every component works on ONE utterance:
  waveform: `(wav, length, seed=None) -> (wav, length)`; wav float32 (samples,), length int32 scalar.
            Samples at `length` and beyond are padding: they are ignored, and zero in the output (`speed`
            returns exactly the new length, without padding).
  features: `(features, frame_length, seed=None) -> features`; features float32 (frames, dim), normalized
            (the input pipeline applies SpecAugment after the normalizer, as PaddleSpeech does).
`component.apply(x, length, u)` is the same with the draws given: `u` float32 (`component.num_draws`,),
uniform in [0, 1); `Augmentation` draws them for all its components at once.

Where we differ from the seed, on purpose:
  - `speed` resamples band-limited (FFT) instead of the seed's linear interpolation, which aliases when
    speeding up. FFT sizes are 7-smooth, so the drawn rate is quantized (within 0.25%, staying inside
    [min_speed_rate, max_speed_rate]) to the applied rate `n / m`; the length becomes
    `int(length / (n / m))`, as the seed's `int(length / rate)`.
  - `noise` loops a noise clip shorter than the utterance; the seed silently skipped such clips.
  - `impulse` keeps the length (the seed returned the full convolution, longer by the IR) by aligning on the
    IR's peak (the direct path), and rescales the result to the input's RMS, like the seed's
    `AudioSegment.convolve_and_normalize`, so an IR's arbitrary gain never changes the level. Each IR's
    tail is cut where 60 dB of its energy has decayed (`IMPULSE_TAIL_DB`).
  - `specaugment` draws widths in [0, F] and [0, T] inclusive (SpecAugment, Park et al. 2019, §2), masks
    only the valid frames, and time-warps with linear rather than bicubic interpolation. Like the seed's
    (PaddleSpeech's SpeechCollator: normalize, then `transform_feature`), it sees z-scored features, so its
    default fill, 0, is each bin's mean: a masked band is average, neither loud nor silent. (Masking raw
    log power with 0, far above its mean, and normalizing after made every mask a loud broadband band.)

Noise and impulse clips are loaded once, when the config is parsed, into one flat float32 CPU tensor (no
padding) that the tf.data functions capture (by reference: never copied per utterance). Noise manifests
are small: at most `MAX_BANK_SECONDS` of audio (230 MB at 16 kHz) per component, held in memory.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Union

import numpy as np
import tensorflow as tf

from deepspeech2.audio import SAMPLE_RATE
from deepspeech2.data.manifest import load_utterance, read_manifest
from deepspeech2.data.telephone import TELEPHONE_RATE, telephone

logger = logging.getLogger(__name__)

MAX_BANK_SECONDS = 3600.0  # one hour of noise or IRs per component: 230 MB float32 in memory
MEAN_SQUARE_FLOOR = 1e-10  # -100 dBFS, below 16-bit quantization noise: the power of "silence"
SPEED_RESAMPLE_PAD = 1024  # zeros after the signal before the FFT resampler, so its wrap-around is silence
# FFT sizes are 7-smooth (2^a 3^b 5^c 7^d): TF's FFT (ducc, pocketfft's successor) is equally fast on all of
# them, while a size with a large prime factor (e.g. 81232 = 2^4 * 5077) goes through Bluestein's algorithm,
# 4-8x slower. Near 80000 they are at most 1.6% apart (powers of two: up to 100%).
FFT_SIZE_PRIMES = (2, 3, 5, 7)
MAX_FFT_SIZE = 2**30  # longest FFT input supported: 18 hours at 16 kHz, far beyond any one utterance
SPEED_SIZE_CANDIDATES = 8  # input sizes tried per speed change: the rate error falls from 0.8% (1) to 0.25%
IMPULSE_TAIL_DB = 60.0  # IRs are cut where the energy still to come is 60 dB down (the RT60 definition)

TYPES = ("volume", "speed", "shift", "noise", "impulse", "eq", "bayesian_normal", "telephone", "specaugment",
         "vtlp")


# ---------------------------------------------------------------------------------------------------------
# Validation helpers


def _check_number(name: str, value, *, low: float | None = None, high: float | None = None,
                  low_open: bool = False, integer: bool = False) -> None:
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) \
            or not math.isfinite(value):
        raise ValueError(f"`{name}` must be {kind}, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"`{name}` must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"`{name}` must be <= {high}, got {value!r}")


def _check_prob(prob) -> None:
    _check_number("prob", prob, low=0.0, high=1.0)


def _check_range(lo_name: str, lo, hi_name: str, hi, **bounds) -> None:
    _check_number(lo_name, lo, **bounds)
    _check_number(hi_name, hi, **bounds)
    if lo > hi:
        raise ValueError(f"`{lo_name}` ({lo!r}) must not exceed `{hi_name}` ({hi!r})")


# ---------------------------------------------------------------------------------------------------------
# Graph helpers


# All of an utterance's draws come from ONE stateless op (`Augmentation._draws`), which components map
# from uniforms in [0, 1) with the helpers below: a stateless draw costs a key derivation and the draw
# itself, ~3 us each in tf.data, so one pair per random value added ~5% to the pipeline's time.


def _key(seed) -> tf.Tensor:
    """`seed` as a stateless key, (2,) int; None: a fresh key from TF's global generator."""
    if seed is None:
        return tf.random.uniform([2], 0, tf.int64.max, dtype=tf.int64)
    return tf.convert_to_tensor(seed)


def _draw(seed, n: int) -> tf.Tensor:
    """float32 (n,), uniform in [0, 1): a function of the (2,) key `seed` alone (None: fresh draws)."""
    return tf.random.stateless_uniform([n], _key(seed))


def _scale(u: tf.Tensor, low: float, high: float) -> tf.Tensor:
    """A uniform draw `u` in [0, 1) mapped to [low, high)."""
    return low + u * (high - low) if high > low else tf.constant(float(low))


def _randint(u: tf.Tensor, high: tf.Tensor) -> tf.Tensor:
    """Uniform draws `u` in [0, 1) mapped to integers in [0, high] inclusive; `high` int32 >= 0, scalar or
    broadcastable to `u`."""
    high = tf.cast(high, tf.float32)
    return tf.cast(tf.minimum(tf.floor(u * (high + 1.0)), high), tf.int32)


def _pad_to(x: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
    return tf.pad(x, [[0, n - tf.shape(x)[0]]])


def _sum_square(x: tf.Tensor) -> tf.Tensor:
    # One fused pass over x (EuclideanNorm), where reduce_sum(square(x)) makes two.
    return tf.square(tf.math.reduce_euclidean_norm(x))


def _mean_square(x: tf.Tensor, length: tf.Tensor) -> tf.Tensor:
    return _sum_square(x) / tf.cast(tf.maximum(length, 1), tf.float32)


def smooth_sizes(primes: tuple[int, ...] = FFT_SIZE_PRIMES, limit: int = 2**31 - 1) -> np.ndarray:
    """All integers in [1, limit] whose prime factors are in `primes`, ascending, as int32 (the FFT sizes)."""
    sizes = [1]
    for p in primes:
        grown = []
        for s in sizes:
            while s <= limit:
                grown.append(s)
                s *= p
        sizes = grown
    return np.array(sorted(sizes), np.int32)


FFT_SIZES = smooth_sizes()  # 5911 sizes; the 651 above MAX_FFT_SIZE leave room for the speed candidates


def _lower_bound(table: np.ndarray, values: tf.Tensor) -> tf.Tensor:
    """`tf.searchsorted(table, values)` for a (k,) `values`, without the wrapper's 20 reshaping ops."""
    values = tf.reshape(tf.cast(values, table.dtype), [1, -1])
    return tf.raw_ops.LowerBound(sorted_inputs=table[None], values=values, out_type=tf.int32)[0]


def fft_size(n: tf.Tensor) -> tf.Tensor:
    """The smallest size in `FFT_SIZES` that is >= `n` (int32 scalar, n <= MAX_FFT_SIZE; graph op)."""
    return tf.gather(FFT_SIZES, _lower_bound(FFT_SIZES, n)[0])


def speed_fft_sizes(min_size: tf.Tensor, rate: tf.Tensor, min_rate: float | None = None,
                    max_rate: float | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """FFT sizes `(n, m)` for Fourier resampling by `rate`: both in `FFT_SIZES`, `n >= min_size`, `n / m`
    as close to `rate` as `SPEED_SIZE_CANDIDATES` candidate sizes for `n` allow: for rates in [0.9, 1.1],
    within 0.25% from 1 s of audio up, 0.4% for shorter clips.

    When some candidate ratio lies in [min_rate, max_rate], the best of those is taken, so a quantized rate
    never leaves the configured range.

    Args:
        min_size: int32 scalar <= MAX_FFT_SIZE, the smallest acceptable input size.
        rate: float scalar > 0, the rate wanted.
        min_rate, max_rate: the range the ratio should stay in (both or neither).
    Returns:
        `(n, m)`, int32 scalars.
    """
    rate = tf.cast(rate, tf.float64)
    sizes = tf.constant(FFT_SIZES)
    n = tf.slice(sizes, _lower_bound(FFT_SIZES, min_size), [SPEED_SIZE_CANDIDATES])  # (k,) input sizes
    # For each, the sizes just below and above n / rate: 2k candidate pairs.
    j = _lower_bound(FFT_SIZES.astype(np.float64), tf.cast(n, tf.float64) / rate)
    j = tf.clip_by_value(j, 1, len(FFT_SIZES) - 1)
    n = tf.tile(n, [2])
    m = tf.gather(sizes, tf.concat([j - 1, j], 0))
    ratio = tf.cast(n, tf.float64) / tf.cast(m, tf.float64)
    error = tf.abs(ratio - rate)
    if min_rate is not None:
        error += tf.cast((ratio < min_rate) | (ratio > max_rate), tf.float64)  # 1 > any in-range error
    best = tf.argmin(error, output_type=tf.int32)
    return n[best], m[best]


# The raw FFT ops: tf.signal.rfft / irfft wrap them in ~20 shape ops each and an extra copy of the input.


def _rfft(x: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
    """rfft of `x` zero-padded to `n >= len(x)` samples: complex64 (n // 2 + 1,)."""
    return tf.raw_ops.RFFT(input=tf.pad(x, [[0, n - tf.shape(x)[0]]]), fft_length=tf.reshape(n, [1]))


def _irfft(spectrum: tf.Tensor, m: tf.Tensor) -> tf.Tensor:
    """irfft to `m` samples, the spectrum cropped or zero-padded to m // 2 + 1 bins: float32 (m,)."""
    missing = tf.maximum(m // 2 + 1 - tf.shape(spectrum)[0], 0)
    return tf.raw_ops.IRFFT(input=tf.pad(spectrum, [[0, missing]]), fft_length=tf.reshape(m, [1]))


def change_speed(wav: tf.Tensor, length: tf.Tensor, rate: tf.Tensor, min_rate: float | None = None,
                 max_rate: float | None = None) -> tuple[tf.Tensor, tf.Tensor]:
    """Play `wav` about `rate` times faster: band-limited Fourier resampling, no pitch correction.

    The signal, followed by at least `SPEED_RESAMPLE_PAD` zeros, is resampled from `n` to `m` samples,
    with `(n, m) = speed_fft_sizes(length + SPEED_RESAMPLE_PAD, rate, min_rate, max_rate)`: the rate
    actually applied is `n / m`, within 0.25% of `rate` (see `speed_fft_sizes`).

    Args:
        wav: float32 (samples,); samples at `length` and beyond are ignored.
        length: int32 scalar, valid samples.
        rate: float scalar > 0; > 1 speeds up (shorter, higher pitch).
        min_rate, max_rate: keep the applied rate in this range where the sizes allow (both or neither).

    Returns:
        `(wav, length)`: float32 (length * m // n,) and its length.
    """
    length = tf.cast(length, tf.int32)
    n, m = speed_fft_sizes(length + SPEED_RESAMPLE_PAD, rate, min_rate, max_rate)
    # Exact integer floor(length / (n / m)); int64: length * m overflows int32 beyond ~2 minutes.
    new_length = tf.cast(tf.cast(length, tf.int64) * tf.cast(m, tf.int64) // tf.cast(n, tf.int64), tf.int32)
    # Zero-padding to n makes the FFT's periodic wrap-around join silence to silence. m samples crop (speed
    # up: low-pass at the new Nyquist) or zero-pad (slow down) the spectrum; m / n keeps the amplitude.
    y = _irfft(_rfft(wav[:length], n), m)
    return y[:new_length] * (tf.cast(m, tf.float32) / tf.cast(n, tf.float32)), new_length


def _fft_convolve(x: tf.Tensor, h: tf.Tensor, n_out: tf.Tensor, delay: tf.Tensor) -> tf.Tensor:
    """`np.convolve(x, h)[delay:delay + n_out]` through the FFT."""
    n_fft = fft_size(tf.shape(x)[0] + tf.shape(h)[0] - 1)
    full = tf.raw_ops.IRFFT(input=_rfft(x, n_fft) * _rfft(h, n_fft), fft_length=tf.reshape(n_fft, [1]))
    return full[delay:delay + n_out]


def trim_tail(h: np.ndarray, tail_db: float = IMPULSE_TAIL_DB) -> np.ndarray:
    """`h` up to where the energy still to come (Schroeder's backward integral) is `tail_db` below the
    total; never before its peak. An all-zero `h` is returned whole.

    Args:
        h: float (taps,).
    Returns:
        `h[:k]`, k <= taps.
    """
    energy = np.cumsum(np.square(h[::-1], dtype=np.float64))[::-1]  # energy[k] = sum(h[k:] ** 2)
    if h.size == 0 or energy[0] == 0:
        return h
    k = int(np.argmax(energy < energy[0] * 10.0 ** (-tail_db / 10.0))) or h.size  # first k below, if any
    return h[:max(k, int(np.argmax(np.abs(h))) + 1)]


class _Bank:
    """Clips from a manifest, concatenated in one flat float32 tensor with offsets and lengths; `tail_db`
    trims each clip with `trim_tail`."""

    def __init__(self, manifest_path: str, sample_rate: int, what: str, tail_db: float | None = None):
        utterances = read_manifest(manifest_path)  # FileNotFoundError / ValueError name the file and line
        clips, skipped = [], 0
        for u in utterances:
            try:
                wav = load_utterance(u, sample_rate)  # the one offset/duration rule (manifest.audio_span)
            except (ValueError, FileNotFoundError) as e:
                skipped += 1
                logger.warning("skipping %s clip: %s", what, e)
                continue
            if tail_db is not None:
                wav = trim_tail(wav, tail_db)
            if wav.size:
                clips.append(wav)
        if skipped:
            logger.warning("%d of %d %s clips in `%s` could not be read and were skipped",
                           skipped, len(utterances), what, manifest_path)
        if not clips:
            raise ValueError(f"`{manifest_path}` has no readable, non-empty {what} clips "
                             f"({len(utterances)} lines, {skipped} unreadable)")
        total = sum(c.size for c in clips)
        if total > MAX_BANK_SECONDS * sample_rate:
            raise ValueError(f"`{manifest_path}` holds {total / sample_rate / 3600:.1f} h of {what}; "
                             f"at most {MAX_BANK_SECONDS / 3600:.1f} h is held in memory; use fewer clips")
        self.lengths = np.array([c.size for c in clips], np.int32)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int32)
        # An eager CPU tensor, which a tf.data function captures by reference. Built as a graph constant
        # inside the map function, the whole bank was copied on every call (1.4 ms for 2 min of noise).
        with tf.init_scope(), tf.device("/CPU:0"):
            self.samples = tf.constant(np.concatenate(clips).astype(np.float32))  # (total samples,)

    def pick(self, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The clip a uniform draw `u` in [0, 1) selects: `(flat samples, offset, length)` as tensors."""
        i = _randint(u, len(self.lengths) - 1)
        return self.samples, tf.gather(self.offsets, i), tf.gather(self.lengths, i)


# ---------------------------------------------------------------------------------------------------------
# Waveform components


@dataclass(frozen=True)
class VolumePerturb:
    """Random gain, uniform in dB (seed: VolumePerturbAugmentor)."""

    type: ClassVar[str] = "volume"
    num_draws: ClassVar[int] = 1  # uniforms `apply` takes: the gain
    min_gain_dBFS: float  # lowest gain, dB
    max_gain_dBFS: float  # highest gain, dB
    prob: float = 1.0  # chance this component fires for an utterance

    def __post_init__(self):
        _check_prob(self.prob)
        _check_range("min_gain_dBFS", self.min_gain_dBFS, "max_gain_dBFS", self.max_gain_dBFS)

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, _draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        gain_db = _scale(u[0], self.min_gain_dBFS, self.max_gain_dBFS)
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
        _check_prob(self.prob)
        _check_range("min_speed_rate", self.min_speed_rate, "max_speed_rate", self.max_speed_rate,
                     low=0.0, low_open=True)

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, _draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return change_speed(wav, length, _scale(u[0], self.min_speed_rate, self.max_speed_rate),
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
        _check_prob(self.prob)
        _check_range("min_shift_ms", self.min_shift_ms, "max_shift_ms", self.max_shift_ms)

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, _draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        shift_ms = _scale(u[0], self.min_shift_ms, self.max_shift_ms)
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
    bank: _Bank = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        _check_prob(self.prob)
        _check_range("min_snr_dB", self.min_snr_dB, "max_snr_dB", self.max_snr_dB)
        if not isinstance(self.noise_manifest_path, (str, os.PathLike)):
            raise ValueError(f"`noise_manifest_path` must be a path, got {self.noise_manifest_path!r}")
        object.__setattr__(self, "bank", _Bank(str(self.noise_manifest_path), self.sample_rate, "noise"))

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, _draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        length = tf.cast(length, tf.int32)
        x = wav[:length]
        u_clip, u_start, u_snr = tf.unstack(u, num=3)
        samples, offset, n = self.bank.pick(u_clip)
        # A longer clip: a random stretch inside it (the seed), a plain slice. A shorter one: loop it from a
        # random phase (a gather).
        start = _randint(u_start, tf.where(n >= length, n - length, n - 1))
        noise = tf.cond(n >= length, lambda: samples[offset + start:offset + start + length],
                        lambda: tf.gather(samples, offset + (start + tf.range(length)) % n))
        snr_db = _scale(u_snr, self.min_snr_dB, self.max_snr_dB)
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
    bank: _Bank = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        _check_prob(self.prob)
        if not isinstance(self.impulse_manifest_path, (str, os.PathLike)):
            raise ValueError(f"`impulse_manifest_path` must be a path, got {self.impulse_manifest_path!r}")
        bank = _Bank(str(self.impulse_manifest_path), self.sample_rate, "impulse", tail_db=IMPULSE_TAIL_DB)
        object.__setattr__(self, "bank", bank)

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, _draw(seed, self.num_draws))

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
    y = _fft_convolve(x, impulse, length, peak)
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
        _check_prob(self.prob)
        _check_number("max_gain_dB", self.max_gain_dB, low=0.0, high=40.0)
        _check_number("num_bands", self.num_bands, low=1, high=32, integer=True)

    @property
    def num_draws(self) -> int:
        """Uniforms `apply` takes: one amplitude per band."""
        return self.num_bands

    def __call__(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        return self.apply(wav, length, _draw(seed, self.num_draws))

    def apply(self, wav: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        length = tf.cast(length, tf.int32)
        x = wav[:length]
        n = fft_size(length + SPEED_RESAMPLE_PAD)
        bins = n // 2 + 1
        hz = tf.cast(tf.range(bins), tf.float32) * (self.sample_rate / tf.cast(n, tf.float32))
        gain_db = tf.linalg.matvec(equalizer_basis(hz, self.num_bands, self.sample_rate),
                                   (2.0 * u - 1.0) * (self.max_gain_dB / self.num_bands), transpose_a=True)
        gain = tf.cast(tf.pow(10.0, gain_db / 20.0), tf.complex64)
        y = tf.raw_ops.IRFFT(input=_rfft(x, n) * gain, fft_length=tf.reshape(n, [1]))[:length]
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
        _check_prob(self.prob)
        _check_number("target_db", self.target_db)
        _check_number("prior_db", self.prior_db)
        _check_number("prior_samples", self.prior_samples, low=0.0)
        _check_number("startup_delay", self.startup_delay, low=0.0)

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
        _check_prob(self.prob)
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


# ---------------------------------------------------------------------------------------------------------
# Feature component


@dataclass(frozen=True)
class SpecAugment:
    """SpecAugment on one utterance's features: time warp, frequency masks, time masks (Park et al. 2019;
    seed: SpecAugmentor). Everything stays inside the valid `frame_length` frames.

    It expects normalized (z-scored) features, as the input pipeline gives it: there the fill value 0 is
    each bin's mean over the training data.
    """

    type: ClassVar[str] = "specaugment"
    F: int  # widest frequency mask, bins (width uniform in [0, F])
    T: int  # widest time mask, frames (width uniform in [0, T])
    n_freq_masks: int  # frequency masks per utterance
    n_time_masks: int  # time masks per utterance (ignored when adaptive_number_ratio > 0)
    p: float = 1.0  # a time mask covers at most this fraction of the frames
    W: int = 0  # time-warp window, frames; 0 disables warping
    adaptive_number_ratio: float = 0.0  # > 0: time masks = min(ratio * frames, max_n_time_masks)
    adaptive_size_ratio: float = 0.0  # > 0: widest time mask = ratio * frames (replaces T)
    max_n_time_masks: int = 20  # cap on adaptive time masks
    replace_with_zero: bool = True  # masked value: 0 (the per-bin mean, in z-score units), else the mean
    # of this utterance's valid features (as the seed: one scalar over all bins)
    prob: float = 1.0

    def __post_init__(self):
        _check_prob(self.prob)
        for name in ("F", "T", "n_freq_masks", "n_time_masks", "W", "max_n_time_masks"):
            _check_number(name, getattr(self, name), low=0, integer=True)
        _check_number("p", self.p, low=0.0, high=1.0, low_open=True)
        _check_number("adaptive_number_ratio", self.adaptive_number_ratio, low=0.0, high=1.0)
        _check_number("adaptive_size_ratio", self.adaptive_size_ratio, low=0.0, high=1.0)
        if not isinstance(self.replace_with_zero, bool):
            raise ValueError(f"`replace_with_zero` must be true or false, got {self.replace_with_zero!r}")

    @property
    def _time_slots(self) -> int:
        """Time masks drawn: the adaptive count is known only per utterance, so its cap is drawn."""
        return self.max_n_time_masks if self.adaptive_number_ratio > 0 else self.n_time_masks

    @property
    def num_draws(self) -> int:
        """Uniforms `apply` takes: the warp centre and target, then f and f0 per frequency mask, t and t0
        per time mask slot."""
        return 2 + 2 * self.n_freq_masks + 2 * self._time_slots

    def __call__(self, features: tf.Tensor, frame_length: tf.Tensor, seed=None) -> tf.Tensor:
        return self.apply(features, frame_length, _draw(seed, self.num_draws))

    def apply(self, features: tf.Tensor, frame_length: tf.Tensor, u: tf.Tensor) -> tf.Tensor:
        frames, dim = tf.shape(features)[0], tf.shape(features)[1]
        length = tf.minimum(tf.cast(frame_length, tf.int32), frames)
        nf, slots = self.n_freq_masks, self._time_slots
        u_warp, u_f, u_f0, u_t, u_t0 = tf.split(u, [2, nf, nf, slots, slots])
        if self.W > 0:
            features = tf.cond(length > 2 * self.W, lambda: self._warp(features, length, u_warp),
                               lambda: features)
        valid = tf.range(frames) < length  # (frames,)

        # Frequency masks: width f in [0, min(F, dim)], start in [0, dim - f].
        f = _randint(u_f, tf.minimum(self.F, dim))
        f0 = _randint(u_f0, dim - f)
        freq_mask = _spans(f0, f, dim)  # (dim,)

        # Time masks: width t in [0, T], capped at p * length; start in [0, length - t].
        if self.adaptive_number_ratio > 0:
            n_masks = tf.minimum(tf.cast(tf.cast(length, tf.float32) * self.adaptive_number_ratio,
                                         tf.int32), self.max_n_time_masks)
        else:
            n_masks = self.n_time_masks
        if self.adaptive_size_ratio > 0:
            widest = tf.cast(tf.cast(length, tf.float32) * self.adaptive_size_ratio, tf.int32)
        else:
            widest = tf.constant(self.T)
        widest = tf.minimum(widest, tf.cast(tf.cast(length, tf.float32) * self.p, tf.int32))
        t = _randint(u_t, widest) * tf.cast(tf.range(slots) < n_masks, tf.int32)
        t0 = _randint(u_t0, length - t)
        time_mask = _spans(t0, t, frames) & valid  # (frames,)

        mask = (time_mask[:, None] | freq_mask[None, :]) & valid[:, None]  # (frames, dim)
        if self.replace_with_zero:
            value = tf.zeros([], features.dtype)
        else:
            value = tf.reduce_sum(tf.where(valid[:, None], features, 0.0)) / tf.cast(
                tf.maximum(length * dim, 1), features.dtype)
        return tf.where(mask, value, features)

    def _warp(self, x: tf.Tensor, length: tf.Tensor, u: tf.Tensor) -> tf.Tensor:
        # Seed: center in [W, length - W), the frame at center moves to warped in [center - W + 1,
        # center + W]; [0, center) stretches onto [0, warped), [center, length) onto [warped, length).
        center = self.W + _randint(u[0], length - 2 * self.W - 1)
        warped = center - self.W + 1 + _randint(u[1], 2 * self.W - 1)
        j = tf.cast(tf.range(tf.shape(x)[0]), tf.float32)
        c, w, n = (tf.cast(v, tf.float32) for v in (center, warped, length))
        # Half-pixel centres, as image resizing does.
        left = tf.clip_by_value((j + 0.5) * c / w - 0.5, 0.0, c - 1.0)
        right = tf.clip_by_value(c + (j - w + 0.5) * (n - c) / (n - w) - 0.5, c, n - 1.0)
        src = tf.where(j < w, left, right)
        src = tf.where(j < n, src, j)  # padding frames stay put
        i0 = tf.cast(tf.floor(src), tf.int32)
        i1 = tf.minimum(i0 + 1, tf.maximum(length - 1, i0))
        frac = (src - tf.floor(src))[:, None]
        return tf.gather(x, i0) * (1.0 - frac) + tf.gather(x, i1) * frac


@dataclass(frozen=True)
class VTLP:
    """Vocal tract length perturbation (Jaitly & Hinton 2013) on spectral features: the frequency axis is
    warped by a factor alpha drawn per utterance, so one voice sounds as from a shorter or longer vocal
    tract, i.e. as another speaker.

    The warp is VTLP's piecewise-linear one on the bin index k of `dim` bins: k -> alpha * k up to the
    boundary `b = boundary * (dim - 1) * min(alpha, 1) / alpha`, then a straight line to the last bin, which
    stays put. Each output bin reads its source position with linear interpolation between bins. For the
    linear and log-mel features (bins ordered by frequency); MFCC cepstra are not a frequency axis.
    """

    type: ClassVar[str] = "vtlp"
    min_warp: float = 0.9  # smallest alpha (< 1 moves formants down)
    max_warp: float = 1.1  # largest alpha
    boundary: float = 0.8  # fraction of the band where the warp turns to reach the top bin unchanged
    prob: float = 1.0

    def __post_init__(self):
        _check_prob(self.prob)
        _check_range("min_warp", self.min_warp, "max_warp", self.max_warp, low=0.5, high=2.0)
        _check_number("boundary", self.boundary, low=0.0, high=1.0, low_open=True)

    num_draws: ClassVar[int] = 1

    def __call__(self, features: tf.Tensor, frame_length: tf.Tensor, seed=None) -> tf.Tensor:
        return self.apply(features, frame_length, _draw(seed, self.num_draws))

    def apply(self, features: tf.Tensor, frame_length: tf.Tensor, u: tf.Tensor) -> tf.Tensor:
        return warp_frequency(features, _scale(u[0], self.min_warp, self.max_warp), self.boundary)


def warp_frequency(features: tf.Tensor, alpha: tf.Tensor, boundary: float = 0.8) -> tf.Tensor:
    """VTLP's piecewise-linear warp of the last axis of `features` (..., dim) by `alpha` (see `VTLP`)."""
    dim = tf.shape(features)[-1]
    top = tf.cast(dim - 1, tf.float32)
    alpha = tf.cast(alpha, tf.float32)
    knee = boundary * top * tf.minimum(alpha, 1.0) / alpha  # source bin where the warp turns
    k = tf.range(dim, dtype=tf.float32)  # output bins
    # Invert the forward map: output k <- source k / alpha below alpha * knee, else along the line from
    # (alpha * knee) to (top) mapping back to (knee) .. (top).
    turn = alpha * knee
    upper = knee + (k - turn) * (top - knee) / tf.maximum(top - turn, 1e-6)
    src = tf.clip_by_value(tf.where(k <= turn, k / alpha, upper), 0.0, top)
    i0 = tf.cast(tf.floor(src), tf.int32)
    i1 = tf.minimum(i0 + 1, dim - 1)
    frac = src - tf.floor(src)
    return tf.gather(features, i0, axis=-1) * (1.0 - frac) + tf.gather(features, i1, axis=-1) * frac


def _spans(starts: tf.Tensor, widths: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
    """Union of [start, start + width) over the masks, as a bool (size,) vector."""
    pos = tf.range(size)[None, :]
    inside = (pos >= starts[:, None]) & (pos < (starts + widths)[:, None])
    return tf.reduce_any(inside, axis=0) if starts.shape[0] != 0 else tf.zeros([size], tf.bool)


# ---------------------------------------------------------------------------------------------------------
# The pipeline

WaveformAugment = Union[VolumePerturb, SpeedPerturb, ShiftPerturb, NoisePerturb, ImpulseResponse, Equalizer,
                        BayesianNormalization, Telephone]


@dataclass(frozen=True)
class Augmentation:
    """The parsed pipeline: waveform components, then feature components, each in config order."""

    waveform: tuple[WaveformAugment, ...] = ()  # applied to (wav, length) before the features
    feature: tuple[SpecAugment | VTLP, ...] = ()  # applied to (features, frame_length)

    def __bool__(self) -> bool:
        return bool(self.waveform or self.feature)

    def apply_waveform(self, wav: tf.Tensor, length: tf.Tensor, seed=None) -> tuple[tf.Tensor, tf.Tensor]:
        """Apply each waveform component with its probability (graph ops; call inside Dataset.map).

        Args:
            wav: float32 (samples,).
            length: int32 scalar, valid samples.
            seed: (2,) int key the draws are a function of (the same key as `apply_features`'s: they use
                different parts of it); None: a fresh one.
        Returns:
            `(wav, length)`; the valid samples are `wav[:length]`, the rest is zero.
        """
        wav = tf.convert_to_tensor(wav, tf.float32)
        length = tf.cast(length, tf.int32)
        if not self.waveform:
            return wav, length
        coins, draws = self._draws(seed)
        for c, coin, u in zip(self.waveform, coins, draws):
            wav, length = _maybe(c.prob, coin, lambda c=c, u=u: c.apply(wav, length, u), (wav, length))
        return wav, length

    def apply_features(self, features: tf.Tensor, frame_length: tf.Tensor, seed=None) -> tf.Tensor:
        """Apply each feature component with its probability.

        Args:
            features: float32 (frames, dim), normalized.
            frame_length: int32 scalar, valid frames.
            seed: (2,) int key, as for `apply_waveform`; None: a fresh one.
        Returns:
            float32 (frames, dim).
        """
        features = tf.convert_to_tensor(features, tf.float32)
        if not self.feature:
            return features
        coins, draws = self._draws(seed)
        skip = len(self.waveform)
        for c, coin, u in zip(self.feature, coins[skip:], draws[skip:]):
            features = _maybe(c.prob, coin, lambda c=c, u=u: c.apply(features, frame_length, u), features)
        return features

    def _draws(self, seed) -> tuple[list[tf.Tensor], list[tf.Tensor]]:
        # One stateless op for the utterance: a coin per component (does it fire?), then each component's
        # own uniforms, waveform components first. Both apply_* draw the same from the same seed and take
        # their own components' share.
        components = (*self.waveform, *self.feature)
        n, sizes = len(components), [c.num_draws for c in components]
        parts = tf.split(_draw(seed, n + sum(sizes)), [n] + sizes)
        return tf.unstack(parts[0], num=n), parts[1:]

    def to_config(self) -> list[dict]:
        """The JSON list that parses back to this pipeline (waveform entries first)."""
        return [_entry(c) for c in (*self.waveform, *self.feature)]


def _maybe(prob: float, coin: tf.Tensor, fire, unchanged):
    """`fire()` with probability `prob` (`coin` is a uniform draw in [0, 1)), else `unchanged`."""
    if prob >= 1.0:
        return fire()
    if prob <= 0.0:
        return unchanged
    return tf.cond(coin < prob, fire, lambda: unchanged)


def _params(cls) -> tuple[list[str], list[str]]:
    """(all JSON param names, required ones) of a component class."""
    names, required = [], []
    for f in dataclasses.fields(cls):
        if f.init and f.name not in ("prob", "sample_rate"):
            names.append(f.name)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
    return names, required


def _entry(component) -> dict:
    names, _ = _params(type(component))
    params = {k: getattr(component, k) for k in names}
    return {"type": component.type, "params": params, "prob": component.prob}


def _component_class(kind: str):
    if kind == "volume":
        return VolumePerturb
    if kind == "speed":
        return SpeedPerturb
    if kind == "shift":
        return ShiftPerturb
    if kind == "noise":
        return NoisePerturb
    if kind == "impulse":
        return ImpulseResponse
    if kind == "eq":
        return Equalizer
    if kind == "bayesian_normal":
        return BayesianNormalization
    if kind == "telephone":
        return Telephone
    if kind == "specaugment":
        return SpecAugment
    if kind == "vtlp":
        return VTLP
    return None


def parse_augmentation(config: list | str | os.PathLike | None,
                       sample_rate: int = SAMPLE_RATE) -> Augmentation:
    """Build the pipeline from the seed's JSON format.

    Args:
        config: the list of entries; a JSON string of it; or the path of a JSON file holding it.
            None, "" or [] give an empty pipeline.
        sample_rate: Hz of the waveforms the pipeline will see.

    Returns:
        an Augmentation.

    Raises:
        ValueError: bad JSON, an unknown `type`, unknown or missing params, or a bad value; the message
            names the entry's index, its type and the key.
        FileNotFoundError: the config file or a noise/impulse manifest doesn't exist.
    """
    where = "augmentation config"
    if config is None or (isinstance(config, str) and not config.strip()):
        return Augmentation()
    if isinstance(config, (str, os.PathLike)):
        text = str(config)
        if not (isinstance(config, str) and text.lstrip().startswith(("[", "{"))):
            path = Path(config)
            if not path.exists():
                raise FileNotFoundError(f"augmentation config `{path}` does not exist")
            where, text = f"augmentation config `{path}`", path.read_text(encoding="utf-8")
        try:
            config = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") \
                from None
    if not isinstance(config, list):
        raise ValueError(f"{where}: expected a JSON list of {{\"type\", \"params\", \"prob\"}} objects, "
                         f"got {type(config).__name__}")
    waveform, feature = [], []
    for i, entry in enumerate(config):
        component = _parse_entry(entry, f"{where}, entry {i}", sample_rate)
        (feature if isinstance(component, (SpecAugment, VTLP)) else waveform).append(component)
    return Augmentation(tuple(waveform), tuple(feature))


def _parse_entry(entry, where: str, sample_rate: int):
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object with `type`, `params` and `prob`, got {entry!r}")
    unknown = sorted(set(entry) - {"type", "params", "prob"})
    missing = [k for k in ("type", "params", "prob") if k not in entry]
    if unknown or missing:
        raise ValueError(f"{where}: " + (f"unknown key(s) {unknown}" if unknown else
                                         f"missing key(s) {missing}") +
                         "; each entry is {\"type\": ..., \"params\": {...}, \"prob\": p}")
    kind, params = entry["type"], entry["params"]
    cls = _component_class(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"{where}: unknown augmentation type {kind!r}; accepted: {', '.join(TYPES)}")
    where = f"{where} (`{kind}`)"
    if not isinstance(params, dict):
        raise ValueError(f"{where}: `params` must be an object, got {params!r}")
    names, required = _params(cls)
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown param(s) {unknown}; accepted: {names}")
    missing = [k for k in required if k not in params]
    if missing:
        raise ValueError(f"{where}: missing param(s) {missing}; required: {required}, accepted: {names}")
    extra = {"sample_rate": sample_rate} if "sample_rate" in {f.name for f in dataclasses.fields(cls)} \
        else {}
    try:
        return cls(**params, prob=entry["prob"], **extra)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{where}: {e} (relative paths resolve against the working directory "
                                f"{os.getcwd()})") from None
