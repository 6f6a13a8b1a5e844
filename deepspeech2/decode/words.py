"""Words with times and confidences: where each word of a beam-search transcript lies in the audio, and how likely
it is to be right (README "Word times and confidence").

Times. The beam search keeps, for every word of every hypothesis, the model output steps of its first and last
character (pyctcdecode's word frames; `search.PrefixSearch`). Frames dropped as repeats before the search (pruning
step 3 of `beam`) are repeats of a word's last character when they follow it, so a word's end is carried over them
(`hypotheses`): the spans are those of the unpruned search. A step is `hop x conv time stride` of audio (`FrameClock`:
20 ms for the tiny model, 10 ms hop x 2), and the receptive field of step 0 is centred `FrameClock.origin` into the
audio (the conv front end's kernels and the STFT window). CTC's spikes sit inside the word, not at its edges (the
demo's model: starts 16 ms late, ends 19 ms early); `WordConfig.start_shift` / `end_shift`, the median errors on dev
audio with known word times (bench/words.py), are added to every word.

Confidence. Two raw scores per word, both measured against which words are right (bench/words.py):
- its posterior in the n-best list: the share of the hypotheses' probability mass (softmax of their DS2 eq. 12
  scores) held by those that have the same word at an overlapping time (`nbest_posterior`), in the spirit of
  confusion-network posteriors (Mangu et al. 2000; Evermann & Woodland 2000). The list is that of the diverse
  search (`BeamSearch.hypotheses(prune_history=False)`, `nbest`'s): the transcribing search keeps one hypothesis
  per LM context, too few to disagree (dev AUROC 0.61 against 0.77);
- the mean of its frames' best-token posteriors (`frame_confidence`), the baseline: it ranks the words all the
  n-best agree on (two in three), where the posterior is 1 for every one of them.
The confidence is a logistic regression on both logits, Platt scaling (Platt 1999) with two inputs (`fit_platt`),
fitted on dev: `WordConfig.posterior_weight`, `frame_weight`, `intercept`. `auroc` and `calibration_table` /
`expected_calibration_error` measure it.

Imports numpy only (and the TF-free `deepspeech2.geometry` inside `FrameClock.of`), so servers can use it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2 import configs
from deepspeech2.fileio import write_json

CLIP = 1e-4  # raw confidences are clipped to [CLIP, 1 - CLIP] before their logit (|logit| <= 9.2)
ECE_BINS = 10  # equal-width confidence bins of the expected calibration error (Guo et al. 2017, §2)
PLATT_ITERATIONS = 100  # Newton steps of `fit_platt` (it converges in under 10 on well-posed data)


@dataclass(frozen=True)
class WordConfig:
    """How word times are shifted and confidences calibrated; measured by bench/words.py, saved as JSON (e.g.
    results/e23/words.json, beside the α/β of ds2-tune's tune.json: they belong to the same model and LM). The
    defaults shift nothing and give the raw n-best posterior."""

    start_shift: float = 0.0  # seconds added to each word's start (CTC's measured lag; < 0: spikes come late)
    end_shift: float = 0.0  # seconds added to each word's end
    # confidence = sigmoid(posterior_weight * logit(posterior) + frame_weight * logit(frame mean) + intercept)
    posterior_weight: float = 1.0  # on the n-best posterior's logit (`nbest_posterior`)
    frame_weight: float = 0.0  # on the frames' mean best-token posterior's logit (`frame_confidence`)
    intercept: float = 0.0

    def __post_init__(self):
        for name in ("start_shift", "end_shift", "posterior_weight", "frame_weight", "intercept"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"`{name}` must be a finite number, got {value!r}")
        if self.posterior_weight < 0 or self.frame_weight < 0 or not self.posterior_weight + self.frame_weight > 0:
            raise ValueError(f"`posterior_weight` ({self.posterior_weight!r}) and `frame_weight` "
                             f"({self.frame_weight!r}) must be >= 0 and not both 0: a confidence rises with both")

    def calibrate(self, posterior, frame) -> np.ndarray:
        """Confidences in (0, 1) of raw scores in [0, 1] (`nbest_posterior`, `frame_confidence`; same shape)."""
        return _sigmoid(self.posterior_weight * logit(posterior) + self.frame_weight * logit(frame) + self.intercept)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> WordConfig:
        """Inverse of `to_dict`. Raises ValueError on a key that is not a field."""
        return configs.from_dict(cls, d)

    def save(self, path: str | os.PathLike) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> WordConfig:
        """Read a saved config.

        Raises:
            FileNotFoundError: no such file.
            ValueError: not a JSON object of `WordConfig` fields.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"word config `{path}` does not exist; bench/words.py writes one")
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"word config `{path}` is not JSON: {e}") from None
        if not isinstance(values, dict):
            raise ValueError(f"word config `{path}` must hold a JSON object, got {type(values).__name__}")
        return cls.from_dict(values)


@dataclass(frozen=True)
class FrameClock:
    """Model output steps -> seconds: step `j` covers `[origin + (j - 1/2) * step, origin + (j + 1/2) * step)`."""

    step: float  # seconds per output step: hop x the conv front end's time stride
    origin: float  # seconds from the audio's start to the centre of step 0's receptive field

    def __post_init__(self):
        if not (math.isfinite(self.step) and self.step > 0):
            raise ValueError(f"`step` must be > 0 seconds, got {self.step!r}")
        if not (math.isfinite(self.origin) and self.origin >= 0):
            raise ValueError(f"`origin` must be >= 0 seconds, got {self.origin!r}")

    @classmethod
    def of(cls, model_config, feature_config) -> FrameClock:
        """The clock of a model (`ModelConfig`: its convs' time kernels, strides and padding) on its features
        (`FeatureConfig`: window, hop, sample rate).

        Output step `j` of a conv (kernel k, stride s) is centred on its input `j * s + (k - 1) / 2 - pad`, where
        pad is 0 ("valid") or `(k - 1) // 2` ("same", `geometry.same_padding`); feature frame `f` is centred
        `f * hop + window / 2` samples in. For the tiny model (two 3-wide convs, strides 2 and 1, "valid"): step
        `j` is centred on frame `2j + 3`, 40 ms + 20 ms x j.
        """
        from deepspeech2.geometry import same_padding  # here: the rest of this module needs numpy alone

        centre, stride = 0.0, 1  # step 0's centre, in the input of the conv being unwound
        for (kernel, _), (s, _) in reversed(list(zip(model_config.conv_kernel_sizes, model_config.conv_strides))):
            pad = same_padding(kernel)[0] if model_config.conv_padding == "same" else 0
            centre = centre * s + (kernel - 1) / 2 - pad
            stride *= s
        rate, hop = feature_config.sample_rate, feature_config.hop_length
        return cls(step=stride * hop / rate, origin=(centre * hop + feature_config.window_length / 2) / rate)

    def start(self, frames):
        """Seconds where step(s) `frames` begin (a span `[start, end)` of steps begins at `start(start)` and ends
        at `start(end)`)."""
        return self.origin + (np.asarray(frames, dtype=np.float64) - 0.5) * self.step


@dataclass(frozen=True)
class Hypothesis:
    """One hypothesis of the beam: its transcript, its words' spans and its score."""

    text: str  # the transcript (no spaces for a character language)
    spans: tuple[tuple[str, int, int], ...]  # (word, first step, last step + 1) per word, in model output steps
    score: float  # DS2 eq. 12: log p_ctc + alpha log p_lm + beta words (+ hotword bonus), nats


@dataclass(frozen=True)
class Word:
    """A word of a transcript, where it is and how sure the decoder is of it."""

    word: str
    start: float  # seconds from the start of the audio
    end: float  # seconds; >= start
    confidence: float  # in [0, 1]: the calibrated probability that the word is right

    def to_dict(self) -> dict:
        return {"word": self.word, "start": round(self.start, 3), "end": round(self.end, 3),
                "confidence": round(self.confidence, 4)}


def hypotheses(beams: Sequence[tuple], frame_ids, steps: int,
               text: Callable[[str], str] = lambda t: t) -> list[Hypothesis]:
    """`search.PrefixSearch.finish()`'s beams as `Hypothesis`es, with word ends carried over pruned frames.

    A word's span is (its first character's step, its last character's step + 1). A frame that pruning step 3
    dropped repeats the single candidate of the frame before it, so when it follows a word's last character, the
    unpruned search would have extended that word over it: the end moves to the next kept frame (or `steps`).

    Args:
        beams: `(text, lm_state, [(word, (start, end)), ...], logit_score, combined_score)`, best first.
        frame_ids: the kept frames' indices in the model's output, ascending (`prune.candidate_frames`; for a
            stream, each chunk's kept indices plus the steps before it).
        steps: the utterance's output steps.
        text: the beam text -> transcript (`BeamSearch.text`: drops a character language's spaces).

    Raises:
        ValueError: `frame_ids` isn't ascending within [0, steps), or a span's end isn't a kept frame + 1.
    """
    frame_ids = np.asarray(frame_ids, dtype=np.int64)
    if frame_ids.ndim != 1 or np.any(np.diff(frame_ids) <= 0) or (
            len(frame_ids) and not 0 <= frame_ids[0] <= frame_ids[-1] < steps):
        raise ValueError(f"`frame_ids` must ascend within [0, steps={steps}), got {frame_ids.tolist()[:10]}...")
    next_kept = np.append(frame_ids[1:], steps)
    out = []
    for beam_text, _, word_frames, _, score in beams:
        spans = []
        for word, (start, end) in word_frames:
            k = int(np.searchsorted(frame_ids, end - 1))
            if k == len(frame_ids) or frame_ids[k] != end - 1:
                raise ValueError(f"word {word!r} ends at step {end - 1}, which is not a kept frame")
            spans.append((word, int(start), int(next_kept[k])))
        out.append(Hypothesis(text(beam_text), tuple(spans), float(score)))
    return out


def nbest_posterior(best: Hypothesis, hyps: Sequence[Hypothesis]) -> np.ndarray:
    """Each word of `best`'s posterior in the n-best list `hyps`: the share of their mass (softmax of their scores)
    held by the hypotheses that have the same word at an overlapping span.

    Returns:
        `(words of best,)` float64 in [0, 1]; 0 for every word when `hyps` is empty.
    """
    out = np.zeros(len(best.spans))
    if not hyps:
        return out
    scores = np.array([h.score for h in hyps])
    weights = np.exp(scores - scores.max())
    weights /= weights.sum()
    for i, (word, start, end) in enumerate(best.spans):
        for h, w in zip(hyps, weights):
            if any(other == word and max(start, s) < min(end, e) for other, s, e in h.spans):
                out[i] += w
    return np.minimum(out, 1.0)


def frame_confidence(log_probs: np.ndarray, spans: Sequence[tuple[str, int, int]]) -> np.ndarray:
    """The baseline confidence: per span, the mean over its steps of the best token's posterior.

    Args:
        log_probs: `(steps, vocab_size)` the utterance's log-probabilities (or logits: normalized here).
        spans: `(word, start, end)` in steps, end exclusive (an empty span reads its start step).

    Returns:
        `(len(spans),)` float64 in [0, 1].
    """
    log_probs = np.asarray(log_probs, dtype=np.float64)
    if log_probs.ndim != 2:
        raise ValueError(f"`log_probs` must be (steps, vocab_size), got shape {log_probs.shape}")
    top = log_probs.max(axis=-1)
    best = 1 / np.exp(log_probs - top[:, None]).sum(axis=-1)  # (steps,) the largest softmax probability
    return np.array([best[start:max(end, start + 1)].mean() for _, start, end in spans])


def words(best: Hypothesis, hyps: Sequence[Hypothesis], log_probs: np.ndarray, clock: FrameClock,
          config: WordConfig = WordConfig(), duration: float | None = None) -> list[Word]:
    """`best`'s words with their times (shifted by `config`) and calibrated confidences.

    Args:
        best: the transcript's hypothesis (`BeamSearch.hypotheses(...)[0]`).
        hyps: the diverse search's hypotheses (`BeamSearch.hypotheses(..., prune_history=False)`).
        log_probs: `(steps, vocab_size)` the utterance's log-probabilities.
        clock: the model's steps in seconds (`FrameClock.of`).
        config: shifts and calibration (`WordConfig.load` of bench/words.py's file; the default: none).
        duration: the audio's seconds, if known: times are clipped to it.

    Returns:
        One `Word` per word of `best`; a start never precedes 0 or the previous word's start, an end never
        precedes its start.
    """
    spans = best.spans
    confidence = config.calibrate(nbest_posterior(best, hyps), frame_confidence(log_probs, spans))
    starts = clock.start([s for _, s, _ in spans]) + config.start_shift
    ends = clock.start([e for _, _, e in spans]) + config.end_shift
    out, floor = [], 0.0
    limit = math.inf if duration is None else duration
    for (word, _, _), start, end, c in zip(spans, starts, ends, confidence):
        start = min(max(float(start), floor), limit)
        end = min(max(float(end), start), limit)
        out.append(Word(word, start, end, float(c)))
        floor = start
    return out


def decode_words(search, log_probs: np.ndarray, clock: FrameClock, config: WordConfig = WordConfig(),
                 hotwords=None, duration: float | None = None, stop=None) -> tuple[str, list[Word]]:
    """One utterance's transcript and its `words`: the two searches of `search` (a `beam.BeamSearch`) over it.

    Args:
        search: the beam search (its config and LM).
        log_probs: `(steps, vocab_size)` the utterance's log-probabilities.
        clock, config, duration: as `words`.
        hotwords: `BeamSearch.hotwords_with`'s, for both searches (None: the config's).
        stop: called before each frame of the searches; what it raises ends them (`search.PrefixSearch.advance`).

    Returns:
        `(transcript, words)`: the transcript is `search(log_probs)`'s.
    """
    stream = search.stream(hotwords, words=True)  # the same two searches a stream runs, fed the whole utterance
    stream.update(log_probs, stop)
    return stream.finish_words(clock, config, duration)


# ------------------------------------------------------------------------------------------ calibration and scores

def logit(p) -> np.ndarray:
    """log(p / (1 - p)) of `p` clipped to [CLIP, 1 - CLIP]."""
    p = np.clip(np.asarray(p, dtype=np.float64), CLIP, 1 - CLIP)
    return np.log(p) - np.log1p(-p)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * x))  # stable for any x


def _check_labelled(scores, correct, name: str) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64).ravel()
    correct = np.asarray(correct).ravel()
    if len(scores) != len(correct):
        raise ValueError(f"`{name}` has {len(scores)} values but `correct` has {len(correct)}")
    if not np.all(np.isfinite(scores)):
        raise ValueError(f"`{name}` must be finite, got {scores[~np.isfinite(scores)][:3].tolist()}")
    if not np.all(np.isin(correct, (0, 1))):
        raise ValueError(f"`correct` must be booleans (or 0/1), got {np.unique(correct)[:5].tolist()}")
    return scores, correct.astype(bool)


def fit_platt(scores, correct) -> tuple[np.ndarray, float]:
    """Platt scaling (Platt 1999, with the regularized targets of Lin, Lin & Weng 2007) of one or more scores: the
    weights and intercept of `sigmoid(scores @ weights + intercept)` that maximize the likelihood of `correct`, by
    Newton's method (a logistic regression). Give it logits (`logit`) of raw confidences.

    The targets are `(N+ + 1) / (N+ + 2)` for a right word and `1 / (N- + 2)` for a wrong one, which keeps the fit
    finite even when the scores separate the classes.

    Args:
        scores: `(words,)` or `(words, k)` finite scores.
        correct: `(words,)` whether each word is right.

    Returns:
        `(weights (k,), intercept)`.

    Raises:
        ValueError: lengths differ, a score isn't finite, or one class is missing (nothing to calibrate against).
    """
    scores = np.asarray(scores, dtype=np.float64)
    design = scores[:, None] if scores.ndim == 1 else scores  # (words, k)
    if design.ndim != 2:
        raise ValueError(f"`scores` must be (words,) or (words, k), got shape {scores.shape}")
    _, correct = _check_labelled(design[:, 0], correct, "scores")
    if not np.all(np.isfinite(design)):
        raise ValueError("`scores` must be finite (give logits of clipped confidences: `logit`)")
    positives = int(correct.sum())
    if positives in (0, len(correct)):
        raise ValueError(f"`correct` must hold both right and wrong words to calibrate, got {positives} right of "
                         f"{len(correct)}")
    target = np.where(correct, (positives + 1) / (positives + 2), 1 / (len(correct) - positives + 2))
    design = np.concatenate([design, np.ones((len(design), 1))], axis=1)  # (words, k + 1): the intercept's column
    params = np.zeros(design.shape[1])
    for _ in range(PLATT_ITERATIONS):
        p = _sigmoid(design @ params)
        gradient = design.T @ (p - target)
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + 1e-12 * np.eye(len(params))
        step = np.linalg.solve(hessian, gradient)
        params -= step
        if np.max(np.abs(step)) < 1e-12:
            break
    return params[:-1], float(params[-1])


def auroc(scores, correct) -> float:
    """The area under the ROC curve of `scores` separating right words from wrong ones: the chance that a random
    right word scores above a random wrong one, ties counting one half (the Mann-Whitney U over both counts).

    Raises:
        ValueError: lengths differ, a score isn't finite, or one class is missing.
    """
    scores, correct = _check_labelled(scores, correct, "scores")
    positives, negatives = int(correct.sum()), int((~correct).sum())
    if not positives or not negatives:
        raise ValueError(f"`correct` must hold both right and wrong words, got {positives} right and {negatives} "
                         "wrong")
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # Average ranks (1-based) over runs of equal scores.
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], len(scores)]
    for a, b in zip(starts, ends):
        ranks[order[a:b]] = (a + b + 1) / 2
    return float((ranks[correct].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def calibration_table(confidence, correct, bins: int = ECE_BINS) -> list[dict]:
    """The reliability table: `bins` equal-width confidence bins over [0, 1] (the last one closed), each with its
    `low`, `high`, `words`, `confidence` (their mean) and `accuracy` (share right; both None when empty).

    Raises:
        ValueError: lengths differ, a confidence is outside [0, 1], or `bins` < 1.
    """
    confidence, correct = _check_labelled(confidence, correct, "confidence")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"`bins` must be a positive int, got {bins!r}")
    if np.any((confidence < 0) | (confidence > 1)):
        raise ValueError(f"`confidence` must be in [0, 1], got {confidence[(confidence < 0) | (confidence > 1)][:3]}")
    index = np.minimum((confidence * bins).astype(np.int64), bins - 1)
    rows = []
    for b in range(bins):
        members = index == b
        n = int(members.sum())
        rows.append({"low": b / bins, "high": (b + 1) / bins, "words": n,
                     "confidence": float(confidence[members].mean()) if n else None,
                     "accuracy": float(correct[members].mean()) if n else None})
    return rows


def expected_calibration_error(confidence, correct, bins: int = ECE_BINS) -> float:
    """ECE (Guo et al. 2017, eq. 3): the words-weighted mean over `calibration_table`'s bins of |accuracy -
    confidence|. 0 is perfectly calibrated.

    Raises:
        ValueError: as `calibration_table`, or no words.
    """
    table = calibration_table(confidence, correct, bins)
    total = sum(row["words"] for row in table)
    if not total:
        raise ValueError("no words to score")
    return float(sum(row["words"] * abs(row["accuracy"] - row["confidence"]) for row in table if row["words"])
                 / total)


def confidence_summary(confidence, correct, bins: int = ECE_BINS) -> dict:
    """How well confidences separate and predict right words (ds2-eval's report, bench/words.py).

    Returns:
        `words`, `right` (their share), `mean_confidence`, `auroc` (None unless some words are right and some
        wrong), `ece` (None without words) and `table` (`calibration_table`).
    """
    confidence, correct = _check_labelled(confidence, correct, "confidence")
    both = 0 < int(correct.sum()) < len(correct)
    return {"words": len(correct), "right": float(correct.mean()) if len(correct) else None,
            "mean_confidence": float(confidence.mean()) if len(correct) else None,
            "auroc": auroc(confidence, correct) if both else None,
            "ece": expected_calibration_error(confidence, correct, bins) if len(correct) else None,
            "table": calibration_table(confidence, correct, bins)}


__all__ = ["CLIP", "ECE_BINS", "FrameClock", "Hypothesis", "Word", "WordConfig", "auroc", "calibration_table",
           "confidence_summary", "decode_words", "expected_calibration_error", "fit_platt", "frame_confidence",
           "hypotheses", "logit", "nbest_posterior", "words"]
