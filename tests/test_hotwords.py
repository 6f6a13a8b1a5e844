"""Hotwords: what the boost adds to a hypothesis' score (exactly), words the LM lacks and phrases on hand-built
posteriors with a small ARPA LM, streams and per-request lists, the config's checks, the CLIs' flags, and
ds2-serve's `hotwords` request input."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.decode import DecoderConfig
from deepspeech2.decode.beam import BeamSearch
from deepspeech2.decode.hotwords import Hotwords, normalize_hotwords
from deepspeech2.vocab import Vocabulary
from test_decode import ARPA_EN, frames, spell

EN = Vocabulary.english()
VENV_BIN = Path(sys.executable).parent
LM = dict(beam_size=32, alpha=0.5, beta=1.0, num_workers=1)
# The acoustics slightly prefer "kat" (k 0.6, c 0.39), a word the LM lacks; the LM prefers "the cat sat".
KAT = frames(spell("the cat sat on the mat", at4={"k": 0.6, "c": 0.39}), EN)
# The acoustics slightly prefer "hat" (h 0.6, c 0.39), a word the LM barely knows (log10 p -3).
HAT = frames(spell("the cat sat on the mat", at4={"h": 0.6, "c": 0.39}), EN)
# Two words the LM lacks: "kat" (k 0.6, c 0.39) and "zat" (z 0.6, s 0.39).
KAT_ZAT = frames(spell("the cat sat on the mat", at4={"k": 0.6, "c": 0.39}, at8={"z": 0.6, "s": 0.39}), EN)


@pytest.fixture(scope="module")
def en_lm(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "en.arpa"
    path.write_text(ARPA_EN)
    return str(path)


def decode(lp, **config):
    return BeamSearch(DecoderConfig(**config), EN)(lp)


def scores(lp, **config):
    """{text: score} of the whole n-best list (beams 50 nats below the best kept, so both texts survive)."""
    return dict(BeamSearch(DecoderConfig(beam_prune_logp=-50.0, **config), EN).nbest(lp, 32))


def test_a_hotword_adds_its_weight_to_a_hypothesis_for_each_time_it_holds_it(en_lm):
    for lm_path in (en_lm, None):
        plain = scores(HAT, lm_path=lm_path, **LM)
        boosted = scores(HAT, lm_path=lm_path, hotwords=("hat",), hotword_weight=3.0, **LM)
        assert boosted["the hat sat on the mat"] - plain["the hat sat on the mat"] == pytest.approx(3.0, abs=1e-6)
        assert boosted["the cat sat on the mat"] == pytest.approx(plain["the cat sat on the mat"], abs=1e-6)
        twice = scores(HAT, lm_path=lm_path, hotwords=("the",), hotword_weight=3.0, **LM)
        assert twice["the hat sat on the mat"] - plain["the hat sat on the mat"] == pytest.approx(6.0, abs=1e-6)
    assert decode(HAT, lm_path=en_lm, **LM) == "the cat sat on the mat"
    # The LM puts "the hat sat" 4.75 nats below "the cat sat": a weight of 3 is not enough, 6 is.
    assert decode(HAT, lm_path=en_lm, hotwords=("hat",), hotword_weight=3.0, **LM) == "the cat sat on the mat"
    assert decode(HAT, lm_path=en_lm, hotwords=("hat",), hotword_weight=6.0, **LM) == "the hat sat on the mat"


def test_a_hotword_the_lm_lacks_gets_the_unknown_word_offset_back(en_lm):
    """pyctcdecode adds `unk_score_offset` (log10) to a word the LM lacks, alpha * 10 * ln 10 = 11.5 nats here: more
    than a weight of 5 gives. `Hotwords` gives it back, so "kat" scores as KenLM's <unk> plus the weight, and wins."""
    from pyctcdecode.language_model import HotwordScorer

    offset = LM["alpha"] * 10 * math.log(10)
    plain = scores(KAT, lm_path=en_lm, **LM)
    boosted = scores(KAT, lm_path=en_lm, hotwords=("kat",), hotword_weight=5.0, **LM)
    assert boosted["the kat sat on the mat"] - plain["the kat sat on the mat"] == pytest.approx(5.0 + offset, abs=1e-6)
    assert decode(KAT, lm_path=en_lm, **LM) == "the cat sat on the mat"
    assert decode(KAT, lm_path=en_lm, hotwords=("kat",), hotword_weight=5.0, **LM) == "the kat sat on the mat"
    # pyctcdecode's scorer as it is, at the same weight: the offset still outweighs the bonus.
    search = BeamSearch(DecoderConfig(lm_path=en_lm, hotword_weight=5.0, **LM), EN)
    assert search.ctc.decode(KAT, beam_width=32, hotwords=["kat"], hotword_weight=5.0) == "the cat sat on the mat"
    assert search.start(hotwords=HotwordScorer.build_scorer(["kat"], weight=5.0)) is not None
    # Weight 0 only declares the word: no bonus, no offset (the LM's <unk> probability, log10 -2, is what is left).
    declared = scores(KAT, lm_path=en_lm, hotwords=("kat",), hotword_weight=0.0, **LM)
    assert declared["the kat sat on the mat"] - plain["the kat sat on the mat"] == pytest.approx(offset, abs=1e-6)
    # While "kat" is spelled, its prefixes score the hotword's share, where the LM gives a prefix of no word -10.
    hotwords = search.hotwords_with(["kat"])
    lm = search.ctc._language_model
    assert lm.score_partial_token("ka") == -10.0 and "ka" in hotwords
    assert hotwords.score_partial_token("ka") == pytest.approx(5.0 * 2 / 3)
    assert hotwords.unknown == ("kat",) and search.hotwords_with(["hat"]).unknown == ()


def test_a_phrase_of_words_the_lm_lacks(en_lm):
    """A phrase counts word by word: "kat zat" adds the weight (and the offset) once for each of its words."""
    offset = LM["alpha"] * 10 * math.log(10)
    assert decode(KAT_ZAT, lm_path=en_lm, **LM) == "the cat sat on the mat"
    config = dict(lm_path=en_lm, hotwords=("Kat  Zat",), hotword_weight=4.0, **LM)
    assert decode(KAT_ZAT, **config) == "the kat zat on the mat"
    plain = scores(KAT_ZAT, lm_path=en_lm, **LM)
    boosted = scores(KAT_ZAT, **config)
    text = "the kat zat on the mat"
    assert boosted[text] - plain[text] == pytest.approx(2 * (4.0 + offset), abs=1e-6)
    # Each word alone is boosted too, wherever it occurs (pyctcdecode's phrases).
    assert decode(KAT, **config) == "the kat sat on the mat"


def test_streams_and_requests_get_the_hotwords(en_lm):
    with_config = BeamSearch(DecoderConfig(lm_path=en_lm, hotwords=("kat",), hotword_weight=5.0, **LM), EN)
    without = BeamSearch(DecoderConfig(lm_path=en_lm, hotword_weight=5.0, **LM), EN)
    assert without.hotwords is None
    for search, hotwords in ((with_config, None), (without, without.hotwords_with(["KAT"]))):
        stream = search.stream(hotwords)
        for chunk in np.array_split(KAT, 5):
            stream.update(chunk)
        assert stream.finish() == "the kat sat on the mat"
        assert search.nbest(KAT, 1, hotwords)[0][0] == "the kat sat on the mat"
    stream = without.stream()
    stream.update(KAT)
    assert stream.finish() == "the cat sat on the mat"
    # A request's list adds to the config's; both at the config's weight.
    both = with_config.hotwords_with(["zat", "kat"])
    assert both.words == ("kat", "zat") and both.weight == 5.0
    assert with_config.nbest(KAT_ZAT, 1, both)[0][0] == "the kat zat on the mat"


def test_config_checks_and_round_trip(tmp_path):
    config = DecoderConfig(hotwords=["New York", "zyxel", "new york", "R2-D2"], hotword_weight=2.5)
    assert config.hotwords == ("new york", "zyxel", "r two d two")
    assert DecoderConfig.from_dict(config.to_dict()) == config
    for bad, message in ((dict(hotwords="zyxel"), "a list of words or phrases"),
                         (dict(hotwords=("ok", "α")), "'α' is not a word"), (dict(hotwords=("",)), "'' is not"),
                         (dict(hotwords=(3,)), "3 is not"), (dict(hotword_weight=-1.0), "`hotword_weight`"),
                         (dict(hotword_weight=math.inf), "`hotword_weight`"),
                         (dict(kind="greedy", hotwords=("zyxel",)), "need kind='beam'")):
        with pytest.raises(ValueError, match=message):
            DecoderConfig(**bad)
    with pytest.raises(ValueError, match="need a vocabulary with a space"):
        BeamSearch(DecoderConfig(hotwords=("ab",)), Vocabulary(tuple("ab")))
    with pytest.raises(ValueError, match=r"don't\" holds \[\"'\"\]"):
        BeamSearch(DecoderConfig(hotwords=("don't",)), Vocabulary(tuple(" abcdefghijklmnopqrstuvwxyz")))
    with pytest.raises(ValueError, match="'α' is not a word"):
        BeamSearch(DecoderConfig(), EN).hotwords_with(["α"])
    assert normalize_hotwords(()) == () and BeamSearch(DecoderConfig(), EN).hotwords_with([]) is None
    assert Hotwords(("kat",), 1.0).score("the kat sat on kat") == 2.0  # no LM: the weight alone


def _run(*argv):
    return subprocess.run([str(VENV_BIN / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=300)


# The shared decoder flags parsed as ds2-infer parses them (a fresh process: absl's flags are global).
PARSE = """
import json, sys
from absl import flags
from deepspeech2_cli import _decoding
_decoding.define_flags(kind="greedy")
flags.FLAGS(["ds2-infer", *sys.argv[1:]])
def run(make):
    try:
        return make(flags.FLAGS)
    except ValueError as e:
        return str(e)
config = run(_decoding.config)
override = run(_decoding.override)  # what ds2-serve and ds2-demo use
print(json.dumps([[config.hotwords, config.hotword_weight] if not isinstance(config, str) else config,
                  override if isinstance(override, str) or override is None else "replaced"]))
"""


def test_the_shared_flags_make_the_config_and_clis_refuse_bad_hotwords_in_one_line(tmp_path):
    def parse(*argv):
        out = subprocess.run([sys.executable, "-c", PARSE, *argv], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    lm = ("--lm", str(tmp_path / "lm.arpa"))
    assert parse("--decoder", "beam", "--hotwords", "Zyxel,new york", "--hotword_weight", "3", *lm) == [
        [["zyxel", "new york"], 3.0], "replaced"]
    assert parse("--beam_size", "9") == [[[], 8.0], "replaced"] and parse() == [[[], 8.0], None]
    config, override = parse("--hotwords", "zyxel")
    assert config.startswith("`hotwords` ['zyxel'] need kind='beam'")
    # ds2-serve and ds2-demo: hotwords without --lm would drop the export's LM.
    config, override = parse("--decoder", "beam", "--hotwords", "zyxel")
    assert config == [["zyxel"], 8.0] and override.startswith("--hotwords and --hotword_weight replace the export's")
    assert "`hotword_weight` must be >= 0" in parse("--decoder", "beam", "--hotword_weight=-2", *lm)[0]
    out = _run("ds2-infer", "--help")
    assert out.returncode == 0 and "--hotwords" in out.stdout and "--hotword_weight" in out.stdout, out.stderr
    out = _run("ds2-eval", "--model_dir", str(tmp_path), "--manifest", str(tmp_path / "m.jsonl"), "--decoder", "beam",
               "--hotwords", "zyxel,α")
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "ds2-eval: error: `hotwords`: 'α' is not a word" in out.stderr


# ------------------------------------------------------------------------------------------------- ds2-serve

@pytest.fixture(scope="module")
def servable(tmp_path_factory, hello_world_lm):
    """An untrained tiny model exported with a beam decoder and the hello/world LM, loaded for serving."""
    import keras

    from deepspeech2.bundle import save_bundle
    from deepspeech2.features import FeatureConfig
    from deepspeech2.model import build_model
    from deepspeech2.model_config import TINY
    from deepspeech2.prepare.stats import compute_mean_std
    from factories import make_manifest
    from deepspeech2_export.saved_model import ExportConfig, export_model
    from deepspeech2_serving.servable import Servable

    d = tmp_path_factory.mktemp("hotwords_serving")
    manifest, _ = make_manifest(d, n=2)
    keras.utils.set_random_seed(0)
    bundle = save_bundle(d / "model", build_model(TINY), TINY, EN, compute_mean_std([manifest], FeatureConfig()))
    decoder = DecoderConfig(lm_path=str(hello_world_lm), beam_size=8, alpha=0.5, beta=1.0, hotwords=("speech",))
    version = export_model(ExportConfig(str(bundle), str(d / "export"), max_audio_seconds=4.0, decoder=decoder))
    return Servable(version, "ds2")


def _predict(servable, **inputs):
    from deepspeech2.audio import speech_like_clip
    from deepspeech2_export.requests import predict_request, wav_bytes
    from deepspeech2_serving.predictor import Predictor

    wav = wav_bytes(speech_like_clip(1.5, seed=3), servable.sample_rate)
    request = predict_request("ds2", "transcribe_wav", {"wav": np.array([wav], object), **inputs})
    response, _ = Predictor(None).predict(request, servable, direct=True)
    return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}


def _padded(beams, n):
    """`BeamSearch.nbest`'s list as ds2-serve answers it: n entries, "" and -inf where the beam held fewer."""
    return [t for t, _ in beams] + [""] * (n - len(beams)), [s for _, s in beams] + [-np.inf] * (n - len(beams))


def test_ds2_serve_takes_hotwords_per_request_with_nbest(servable):
    from deepspeech2_export.requests import HOTWORDS

    search = servable.decoder.search
    assert search.hotwords.words == ("speech",)  # the export's, recorded in decoder_config.json
    plain = _predict(servable, nbest=np.int32(3))
    lp = plain["log_probs"][0, :plain["output_lengths"][0]]
    assert [t.decode() for t in plain["nbest_transcripts"][0]] == _padded(search.nbest(lp, 3), 3)[0]
    # The model is untrained: its noise reads as "speech speech ..." with the export's hotword, as "hello ..." once a
    # request adds "hello" (a hotword wins over noise: the false alarms of README's Hotwords section).
    assert plain["nbest_transcripts"][0, 0].decode().split()[0] == "speech"
    boosted = _predict(servable, nbest=np.int32(3), **{HOTWORDS: np.array(["Hello"], object)})
    expected = search.nbest(lp, 3, search.hotwords_with(["hello"]))
    texts, scores = _padded(expected, 3)
    assert [t.decode() for t in boosted["nbest_transcripts"][0]] == texts
    np.testing.assert_allclose(boosted["nbest_scores"][0], scores, rtol=1e-5)
    assert texts[0].split()[0] == "hello"
    assert _predict(servable, nbest=np.int32(1), **{HOTWORDS: np.array("Hello World".encode())})  # a scalar


@pytest.mark.parametrize("value, message", [
    (np.array(["zyxel"], object), "send `nbest` with them"),
    (np.array([1.0], np.float32), "input `hotwords` must be DT_STRING, got DT_FLOAT"),
    (np.array([["a", "b"]], object), r"a list of at most 256 strings \(shape \[n\]\), got shape \[1, 2\]"),
    (np.array(["a"] * 257, object), r"at most 256 strings \(shape \[n\]\), got shape \[257\]"),
    (np.array(["ok", "α"], object), "`hotwords`: 'α' is not a word"),
    (np.array(["x" * 101], object), "has 101 characters, over 100"),
])
def test_ds2_serve_refuses_bad_hotwords_naming_the_input(servable, value, message):
    from deepspeech2_export.requests import HOTWORDS
    from deepspeech2_serving.checks import RequestError

    inputs = {HOTWORDS: value} if "nbest" in message else {HOTWORDS: value, "nbest": np.int32(2)}
    with pytest.raises(RequestError) as e:
        _predict(servable, **inputs)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "hotwords" in e.value.message
    assert re.search(message, e.value.message), e.value.message
