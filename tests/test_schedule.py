"""The learning rate (deepspeech2/train/schedule.py): a linear warm-up, then a per-epoch anneal, exponential or a
half cosine; on Python numbers and on tensors alike."""

import pytest
import tensorflow as tf

from deepspeech2.train.config import OptimizationConfig, TrainConfig
from deepspeech2.train.schedule import learning_rate


def test_learning_rate_warmup_and_per_epoch_anneal():
    config = TrainConfig(workdir="w", train_shards=("s",), vocab_path="v", normalizer_path="n",
                         optimization=OptimizationConfig(learning_rate=1e-3, warmup_steps=4, lr_decay=0.5))
    assert learning_rate(config, 0, 0) == pytest.approx(2.5e-4)
    assert learning_rate(config, 3, 0) == pytest.approx(1e-3)
    assert learning_rate(config, 100, 2) == pytest.approx(2.5e-4)
    assert float(learning_rate(config, tf.constant(1, tf.int64), tf.constant(1, tf.int64))) == pytest.approx(2.5e-4)


def test_learning_rate_cosine_anneal():
    # 5 epochs: factors 1, (1 + cos(pi/4))/2, 1/2, (1 - cos(pi/4))/2, 0, mapped onto [lr_final, 1].
    config = TrainConfig(workdir="w", train_shards=("s",), vocab_path="v", normalizer_path="n", epochs=5,
                         optimization=OptimizationConfig(learning_rate=1e-3, warmup_steps=4, lr_schedule="cosine",
                                                         lr_final=0.1))
    expected = [1.0, 0.1 + 0.9 * (1 + 2**-0.5) / 2, 0.55, 0.1 + 0.9 * (1 - 2**-0.5) / 2, 0.1, 0.1]
    for epoch, factor in enumerate(expected):  # epoch 5: a run extended on resume stays at the floor
        assert learning_rate(config, 100, epoch) == pytest.approx(1e-3 * factor)
        tensor = learning_rate(config, tf.constant(100, tf.int64), tf.constant(epoch, tf.int64))
        assert float(tensor) == pytest.approx(1e-3 * factor, rel=1e-5)
    assert learning_rate(config, 0, 0) == pytest.approx(2.5e-4)  # the warm-up still applies
    with pytest.raises(ValueError, match="lr_schedule"):
        OptimizationConfig(lr_schedule="step")
    with pytest.raises(ValueError, match="lr_final"):
        OptimizationConfig(lr_final=1.5)
