"""Tuning the beam search's LM weight alpha and word bonus beta: a 2-D grid search on a dev set.

As in the PaddlePaddle DS2 `tools/tune.py`: every (alpha, beta) of an `num_alphas` x `num_betas` grid decodes
the same dev utterances and is scored by WER, or by CER for a vocabulary without a space (Mandarin, where a
"word" is a character and beta a per-character bonus), as ds2-eval scores (`deepspeech2.metrics`); the best
pair goes into the decoding config. The acoustic log-probabilities are computed once by the caller and pruned
once here (DS2 §7.3 does not depend on alpha or beta); grid points decode in parallel, one point per task in
a forked process pool, the workers sharing the loaded LM and the pruned log-probabilities.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import multiprocessing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2.decode.beam import BeamSearch, DecoderConfig, cpu_count
from deepspeech2.decode.prune import candidate_log_probs
from deepspeech2.fileio import atomic_path, write_json
from deepspeech2.metrics import cer, wer
from deepspeech2.vocab import Vocabulary

logger = logging.getLogger(__name__)

METRICS = ("auto", "wer", "cer")  # auto: `Vocabulary.metric`


@dataclass(frozen=True)
class TuneConfig:
    """The alpha x beta grid (both ends included) and how points are scored."""

    alpha_from: float = 0.0  # smallest LM weight (0: the LM only vets words through its unigram list)
    alpha_to: float = 2.5  # largest LM weight (the PaddlePaddle DS2 LibriSpeech setting is 2.5)
    num_alphas: int = 11  # grid points along alpha
    beta_from: float = 0.0  # smallest word bonus
    beta_to: float = 5.0  # largest word bonus (it offsets alpha x a word's LM cost, several nats in a small LM)
    num_betas: int = 6  # grid points along beta
    metric: str = "auto"  # "wer", "cer" (`deepspeech2.metrics`, by `Vocabulary.spaced`), "auto": `Vocabulary.metric`
    num_workers: int = 0  # processes decoding grid points at once; 0: one per CPU core

    def __post_init__(self):
        for name in ("alpha_from", "alpha_to", "beta_from", "beta_to"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"`{name}` must be finite, got {getattr(self, name)!r}")
        if self.alpha_from < 0 or self.alpha_to < self.alpha_from:
            raise ValueError(f"need 0 <= `alpha_from` <= `alpha_to`, got alpha_from={self.alpha_from!r}, "
                             f"alpha_to={self.alpha_to!r}")
        if self.beta_to < self.beta_from:
            raise ValueError(f"need `beta_from` <= `beta_to`, got beta_from={self.beta_from!r}, "
                             f"beta_to={self.beta_to!r}")
        for name in ("num_alphas", "num_betas"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive int, got {value!r}")
        if self.metric not in METRICS:
            raise ValueError(f"`metric` must be one of {METRICS}, got {self.metric!r}")
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) or self.num_workers < 0:
            raise ValueError(f"`num_workers` must be an int >= 0 (0: one per CPU core), got {self.num_workers!r}")

    @property
    def alphas(self) -> np.ndarray:
        return np.linspace(self.alpha_from, self.alpha_to, self.num_alphas)

    @property
    def betas(self) -> np.ndarray:
        return np.linspace(self.beta_from, self.beta_to, self.num_betas)


@dataclass(frozen=True)
class TuneResult:
    """The error at every grid point and the best pair."""

    alphas: tuple[float, ...]  # the grid's alphas
    betas: tuple[float, ...]  # the grid's betas
    errors: tuple[tuple[float, ...], ...]  # errors[i][j]: the error rate (a fraction) at alphas[i], betas[j]
    metric: str  # "wer" or "cer" (what "auto" resolved to)
    best_alpha: float  # the pair with the lowest error (ties: see `best_point`)
    best_beta: float
    best_error: float
    num_utterances: int  # dev utterances decoded at every point
    decoder_config: dict  # the DecoderConfig used (its alpha and beta are the grid's)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["points"] = [{"alpha": a, "beta": b, self.metric: self.errors[i][j]}
                       for i, a in enumerate(self.alphas) for j, b in enumerate(self.betas)]
        del d["errors"]
        return d


_state: tuple | None = None  # (search, candidates, references, metric, spaced): set before the pool forks


def _score_point(point: tuple[int, int, float, float]) -> tuple[int, int, float]:
    i, j, alpha, beta = point
    search, candidates, references, metric, spaced = _state
    search.set_weights(alpha, beta)
    hypotheses = [search.decode_candidates(c) for c in candidates]
    return i, j, (wer if metric == "wer" else cer)(references, hypotheses, spaced=spaced)


def tune(log_probs: Sequence[np.ndarray], references: Sequence[str], vocab: Vocabulary, config: TuneConfig,
         decoder_config: DecoderConfig, on_point: Callable[[float, float, float], None] | None = None) -> TuneResult:
    """Decode `log_probs` at every (alpha, beta) of the grid and score each point against `references`.

    Args:
        log_probs: one `(time_i, vocab_size)` array of log-probabilities per dev utterance (valid steps only),
            computed once, e.g. by `deepspeech2.inference.compute_log_probs`.
        references: the normalized reference transcript of each utterance.
        vocab: the model's output vocabulary.
        config: the grid.
        decoder_config: the beam search (beam size, pruning, `lm_path`); its alpha and beta are ignored.
        on_point: called with (alpha, beta, error) as each point finishes (in completion order).

    Returns:
        The error surface and the best pair.

    Raises:
        ValueError: no utterances, `references` of another length, no LM, or greedy decoding.
        FileNotFoundError: the LM or its unigram list is missing.
    """
    global _state
    if len(log_probs) != len(references):
        raise ValueError(f"`log_probs` has {len(log_probs)} utterances but `references` {len(references)}")
    if not log_probs:
        raise ValueError("`log_probs` is empty: nothing to tune on")
    if decoder_config.kind != "beam" or not decoder_config.lm_path:
        raise ValueError("tuning alpha and beta needs beam search with an LM: set `kind`='beam' and `lm_path` "
                         f"(got kind={decoder_config.kind!r}, lm_path={decoder_config.lm_path!r})")
    metric = vocab.metric if config.metric == "auto" else config.metric
    search = BeamSearch(decoder_config, vocab)
    candidates = [candidate_log_probs(np.asarray(lp), decoder_config) for lp in log_probs]
    points = [(i, j, float(a), float(b)) for i, a in enumerate(config.alphas) for j, b in enumerate(config.betas)]
    errors = np.full((config.num_alphas, config.num_betas), np.nan)
    workers = min(config.num_workers or cpu_count(), len(points))
    _state = (search, candidates, list(references), metric, vocab.spaced)
    try:
        if workers <= 1:
            results = map(_score_point, points)
            pool = None
        else:
            pool = multiprocessing.get_context("fork").Pool(workers)  # inherits _state: nothing is pickled
            results = pool.imap_unordered(_score_point, points)
        try:
            for i, j, error in results:
                errors[i, j] = error
                logger.info("alpha %.3f beta %.3f: %s %.2f%%", config.alphas[i], config.betas[j], metric.upper(),
                            100 * error)
                if on_point is not None:
                    on_point(config.alphas[i], config.betas[j], error)
        finally:
            if pool is not None:
                pool.terminate()
    finally:
        _state = None  # the search, and with it its LM (`beam.BeamSearch`), goes when this function returns
    i, j = best_point(errors)
    return TuneResult(alphas=tuple(map(float, config.alphas)), betas=tuple(map(float, config.betas)),
                      errors=tuple(tuple(map(float, row)) for row in errors), metric=metric,
                      best_alpha=float(config.alphas[i]), best_beta=float(config.betas[j]),
                      best_error=float(errors[i, j]), num_utterances=len(log_probs),
                      decoder_config=decoder_config.to_dict())


def best_point(errors: np.ndarray) -> tuple[int, int]:
    """The grid index `(i, j)` of the lowest error.

    Among tied points, the one whose neighbours (the 3 x 3 block around it) err least on average: the middle
    of a flat valley rather than its rim, which is the safer setting for other data. Remaining ties go to
    the smaller alpha, then the smaller beta.
    """
    ties = np.argwhere(np.isclose(errors, np.nanmin(errors), rtol=0, atol=1e-12))
    padded = np.pad(errors, 1, constant_values=np.nan)
    neighbourhood = [np.nanmean(padded[i:i + 3, j:j + 3]) for i, j in ties]
    i, j = ties[int(np.argmin(neighbourhood))]  # argmin takes the first: ties are in row-major order
    return int(i), int(j)


def save_result(result: TuneResult, path: str | Path) -> None:
    """Write `result.to_dict()` as JSON, atomically."""
    write_json(path, result.to_dict())


def plot_error_surface(result: TuneResult, path: str | Path) -> None:
    """Draw the error surface as a heat map: alpha across, beta up, each cell's error in %, the best marked.

    Cells are annotated when the grid has at most 400 of them (a dense grid gets contour lines instead).
    """
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    alphas, betas = np.array(result.alphas), np.array(result.betas)
    errors = 100 * np.array(result.errors).T  # (betas, alphas): rows go up the y axis
    fig, ax = plt.subplots(figsize=(min(3 + 0.6 * len(alphas), 16), min(2.5 + 0.45 * len(betas), 12)))
    # The colours resolve the valley: everything above the median error is drawn as the darkest colour.
    low, high = np.nanmin(errors), np.nanmedian(errors)
    mesh = ax.pcolormesh(_edges(alphas), _edges(betas), errors, cmap="viridis_r", shading="flat", vmin=low,
                         vmax=high if high > low else None)
    fig.colorbar(mesh, ax=ax, label=f"{result.metric.upper()} (%)",
                 extend="max" if high < np.nanmax(errors) else "neither")
    if errors.size <= 400:
        for j, b in enumerate(betas):
            for i, a in enumerate(alphas):
                ax.text(a, b, f"{errors[j, i]:.1f}", ha="center", va="center", fontsize=7,
                        color="black" if mesh.norm(errors[j, i]) < 0.5 else "white")
    if len(alphas) <= 16:
        ax.set_xticks(alphas, [f"{a:.3g}" for a in alphas])
    if len(betas) <= 16:
        ax.set_yticks(betas, [f"{b:.3g}" for b in betas])
    elif len(alphas) > 1 and len(betas) > 1:
        contours = ax.contour(alphas, betas, errors, colors="white", linewidths=0.6)
        ax.clabel(contours, fontsize=7, fmt="%.1f")
    ax.plot(result.best_alpha, result.best_beta, marker="o", markersize=18, markerfacecolor="none",
            markeredgecolor="red", markeredgewidth=2, linestyle="none",
            label=f"best: alpha {result.best_alpha:.3g}, beta {result.best_beta:.3g}, "
                  f"{result.metric.upper()} {100 * result.best_error:.2f}%")
    ax.set_xlabel("alpha (LM weight)")
    ax.set_ylabel("beta (word insertion bonus)" if result.metric == "wer" else "beta (bonus per character)")
    # Two lines: a grid of two alphas makes a figure narrower than the title on one line.
    ax.set_title(f"{result.metric.upper()} over alpha x beta\n{result.num_utterances} utterances, "
                 f"beam {result.decoder_config['beam_size']}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def _edges(centers: np.ndarray) -> np.ndarray:
    """Cell edges around grid centers (a one-point grid gets a unit-wide cell)."""
    if len(centers) == 1:
        return np.array([centers[0] - 0.5, centers[0] + 0.5])
    mids = (centers[1:] + centers[:-1]) / 2
    return np.concatenate([[2 * centers[0] - mids[0]], mids, [2 * centers[-1] - mids[-1]]])
