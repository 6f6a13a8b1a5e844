"""The optimizer and the learning rate it is given at each step: a linear warm-up, then a per-epoch anneal
(exponential, DS2 §3.1, or a half cosine)."""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from deepspeech2.train.config import OptimizationConfig, TrainConfig


def learning_rate(config: TrainConfig, step, epoch):
    """The learning rate at global `step` (0-based) in `epoch` (0-based), by `config.optimization`: linear
    warm-up to the peak over `warmup_steps`, times the epoch's anneal factor: `lr_decay ** epoch` (DS2 §3.1
    anneals by 1.2 after each epoch), or for `lr_schedule="cosine"` a half cosine from 1 in the first epoch to
    `lr_final` in the last (epoch `config.epochs - 1`; later epochs of a run extended on resume stay at `lr_final`).

    Tied to the real epoch counter, so the anneal follows the data whatever the batch size, `batch_frames`
    or replica count, and a resumed run continues the same curve. Works on Python numbers and on tensors.
    """
    span = max(config.epochs - 1, 1)
    o = config.optimization
    if isinstance(step, (int, float)) and isinstance(epoch, (int, float)):
        warm = min(1.0, (step + 1) / max(o.warmup_steps, 1))
        if o.lr_schedule == "cosine":
            cos = 0.5 * (1.0 + math.cos(math.pi * min(epoch / span, 1.0)))
            return o.learning_rate * warm * (o.lr_final + (1.0 - o.lr_final) * cos)
        return o.learning_rate * warm * o.lr_decay**epoch
    step, epoch = tf.cast(step, tf.float32), tf.cast(epoch, tf.float32)
    warm = tf.minimum(1.0, (step + 1.0) / max(o.warmup_steps, 1))
    if o.lr_schedule == "cosine":
        cos = 0.5 * (1.0 + tf.cos(math.pi * tf.minimum(epoch / span, 1.0)))
        return o.learning_rate * warm * (o.lr_final + (1.0 - o.lr_final) * cos)
    return o.learning_rate * warm * tf.pow(o.lr_decay, epoch)


def make_optimizer(config: OptimizationConfig) -> keras.optimizers.Optimizer:
    """Adam, or SGD with Nesterov momentum (DS2 §3.1). No clipping or loss scaling inside: the train step
    does both on the all-reduced gradients, and passes `learning_rate(...)` to each update."""
    if config.optimizer == "adam":
        return keras.optimizers.Adam(config.learning_rate)
    return keras.optimizers.SGD(config.learning_rate, momentum=config.momentum, nesterov=True)
