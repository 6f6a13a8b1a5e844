"""Hotwords: words or phrases the beam search favours, for a whole config or one request.

`DecoderConfig.hotwords` lists words or phrases the search favours, with pyctcdecode's hotword scoring (`Hotwords`,
README "Hotwords"): a hypothesis gains `hotword_weight` nats for each hotword it holds (each word of a phrase
counts on its own), and a partial word that starts a hotword gains its share of the weight instead of the LM's
partial-word score. A hotword the LM doesn't know is scored as the LM scores an unknown word, without
`unk_score_offset`: the list says it exists. A request can add its own (`BeamSearch.hotwords_with`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from deepspeech2.text import normalize_english
from deepspeech2.vocab import Vocabulary

# The default hotword bonus, in nats: the lowest dev WER on the tiny corpus (bench/hotwords.py, README "Hotwords");
# kept below -beam_prune_logp (10), past which a hotword's prefixes prune the beams that spell other words.
HOTWORD_WEIGHT = 8.0
LN10 = math.log(10)  # pyctcdecode's LM scores are KenLM's log10 times ln 10 (its LOG_BASE_CHANGE_FACTOR)


def normalize_hotwords(hotwords: Sequence[str]) -> tuple[str, ...]:
    """Hotwords as the search matches them: each normalized as a transcript is (`normalize_english`: lower case,
    numbers spelled out, punctuation dropped), duplicates dropped, in order.

    >>> normalize_hotwords(["Zyxel", "New  York", "zyxel", "R2-D2"])
    ('zyxel', 'new york', 'r two d two')

    Raises:
        ValueError: `hotwords` is a single string, or an entry is not a string, is empty, or can't be normalized.
    """
    if isinstance(hotwords, (str, bytes)):
        raise ValueError(f"`hotwords` must be a list of words or phrases, got the string {hotwords!r}")
    out = []
    for hotword in hotwords:
        text = normalize_english(hotword) if isinstance(hotword, str) else ""
        if not text:
            raise ValueError(f"`hotwords`: {hotword!r} is not a word or phrase that can be written in [a-z' ] (it is "
                             "normalized as a transcript: numbers spelled out, punctuation dropped)")
        if text not in out:
            out.append(text)
    return tuple(out)


class Hotwords:
    """pyctcdecode's hotword scoring (its `HotwordScorer`) for one list of hotwords, with one change: a hotword
    the LM doesn't know is scored as a known word.

    pyctcdecode adds `weight` nats to a hypothesis for each hotword in it (a phrase counts word by word, wherever
    each word occurs) and, while a hypothesis' last word is unfinished and starts a hotword, `weight * len(prefix)
    / len(shortest hotword it starts)` instead of the LM's partial-word score (`unk_score_offset` for a prefix of
    no LM word). When a word the LM doesn't know ends, the LM adds `unk_score_offset` (in log10, so alpha * 10 *
    ln 10 nats: 17 at alpha 0.75) to KenLM's <unk> probability, more than the bonus gives: out of the box an
    out-of-LM hotword loses at its last letter. Here that offset is given back for each such hotword, so it is
    scored as KenLM scores <unk>, plus the bonus. The search calls `score`, `score_partial_token` and `in`.
    """

    def __init__(self, words: Sequence[str], weight: float, language_model=None):
        """
        Args:
            words: normalized hotwords (`normalize_hotwords`), words or phrases.
            weight: nats per hotword in a hypothesis.
            language_model: the search's `pyctcdecode.LanguageModel` (its alpha and offset are read at each
                score, so `BeamSearch.set_weights` applies), or None without an LM.
        """
        from pyctcdecode.language_model import HotwordScorer  # as BeamSearch: only beam search needs it

        self.words = tuple(words)
        self.weight = float(weight)
        self._scorer = HotwordScorer.build_scorer(self.words, weight=self.weight)
        unigrams = sorted({w for phrase in self.words for w in phrase.split()})
        # The words pyctcdecode's LanguageModel.score gives `unk_score_offset` (its own test, as written there).
        self.unknown = tuple(w for w in unigrams if language_model is not None and (
            (language_model._unigram_set and w not in language_model._unigram_set)
            or w not in language_model._kenlm_model))
        self._count_unknown = HotwordScorer.build_scorer(self.unknown, weight=1.0)
        self._lm = language_model

    def __contains__(self, prefix: str) -> bool:
        return prefix in self._scorer

    def score_partial_token(self, prefix: str) -> float:
        return self._scorer.score_partial_token(prefix)

    def score(self, text: str) -> float:
        """The bonus of a hypothesis' finished words: `weight` per hotword, and the LM's unknown-word offset back
        for each that the LM doesn't know."""
        score = self._scorer.score(text)
        if self.unknown:
            score -= self._count_unknown.score(text) * self._lm.alpha * self._lm.unk_score_offset * LN10
        return score


def check_hotwords(hotwords: Sequence[str], vocab: Vocabulary) -> None:
    """Raises ValueError unless the model can spell every hotword (normalized) as words of its vocabulary."""
    if not vocab.spaced:
        raise ValueError(f"`hotwords` {list(hotwords)} need a vocabulary with a space (words); for a character "
                         "language pyctcdecode's hotwords would boost single characters wherever they occur")
    for hotword in hotwords:
        missing = sorted(vocab.unknown(hotword))
        if missing:
            raise ValueError(f"`hotwords`: {hotword!r} holds {missing}, which the model can't output")


__all__ = ["HOTWORD_WEIGHT", "Hotwords", "check_hotwords", "normalize_hotwords"]
