"""The feature components: each takes one utterance's normalized `(features, frame_length)` and returns the
features changed. `specaugment` is the seed's; `vtlp` (vocal tract length perturbation) is ours. They run after
every waveform component, whatever their place in the config's list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import tensorflow as tf

from deepspeech2.data.augment.draws import draw, randint, scale
from deepspeech2.data.augment.params import check_number, check_prob, check_range


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
        check_prob(self.prob)
        for name in ("F", "T", "n_freq_masks", "n_time_masks", "W", "max_n_time_masks"):
            check_number(name, getattr(self, name), low=0, integer=True)
        check_number("p", self.p, low=0.0, high=1.0, low_open=True)
        check_number("adaptive_number_ratio", self.adaptive_number_ratio, low=0.0, high=1.0)
        check_number("adaptive_size_ratio", self.adaptive_size_ratio, low=0.0, high=1.0)
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
        return self.apply(features, frame_length, draw(seed, self.num_draws))

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
        f = randint(u_f, tf.minimum(self.F, dim))
        f0 = randint(u_f0, dim - f)
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
        t = randint(u_t, widest) * tf.cast(tf.range(slots) < n_masks, tf.int32)
        t0 = randint(u_t0, length - t)
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
        center = self.W + randint(u[0], length - 2 * self.W - 1)
        warped = center - self.W + 1 + randint(u[1], 2 * self.W - 1)
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
        check_prob(self.prob)
        check_range("min_warp", self.min_warp, "max_warp", self.max_warp, low=0.5, high=2.0)
        check_number("boundary", self.boundary, low=0.0, high=1.0, low_open=True)

    num_draws: ClassVar[int] = 1

    def __call__(self, features: tf.Tensor, frame_length: tf.Tensor, seed=None) -> tf.Tensor:
        return self.apply(features, frame_length, draw(seed, self.num_draws))

    def apply(self, features: tf.Tensor, frame_length: tf.Tensor, u: tf.Tensor) -> tf.Tensor:
        return warp_frequency(features, scale(u[0], self.min_warp, self.max_warp), self.boundary)


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
