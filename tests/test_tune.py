"""ds2-tune: the alpha x beta grid finds a planted best region, writes JSON and the error surface, runs end to end."""

import json
import math
import subprocess
import sys
from pathlib import Path

import kenlm
import numpy as np
import pytest

from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.decode.tune import TuneConfig, plot_error_surface, save_result, tune
from deepspeech2.vocab import Vocabulary

EN = Vocabulary.english()
LN10 = math.log(10)

# A bigram LM (log10). "the cat sat" beats "the hat sat" by 1.2; "a dog ran" and "dog ran" are close; an
# extra "a" in "the a dog ran" costs 1.2.
ARPA = """\\data\\
ngram 1=10
ngram 2=12

\\1-grams:
-3.0\t<unk>\t0
0\t<s>\t-0.2
-1.0\t</s>\t0
-1.0\tthe\t-0.2
-1.2\ta\t-0.2
-1.5\tcat\t-0.2
-2.0\that\t-0.2
-1.5\tdog\t-0.2
-1.5\tsat\t-0.2
-1.5\tran\t-0.2

\\2-grams:
-0.3\t<s> the
-0.6\t<s> a
-0.9\t<s> dog
-0.5\tthe cat
-1.5\tthe hat
-0.6\tthe dog
-0.4\ta dog
-0.3\tcat sat
-0.5\that sat
-0.3\tdog ran
-0.2\tsat </s>
-0.2\tran </s>

\\end\\
"""


def frames(text, weak):
    """(time, vocab) log-probs: one spike step per character of `text`, each followed by a blank step;
    `weak` maps a position to that step's {char: prob} (the rest goes to the blank)."""
    rows = []
    for i, c in enumerate(text):
        row = np.full(EN.size, 1e-6)
        for char, p in weak.get(i, {c: 0.99}).items():
            row[EN.encode(char)[0]] = p
        row[0] = max(1 - row.sum(), 1e-6)
        rows += [row, np.r_[0.999, np.full(EN.size - 1, 0.001 / (EN.size - 1))]]
    rows = np.array(rows)
    return np.log(rows / rows.sum(axis=1, keepdims=True)).astype(np.float32)


# Each utterance: (reference, its log-probs, the competing hypothesis, acoustic log-odds of reference over it).
UTTERANCES = [
    # A: the acoustics lean to "hat"; the LM must pull it to "cat" (needs a large enough alpha).
    ("the cat sat", frames("the cat sat", {4: {"h": 0.7, "c": 0.3}}), "the hat sat", math.log(0.3 / 0.7)),
    # B: the acoustics clearly say "hat"; too large an alpha turns it into "cat".
    ("the hat sat", frames("the hat sat", {4: {"h": 0.96, "c": 0.04}}), "the cat sat", math.log(0.96 / 0.04)),
    # C: a weak "a" (0.3 against the blank's 0.7) is really there: beta must pay for the word.
    ("a dog ran", frames("a dog ran", {0: {"a": 0.3}}), "dog ran", math.log(0.3 / 0.7)),
    # D: a weak spurious "a" (0.2): too large a beta inserts it.
    ("the dog ran", frames("the a dog ran", {4: {"a": 0.2}}), "the a dog ran", math.log(0.8 / 0.2)),
]


def planted(alpha, beta, lm):
    """Expected WER at (alpha, beta) from Q(y) = log p_ctc + alpha log p_lm + beta words, and the smallest
    margin (nats) by which any utterance is decided."""
    wrong, margin = 0, np.inf
    for ref, _, other, acoustic in UTTERANCES:
        gap = (acoustic + alpha * LN10 * (lm.score(ref) - lm.score(other))
               + beta * (len(ref.split()) - len(other.split())))
        wrong += gap < 0
        margin = min(margin, abs(gap))
    return wrong / sum(len(ref.split()) for ref, *_ in UTTERANCES), margin


@pytest.fixture
def lm_path(tmp_path):
    (tmp_path / "lm.arpa").write_text(ARPA)
    return str(tmp_path / "lm.arpa")


def test_tune_finds_the_planted_region(tmp_path, lm_path):
    grid = TuneConfig(alpha_from=0.0, alpha_to=2.0, num_alphas=9, beta_from=0.0, beta_to=4.0, num_betas=9,
                      num_workers=2)
    decoder_config = DecoderConfig(beam_size=32, lm_path=lm_path)
    seen = []
    result = tune([lp for _, lp, *_ in UTTERANCES], [ref for ref, *_ in UTTERANCES], EN, grid, decoder_config,
                  on_point=lambda a, b, e: seen.append((a, b)))
    assert len(seen) == 81 and len(set(seen)) == 81
    lm = kenlm.Model(lm_path)
    decided = 0
    for i, alpha in enumerate(result.alphas):
        for j, beta in enumerate(result.betas):
            expected, margin = planted(alpha, beta, lm)
            if margin > 0.05:  # not on a boundary of the region
                assert result.errors[i][j] == pytest.approx(expected), (alpha, beta)
                decided += 1
    assert decided > 60
    # The best pair is inside the planted region (alpha 0.31-1.15, beta between two alpha-dependent lines)
    # and decodes everything right; the corners don't.
    assert result.best_error == 0 and planted(result.best_alpha, result.best_beta, lm) == (0, pytest.approx(
        planted(result.best_alpha, result.best_beta, lm)[1]))
    assert 0.3 < result.best_alpha < 1.15
    assert min(result.errors[0][0], result.errors[0][-1], result.errors[-1][0], result.errors[-1][-1]) > 0
    # A grid point is what the decoder gives at that alpha and beta on the same log-probs.
    i, j = 6, 2
    direct = Decoder(DecoderConfig(beam_size=32, lm_path=lm_path, alpha=result.alphas[i], beta=result.betas[j],
                                   num_workers=1), EN)
    hyps = direct.decode_utterances([lp for _, lp, *_ in UTTERANCES])
    from deepspeech2.metrics import wer

    assert result.errors[i][j] == pytest.approx(wer([ref for ref, *_ in UTTERANCES], hyps, spaced=EN.spaced))

    save_result(result, tmp_path / "tune.json")
    saved = json.loads((tmp_path / "tune.json").read_text())
    assert (saved["best_alpha"], saved["best_beta"]) == (result.best_alpha, result.best_beta)
    assert len(saved["points"]) == 81 and set(saved["points"][0]) == {"alpha", "beta", "wer"}
    assert saved["decoder_config"]["lm_path"] == lm_path
    plot_error_surface(result, tmp_path / "tune.png")
    assert (tmp_path / "tune.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_serial_and_one_point_grids(lm_path, tmp_path):
    refs, lps = [ref for ref, *_ in UTTERANCES], [lp for _, lp, *_ in UTTERANCES]
    one = tune(lps, refs, EN, TuneConfig(alpha_from=0.75, alpha_to=0.75, num_alphas=1, beta_from=1.5, beta_to=1.5,
                                         num_betas=1, num_workers=1, metric="cer"), DecoderConfig(lm_path=lm_path))
    assert (one.best_alpha, one.best_beta, one.best_error) == (0.75, 1.5, 0.0) and one.metric == "cer"
    plot_error_surface(one, tmp_path / "one.png")
    assert (tmp_path / "one.png").exists()


def test_tune_checks(lm_path):
    refs, lps = [ref for ref, *_ in UTTERANCES], [lp for _, lp, *_ in UTTERANCES]
    with pytest.raises(ValueError, match="needs beam search with an LM"):
        tune(lps, refs, EN, TuneConfig(), DecoderConfig())
    with pytest.raises(ValueError, match="`references` 3"):
        tune(lps, refs[:3], EN, TuneConfig(), DecoderConfig(lm_path=lm_path))
    with pytest.raises(ValueError, match="empty"):
        tune([], [], EN, TuneConfig(), DecoderConfig(lm_path=lm_path))
    for bad, name in ((dict(alpha_from=-1), "alpha_from"), (dict(alpha_to=-1), "alpha_to"),
                      (dict(beta_from=2, beta_to=1), "beta_from"), (dict(num_alphas=0), "num_alphas"),
                      (dict(metric="ser"), "metric"), (dict(num_workers=-2), "num_workers")):
        with pytest.raises(ValueError, match=f"`{name}`"):
            TuneConfig(**bad)


def test_cli_end_to_end(tmp_path, lm_path):
    """ds2-tune on a (random, untrained) tiny model bundle: acoustic outputs once, a 2 x 2 grid, JSON + PNG."""
    from deepspeech2.bundle import save_bundle
    from deepspeech2.features import FeatureConfig, Normalizer
    from deepspeech2.model import build_model
    from deepspeech2.model_config import TINY
    from factories import make_manifest

    config = FeatureConfig()
    normalizer = Normalizer(np.zeros(config.dim, np.float32), np.ones(config.dim, np.float32), config)
    save_bundle(tmp_path / "model", build_model(TINY), TINY, EN, normalizer)
    manifest, _ = make_manifest(tmp_path / "data", n=3)
    with open(manifest, "a") as f:  # an unreadable utterance is skipped, not fatal
        f.write(json.dumps({"audio_filepath": "wav/missing.wav", "duration": 1.0, "text": "gone"}) + "\n")
    cli = [sys.executable, str(Path(__file__).parents[1] / "bin" / "ds2_tune.py"), "--model_dir",
           str(tmp_path / "model"), "--manifest", str(manifest), "--lm", lm_path, "--num_alphas", "2",
           "--num_betas", "2", "--beam_size", "4", "--out_json", str(tmp_path / "t.json")]
    done = subprocess.run(cli, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "best: alpha" in done.stdout and done.stdout.count("WER") == 5
    result = json.loads((tmp_path / "t.json").read_text())
    assert result["num_utterances"] == 3 and len(result["points"]) == 4
    assert (tmp_path / "t.png").exists()  # the error surface, beside the JSON without --out_png
    done = subprocess.run(cli[:-2] + ["--lm", str(tmp_path / "nope.bin")], capture_output=True, text=True)
    assert done.returncode == 1 and "ds2-tune: error: `lm_path`" in done.stderr


def test_best_point_prefers_the_middle_of_a_flat_valley():
    from deepspeech2.decode.tune import best_point

    errors = np.full((5, 6), 0.3)
    errors[1:4, 1:4] = 0.1
    errors[3, 3] = 0.2
    assert best_point(errors) == (2, 2)  # of the 8 minima, the one whose neighbourhood errs least
    assert best_point(np.array([[.5, .4], [.4, .3]])) == (1, 1)
    assert best_point(np.array([[.1, .1]])) == (0, 0)


def test_mandarin_tunes_cer_by_default_and_each_point_matches_a_direct_decode(tmp_path):
    """A vocabulary without a space is tuned by CER (metric "auto"), beta being a per-character bonus; every
    grid point's error equals jiwer's CER of a Decoder run at that point alone (brute force)."""
    import jiwer

    zh = Vocabulary.from_texts(["你好号吗我很"])
    (tmp_path / "zh.arpa").write_text(
        "\\data\\\nngram 1=9\nngram 2=3\n\n\\1-grams:\n-2.0\t<unk>\t0\n0\t<s>\t-0.3\n-1.0\t</s>\t0\n"
        "-1.0\t你\t-0.3\n-1.0\t好\t-0.3\n-2.5\t号\t-0.3\n-1.2\t吗\t-0.3\n-1.2\t我\t-0.3\n-1.5\t很\t-0.3\n\n"
        "\\2-grams:\n-0.1\t你 好\n-0.2\t好 吗\n-0.3\t很 好\n\n\\end\\\n", encoding="utf-8")

    def spikes(dists):
        rows = []
        for dist in dists:
            row = np.full(zh.size, 1e-6)
            for ch, p in dist.items():
                row[zh.encode(ch)[0]] = p
            row[0] = max(1 - row.sum(), 1e-6)
            rows += [row, np.r_[0.999, np.full(zh.size - 1, 0.001 / (zh.size - 1))]]
        rows = np.array(rows)
        return np.log(rows / rows.sum(axis=1, keepdims=True)).astype(np.float32)

    refs = ["你好吗", "我很好", "你号"]
    log_probs = [spikes([{"你": 0.99}, {"号": 0.6, "好": 0.4}, {"吗": 0.99}]),  # the LM should pull 号 -> 好
                 spikes([{"我": 0.99}, {"很": 0.25}, {"好": 0.99}]),  # a weak 很: beta must pay for it
                 spikes([{"你": 0.99}, {"号": 0.97, "好": 0.03}])]  # 号 is really said: too large an alpha errs
    decoder = DecoderConfig(lm_path=str(tmp_path / "zh.arpa"), beam_size=16)
    grid = TuneConfig(alpha_from=0, alpha_to=2, num_alphas=3, beta_from=0, beta_to=2, num_betas=3, num_workers=1)
    result = tune(log_probs, refs, zh, grid, decoder)
    assert result.metric == "cer"
    for i, alpha in enumerate(result.alphas):
        for j, beta in enumerate(result.betas):
            config = DecoderConfig(**{**decoder.to_dict(), "alpha": alpha, "beta": beta, "num_workers": 1})
            hyps = Decoder(config, zh).decode_utterances(log_probs)
            assert result.errors[i][j] == pytest.approx(jiwer.cer(refs, hyps)), (alpha, beta, hyps)
    assert result.best_error < max(max(row) for row in result.errors)  # the grid matters
    assert TuneConfig(metric="wer").metric == "wer"
