"""Best-path (greedy) CTC decoding in NumPy: the one decoder of the library, ds2-serve and ds2-demo.

    greedy_decode  a padded batch -> label ids, vectorised over the batch
    GreedyStream   the same, one stream chunk by chunk (repeats merged across chunks)
    ids_to_text    label ids -> transcript, as every decoder joins it

No TensorFlow and no model code: the server uses it. The export's in-graph twin is
`deepspeech2_export.saved_model.greedy_transcripts` (`tests/test_export.py` checks they agree).
"""

from __future__ import annotations

import numpy as np

from deepspeech2.vocab import BLANK_ID, Vocabulary


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


def greedy_decode(log_probs, lengths, blank_id: int = BLANK_ID, previous=None) -> list[list[int]]:
    """Best-path decoding: argmax per step over the valid steps, merge repeats, drop blanks.

    One argmax and a few boolean masks for the whole batch; no per-utterance Python loop over steps.

    Args:
        log_probs: `(batch, time, vocab_size)` scores (any monotonic transform of probabilities: logits,
            log-probabilities or probabilities).
        lengths: `(batch,)` valid steps per utterance; steps past it are ignored.
        blank_id: the CTC blank's id (0 in this project's vocabularies).
        previous: `(batch,)` the label of the step before these (a stream's last label so far), so a repeat
            across the boundary is merged; None: nothing came before.

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
    if previous is not None:
        changed[:, :1] = best[:, :1] != np.asarray(previous).reshape(-1, 1)
    keep = valid & changed & (best != blank_id)
    # best[keep] is row-major, so it is the utterances' labels one after the other.
    ends = np.cumsum(keep.sum(axis=1))
    return [ids.tolist() for ids in np.split(best[keep], ends[:-1])] if len(ends) else []


def ids_to_text(ids, vocab: Vocabulary) -> str:
    """Label ids -> transcript, as every decoder here joins it: words separated by single spaces, none at the
    ends; no spaces at all for a character language (`vocab.spaced` false)."""
    words = vocab.decode(ids).split()
    return " ".join(words) if vocab.spaced else "".join(words)


class GreedyStream:
    """Incremental best-path decoding of one stream: feed each step's log-probs, read the partial transcript.

    Repeats are merged across chunk boundaries (the last label is carried), so the text equals
    `greedy_decode` of the concatenated log-probs at every point.
    """

    def __init__(self, vocab: Vocabulary):
        self.vocab = vocab
        self.ids: list[int] = []
        self._last = BLANK_ID
        self.steps = 0

    def update(self, log_probs: np.ndarray) -> str:
        """Add `(steps, vocab_size)` new log-probs; returns the transcript so far."""
        log_probs = np.asarray(log_probs)
        if len(log_probs):
            self.ids += greedy_decode(log_probs[None], [len(log_probs)], previous=[self._last])[0]
            self._last = int(np.argmax(log_probs[-1]))
        self.steps += len(log_probs)
        return self.text

    @property
    def text(self) -> str:
        """The transcript so far (`ids_to_text`)."""
        return ids_to_text(self.ids, self.vocab)


__all__ = ["GreedyStream", "check_log_probs", "greedy_decode", "ids_to_text"]
