import jiwer
import numpy as np

from deepspeech2.metrics import cer, edit_distance, wer


def test_against_jiwer():
    rng = np.random.default_rng()
    words = "the cat sat on a mat dog ran far away".split()
    refs, hyps = [], []
    for _ in range(50):
        refs.append(" ".join(rng.choice(words, rng.integers(1, 8))))
        hyps.append(" ".join(rng.choice(words, rng.integers(0, 8))))
    assert abs(wer(refs, hyps) - jiwer.wer(refs, hyps)) < 1e-12
    nonempty = [(r, h) for r, h in zip(refs, hyps) if h]
    r2, h2 = zip(*nonempty)
    assert abs(cer(list(r2), list(h2)) - jiwer.cer(list(r2), list(h2))) < 1e-12


def test_edit_distance_basics():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "") == 3
    assert cer(["我们好"], ["我好"], ignore_spaces=True) == 1 / 3
