"""Stateless draws for the augmentation components: every random value is a function of a (2,) int key.

Draws are stateless (`tf.random.stateless_uniform`): a (2,) int key `seed` determines them all. The input
pipeline keys each record on (`PipelineConfig.seed`, epoch, input pipeline, position in the epoch), so
every epoch and every worker draws anew, an epoch rebuilt to resume it replays its draws, and parallel
calls can't reorder them. Stateful ops would not do: the trainer rebuilds the dataset every epoch, and a
rebuilt map function starts its stateful ops from the same op seeds, so every epoch (and every worker)
replayed the same draws. Without a seed (tests, interactive use) the draws are fresh on every call.
"""

from __future__ import annotations

import tensorflow as tf


# All of an utterance's draws come from ONE stateless op (`Augmentation._draws`), which components map
# from uniforms in [0, 1) with the helpers below: a stateless draw costs a key derivation and the draw
# itself, ~3 us each in tf.data, so one pair per random value added ~5% to the pipeline's time.


def _key(seed) -> tf.Tensor:
    """`seed` as a stateless key, (2,) int; None: a fresh key from TF's global generator."""
    if seed is None:
        return tf.random.uniform([2], 0, tf.int64.max, dtype=tf.int64)
    return tf.convert_to_tensor(seed)


def draw(seed, n: int) -> tf.Tensor:
    """float32 (n,), uniform in [0, 1): a function of the (2,) key `seed` alone (None: fresh draws)."""
    return tf.random.stateless_uniform([n], _key(seed))


def scale(u: tf.Tensor, low: float, high: float) -> tf.Tensor:
    """A uniform draw `u` in [0, 1) mapped to [low, high)."""
    return low + u * (high - low) if high > low else tf.constant(float(low))


def randint(u: tf.Tensor, high: tf.Tensor) -> tf.Tensor:
    """Uniform draws `u` in [0, 1) mapped to integers in [0, high] inclusive; `high` int32 >= 0, scalar or
    broadcastable to `u`."""
    high = tf.cast(high, tf.float32)
    return tf.cast(tf.minimum(tf.floor(u * (high + 1.0)), high), tf.int32)
