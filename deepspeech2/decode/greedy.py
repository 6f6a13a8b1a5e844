"""Best-path (greedy) CTC decoding, vectorised over the batch."""

from __future__ import annotations

import numpy as np

from deepspeech2.vocab import BLANK_ID


def check_log_probs(log_probs, lengths) -> tuple[np.ndarray, np.ndarray]:
    """`log_probs` and `lengths` as numpy arrays, checked against each other.

    Args:
        log_probs: `(batch, time, vocab_size)` scores (a numpy array or anything `np.asarray` takes, e.g. an
            eager TF tensor).
        lengths: `(batch,)` valid steps per utterance.

    Returns:
        `(log_probs, lengths)` as numpy arrays, lengths as int64.

    Raises:
        ValueError: the shapes don't fit, or a length is negative or longer than the time axis.
    """
    log_probs = np.asarray(log_probs)
    lengths = np.asarray(lengths).astype(np.int64, copy=False)
    if log_probs.ndim != 3:
        raise ValueError(f"`log_probs` must be (batch, time, vocab_size), got shape {log_probs.shape}")
    if lengths.shape != log_probs.shape[:1]:
        raise ValueError(f"`lengths` must be ({log_probs.shape[0]},) for a batch of {log_probs.shape[0]}, "
                         f"got shape {lengths.shape}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > log_probs.shape[1]):
        raise ValueError(f"`lengths` must lie in [0, {log_probs.shape[1]}] (the time axis), got "
                         f"{lengths.tolist()}")
    return log_probs, lengths


def greedy_decode(log_probs, lengths, blank_id: int = BLANK_ID) -> list[list[int]]:
    """Best-path decoding: argmax per step over the valid steps, merge repeats, drop blanks.

    One argmax and a few boolean masks for the whole batch; no per-utterance Python loop over steps.

    Args:
        log_probs: `(batch, time, vocab_size)` scores (any monotonic transform of probabilities: logits,
            log-probabilities or probabilities).
        lengths: `(batch,)` valid steps per utterance; steps past it are ignored.
        blank_id: the CTC blank's id (0 in this project's vocabularies).

    Returns:
        One list of label ids per utterance, blanks removed.

    Raises:
        ValueError: the shapes don't fit, or a length is out of range.

    >>> greedy_decode(np.log([[[.1, .8, .1], [.1, .8, .1], [.8, .1, .1], [.1, .8, .1], [.1, .1, .8]]]), [4])
    [[1, 1]]
    """
    log_probs, lengths = check_log_probs(log_probs, lengths)
    best = np.argmax(log_probs, axis=-1)  # (B, T)
    valid = np.arange(best.shape[1])[None, :] < lengths[:, None]  # (B, T)
    changed = np.ones_like(valid)
    changed[:, 1:] = best[:, 1:] != best[:, :-1]  # a repeat separated by a blank counts again
    keep = valid & changed & (best != blank_id)
    # best[keep] is row-major, so it is the utterances' labels one after the other.
    ends = np.cumsum(keep.sum(axis=1))
    return [ids.tolist() for ids in np.split(best[keep], ends[:-1])] if len(ends) else []
