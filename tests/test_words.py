"""Word times and confidence (deepspeech2/decode/words.py): spans against hand-built posteriors (collapsed frames,
chunked streaming), the clock against the conv geometry, confidence ordering, calibration, AUROC against a brute
force pair count, ECE by hand, the alignment that labels words right, and bad input."""

import json
import math

import numpy as np
import pytest

from deepspeech2.decode.beam import BeamSearch, DecoderConfig
from deepspeech2.decode.prune import candidate_frames
from deepspeech2.decode.words import (FrameClock, Hypothesis, Word, WordConfig, auroc, calibration_table,
                                      decode_words, expected_calibration_error, fit_platt, frame_confidence,
                                      hypotheses, logit, nbest_posterior, words)
from deepspeech2.feature_config import FeatureConfig
from deepspeech2.metrics import align, hypothesis_hits
from deepspeech2.model_config import DS2_PAPER_EN, DS2_SMALL, TINY, ModelConfig
from deepspeech2.vocab import Vocabulary

EN = Vocabulary.english()
NO_LM = DecoderConfig(beam_size=16, num_workers=1)

# A bigram LM that knows "the cat sat on the mat" (log10 probabilities); "hat" is rare.
ARPA = """\\data\\
ngram 1=8
ngram 2=4

\\1-grams:
-2.0\t<unk>\t0
0\t<s>\t-0.3
-1.0\t</s>\t0
-1.0\tthe\t-0.3
-1.3\tcat\t-0.3
-3.0\that\t-0.3
-1.3\tsat\t-0.3
-1.3\tmat\t-0.3

\\2-grams:
-0.1\t<s> the
-0.2\tthe cat
-0.2\tcat sat
-0.2\tthe mat

\\end\\
"""


def steps(spec: str, vocab=EN, p=0.999, ambiguous=None) -> np.ndarray:
    """`(steps, vocab)` log-probs, one step per character of `spec` ("_" the blank) at probability `p`, the rest
    spread evenly; `ambiguous` {step: {char: prob}} overrides steps."""
    rows = []
    for i, c in enumerate(spec):
        probs = (ambiguous or {}).get(i, {c: p})
        row = np.full(vocab.size, (1 - sum(probs.values())) / (vocab.size - len(probs)))
        for char, q in probs.items():
            row[0 if char == "_" else vocab.encode(char)[0]] = q
        rows.append(row)
    return np.log(np.array(rows)).astype(np.float32)


# ------------------------------------------------------------------------------------------------------ spans

def test_spans_are_the_frames_of_each_words_first_and_last_character_over_collapsed_repeats():
    #                 0123456789012345
    lp = steps("_tthee_ caaatt__")
    search = BeamSearch(NO_LM, EN)
    kept = candidate_frames(lp, NO_LM)[1]
    assert len(kept) < len(lp)  # confident repeats were collapsed: t t, e e, a a a, t t, _ _
    best = search.hypotheses(lp)[0]
    # "the": t at 1 (2 repeats it), e at 4-5 -> [1, 6); "cat": c at 8, t at 12-13 -> [8, 14).
    assert best.text == "the cat" == search(lp)
    assert best.spans == (("the", 1, 6), ("cat", 8, 14))
    # The same spans as the search over every frame, nothing collapsed.
    ctc_search = search.start()
    ctc_search.advance(candidate_frames(lp, NO_LM, collapse=False)[0])
    assert hypotheses(ctc_search.finish(), np.arange(len(lp)), len(lp))[0].spans == best.spans


def test_a_word_at_the_end_extends_over_collapsed_frames_to_the_last_step():
    lp = steps("_hiii")  # i repeated to the end: of steps 2-4 only 2 is kept
    assert candidate_frames(lp, NO_LM)[1].tolist() == [0, 1, 2]
    assert BeamSearch(NO_LM, EN).hypotheses(lp)[0].spans == (("hi", 1, 5),)


def test_chunked_streaming_gives_the_spans_of_the_whole_utterance():
    rng = np.random.default_rng(0)
    spec = "__tthhee___  ccaat__ ssaatt___ oonn_ tthhee  mmaatt__"
    lp = steps(spec, ambiguous={21: {"s": 0.6, "m": 0.39}, 45: {"m": 0.7, "h": 0.25}})
    lp += rng.normal(0, 0.05, lp.shape).astype(np.float32)  # not every repeat is a single candidate
    search = BeamSearch(NO_LM, EN)
    whole = search.hypotheses(lp, prune_history=False)
    unpruned = search.start(prune_history=False)  # every frame, none collapsed: the spans to match
    unpruned.advance(candidate_frames(lp, NO_LM, collapse=False)[0])
    assert hypotheses(unpruned.finish(), np.arange(len(lp)), len(lp))[0].spans == whole[0].spans
    assert len(candidate_frames(lp, NO_LM)[1]) < len(lp)
    for cuts in ([0, 3, 4, 5, 17, 30, len(lp)], [0, len(lp) // 2, len(lp)], list(range(len(lp) + 1))):
        prefix, previous, kept_all = search.start(prune_history=False), -1, []
        for start, end in zip(cuts[:-1], cuts[1:]):  # as BeamStream.update does
            frames, kept, previous = candidate_frames(lp[start:end], NO_LM, previous)
            prefix.advance(frames, kept + start)
            kept_all.append(kept + start)
        streamed = hypotheses(prefix.finish(), np.concatenate(kept_all), len(lp))
        assert [(h.text, h.spans) for h in streamed] == [(h.text, h.spans) for h in whole]
        assert [h.score for h in streamed] == pytest.approx([h.score for h in whole])


# ------------------------------------------------------------------------------------------------------ times

def test_the_clock_of_the_demo_model_by_hand():
    # Two 3-wide convs, time strides 2 and 1, no padding: step j sees frames 2j .. 2j + 6, centred on 2j + 3,
    # whose window is centred 160 (2j + 3) + 160 samples in: 40 ms + 20 ms x j at 16 kHz.
    model = ModelConfig(conv_kernel_sizes=((3, 3), (3, 3)), conv_strides=((2, 2), (1, 2)), conv_padding="valid")
    clock = FrameClock.of(model, FeatureConfig(kind="logmel"))
    assert clock == FrameClock(step=0.02, origin=0.04)
    assert clock.start([0, 1, 10]) == pytest.approx([0.03, 0.05, 0.23])


@pytest.mark.parametrize("model", [TINY, DS2_SMALL, DS2_PAPER_EN], ids=["tiny", "ds2-small", "ds2-paper-en"])
def test_the_clock_is_the_centre_of_each_steps_receptive_field(model):
    features = FeatureConfig(hop_ms=10.0, window_ms=25.0)
    # Brute force: propagate the span of input frames each step reads, conv by conv.
    low, high = 0, 0  # step 0 of the last conv reads its own input [low, high]
    for (kernel, _), (stride, _) in reversed(list(zip(model.conv_kernel_sizes, model.conv_strides))):
        pad = (kernel - 1) // 2 if model.conv_padding == "same" else 0
        low, high = low * stride - pad, high * stride - pad + kernel - 1
    centre = (low + high) / 2 * features.hop_length + features.window_length / 2
    clock = FrameClock.of(model, features)
    assert clock.origin == pytest.approx(centre / features.sample_rate)
    assert clock.step == pytest.approx(model.time_stride * features.hop_ms / 1000)


def test_words_are_timed_by_the_clock_and_shifted_by_the_config():
    lp = steps("_tthee_ caaatt__")
    search = BeamSearch(NO_LM, EN)
    clock = FrameClock(step=0.02, origin=0.04)
    best, hyps = search.hypotheses(lp)[0], search.hypotheses(lp, prune_history=False)
    got = words(best, hyps, lp, clock)
    # [1, 6) and [8, 14): starts 0.04 + (s - 0.5) * 0.02, ends the same of the end step.
    assert [(w.word, w.start, w.end) for w in got] == [("the", pytest.approx(0.05), pytest.approx(0.15)),
                                                      ("cat", pytest.approx(0.19), pytest.approx(0.31))]
    shifted = words(best, hyps, lp, clock, WordConfig(start_shift=-0.06, end_shift=0.01), duration=0.3)
    assert [(w.start, w.end) for w in shifted] == [(0.0, pytest.approx(0.16)), (pytest.approx(0.13), 0.3)]
    assert [w.to_dict() for w in shifted][0] == {"word": "the", "start": 0.0, "end": 0.16,
                                                 "confidence": round(shifted[0].confidence, 4)}


def test_decode_words_with_an_lm_gives_the_transcript_of_the_search(tmp_path):
    (tmp_path / "lm.arpa").write_text(ARPA)
    config = DecoderConfig(beam_size=16, alpha=0.5, beta=1.0, lm_path=str(tmp_path / "lm.arpa"), num_workers=1)
    search = BeamSearch(config, EN)
    lp = steps("_tthhee_  ccaatt_  ssaatt__")
    text, got = decode_words(search, lp, FrameClock(step=0.02, origin=0.04))
    assert text == search(lp) == "the cat sat"
    assert [w.word for w in got] == ["the", "cat", "sat"] and all(0 <= w.confidence <= 1 for w in got)
    assert decode_words(search, lp[:0], FrameClock(step=0.02, origin=0.04)) == ("", [])


def test_a_character_language_times_each_character():
    zh = Vocabulary(tuple("你好号吗"))
    ids = [0, 1, 1, 0, 2, 2, 2, 0, 4, 0]  # 你 你 _ 好 好 好 _ 吗 _
    lp = np.log(np.full((len(ids), zh.size), 0.001 / (zh.size - 1)))
    lp[np.arange(len(ids)), ids] = np.log(0.999)
    search = BeamSearch(NO_LM, zh)
    text, got = decode_words(search, lp, FrameClock(step=0.02, origin=0.04))
    assert text == search(lp) == "你好吗"
    assert [(w.word, round(w.start, 3), round(w.end, 3)) for w in got] == [
        ("你", 0.05, 0.09), ("好", 0.11, 0.17), ("吗", 0.19, 0.21)]  # steps [1, 3), [4, 7), [8, 9)

# ------------------------------------------------------------------------------------------------- confidence

def test_a_confident_word_scores_above_an_ambiguous_one():
    # "cat mat", where the m is 55/40 against h: the n-best holds "cat mat" and "cat hat".
    lp = steps("_c_a_t_ _m_a_t_", ambiguous={9: {"m": 0.55, "h": 0.40}})
    search = BeamSearch(NO_LM, EN)
    best, hyps = search.hypotheses(lp)[0], search.hypotheses(lp, prune_history=False)
    assert best.text == "cat mat"
    posterior = nbest_posterior(best, hyps)
    # Every other step has one candidate (the rest are under token_min_logp), so the two hypotheses differ in that
    # step only and "mat" holds 0.55 / (0.55 + 0.40) of the mass.
    assert posterior[0] == pytest.approx(1.0, abs=1e-3)
    assert posterior[1] == pytest.approx(0.55 / 0.95, abs=1e-3)
    frame = frame_confidence(lp, best.spans)
    assert frame[0] == pytest.approx(0.999) and frame[1] == pytest.approx((0.999 * 4 + 0.55) / 5)
    config = WordConfig(posterior_weight=0.3, frame_weight=0.7, intercept=-1.0)
    calibrated = [w.confidence for w in words(best, hyps, lp, FrameClock(0.02, 0.04), config)]
    assert calibrated[0] > calibrated[1]
    assert calibrated == pytest.approx(config.calibrate(posterior, frame))


def test_posterior_counts_a_word_only_where_another_hypothesis_has_it_at_an_overlapping_time():
    best = Hypothesis("a cat", (("a", 0, 2), ("cat", 4, 8)), -1.0)
    hyps = [best,
            Hypothesis("a cat", (("a", 2, 3), ("cat", 7, 9)), -1.0),  # "a" just after, "cat" overlapping
            Hypothesis("cat", (("cat", 0, 3),), -1.0 + math.log(2))]  # "cat" earlier: no overlap
    # Weights 1/4, 1/4, 1/2.
    assert nbest_posterior(best, hyps) == pytest.approx([0.25, 0.5])
    assert nbest_posterior(best, []).tolist() == [0.0, 0.0]


def test_calibrate_is_the_logistic_of_the_weighted_logits():
    config = WordConfig(posterior_weight=0.5, frame_weight=1.0, intercept=-0.2)
    z = 0.5 * math.log(0.9 / 0.1) + math.log(0.8 / 0.2) - 0.2
    assert config.calibrate(0.9, 0.8) == pytest.approx(1 / (1 + math.exp(-z)))
    assert WordConfig().calibrate([0.3, 0.9], [0.1, 0.2]) == pytest.approx([0.3, 0.9])  # the raw posterior
    assert logit([0.0, 1.0]) == pytest.approx([math.log(1e-4 / (1 - 1e-4)), math.log((1 - 1e-4) / 1e-4)])


def test_fit_platt_recovers_a_logistic_model_and_satisfies_the_likelihood_equations():
    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, (20000, 2))
    correct = rng.random(20000) < 1 / (1 + np.exp(-(1.5 * x[:, 0] + 0.5 * x[:, 1] - 1.0)))
    weights, intercept = fit_platt(x, correct)
    assert weights == pytest.approx([1.5, 0.5], abs=0.06) and intercept == pytest.approx(-1.0, abs=0.06)
    # At the maximum, the residuals against Platt's targets are orthogonal to every input and sum to 0.
    small = x[:300, 0]
    (a,), b = fit_platt(small, correct[:300])
    n_pos = int(correct[:300].sum())
    target = np.where(correct[:300], (n_pos + 1) / (n_pos + 2), 1 / (300 - n_pos + 2))
    residual = 1 / (1 + np.exp(-(a * small + b))) - target
    assert abs(residual.sum()) < 1e-8 and abs((residual * small).sum()) < 1e-8
    # Separable scores still give a finite fit.
    (a,), b = fit_platt([-3.0, -2.0, 2.0, 3.0], [False, False, True, True])
    assert math.isfinite(a) and a > 0


# ---------------------------------------------------------------------------------------------- AUROC and ECE

def test_auroc_is_the_share_of_right_wrong_pairs_in_order():
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 6, 200) / 5  # many ties
    correct = rng.random(200) < 0.3 + 0.5 * scores
    pos, neg = scores[correct], scores[~correct]
    brute = (np.sum(pos[:, None] > neg[None, :]) + 0.5 * np.sum(pos[:, None] == neg[None, :])) / (len(pos) * len(neg))
    assert auroc(scores, correct) == pytest.approx(brute, abs=1e-12)
    assert auroc([0.1, 0.2, 0.9], [False, False, True]) == 1.0
    assert auroc([0.9, 0.2, 0.1], [False, True, True]) == 0.0
    assert auroc([0.5, 0.5], [True, False]) == 0.5


def test_ece_and_its_table_by_hand():
    confidence = [0.05, 0.15, 0.95, 0.95, 1.0]
    correct = [False, False, True, False, True]
    table = calibration_table(confidence, correct)
    assert [r["words"] for r in table] == [1, 1, 0, 0, 0, 0, 0, 0, 0, 3]  # 1.0 falls in the last bin
    assert table[9]["confidence"] == pytest.approx(2.9 / 3) and table[9]["accuracy"] == pytest.approx(2 / 3)
    assert table[2]["confidence"] is None and table[2]["accuracy"] is None
    # (1 * 0.05 + 1 * 0.15 + 3 * |2/3 - 2.9/3|) / 5
    assert expected_calibration_error(confidence, correct) == pytest.approx((0.05 + 0.15 + 3 * 0.9 / 3) / 5)
    assert expected_calibration_error([0.25, 0.75], [False, True], bins=2) == pytest.approx(0.25)


def test_hypothesis_hits_label_the_right_words_as_align_counts_them():
    assert hypothesis_hits("the cat sat on the mat".split(), "the bat sat on mat now".split()) == [
        0, None, 2, 3, 5, None]
    rng = np.random.default_rng(2)
    vocab = "a b c d e".split()
    for _ in range(200):
        ref = list(rng.choice(vocab, rng.integers(0, 7)))
        hyp = list(rng.choice(vocab, rng.integers(0, 7)))
        hits = hypothesis_hits(ref, hyp)
        errors = align(ref, hyp)
        matched = [i for i in hits if i is not None]
        assert len(matched) == errors.reference - errors.substitutions - errors.deletions
        assert matched == sorted(set(matched)) and all(ref[i] == hyp[j] for j, i in enumerate(hits) if i is not None)


# --------------------------------------------------------------------------------------------------- bad input

def test_word_config_round_trip_and_errors(tmp_path):
    config = WordConfig(start_shift=-0.016, end_shift=0.019, posterior_weight=0.23, frame_weight=0.72,
                        intercept=-1.2)
    config.save(tmp_path / "words.json")
    assert WordConfig.load(tmp_path / "words.json") == config
    with pytest.raises(ValueError, match="`start_shift` must be a finite number, got nan"):
        WordConfig(start_shift=float("nan"))
    with pytest.raises(ValueError, match="`frame_weight`"):
        WordConfig(frame_weight=-1.0)
    with pytest.raises(ValueError, match="not both 0"):
        WordConfig(posterior_weight=0.0)
    with pytest.raises(ValueError, match=r"unknown WordConfig keys \['slope'\]"):
        WordConfig.from_dict({"slope": 1.0})
    with pytest.raises(FileNotFoundError, match="missing.json"):
        WordConfig.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        WordConfig.load(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        WordConfig.load(tmp_path / "bad.json")


def test_bad_input_is_refused_with_the_field_and_value():
    with pytest.raises(ValueError, match="`step` must be > 0 seconds, got 0"):
        FrameClock(step=0, origin=0.0)
    with pytest.raises(ValueError, match="`frame_ids` must ascend"):
        hypotheses([], [3, 2], 5)
    with pytest.raises(ValueError, match="`frame_ids` must ascend within"):
        hypotheses([], [0, 5], 5)
    with pytest.raises(ValueError, match="'cat' ends at step 3, which is not a kept frame"):
        hypotheses([("cat", None, [("cat", (0, 4))], 0.0, 0.0)], [0, 1, 2], 6)
    with pytest.raises(ValueError, match="both right and wrong"):
        auroc([0.1, 0.2], [True, True])
    with pytest.raises(ValueError, match="`scores` has 2 values but `correct` has 3"):
        auroc([0.1, 0.2], [True, False, True])
    with pytest.raises(ValueError, match="`confidence` must be in"):
        calibration_table([1.5], [True])
    with pytest.raises(ValueError, match="`bins` must be a positive int, got 0"):
        calibration_table([0.5], [True], bins=0)
    with pytest.raises(ValueError, match="`correct` must be booleans"):
        expected_calibration_error([0.5], [2])
    with pytest.raises(ValueError, match="both right and wrong words to calibrate, got 2 right of 2"):
        fit_platt([0.1, 0.2], [True, True])
    with pytest.raises(ValueError, match="`scores` must be finite"):
        fit_platt([0.1, float("inf")], [True, False])
    with pytest.raises(ValueError, match=r"`log_probs` must be \(steps, vocab_size\)"):
        frame_confidence(np.zeros(3), [])
    assert Word("a", 0.1, 0.2, 0.5).to_dict() == json.loads('{"word": "a", "start": 0.1, "end": 0.2, '
                                                            '"confidence": 0.5}')


def test_ds2_eval_and_ds2_infer_give_the_same_timed_words(tmp_path):
    # The library calls of ds2-eval --words and ds2-infer --words, on an untrained tiny bundle (plumbing, not
    # accuracy: its words are all wrong, so the expected calibration error is the mean confidence).
    from deepspeech2.bundle import load_bundle, save_bundle
    from deepspeech2.data.manifest import read_manifest
    from deepspeech2.decode import Decoder
    from deepspeech2.evaluate import EvalConfig, evaluate
    from deepspeech2.inference import transcribe
    from deepspeech2.model import build_model
    from deepspeech2.prepare.stats import compute_mean_std
    from factories import make_manifest

    manifest, _ = make_manifest(tmp_path, n=2)
    stats = compute_mean_std([manifest], FeatureConfig())
    bundle_dir = save_bundle(tmp_path / "model", build_model(TINY), TINY, EN, stats, {"note": "untrained"})
    config = WordConfig(start_shift=-0.01, posterior_weight=0.5, frame_weight=0.5)
    report = evaluate(EvalConfig(str(bundle_dir), (str(manifest),), NO_LM, progress=False, words=config))
    bundle = load_bundle(bundle_dir)
    with Decoder(NO_LM, EN) as decoder:
        transcripts = transcribe(bundle, read_manifest(manifest), decoder, words=config)
    confidences = []
    for u, t in zip(report["utterances"], transcripts):
        assert [w["word"] for w in u["word_times"]] == u["hypothesis"].split() == t.text.split()
        assert u["word_times"] == [{**w.to_dict(), "right": False} for w in t.words]
        assert all(0 <= w.start <= w.end <= u["duration"] and 0 < w.confidence < 1 for w in t.words)
        confidences += [w.confidence for w in t.words]
    summary = report["word_confidence"]
    assert summary["config"] == config.to_dict() and summary["words"] == len(confidences) > 0
    assert summary["right"] == 0 and summary["auroc"] is None
    assert summary["ece"] == pytest.approx(np.mean(confidences), abs=1e-3)  # rounded to 4 digits in the words
    with pytest.raises(ValueError, match="need the beam search"):
        EvalConfig(str(bundle_dir), (str(manifest),), DecoderConfig(kind="greedy"), words=config)
    with Decoder(DecoderConfig(kind="greedy"), EN) as decoder, pytest.raises(ValueError, match="beam search"):
        transcribe(bundle, read_manifest(manifest), decoder, words=config)


# ------------------------------------------------------------------------------------------------------ streams

def test_a_stream_keeps_what_its_words_need_and_finishes_with_decode_words_words(tmp_path):
    # ds2-serve's and ds2-demo's sessions: BeamStream(words=True) fed chunk by chunk (any chunking, empty chunks
    # too) ends with what decode_words gives over the whole utterance, with the LM, hotwords and a calibration.
    from deepspeech2.decode.beam import BeamStream

    (tmp_path / "lm.arpa").write_text(ARPA)
    config = DecoderConfig(beam_size=16, alpha=0.5, beta=1.0, lm_path=str(tmp_path / "lm.arpa"), num_workers=1,
                           hotwords=("hat",), hotword_weight=3.0)
    search = BeamSearch(config, EN)
    rng = np.random.default_rng(1)
    #               0         1         2         3         4
    #               0123456789012345678901234567890123456789012345
    lp = steps("__tthhee___  ccaat__ saatt___ tthhee  maatt__", ambiguous={21: {"s": 0.6, "m": 0.39},
                                                                         37: {"m": 0.5, "h": 0.49}})
    lp += rng.normal(0, 0.05, lp.shape).astype(np.float32)  # not every repeat is a single candidate
    clock, calibration = FrameClock(step=0.02, origin=0.04), WordConfig(-0.01, 0.02, 0.4, 0.8, -0.3)
    text, expected = decode_words(search, lp, clock, calibration, duration=0.85)
    assert text == search(lp) == "the cat sat the mat"
    hyps = search.hypotheses(lp, prune_history=False)
    posterior = nbest_posterior(search.hypotheses(lp)[0], hyps)
    assert len(hyps) > 1 and posterior[2] < 0.95  # "sat" is in doubt ("mat"): the n-best list counts
    assert expected[-1].end == 0.85  # clipped to the duration
    for cuts in ([0, 3, 3, 4, 17, 30, len(lp)], [0, len(lp)], list(range(len(lp) + 1))):
        stream = BeamStream(search, words=True)
        for start, end in zip(cuts[:-1], cuts[1:]):
            stream.update(lp[start:end])
        assert stream.nbytes <= stream.fixed_bytes + stream.step_bytes * len(lp)
        got_text, got = stream.finish_words(clock, calibration, duration=0.85)
        assert got_text == text and [w.word for w in got] == [w.word for w in expected]
        for field in ("start", "end", "confidence"):
            np.testing.assert_allclose([getattr(w, field) for w in got], [getattr(w, field) for w in expected],
                                       rtol=0, atol=1e-9, err_msg=field)
    empty = BeamStream(search, words=True)
    empty.update(lp[:0])
    assert empty.finish_words(clock, calibration) == ("", [])
    plain = BeamStream(search)
    plain.update(lp)
    assert plain.fixed_bytes * 2 == BeamStream(search, words=True).fixed_bytes
    with pytest.raises(ValueError, match="start it with `words=True`"):
        plain.finish_words(clock, calibration)
