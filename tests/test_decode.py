"""Decoders: greedy against a hand-computed case, beam search against TF's, the LM's effect, DS2 pruning."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deepspeech2.decode import Decoder, DecoderConfig, GreedyStream, greedy_decode, prune_log_probs
from deepspeech2.decode.beam import pyctcdecode_labels
from deepspeech2.decode.prune import SKIP_LOGP, candidate_log_probs, log_softmax
from deepspeech2.vocab import Vocabulary

EN = Vocabulary.english()

# A bigram LM that knows "the cat sat on the mat" and barely knows "hat" (log10 probabilities).
ARPA_EN = """\\data\\
ngram 1=9
ngram 2=6

\\1-grams:
-2.0\t<unk>\t0
0\t<s>\t-0.3
-1.0\t</s>\t0
-1.0\tthe\t-0.3
-1.3\tcat\t-0.3
-3.0\that\t-0.3
-1.3\tsat\t-0.3
-1.3\ton\t-0.3
-1.3\tmat\t-0.3

\\2-grams:
-0.1\t<s> the
-0.2\tthe cat
-0.2\tcat sat
-0.2\tsat on
-0.3\ton the
-0.2\tmat </s>

\\end\\
"""

# A character bigram LM for a Mandarin-style vocabulary: 你 is followed by 好, not 号.
ARPA_ZH = """\\data\\
ngram 1=7
ngram 2=3

\\1-grams:
-2.0\t<unk>\t0
0\t<s>\t-0.3
-1.0\t</s>\t0
-0.8\t你\t-0.3
-1.0\t好\t-0.3
-2.5\t号\t-0.3
-1.2\t吗\t-0.3

\\2-grams:
-0.1\t<s> 你
-0.1\t你 好
-0.2\t好 吗

\\end\\
"""


def frames(spec, vocab, blank_p=0.999):
    """(time, vocab) log-probs: each entry of `spec` ({char: prob}, rest to the blank) is one step, followed by
    a blank step."""
    rows = []
    for probs in spec:
        row = np.full(vocab.size, 1e-6)
        for char, p in probs.items():
            row[vocab.encode(char)[0]] = p
        row[0] = max(1 - row.sum(), 1e-6)
        rows += [row, np.r_[blank_p, np.full(vocab.size - 1, (1 - blank_p) / (vocab.size - 1))]]
    rows = np.array(rows)
    return np.log(rows / rows.sum(axis=1, keepdims=True)).astype(np.float32)


def spell(text, **overrides):
    """One spike per character; `overrides` maps a character position to its {char: prob}."""
    return [overrides.get(f"at{i}", {c: 0.99}) for i, c in enumerate(text)]


@pytest.fixture
def en_lm(tmp_path):
    path = tmp_path / "en.arpa"
    path.write_text(ARPA_EN)
    return str(path)


# ------------------------------------------------------------------------------------------------- greedy

def test_greedy_hand_computed():
    # argmax path per utterance (ids): h=10 e=7 l=14 o=17, blank=0, space=1
    paths = [[10, 10, 0, 7, 14, 14, 0, 14, 17, 0],  # h h _ e l l _ l o _ -> "hello"
             [1, 3, 3, 3, 0, 0, 3, 1, 9, 9]]  # _ a a a _ _ a _ (then ignored) -> " aa "
    log_probs = np.log(np.full((2, 10, EN.size), 0.01))
    for b, path in enumerate(paths):
        log_probs[b, np.arange(10), path] = np.log(0.7)
    ids = greedy_decode(log_probs, [10, 8])
    assert ids == [[10, 7, 14, 14, 17], [1, 3, 3, 1]]
    assert EN.decode(ids[0]) == "hello"
    assert Decoder(DecoderConfig(kind="greedy"), EN).decode_batch(log_probs, [10, 8]) == ["hello", "aa"]
    assert greedy_decode(log_probs, [0, 1]) == [[], [1]]


def test_greedy_checks_shapes():
    with pytest.raises(ValueError, match="`lengths`"):
        greedy_decode(np.zeros((2, 5, 3)), [5, 6])
    with pytest.raises(ValueError, match="`log_probs`"):
        greedy_decode(np.zeros((5, 3)), [5])
    with pytest.raises(ValueError, match="29 ids"):
        Decoder(DecoderConfig(kind="greedy"), EN).decode_batch(np.zeros((1, 5, 3)), [5])


# ----------------------------------------------------------------------------------------------- pruning

def test_greedy_stream_merges_repeats_across_chunks_as_the_whole_utterance_decodes():
    ids = np.random.default_rng(0).choice([0, 0, 1, 1, 3, 4, 5, 28], size=60)  # blanks, spaces, repeats
    ids[5:9] = [3, 3, 3, 3]  # a run split by the boundary at 7
    ids[29:32] = [4, 0, 4]  # a repeat separated by a blank, at the boundaries 30 and 31
    log_probs = np.log(np.full((60, EN.size), 0.01, np.float32))
    np.put_along_axis(log_probs, ids[:, None], np.log(0.7), axis=-1)
    cuts = [0, 0, 1, 7, 7, 8, 30, 31, 60]  # empty and one-step chunks too
    stream, decoder = GreedyStream(EN), Decoder(DecoderConfig(kind="greedy"), EN)
    for start, end in zip(cuts[:-1], cuts[1:]):
        assert stream.update(log_probs[start:end]) == decoder.decode_batch(log_probs[None, :end], [end])[0]
    assert stream.steps == 60 and stream.ids == greedy_decode(log_probs[None], [60])[0]


def test_prune_keeps_the_fewest_tokens_reaching_cutoff_prob():
    probs = np.array([0.04, 0.5, 0.01, 0.3, 0.15])  # sorted: ids 1, 3, 4, 0, 2
    lp = np.log(probs)[None]

    def kept(cutoff_prob, top_n=40):
        return np.flatnonzero(np.isfinite(prune_log_probs(lp, cutoff_prob, top_n)[0])).tolist()

    assert kept(0.4) == [1]  # 0.5 alone reaches 0.4
    assert kept(0.7) == [1, 3]  # 0.5 < 0.7 <= 0.8
    assert kept(0.9) == [1, 3, 4]  # 0.8 < 0.9 <= 0.95
    assert kept(0.985) == [0, 1, 3, 4]  # 0.95 < 0.985 <= 0.99
    assert kept(0.995) == [0, 1, 2, 3, 4]
    assert kept(0.99, top_n=2) == [1, 3]  # capped at cutoff_top_n
    assert kept(1.0, top_n=1) == [0, 1, 2, 3, 4]  # cutoff_prob 1 turns it off, top_n included
    out = prune_log_probs(lp, 0.9, 40)
    np.testing.assert_allclose(out[0, [1, 3, 4]], np.log(probs[[1, 3, 4]]), rtol=1e-6)  # kept values unchanged


def test_prune_is_per_frame_and_keeps_the_best_token():
    rng = np.random.default_rng(0)
    lp = log_softmax(rng.normal(size=(7, 50, 29)) * 3)
    out = prune_log_probs(lp, 0.99, 40)
    kept = np.isfinite(out)
    best = np.argmax(lp, axis=-1)
    assert np.take_along_axis(kept, best[..., None], -1).all()
    # The kept tokens are the most probable ones, and the fewest that reach 0.99.
    probs = np.exp(lp)
    mass = np.where(kept, probs, 0).sum(-1)
    least_kept = np.where(kept, probs, np.inf).min(-1)
    assert (np.where(kept, -np.inf, probs).max(-1) <= least_kept).all()
    assert ((mass >= 0.99 - 1e-5) | (kept.sum(-1) == 29)).all()
    assert (mass - least_kept < 0.99).all()  # without its least probable token, a frame falls short
    with pytest.raises(ValueError, match="`cutoff_prob`"):
        prune_log_probs(lp, 0.0, 40)
    with pytest.raises(ValueError, match="`cutoff_top_n`"):
        prune_log_probs(lp, 0.99, 0)


def test_candidates_drop_repeated_single_token_frames():
    # blank, blank, a, a, blank, blank, {a, b}, blank: the second of each identical run goes
    lp = np.log(np.array([[.999, .0005, .0005], [.999, .0005, .0005], [.0005, .999, .0005], [.0005, .999, .0005],
                          [.999, .0005, .0005], [.999, .0005, .0005], [.0005, .6, .3995], [.999, .0005, .0005]]))
    cand = candidate_log_probs(lp, DecoderConfig(cutoff_prob=0.99))
    assert np.isfinite(cand).sum(-1).tolist() == [1, 1, 1, 2, 1]
    assert cand.argmax(-1).tolist() == [0, 1, 0, 1, 0]


def test_frame_collapsing_is_exact(en_lm):
    """The decoder (pruned + collapsed) gives exactly what pyctcdecode gives on the pruned frames alone.

    (That the pruning itself is DS2's is checked above; pyctcdecode's own floor is not used, as it applies
    after renormalizing each frame.)"""
    rng = np.random.default_rng(1)
    # The -3.5 floor leaves many frames with one candidate, so every case collapses some.
    config = DecoderConfig(beam_size=16, alpha=0.5, beta=1.0, lm_path=en_lm, num_workers=1, token_min_logp=-3.5)
    decoder = Decoder(config, EN)
    ctc = decoder.search.ctc
    for _ in range(12):
        ids = rng.integers(1, EN.size, size=12)
        steps = []
        for i in ids:  # each label for 1-3 steps, then 0-4 blank steps, everything a little noisy
            steps += [i] * int(rng.integers(1, 4)) + [0] * int(rng.integers(0, 5))
        logits = rng.normal(size=(len(steps), EN.size)) * 1.5
        logits[np.arange(len(steps)), steps] += rng.uniform(3, 9, size=len(steps))
        lp = log_softmax(logits)
        pruned = candidate_log_probs(lp, config, collapse=False)
        collapsed = candidate_log_probs(lp, config)
        assert len(collapsed) < len(pruned)
        full = ctc.decode(pruned, beam_width=config.beam_size, beam_prune_logp=config.beam_prune_logp,
                          token_min_logp=SKIP_LOGP)
        assert decoder.decode_utterances([lp]) == [full]


# ------------------------------------------------------------------------------------------ beam search

@pytest.mark.parametrize("chars", [" abcd", "abcd"])  # with a space (words), without one (a character language)
def test_beam_without_lm_matches_tensorflow(chars):
    import tensorflow as tf

    vocab = Vocabulary(tuple(chars))
    rng = np.random.default_rng(2)
    batch, steps = 32, 30
    labels = rng.integers(0, vocab.size, size=(batch, steps))
    logits = rng.normal(size=(batch, steps, vocab.size))
    logits[np.arange(batch)[:, None], np.arange(steps), labels] += 6.0  # peaky: one path usually dominates
    lp = log_softmax(logits)
    lengths = rng.integers(10, steps + 1, size=batch)
    # TF wants the blank last and time first: move id 0 to the end, so TF id k is our id k + 1.
    decoded, scores = tf.nn.ctc_beam_search_decoder(np.transpose(np.roll(lp, -1, axis=-1), (1, 0, 2)),
                                                    lengths.astype(np.int32), beam_width=64, top_paths=2)
    tf_ids = tf.sparse.to_dense(decoded[0], default_value=-1).numpy()
    expected = [" ".join(vocab.decode([i + 1 for i in row if i >= 0]).split()) for row in tf_ids]
    # Where TF's best labelling beats its second by a clear margin the answer is well defined. (Near-ties may
    # differ: pyctcdecode merges labellings that give the same text, e.g. "a b" and "a  b".)
    clear = (scores[:, 0] - scores[:, 1]).numpy() > 1.0
    assert clear.sum() >= batch // 2
    config = DecoderConfig(beam_size=64, cutoff_prob=1.0, token_min_logp=-30.0, beam_prune_logp=-50.0,
                           num_workers=1)
    got = Decoder(config, vocab).decode_batch(lp, lengths)
    assert [g for g, c in zip(got, clear) if c] == [e for e, c in zip(expected, clear) if c]
    # The default pruning doesn't change these confident answers.
    got = Decoder(DecoderConfig(beam_size=64, num_workers=1), vocab).decode_batch(lp, lengths)
    assert [g for g, c in zip(got, clear) if c] == [e for e, c in zip(expected, clear) if c]


def test_lm_moves_the_hypothesis_towards_likely_words(en_lm):
    # The acoustics slightly prefer "hat" (h 0.6, c 0.4); the LM strongly prefers "the cat sat".
    hat = frames(spell("the cat sat on the mat", at4={"h": 0.6, "c": 0.39}), EN)
    # "kat" is no word: the acoustics prefer k (0.6) over c (0.39).
    kat = frames(spell("the cat sat on the mat", at4={"k": 0.6, "c": 0.39}), EN)

    def decode(lp, **kw):
        return Decoder(DecoderConfig(beam_size=32, num_workers=1, **kw), EN).decode_utterances([lp])[0]

    assert decode(hat) == "the hat sat on the mat"  # no LM: the acoustics win
    assert decode(hat, lm_path=en_lm, alpha=0.0, beta=0.0) == "the hat sat on the mat"  # "hat" is a word too
    assert decode(hat, lm_path=en_lm, alpha=0.5, beta=1.0) == "the cat sat on the mat"
    assert decode(kat) == "the kat sat on the mat"
    assert decode(kat, lm_path=en_lm, alpha=0.5, beta=1.0) == "the cat sat on the mat"


def test_character_lm_for_a_language_without_spaces(tmp_path):
    vocab = Vocabulary(tuple("你好号吗"))
    assert pyctcdecode_labels(vocab) == ["", "▁你", "▁好", "▁号", "▁吗"]
    (tmp_path / "zh.arpa").write_text(ARPA_ZH)
    lp = frames([{"你": 0.99}, {"号": 0.6, "好": 0.39}, {"吗": 0.99}], vocab)
    assert Decoder(DecoderConfig(beam_size=16, num_workers=1), vocab).decode_utterances([lp]) == ["你号吗"]
    with_lm = DecoderConfig(beam_size=16, alpha=0.5, beta=0.5, lm_path=str(tmp_path / "zh.arpa"), num_workers=1)
    assert Decoder(with_lm, vocab).decode_utterances([lp]) == ["你好吗"]
    assert Decoder(DecoderConfig(kind="greedy"), vocab).decode_utterances([lp]) == ["你号吗"]


def test_worker_pool_is_persistent_and_agrees(en_lm):
    rng = np.random.default_rng(3)
    lp = log_softmax(rng.normal(size=(6, 40, EN.size)) * 4)
    lengths = np.array([40, 12, 33, 5, 40, 27])
    serial = Decoder(DecoderConfig(beam_size=8, lm_path=en_lm, num_workers=1), EN).decode_batch(lp, lengths)
    with Decoder(DecoderConfig(beam_size=8, lm_path=en_lm, num_workers=2), EN) as decoder:
        assert decoder.decode_batch(lp, lengths) == serial
        pool = decoder._pool
        assert pool is not None
        assert decoder.decode_batch(lp[::-1], lengths[::-1]) == serial[::-1]
        assert decoder._pool is pool  # one pool for the decoder's life: the LM is never reloaded
    assert decoder._pool is None


def test_config_checks():
    for bad, name in ((dict(kind="viterbi"), "kind"), (dict(beam_size=0), "beam_size"), (dict(alpha=-1), "alpha"),
                      (dict(cutoff_prob=0), "cutoff_prob"), (dict(cutoff_top_n=0), "cutoff_top_n"),
                      (dict(token_min_logp=-40), "token_min_logp"), (dict(beam_prune_logp=0), "beam_prune_logp"),
                      (dict(kind="greedy", lm_path="x.bin"), "lm_path"), (dict(unigrams_path="u.txt"), "unigrams_path"),
                      (dict(num_workers=-1), "num_workers")):
        with pytest.raises(ValueError, match=f"`{name}`"):
            DecoderConfig(**bad)
    assert DecoderConfig.from_dict(DecoderConfig(beam_size=7).to_dict()) == DecoderConfig(beam_size=7)
    with pytest.raises(ValueError, match="beam_width"):
        DecoderConfig.from_dict({"beam_width": 7})
    with pytest.raises(FileNotFoundError, match="ds2-build-lm"):
        Decoder(DecoderConfig(lm_path="/nonexistent/lm.bin"), EN)
    assert SKIP_LOGP > np.log(1e-15) and SKIP_LOGP < -30


@pytest.mark.parametrize("name, value", [("alpha", math.inf), ("beta", math.nan), ("unk_score_offset", -math.inf),
                                         ("beam_prune_logp", -math.inf), ("hotword_weight", math.inf),
                                         ("cutoff_prob", math.nan)])
def test_non_finite_weights_are_refused_naming_the_field(name, value):
    """An infinite alpha or offset makes every score NaN (inf - inf) and the transcripts arbitrary."""
    with pytest.raises(ValueError, match=f"`{name}` must be a finite number"):
        DecoderConfig(**{name: value})


@pytest.mark.slow
def test_a_non_finite_weight_is_one_line_from_the_cli():
    out = subprocess.run([str(Path(sys.executable).parent / "ds2-serve"), "--model_base_path", "/nonexistent",
                          "--alpha", "inf"], capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1] == "ds2-serve: error: `alpha` must be a finite number, got inf"


# --------------------------------------------------------------------------------------------- Mandarin

def test_beta_is_a_per_character_bonus_for_a_character_lm(tmp_path):
    """DS2 eq. 12's word bonus counts characters when each character is an LM token (a vocabulary without a
    space): the same hypothesis scores exactly 3 * delta_beta higher for 3 characters, and beta 0 means no
    bonus at all."""
    from deepspeech2.decode.beam import BeamSearch

    vocab = Vocabulary(tuple("你好号吗"))
    (tmp_path / "zh.arpa").write_text(ARPA_ZH)
    lp = frames([{"你": 0.99}, {"好": 0.9, "号": 0.09}, {"吗": 0.99}], vocab)
    scores = {}
    for beta in (0.0, 1.0, 2.5):
        search = BeamSearch(DecoderConfig(beam_size=16, alpha=0.5, beta=beta, lm_path=str(tmp_path / "zh.arpa")), vocab)
        (text, score), *_ = search.nbest(lp, 1)
        assert text == "你好吗"
        scores[beta] = score
    assert scores[1.0] - scores[0.0] == pytest.approx(3.0, abs=1e-4)
    assert scores[2.5] - scores[0.0] == pytest.approx(7.5, abs=1e-4)


def test_six_thousand_character_vocabulary_decodes_with_and_without_a_character_lm(tmp_path):
    """A 6,000-character output layer (DS2 §6.2's Mandarin scale): greedy, beam with DS2's pruning, and the LM
    choosing between two near-equal characters; the pruning leaves a handful of the 6,002 ids per frame."""
    chars = [chr(0x4E00 + i) for i in range(6000)]
    vocab = Vocabulary.from_texts(["".join(chars)])
    a, b, c, d = chars[100], chars[2000], chars[4000], chars[5999]
    unigrams = "".join(f"-1.0\t{ch}\t-0.3\n" for ch in (a, b, c, d))
    (tmp_path / "zh.arpa").write_text(
        f"\\data\\\nngram 1={4 + 3}\nngram 2=2\n\n\\1-grams:\n-2.0\t<unk>\t0\n0\t<s>\t-0.3\n-1.0\t</s>\t0\n{unigrams}"
        f"\n\\2-grams:\n-0.1\t{a} {c}\n-0.1\t{c} {d}\n\n\\end\\\n", encoding="utf-8")
    rng = np.random.default_rng(0)
    rows = []
    for dist in ({a: 0.95}, {b: 0.5, c: 0.45}, {d: 0.95}):  # b is louder, the LM knows a c d
        for _ in range(2):
            row = rng.dirichlet(np.full(vocab.size, 0.5)) * 0.04
            for ch, p in dist.items():
                row[vocab.encode(ch)[0]] += p
            rows.append(row / row.sum())
        blank = rng.dirichlet(np.full(vocab.size, 0.5)) * 0.04
        blank[0] += 0.96
        rows.append(blank)
    lp = np.log(np.array(rows)).astype(np.float32)
    assert np.isfinite(candidate_log_probs(lp, DecoderConfig())).sum(-1).max() <= 40
    assert Decoder(DecoderConfig(kind="greedy"), vocab).decode_utterances([lp]) == [a + b + d]
    assert Decoder(DecoderConfig(num_workers=1), vocab).decode_utterances([lp]) == [a + b + d]
    with_lm = DecoderConfig(lm_path=str(tmp_path / "zh.arpa"), alpha=1.0, beta=0.5, num_workers=1)
    assert Decoder(with_lm, vocab).decode_utterances([lp]) == [a + c + d]


# ------------------------------------------------------------------------------------ incremental search

def noisy_utterance(rng, vocab, words=8):
    """(time, vocab) log-probs of a noisy spelling of random label runs with blanks: many candidates per frame."""
    steps = []
    for i in rng.integers(1, vocab.size, size=words * 4):
        steps += [i] * int(rng.integers(1, 4)) + [0] * int(rng.integers(0, 4))
    logits = rng.normal(size=(len(steps), vocab.size)) * 1.5
    logits[np.arange(len(steps)), steps] += rng.uniform(2, 8, size=len(steps))
    return log_softmax(logits)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_prefix_search_gives_what_pyctcdecode_gives(en_lm, tmp_path, language):
    """Our frame loop (decode/search.py) against pyctcdecode's own decode and decode_beams on the same frames."""
    from deepspeech2.decode.beam import BeamSearch
    from deepspeech2.decode.prune import candidate_frames

    if language == "en":
        vocab, lm = EN, en_lm
    else:
        vocab, lm = Vocabulary(tuple("你好号吗")), str(tmp_path / "zh.arpa")
        (tmp_path / "zh.arpa").write_text(ARPA_ZH)
    rng = np.random.default_rng(3)
    for lm_path in (None, lm):
        config = DecoderConfig(beam_size=24, alpha=0.7, beta=1.5, lm_path=lm_path, num_workers=1)
        search = BeamSearch(config, vocab)
        for _ in range(6):
            candidates, _, _ = candidate_frames(noisy_utterance(rng, vocab), config)
            kw = dict(beam_width=config.beam_size, beam_prune_logp=config.beam_prune_logp, token_min_logp=SKIP_LOGP)
            ours = search.start()
            ours.advance(candidates)
            assert ours.finish()[0][0] == search.ctc.decode(candidates, **kw)
            ours = search.start(prune_history=False)
            for chunk in np.array_split(candidates, 4):
                ours.advance(chunk)
            theirs = search.ctc.decode_beams(candidates, **kw)
            got = ours.finish()
            assert [(b[0], b[2], b[3]) for b in got] == [(b[0], b[2], b[3]) for b in theirs]
            np.testing.assert_allclose([b[4] for b in got], [b[4] for b in theirs], rtol=1e-9)


def test_beam_stream_in_any_chunking_ends_as_the_offline_search(en_lm):
    """A stream fed chunks of 0-40 frames (pruning step 3 across chunk boundaries included) finishes with the
    offline beam search's transcript; its partial is the best beam so far."""
    rng = np.random.default_rng(4)
    config = DecoderConfig(beam_size=16, alpha=0.5, beta=1.0, lm_path=en_lm, num_workers=1, token_min_logp=-3.5)
    decoder = Decoder(config, EN)
    for _ in range(10):
        lp = noisy_utterance(rng, EN)
        stream = decoder.search.stream()
        cuts = np.sort(rng.integers(0, len(lp), size=int(rng.integers(1, 12))))
        for chunk in np.split(lp, cuts):
            stream.update(chunk)
            assert isinstance(stream.text, str)
        assert stream.finish() == decoder.decode_utterances([lp])[0]
    # The LM is used as the stream goes: the acoustics say "hat", the LM and the stream's final say "cat".
    hat = frames(spell("the cat sat on the mat", at4={"h": 0.6, "c": 0.39}), EN)
    stream = decoder.search.stream()
    for chunk in np.array_split(hat, 7):
        stream.update(chunk)
    assert stream.text.startswith("the cat sat on")
    assert stream.finish() == "the cat sat on the mat"


def test_beam_stream_memory_is_bounded_by_the_beam(en_lm):
    rng = np.random.default_rng(5)
    config = DecoderConfig(beam_size=8, alpha=0.5, beta=1.0, lm_path=en_lm, num_workers=1)
    stream = Decoder(config, EN).search.stream()
    for _ in range(30):
        stream.update(noisy_utterance(rng, EN, words=4))
        assert len(stream._prefix._lm_scores) <= config.beam_size + 1
        assert len(stream._prefix._part_scores) <= config.beam_size
    assert 0 < stream.nbytes < 200_000
    assert isinstance(stream.finish(), str)
    with pytest.raises(ValueError, match="finished"):
        stream._prefix.advance(noisy_utterance(rng, EN, words=1))


@pytest.mark.parametrize("with_lm", [False, True])
def test_prefix_search_with_hotwords_gives_what_pyctcdecode_gives(en_lm, with_lm):
    """Hotwords the LM knows (or any, without an LM): our search with `Hotwords` against pyctcdecode's decode and
    decode_beams with the same hotwords and weight, on the same frames (a word the LM lacks differs by design:
    tests/test_hotwords.py)."""
    from deepspeech2.decode.beam import BeamSearch
    from deepspeech2.decode.prune import candidate_frames

    rng = np.random.default_rng(6)
    hotwords = ["hat", "cat sat"] if with_lm else ["dab", "cab ace"]
    config = DecoderConfig(beam_size=24, alpha=0.7, beta=1.5, lm_path=en_lm if with_lm else None, num_workers=1,
                           hotwords=tuple(hotwords), hotword_weight=6.0)
    search = BeamSearch(config, EN)
    assert search.hotwords.unknown == ()
    kw = dict(beam_width=config.beam_size, beam_prune_logp=config.beam_prune_logp, token_min_logp=SKIP_LOGP,
              hotwords=hotwords, hotword_weight=6.0)
    for _ in range(4):
        candidates, _, _ = candidate_frames(noisy_utterance(rng, EN), config)
        ours = search.start()
        ours.advance(candidates)
        assert ours.finish()[0][0] == search.ctc.decode(candidates, **kw)
        ours = search.start(prune_history=False)
        for chunk in np.array_split(candidates, 3):
            ours.advance(chunk)
        got, theirs = ours.finish(), search.ctc.decode_beams(candidates, **kw)
        assert [b[0] for b in got] == [b[0] for b in theirs]
        np.testing.assert_allclose([b[4] for b in got], [b[4] for b in theirs], rtol=1e-9)
