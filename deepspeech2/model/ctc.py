"""CTC loss with the project's vocabulary convention: id 0 is the CTC blank (decoding: `deepspeech2.decode`).

One of two CTC losses, on purpose: this one is `keras.ops`, so the model trains on any backend (JAX in
tests/test_model.py); the training loop's `deepspeech2.train.ctc.sparse_ctc_loss` is TF's sparse kernel, ~25x faster
on CPU. tests/test_train.py checks that they agree.
"""

from __future__ import annotations

from keras import ops

from deepspeech2.vocab import BLANK_ID


def ctc_loss(labels, label_lengths, logits, logit_lengths):
    """Per-utterance CTC negative log-likelihood.

    Args:
        labels: `(batch, max_label_length)` int label ids (padding ignored).
        label_lengths: `(batch,)` int valid labels per utterance.
        logits: `(batch, time, vocab_size)` unnormalized scores (or log-probabilities).
        logit_lengths: `(batch,)` int valid steps per utterance.

    Returns:
        `(batch,)` fp32 losses.

    On CPU under TF, compile it with XLA (`tf.function(ctc_loss, jit_compile=True)`) inside a train step
    that is not compiled as a whole: TF's dense CTC otherwise runs its time loop op by op (about 225 ms
    against 80 ms for the batch of `bench/train.py`).
    """
    # Keras calls the blank `mask_index`.
    return ops.ctc_loss(ops.cast(labels, "int32"), ops.cast(logits, "float32"), ops.cast(label_lengths, "int32"),
                        ops.cast(logit_lengths, "int32"), mask_index=BLANK_ID)
