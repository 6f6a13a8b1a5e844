"""The one scorer: WER and CER against jiwer (the reference implementation) in English and Mandarin, the
edit counts by hand, and the spaced/unspaced rule."""

import jiwer
import numpy as np
import pytest

from deepspeech2.metrics import Errors, align, cer, edit_distance, score, wer

WORDS = "the cat sat on a mat dog ran far away".split()
HANZI = "我们你好吗很谢今天气不错"


def _random_pairs(rng, tokens, joiner, n=50):
    refs, hyps = [], []
    for _ in range(n):
        refs.append(joiner.join(rng.choice(tokens, rng.integers(1, 8))))
        hyps.append(joiner.join(rng.choice(tokens, rng.integers(0, 8))))  # some empty
    return refs, hyps


def _kinds(o) -> tuple[int, int]:
    return o.substitutions + o.deletions + o.insertions, o.hits + o.substitutions + o.deletions


def test_english_equals_jiwer():
    refs, hyps = _random_pairs(np.random.default_rng(0), WORDS, " ")
    assert wer(refs, hyps, spaced=True) == pytest.approx(jiwer.wer(refs, hyps), abs=1e-12)
    assert cer(refs, hyps, spaced=True) == pytest.approx(jiwer.cer(refs, hyps), abs=1e-12)  # spaces count
    s = score(refs, hyps, spaced=True)
    assert (s["word_substitutions"] + s["word_deletions"] + s["word_insertions"], s["words"]) == _kinds(
        jiwer.process_words(refs, hyps))
    assert (s["char_substitutions"] + s["char_deletions"] + s["char_insertions"], s["chars"]) == _kinds(
        jiwer.process_characters(refs, hyps))


def test_mandarin_counts_characters_as_words_and_equals_jiwer():
    # Transcripts with and without spaces between words (AISHELL's come spaced): spaces never count.
    refs, hyps = _random_pairs(np.random.default_rng(1), list(HANZI), "")
    refs = [" ".join(r[:2]) + r[2:] if i % 3 == 0 else r for i, r in enumerate(refs)]
    bare = [r.replace(" ", "") for r in refs]
    assert cer(refs, hyps, spaced=False) == pytest.approx(jiwer.cer(bare, hyps), abs=1e-12)
    assert wer(refs, hyps, spaced=False) == pytest.approx(
        jiwer.wer([" ".join(r) for r in bare], [" ".join(h) for h in hyps]), abs=1e-12)
    s = score(refs, hyps, spaced=False)
    assert s["wer"] == s["cer"] and s["words"] == s["chars"] == sum(map(len, bare))


def test_score_hand_counts():
    refs = ["the cat sat", "on the mat", "a dog"]
    hyps = ["the bat sat down", "on mat", "a dog"]
    s = score(refs, hyps, spaced=True)
    # sub bat/cat, ins down; del the; exact.
    assert (s["word_substitutions"], s["word_deletions"], s["word_insertions"], s["words"]) == (1, 1, 1, 8)
    assert s["wer"] == pytest.approx(3 / 8) and s["utterances"] == 3
    zh = score(["我们 好", "你好"], ["我 好", "你好吗"], spaced=False)  # characters, spaces ignored
    assert zh["cer"] == pytest.approx(2 / 5) and zh["chars"] == 5 and zh["wer"] == zh["cer"]
    assert score([], [], spaced=True) == {"utterances": 0, "wer": None, "cer": None}


def test_align_counts_kinds_and_prefers_hits():
    assert align("kitten", "sitting") == Errors(substitutions=2, deletions=0, insertions=1, reference=6)
    assert align("ab", "bc") == Errors(0, 1, 1, 2)  # keep the hit b rather than two substitutions
    assert align("", "abc") == Errors(0, 0, 3, 0) and align("abc", "") == Errors(0, 3, 0, 3)
    assert edit_distance("kitten", "sitting") == 3
    assert (Errors(1, 2, 3, 4) + Errors(1, 1, 1, 1)).rate == 9 / 5


def test_whitespace_runs_count_once():
    assert cer(["a  b "], [" a b"], spaced=True) == 0 and wer(["a  b"], ["a b"], spaced=True) == 0
    assert cer(["我们好"], ["我 好"], spaced=False) == 1 / 3
