"""The CTC loss (deepspeech2/train/ctc.py): TF's kernels against the references, filler rows adding nothing, and
cuDNN's kernel left for transcripts longer than it allows."""

import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.train import ctc


def test_sparse_ctc_matches_tf_and_keras_reference():
    from deepspeech2.model import ctc_loss
    from deepspeech2.train.ctc import sparse_ctc_loss

    rng = np.random.default_rng()
    logits = rng.normal(size=(4, 30, 29)).astype(np.float32)
    labels = rng.integers(1, 29, (4, 10)).astype(np.int32)
    label_lengths = np.array([10, 7, 3, 1], np.int32)
    logit_lengths = np.array([30, 25, 12, 5], np.int32)
    labels[np.arange(10)[None] >= label_lengths[:, None]] = 0
    ours = sparse_ctc_loss(labels, label_lengths, logits, logit_lengths).numpy()
    np.testing.assert_allclose(ours, ctc_loss(labels, label_lengths, logits, logit_lengths), rtol=1e-4)
    dense = tf.nn.ctc_loss(labels, logits, label_lengths, logit_lengths, logits_time_major=False, blank_index=0)
    np.testing.assert_allclose(ours, dense.numpy(), rtol=1e-4)


def test_masked_ctc_is_the_reference_on_utterances_and_zero_on_filler():
    rng = np.random.default_rng(1)
    logits = tf.constant(rng.normal(size=(4, 20, 29)).astype(np.float32))
    labels = np.array([[3, 4, 5], [0, 0, 0], [7, 8, 0], [0, 0, 0]], np.int32)
    label_lengths = np.array([3, 0, 2, 0], np.int32)
    logit_lengths = np.array([20, 0, 9, 4], np.int32)  # filler: no frames in, no steps or a few out
    rows = logit_lengths > 0
    rows[3] = False
    with tf.GradientTape() as tape:
        tape.watch(logits)
        ours = ctc.masked_ctc_loss(labels, label_lengths, logits, logit_lengths, tf.constant(rows))
        total = tf.reduce_sum(ours)
    grad = tape.gradient(total, logits).numpy()
    reference = tf.nn.ctc_loss(labels[rows], tf.boolean_mask(logits, rows), label_lengths[rows], logit_lengths[rows],
                               logits_time_major=False, blank_index=0)
    np.testing.assert_allclose(ours.numpy()[rows], reference.numpy(), rtol=1e-5)
    assert ours.numpy()[~rows].tolist() == [0.0, 0.0] and not grad[~rows].any() and np.isfinite(grad).all()
    none = ctc.masked_ctc_loss(np.zeros((2, 0), np.int32), np.zeros(2, np.int32), logits[:2], np.zeros(2, np.int32),
                               tf.constant([False, False]))  # a replica with filler alone
    assert none.numpy().tolist() == [0.0, 0.0]


@pytest.mark.parametrize("label_length, uses_cudnn_path", [(256, True), (300, False)])
def test_labels_longer_than_cudnn_allows_fall_back_to_tf_kernel(monkeypatch, label_length, uses_cudnn_path):

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 700, 29)).astype(np.float32)
    labels = rng.integers(1, 29, (2, label_length)).astype(np.int32)
    lengths = np.array([label_length, 50], np.int32)
    labels[1, 50:] = 0
    logit_lengths = np.array([700, 600], np.int32)
    reference = tf.nn.ctc_loss(labels, logits, lengths, logit_lengths, logits_time_major=False, blank_index=0)
    calls = []
    real = tf.nn.ctc_loss

    def spy(*args, **kwargs):  # the call that becomes cuDNN's kernel on a GPU
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ctc.tf.nn, "ctc_loss", spy)
    # Eager: tf.cond runs only the branch the guard picks.
    ours = ctc.sparse_ctc_loss(labels, lengths, logits, logit_lengths, gpu=True)
    assert bool(calls) == uses_cudnn_path
    np.testing.assert_allclose(ours.numpy(), reference.numpy(), rtol=1e-4)
