"""The FFT machinery of the waveform components: 7-smooth FFT sizes, the Fourier resampler `speed` plays
an utterance faster with, and the FFT convolution `impulse` reverberates with.

FFT sizes are 7-smooth, so `speed`'s drawn rate is quantized (within 0.25%, staying inside [min_speed_rate,
max_speed_rate]) to the applied rate `n / m` (`speed_fft_sizes`).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

SPEED_RESAMPLE_PAD = 1024  # zeros after the signal before the FFT resampler, so its wrap-around is silence
# FFT sizes are 7-smooth (2^a 3^b 5^c 7^d): TF's FFT (ducc, pocketfft's successor) is equally fast on all of
# them, while a size with a large prime factor (e.g. 81232 = 2^4 * 5077) goes through Bluestein's algorithm,
# 4-8x slower. Near 80000 they are at most 1.6% apart (powers of two: up to 100%).
FFT_SIZE_PRIMES = (2, 3, 5, 7)
MAX_FFT_SIZE = 2**30  # longest FFT input supported: 18 hours at 16 kHz, far beyond any one utterance
SPEED_SIZE_CANDIDATES = 8  # input sizes tried per speed change: the rate error falls from 0.8% (1) to 0.25%


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


def rfft(x: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
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
    y = _irfft(rfft(wav[:length], n), m)
    return y[:new_length] * (tf.cast(m, tf.float32) / tf.cast(n, tf.float32)), new_length


def fft_convolve(x: tf.Tensor, h: tf.Tensor, n_out: tf.Tensor, delay: tf.Tensor) -> tf.Tensor:
    """`np.convolve(x, h)[delay:delay + n_out]` through the FFT."""
    n_fft = fft_size(tf.shape(x)[0] + tf.shape(h)[0] - 1)
    full = tf.raw_ops.IRFFT(input=rfft(x, n_fft) * rfft(h, n_fft), fft_length=tf.reshape(n_fft, [1]))
    return full[delay:delay + n_out]
