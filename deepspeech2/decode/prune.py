"""Which tokens of each frame the beam search tries: DS2's pruning heuristic and the frames it leaves.

In the order applied to each utterance's log-probabilities before the search:
    1. DS2 §7.3: per frame, keep only the fewest tokens whose cumulative probability reaches `cutoff_prob`
       (0.99), at most `cutoff_top_n` (40) of them (`prune_log_probs`); off when `cutoff_prob` is 1.
    2. A floor: a token under `token_min_logp` (-5, pyctcdecode's rule and default) is dropped unless it is
       the frame's best. -3.5 (p < 0.03) halves the search at beam 100, but on the trained tiny model it
       cost 0.6 WER points on dev (bench/decode.py: 23.3% against 23.0%), so it is a speed knob, not the
       default. With 29 characters DS2's 0.99/40 alone barely prunes more than -5.
    3. Runs of frames where one and the same token is the only candidate collapse to their first frame.
       This is exact, not a further approximation: after such a frame every beam ends in that token, so
       the next identical frame only adds the same constant to every beam's score.
Steps 1 and 2 set the dropped tokens to -inf, and the search is then told to skip exactly those (its
`token_min_logp` is set just above the floor pyctcdecode clips log-probabilities to), so the candidate
set of every frame is decided here, in one place. Between beams, pyctcdecode drops any beam more than
`beam_prune_logp` below the best one, keeps the best `beam_size`, and of beams the n-gram LM can no
longer tell apart (same last n-1 words and partial word) keeps only the best.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from deepspeech2.decode.beam import DecoderConfig

CUTOFF_PROB = 0.99  # DS2 §7.3: "the fewest characters whose cumulative probability is at least p = 0.99"
CUTOFF_TOP_N = 40  # DS2 §7.3: "... and at most 40 characters"
# pyctcdecode clips log-probabilities to log(1e-15) ~ -34.5 (its MIN_TOKEN_CLIP_P); a dropped token (-inf)
# lands there. The search skips tokens under SKIP_LOGP, which is above that floor and below any token we keep.
SKIP_LOGP = math.log(1e-15) + 1.0
MIN_TOKEN_LOGP = -30.0  # the lowest `token_min_logp` that stays clear of SKIP_LOGP


def log_softmax(x: np.ndarray) -> np.ndarray:
    """Log-softmax over the last axis, float32; idempotent on log-probabilities."""
    x = np.asarray(x, dtype=np.float32)
    top = np.max(x, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0
    shifted = x - top
    with np.errstate(divide="ignore"):
        return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def prune_log_probs(log_probs, cutoff_prob: float = CUTOFF_PROB, cutoff_top_n: int = CUTOFF_TOP_N) -> np.ndarray:
    """DS2 §7.3 pruning: per frame, keep the fewest tokens whose cumulative probability reaches `cutoff_prob`,
    but at most `cutoff_top_n`; the others become -inf.

    Tokens are taken from the most probable down (ties: the lower id first), so the kept set always holds
    the frame's best token. As in the PaddlePaddle DS2 decoder, `cutoff_prob` = 1 turns the pruning off,
    `cutoff_top_n` included.

    Args:
        log_probs: `(..., vocab_size)` log-probabilities, e.g. `(time, vocab_size)` for one utterance.
        cutoff_prob: the cumulative probability to reach, in (0, 1].
        cutoff_top_n: the most tokens kept per frame, >= 1.

    Returns:
        float32 array of `log_probs`' shape: the kept entries unchanged, the pruned ones -inf.

    Raises:
        ValueError: `cutoff_prob` or `cutoff_top_n` out of range.

    >>> np.isfinite(prune_log_probs(np.log([[0.3, 0.6, 0.02, 0.08]]), 0.95, 40))  # 0.6+0.3 < 0.95 <= 0.6+0.3+0.08
    array([[ True,  True, False,  True]])
    """
    if not 0 < cutoff_prob <= 1:
        raise ValueError(f"`cutoff_prob` must be in (0, 1], got {cutoff_prob!r}")
    if isinstance(cutoff_top_n, bool) or not isinstance(cutoff_top_n, int) or cutoff_top_n < 1:
        raise ValueError(f"`cutoff_top_n` must be a positive int, got {cutoff_top_n!r}")
    log_probs = np.asarray(log_probs, dtype=np.float32)
    if cutoff_prob >= 1:
        return log_probs.copy()
    order = np.argsort(-log_probs, axis=-1, kind="stable")  # most probable first
    sorted_probs = np.exp(np.take_along_axis(log_probs, order, axis=-1).astype(np.float64))
    # Token k (0-based, in that order) is kept when the k tokens before it haven't reached cutoff_prob yet.
    before = np.cumsum(sorted_probs, axis=-1) - sorted_probs
    keep_sorted = (before < cutoff_prob) & (np.arange(log_probs.shape[-1]) < cutoff_top_n)
    keep = np.empty_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return np.where(keep, log_probs, -np.inf).astype(np.float32)


def candidate_frames(log_probs: np.ndarray, config: DecoderConfig, previous_best: int = -1,
                     collapse: bool = True) -> tuple[np.ndarray, np.ndarray, int]:
    """Pruning steps 1-3 of the module doc on `(time, vocab_size)` log-probabilities (or logits), keeping track of
    which frames are left, so that a stream can prune chunk by chunk as the whole utterance is pruned at once.

    Both thresholds apply to the model's probabilities (not renormalized after step 1).

    Args:
        log_probs: `(time, vocab_size)` one utterance's frames, or the next chunk of a stream's.
        config: the pruning settings (`cutoff_prob`, `cutoff_top_n`, `token_min_logp`).
        previous_best: the token of the frame before these when that frame had one candidate only, else -1
            (what the previous call returned; -1 at the start of an utterance).
        collapse: do step 3 (off only to check that it changes nothing).

    Returns:
        `(frames (kept, vocab_size) float32, kept frame indices (kept,), previous_best for the next call)`:
        dropped tokens are -inf; repeated single-candidate frames are removed.
    """
    lp = log_softmax(log_probs)
    if lp.shape[0] == 0:
        return lp, np.zeros(0, np.int64), previous_best
    if config.cutoff_prob < 1:
        lp = prune_log_probs(lp, config.cutoff_prob, config.cutoff_top_n)
    best = np.argmax(lp, axis=-1)  # (T,)
    floor = lp < config.token_min_logp
    floor[np.arange(len(best)), best] = False  # pyctcdecode always tries the frame's best token
    lp = np.where(floor, -np.inf, lp).astype(np.float32)
    single = np.isfinite(lp).sum(axis=-1) == 1
    last = int(best[-1]) if single[-1] else -1
    if not collapse:
        return lp, np.arange(len(lp)), last
    repeat = np.zeros_like(single)
    repeat[0] = single[0] and best[0] == previous_best
    repeat[1:] = single[1:] & single[:-1] & (best[1:] == best[:-1])
    kept = np.flatnonzero(~repeat)
    return lp[kept], kept, last


def candidate_log_probs(log_probs: np.ndarray, config: DecoderConfig, collapse: bool = True) -> np.ndarray:
    """One utterance's log-probabilities as the beam search sees them: `candidate_frames`' frames.

    Returns:
        `(frames, vocab_size)` float32, frames <= time: dropped tokens -inf, repeated single-candidate frames
        removed. Frame indices no longer match the input's.
    """
    return candidate_frames(log_probs, config, collapse=collapse)[0]


__all__ = ["CUTOFF_PROB", "CUTOFF_TOP_N", "candidate_frames", "candidate_log_probs", "log_softmax", "prune_log_probs"]
