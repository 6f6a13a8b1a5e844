"""`Augmentation`: the parsed config, its waveform components then its feature components, each in config order
and each fired by its own coin; every draw of an utterance comes from one stateless op."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import tensorflow as tf

from deepspeech2.data.augment.draws import draw
from deepspeech2.data.augment.features import VTLP, SpecAugment
from deepspeech2.data.augment.params import to_entry
from deepspeech2.data.augment.waveform import (BayesianNormalization, Equalizer, ImpulseResponse, NoisePerturb,
                                               ShiftPerturb, SpeedPerturb, Telephone, VolumePerturb)

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
        parts = tf.split(draw(seed, n + sum(sizes)), [n] + sizes)
        return tf.unstack(parts[0], num=n), parts[1:]

    def to_config(self) -> list[dict]:
        """The JSON list that parses back to this pipeline (waveform entries first)."""
        return [to_entry(c) for c in (*self.waveform, *self.feature)]


def _maybe(prob: float, coin: tf.Tensor, fire, unchanged):
    """`fire()` with probability `prob` (`coin` is a uniform draw in [0, 1)), else `unchanged`."""
    if prob >= 1.0:
        return fire()
    if prob <= 0.0:
        return unchanged
    return tf.cond(coin < prob, fire, lambda: unchanged)
