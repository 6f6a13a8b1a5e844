"""CTC prefix beam search with an optional KenLM n-gram LM (pyctcdecode): its config, the search over one utterance
or a stream, and the decoder that runs it over a batch.

A hypothesis y is scored as in DS2 §3.8 eq. 12:

    Q(y) = log p_ctc(y | x) + alpha * log p_lm(y) + beta * word_count(y)

with natural logarithms (pyctcdecode converts KenLM's log10). Partial words are checked against the LM's
unigram list: a prefix that starts no known word gets pyctcdecode's `unk_score_offset` (-10) right away,
which is what keeps misspelled prefixes out of the beam. A binary KenLM file doesn't list its words, so
the unigram list ships beside it (`<name>.unigrams.txt`, written by `ds2-build-lm`) and is loaded here;
for an ARPA file pyctcdecode reads them from the file itself.

Each frame's candidate tokens are decided before the search, by DS2's pruning heuristic (`prune.py`); the search
favours the config's and a request's hotwords (`hotwords.py`).

Languages. A vocabulary with a space (English) decodes words: the LM is a word n-gram. A vocabulary
without one (Mandarin, DS2 §6.2) uses a character LM: every character is a "word" to the LM. The labels
handed to pyctcdecode then start each character with its word-boundary mark "▁" (its BPE mode), so the LM
scores each character as it is completed; the LM's corpus is written one character per token (`ds2-build-lm
--language zh`), and the spaces pyctcdecode puts between words are removed from the output.

Workers. `Decoder` forks a persistent pool of `num_workers` processes on its first batch, after the LM is
loaded: the workers inherit the parent's KenLM model, so the LM is loaded once, not per call or per
worker (a binary model is memory-mapped, so its pages are shared too). They run only numpy and KenLM,
never TensorFlow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import multiprocessing
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2 import configs
from deepspeech2.decode.greedy import check_log_probs, greedy_decode, ids_to_text
from deepspeech2.decode.hotwords import HOTWORD_WEIGHT, Hotwords, check_hotwords, normalize_hotwords
from deepspeech2.decode.lm import check_lm_pair
from deepspeech2.decode.prune import (CUTOFF_PROB, CUTOFF_TOP_N, MIN_TOKEN_LOGP, SKIP_LOGP, candidate_frames,
                                      candidate_log_probs)
from deepspeech2.vocab import Vocabulary

KINDS = ("greedy", "beam")
WORD_BOUNDARY = "▁"  # pyctcdecode's BPE word-start mark, used for character LMs
FLOAT_FIELDS = ("alpha", "beta", "cutoff_prob", "token_min_logp", "beam_prune_logp", "unk_score_offset",
                "hotword_weight")  # DecoderConfig's weights and thresholds: each must be finite


@dataclass(frozen=True)
class DecoderConfig:
    """How CTC outputs become text. The defaults are the ones bench/decode.py measured (see README)."""

    kind: str = "beam"  # "greedy" (best path) or "beam" (prefix beam search; with an LM when `lm_path` is set)
    beam_size: int = 100  # hypotheses kept per frame (DS2 uses 500 for English, 200 for Mandarin)
    alpha: float = 0.5  # LM weight (DS2 §3.8 eq. 12); tune it with ds2-tune
    beta: float = 2.0  # word insertion bonus per word (DS2 §3.8 eq. 12); tune it with ds2-tune
    cutoff_prob: float = CUTOFF_PROB  # DS2 §7.3 per-frame cumulative-probability pruning; 1.0 turns it off
    cutoff_top_n: int = CUTOFF_TOP_N  # DS2 §7.3: at most this many tokens per frame (when cutoff_prob < 1)
    token_min_logp: float = -5.0  # skip tokens below it (except the frame's best), as pyctcdecode does
    beam_prune_logp: float = -10.0  # pyctcdecode: drop beams this far (nats) below the best one
    lm_path: str | None = None  # KenLM model, ARPA (.arpa) or binary; None: no LM
    unigrams_path: str | None = None  # the LM's word list; None: `<lm stem>.unigrams.txt` (needed for binary LMs)
    unk_score_offset: float = -10.0  # pyctcdecode: added for a word (or word prefix) the LM doesn't know
    num_workers: int = 0  # decoding processes for a batch; 0: one per CPU core; 1: in this process
    hotwords: tuple[str, ...] = ()  # words or phrases to favour (`Hotwords`); normalized as transcripts are
    hotword_weight: float = HOTWORD_WEIGHT  # nats a hypothesis gains per hotword it holds (not scaled by alpha)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}, got {self.kind!r}")
        if isinstance(self.beam_size, bool) or not isinstance(self.beam_size, int) or self.beam_size < 1:
            raise ValueError(f"`beam_size` must be a positive int, got {self.beam_size!r}")
        # An infinite or NaN weight turns every hypothesis' score into NaN (inf - inf), and the search's output
        # into whatever its sort makes of NaN: refuse it here, for every weight and threshold.
        for name in FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"`{name}` must be a finite number, got {value!r}")
        if not self.alpha >= 0:
            raise ValueError(f"`alpha` (the LM weight) must be >= 0, got {self.alpha!r}")
        if not 0 < self.cutoff_prob <= 1:
            raise ValueError(f"`cutoff_prob` must be in (0, 1] (1 turns DS2's pruning off), got {self.cutoff_prob!r}")
        if isinstance(self.cutoff_top_n, bool) or not isinstance(self.cutoff_top_n, int) or self.cutoff_top_n < 1:
            raise ValueError(f"`cutoff_top_n` must be a positive int, got {self.cutoff_top_n!r}")
        if not MIN_TOKEN_LOGP <= self.token_min_logp <= 0:
            raise ValueError(f"`token_min_logp` must be in [{MIN_TOKEN_LOGP}, 0] (a log-probability; pyctcdecode "
                             f"clips at log(1e-15)), got {self.token_min_logp!r}")
        if not self.beam_prune_logp < 0:
            raise ValueError(f"`beam_prune_logp` must be < 0 (nats below the best beam), got {self.beam_prune_logp!r}")
        if not self.unk_score_offset <= 0:
            raise ValueError(f"`unk_score_offset` must be <= 0, got {self.unk_score_offset!r}")
        if self.kind == "greedy" and self.lm_path:
            raise ValueError(f"`lm_path` ({self.lm_path}) needs kind='beam'; greedy decoding uses no LM")
        if self.unigrams_path and not self.lm_path:
            raise ValueError(f"`unigrams_path` ({self.unigrams_path}) is given without `lm_path`")
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) or self.num_workers < 0:
            raise ValueError(f"`num_workers` must be an int >= 0 (0: one per CPU core), got {self.num_workers!r}")
        object.__setattr__(self, "hotwords", normalize_hotwords(self.hotwords))  # a JSON list, too
        if not self.hotword_weight >= 0:
            raise ValueError(f"`hotword_weight` must be >= 0 (nats), got {self.hotword_weight!r}")
        if self.hotwords and self.kind != "beam":
            raise ValueError(f"`hotwords` {list(self.hotwords)} need kind='beam'; greedy decoding has no search to "
                             "bias")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DecoderConfig":
        """Inverse of `to_dict`. Raises ValueError on a key that is not a field."""
        return configs.from_dict(cls, d)



def unigrams_path_for(lm_path: str | os.PathLike) -> Path:
    """Where `ds2-build-lm` puts an LM's word list: `lm.bin` / `lm.arpa` -> `lm.unigrams.txt`."""
    lm_path = Path(lm_path)
    return lm_path.with_name(f"{lm_path.stem}.unigrams.txt")


def load_unigrams(path: str | os.PathLike) -> list[str]:
    """Read a word list (one word per line; blank lines ignored).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file lists no word.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"unigram list `{path}` does not exist")
    words = [w for w in path.read_text(encoding="utf-8").split("\n") if w.strip()]
    if not words:
        raise ValueError(f"unigram list `{path}` is empty")
    return words




def pyctcdecode_labels(vocab: Vocabulary) -> list[str]:
    """The vocabulary's ids as pyctcdecode labels: blank "", space " "; without a space (a character
    language), every character starts a word ("▁字"), so a character LM scores each character."""
    if vocab.spaced:
        return vocab.tokens()
    return [""] + [WORD_BOUNDARY + c for c in vocab.chars]


class BeamSearch:
    """The beam search of one config: what a pool worker holds (inherited through fork, never pickled)."""

    def __init__(self, config: DecoderConfig, vocab: Vocabulary):
        import pyctcdecode  # here, not at import time: greedy decoding and the LM builder don't need it

        self.config = config
        self.char_level = not vocab.spaced
        if config.hotwords:  # before the LM loads (seconds for a large one); `hotwords_with` builds them below
            check_hotwords(config.hotwords, vocab)
        lm_path, unigrams = check_lm_files(config), None
        if lm_path is not None:
            words = Path(config.unigrams_path) if config.unigrams_path else unigrams_path_for(lm_path)
            unigrams = load_unigrams(words) if words.is_file() else None  # None: pyctcdecode reads the ARPA's
        # pyctcdecode warns about small word lists (< 1000 words: our test LMs) and about the BPE-style
        # labels of character LMs, which have no UNK token; neither is a problem here.
        with _quiet("pyctcdecode"):
            self.ctc = pyctcdecode.build_ctcdecoder(
                pyctcdecode_labels(vocab), kenlm_model_path=None if lm_path is None else str(lm_path),
                unigrams=unigrams, alpha=float(config.alpha), beta=float(config.beta),
                unk_score_offset=float(config.unk_score_offset))
        # pyctcdecode keeps each decoder's LM in a class-level table (so that forked workers share it) until told to
        # drop it: drop it with the decoder, or every search built and let go (a served version replaced, one that
        # failed to load, a tuning run) would keep its KenLM model, unigrams and trie for the life of the process.
        self._drop_lm = weakref.finalize(self.ctc, _drop_lm, self.ctc._model_key)
        self.vocab = vocab
        self.hotwords = self.hotwords_with(())  # the config's, for every search that isn't given others

    def hotwords_with(self, extra: Sequence[str]) -> Hotwords | None:
        """The config's hotwords and `extra` (e.g. a request's), at the config's weight, for `start`, `nbest` or
        `stream`; None when there are none.

        Raises:
            ValueError: an entry of `extra` can't be normalized, or holds a character the model can't output.
        """
        words = normalize_hotwords(tuple(self.config.hotwords) + tuple(extra))
        if not words:
            return None
        check_hotwords(words, self.vocab)
        return Hotwords(words, self.config.hotword_weight, self.ctc._language_model)

    def release(self) -> None:
        """Drop the LM now rather than when this search is let go; the search can't be used afterwards."""
        self._drop_lm()

    def set_weights(self, alpha: float, beta: float) -> None:
        """Change alpha and beta in place (in this process only; for ds2-tune's workers)."""
        self.ctc.reset_params(alpha=float(alpha), beta=float(beta))

    def start(self, prune_history: bool = True, hotwords: Hotwords | None = None):
        """A new `search.PrefixSearch` over one utterance, to `advance` with candidate frames (`candidate_frames`),
        with `hotwords` (`hotwords_with`; None: the config's)."""
        from deepspeech2.decode.search import PrefixSearch  # it imports pyctcdecode, as the constructor does

        return PrefixSearch(self.ctc, self.config.beam_size, self.config.beam_prune_logp, SKIP_LOGP, prune_history,
                            hotwords if hotwords is not None else self.hotwords)

    def stream(self, hotwords: Hotwords | None = None, words: bool = False) -> "BeamStream":
        """A new utterance to decode chunk by chunk (a streaming session's), with `hotwords` (None: the config's),
        keeping what its words need when `words` (`BeamStream`)."""
        return BeamStream(self, hotwords, words)

    def __call__(self, log_probs: np.ndarray) -> str:
        return self.decode_candidates(candidate_log_probs(log_probs, self.config))

    def text(self, text: str) -> str:
        """A beam's text as a transcript: without the spaces between a character language's words."""
        return text.replace(" ", "") if self.char_level else text

    def decode_candidates(self, candidates: np.ndarray) -> str:
        """Search `candidate_log_probs`' output (prepared once, e.g. for every point of ds2-tune's grid)."""
        if candidates.shape[0] == 0:
            return ""
        search = self.start()
        search.advance(candidates)
        return self.text(search.finish()[0][0])

    def nbest(self, log_probs: np.ndarray, n: int, hotwords: Hotwords | None = None, stop=None
              ) -> list[tuple[str, float]]:
        """The `n` best hypotheses of one utterance `(time, vocab_size)`, best first, with their DS2 eq. 12
        scores (fewer when the beam holds fewer; with `hotwords` (None: the config's), their bonus included).
        `stop`: as `PrefixSearch.advance`'s."""
        # As pyctcdecode's decode_beams: keep the beams' diversity.
        hyps = self.hypotheses(log_probs, prune_history=False, hotwords=hotwords, stop=stop)[:n]
        return [(h.text, h.score) for h in hyps] or [("", 0.0)]

    def hypotheses(self, log_probs: np.ndarray, prune_history: bool = True, hotwords: Hotwords | None = None,
                   stop=None) -> list:
        """Every hypothesis the beam holds at the end of one utterance `(time, vocab_size)`, best first, as
        `words.Hypothesis`: transcript, each word's span in model output steps, DS2 eq. 12 score.

        `prune_history` True is the search that transcribes (`__call__`: the first hypothesis is its transcript),
        False the more diverse one of `nbest`; `hotwords` None: the config's; `stop` as `PrefixSearch.advance`'s.
        `words.decode_words` uses both. Empty for an utterance of no steps."""
        from deepspeech2.decode.words import hypotheses

        candidates, frame_ids, _ = candidate_frames(log_probs, self.config)
        if candidates.shape[0] == 0:
            return []
        search = self.start(prune_history=prune_history, hotwords=hotwords)
        search.advance(candidates, frame_ids, stop)
        return hypotheses(search.finish(), frame_ids, len(log_probs), self.text)


class BeamStream:
    """One utterance decoded with the LM as its log-probs arrive (DS2 §7's streaming, with the beam search kept
    up to date): `update` with each chunk's new frames, `text` is the best beam so far, `finish` gives the final
    transcript, the same as `BeamSearch` over the whole utterance at once.

    With `words`, it also keeps what `words.decode_words` needs as the frames arrive: the second, diverse search
    (`nbest`'s, whose hypotheses score each word's confidence) advanced beside the first, the kept frames' indices
    and the log-probs; `finish_words` then gives the transcript and its timed words, as `decode_words` over the
    whole utterance does, with only the last chunk's frames and the end-of-sentence scores left to compute. It
    doubles the search's work per chunk.

    >>> stream = BeamSearch(DecoderConfig(), Vocabulary.english()).stream()
    >>> for chunk in np.split(np.log(np.eye(29)[[10, 10, 0, 11]] + 1e-6), 2):  # h h blank i
    ...     stream.update(chunk)
    >>> stream.finish()
    'hi'
    """

    def __init__(self, search: BeamSearch, hotwords: Hotwords | None = None, words: bool = False):
        self.search = search
        self._prefix = search.start(hotwords=hotwords)
        self._previous_best = -1  # the last frame's only candidate, for pruning step 3 across chunks
        self.steps = 0  # model output steps seen
        self.words = bool(words)
        self._diverse = search.start(prune_history=False, hotwords=hotwords) if words else None
        self._kept: list[np.ndarray] = []  # with words: each chunk's kept frames, as output step indices
        self._log_probs: list[np.ndarray] = []  # with words: each chunk's (steps, vocab_size) log-probs

    def update(self, log_probs: np.ndarray, stop=None) -> None:
        """Advance over the next `(steps, vocab_size)` log-probabilities (or logits) of the utterance; `stop` as
        `search.PrefixSearch.advance`'s (what it raises leaves the stream unusable)."""
        log_probs = np.asarray(log_probs)
        if log_probs.ndim != 2:
            raise ValueError(f"`log_probs` must be (steps, vocab_size), got shape {log_probs.shape}")
        frames, kept, self._previous_best = candidate_frames(log_probs, self.search.config, self._previous_best)
        self._prefix.advance(frames, kept + self.steps, stop)
        if self.words:
            self._diverse.advance(frames, kept + self.steps, stop)
            self._kept.append(kept + self.steps)
            self._log_probs.append(np.array(log_probs, np.float32))  # a copy: the caller may reuse its buffer
        self.steps += len(log_probs)

    @property
    def text(self) -> str:
        """The best hypothesis so far, with the LM (its last word may be unfinished)."""
        return self.search.text(self._prefix.best)

    @property
    def nbytes(self) -> int:
        """A rough size of the search's state: at most `fixed_bytes` plus `step_bytes` per output step so far."""
        if not self.words:
            return self._prefix.nbytes
        return self._prefix.nbytes + self._diverse.nbytes + sum(a.nbytes + k.nbytes
                                                                for a, k in zip(self._log_probs, self._kept))

    @property
    def fixed_bytes(self) -> int:
        """The most the beams and their LM score caches hold, besides their texts and frame lists."""
        return self._prefix.fixed_bytes * (2 if self.words else 1)

    @property
    def step_bytes(self) -> int:
        """The most one output step can add to `nbytes` (every beam a character and a word's frame span longer;
        with words, in both searches, and the step's log-probs and index)."""
        from deepspeech2.decode.search import STEP_BYTES

        if not self.words:
            return STEP_BYTES * self.search.config.beam_size
        return 2 * STEP_BYTES * self.search.config.beam_size + 4 * self.search.vocab.size + 8

    def finish(self) -> str:
        """The final transcript (the end-of-sentence LM score added). The stream is spent afterwards."""
        if self._prefix.frames == 0:
            self._prefix.done = True
            return ""
        return self.search.text(self._prefix.finish()[0][0])

    def finish_words(self, clock, config, duration: float | None = None) -> tuple[str, list]:
        """The final transcript and its words, what `words.decode_words` gives over the whole utterance (in place
        of `finish`; the stream is spent afterwards).

        Args:
            clock: the model's `words.FrameClock`.
            config: the `words.WordConfig` (shifts, calibration).
            duration: the audio's seconds, if known: times are clipped to it.

        Returns:
            `(transcript, [words.Word, ...])`.

        Raises:
            ValueError: the stream was started without `words`.
        """
        from deepspeech2.decode.words import hypotheses, words

        if not self.words:
            raise ValueError("this stream keeps no words: start it with `words=True`")
        if self._prefix.frames == 0:
            self._prefix.done = self._diverse.done = True
            return "", []
        kept = np.concatenate(self._kept)
        best = hypotheses(self._prefix.finish(), kept, self.steps, self.search.text)[0]
        hyps = hypotheses(self._diverse.finish(), kept, self.steps, self.search.text)
        return best.text, words(best, hyps, np.concatenate(self._log_probs), clock, config, duration)



def check_lm_files(config: DecoderConfig) -> Path | None:
    """The LM path of `config` (None without one), after checking that it and its unigram list exist.

    Raises:
        FileNotFoundError: the LM is missing, or a binary LM's unigram list is.
        ValueError: the LM and the unigram list beside it are not what one ds2-build-lm wrote (`lm.check_lm_pair`).
    """
    if not config.lm_path:
        return None
    lm_path = Path(config.lm_path)
    if not lm_path.is_file():
        raise FileNotFoundError(f"`lm_path` {lm_path} does not exist; build one with ds2-build-lm")
    if config.unigrams_path:
        if not Path(config.unigrams_path).is_file():
            raise FileNotFoundError(f"`unigrams_path` {config.unigrams_path} does not exist")
    elif unigrams_path_for(lm_path).is_file():
        check_lm_pair(lm_path, unigrams_path_for(lm_path))
    elif lm_path.suffix != ".arpa":  # an ARPA file lists its words
        raise FileNotFoundError(
            f"the binary LM `{lm_path}` needs its unigram list (`{unigrams_path_for(lm_path)}`, written by "
            "ds2-build-lm next to the binary) or `unigrams_path`: without it pyctcdecode can't score partial "
            "words and accuracy drops")
    return lm_path


@contextlib.contextmanager
def _quiet(logger_name: str):
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _drop_lm(key: bytes) -> None:
    from pyctcdecode.decoder import BeamSearchDecoderCTC

    BeamSearchDecoderCTC.model_container.pop(key, None)


_worker_search: BeamSearch | None = None  # set in each pool worker by _init_worker


def _init_worker(search: BeamSearch) -> None:
    global _worker_search
    _worker_search = search


def _decode_in_worker(log_probs: np.ndarray) -> str:
    return _worker_search(log_probs)


def cpu_count() -> int:
    """CPU cores this process may run on (the affinity mask, e.g. under `taskset`)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class Decoder:
    """CTC outputs -> text, for one `DecoderConfig` and vocabulary. Build it once and reuse it.

    The LM and its unigrams are loaded once, in the constructor. With `num_workers` > 1, the first batch
    of more than one utterance forks a persistent worker pool that inherits the loaded LM and is reused by
    every later call; `close()` (or leaving a `with` block, or the end of the process) stops it.

    >>> decoder = Decoder(DecoderConfig(kind="greedy"), Vocabulary.english())
    >>> decoder.decode_batch(np.eye(29)[[[10, 10, 0, 11]]], [4])  # h h blank i
    ['hi']
    """

    def __init__(self, config: DecoderConfig, vocab: Vocabulary):
        """
        Args:
            config: the decoding settings.
            vocab: the model's output vocabulary (id 0 = blank).

        Raises:
            FileNotFoundError: the LM, or a binary LM's unigram list, is missing.
            ValueError: the unigram list is empty.
        """
        self.config = config
        self.vocab = vocab
        self.search = BeamSearch(config, vocab) if config.kind == "beam" else None
        self._pool = None
        self._finalizer = None

    @property
    def num_workers(self) -> int:
        return self.config.num_workers or cpu_count()

    def decode_batch(self, log_probs, lengths) -> list[str]:
        """Decode a padded batch.

        Args:
            log_probs: `(batch, time, vocab_size)` log-probabilities (logits work too: each frame is
                log-softmax normalized first).
            lengths: `(batch,)` valid steps per utterance (the model's `output_lengths`).

        Returns:
            One transcript per utterance, words separated by single spaces (no spaces for a character
            language).

        Raises:
            ValueError: the shapes don't fit each other or the vocabulary, or a length is out of range.
        """
        log_probs, lengths = check_log_probs(log_probs, lengths)
        self._check_vocab_size(log_probs.shape[-1])
        if self.search is None:
            return [ids_to_text(ids, self.vocab) for ids in greedy_decode(log_probs, lengths)]
        return self.decode_utterances([lp[:n] for lp, n in zip(log_probs, lengths)])

    def decode_utterances(self, log_probs: Sequence[np.ndarray]) -> list[str]:
        """Decode utterances of different lengths.

        Args:
            log_probs: one `(time_i, vocab_size)` array per utterance, valid steps only.

        Returns:
            One transcript per utterance.

        Raises:
            ValueError: an array isn't `(time, vocab_size)`.
        """
        log_probs = [np.asarray(lp) for lp in log_probs]
        for lp in log_probs:
            if lp.ndim != 2:
                raise ValueError(f"each of `log_probs` must be (time, vocab_size), got shape {lp.shape}")
            self._check_vocab_size(lp.shape[-1])
        if self.search is None:
            return [ids_to_text(greedy_decode(lp[None], [len(lp)])[0], self.vocab) for lp in log_probs]
        if self.num_workers <= 1 or len(log_probs) <= 1:
            return [self.search(lp) for lp in log_probs]
        pool = self._get_pool()
        # Long utterances first, so no worker is left with the longest one at the end.
        order = sorted(range(len(log_probs)), key=lambda i: -len(log_probs[i]))
        texts = pool.map(_decode_in_worker, [log_probs[i] for i in order], chunksize=1)
        out = [""] * len(log_probs)
        for i, text in zip(order, texts):
            out[i] = text
        return out

    def close(self) -> None:
        """Stop the worker pool (if any). The decoder stays usable; a later batch starts a new pool."""
        if self._finalizer is not None:
            self._finalizer()
        self._pool = self._finalizer = None

    def __enter__(self) -> "Decoder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _get_pool(self):
        if self._pool is None:
            # fork: the workers inherit the loaded LM (pyctcdecode keeps it in a class-level table).
            ctx = multiprocessing.get_context("fork")
            self._pool = ctx.Pool(self.num_workers, initializer=_init_worker, initargs=(self.search,))
            self._finalizer = weakref.finalize(self, self._pool.terminate)
        return self._pool

    def _check_vocab_size(self, size: int) -> None:
        if size != self.vocab.size:
            raise ValueError(f"`log_probs` have {size} classes but the vocabulary has {self.vocab.size} ids")


__all__ = ["BeamSearch", "BeamStream", "Decoder", "DecoderConfig", "check_lm_files", "cpu_count", "load_unigrams",
           "pyctcdecode_labels", "unigrams_path_for"]
