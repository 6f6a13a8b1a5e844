"""Synthetic RIRs, coloured noise and babble measured against their definitions; prepare_noise's outputs."""

import json

import numpy as np
import pytest
import scipy.signal

from deepspeech2.audio import load_audio, save_wav
from deepspeech2.data.augment.config import parse_augmentation
from deepspeech2.data.manifest import Utterance, read_manifest, write_manifest
from deepspeech2.prepare.noise import NOISE_EXPONENTS, babble, coloured_noise, noisy_copy, prepare_noise, synth_rir

SR = 16000


def schroeder_rt60(h, sr=SR):
    """RT60 from the Schroeder backward-integrated decay: fit -5..-25 dB (T20), extrapolate to -60 dB."""
    energy = np.cumsum(h[::-1].astype(np.float64) ** 2)[::-1]
    db = 10 * np.log10(np.maximum(energy / energy[0], 1e-30))  # a 16-bit tail ends in exact zeros
    i5, i25 = np.argmax(db <= -5), np.argmax(db <= -25)
    slope = np.polyfit(np.arange(i5, i25) / sr, db[i5:i25], 1)[0]  # dB per second
    return -60.0 / slope


@pytest.mark.parametrize("rt60", [0.2, 0.5, 0.9])
@pytest.mark.parametrize("drr_db", [0.0, 6.0])
def test_rir_rt60_by_schroeder(rt60, drr_db):
    h = synth_rir(rt60, SR, drr_db=drr_db, seed=3)
    assert schroeder_rt60(h) == pytest.approx(rt60, rel=0.15)
    assert np.argmax(np.abs(h)) == 0 and h[0] == 1.0  # the direct path is the peak
    direct, reverb = h[0] ** 2, np.sum(h[1:].astype(np.float64) ** 2)
    assert 10 * np.log10(direct / reverb) == pytest.approx(drr_db, abs=0.01)


def test_rir_deterministic_and_predelay():
    np.testing.assert_array_equal(synth_rir(0.4, seed=7), synth_rir(0.4, seed=7))
    assert not np.array_equal(synth_rir(0.4, seed=7), synth_rir(0.4, seed=8))
    h = synth_rir(0.3, predelay_ms=5.0)
    assert np.argmax(np.abs(h)) == 80 and not h[:80].any()
    with pytest.raises(ValueError, match="rt60"):
        synth_rir(0.0)


@pytest.mark.parametrize("kind", sorted(NOISE_EXPONENTS))
def test_coloured_noise_spectral_slope(kind):
    x = coloured_noise(kind, 8.0, seed=1)
    assert x.shape == (8 * SR,) and x.dtype == np.float32
    assert np.max(np.abs(x)) == pytest.approx(0.9, abs=1e-6)
    f, psd = scipy.signal.welch(x, SR, nperseg=4096)
    band = (f >= 50) & (f <= 6000)
    slope = np.polyfit(np.log10(f[band]), np.log10(psd[band]), 1)[0]
    assert slope == pytest.approx(-NOISE_EXPONENTS[kind], abs=0.1)
    np.testing.assert_array_equal(x, coloured_noise(kind, 8.0, seed=1))


def test_coloured_noise_bad_kind():
    with pytest.raises(ValueError, match="purple"):
        coloured_noise("purple", 1.0)


def _speech_manifest(tmp_path, n_speakers=4, per_speaker=2):
    rng = np.random.default_rng(0)
    utts = []
    for s in range(n_speakers):
        for k in range(per_speaker):
            n = int(rng.uniform(0.5, 1.2) * SR)
            t = np.arange(n) / SR
            wav = 0.3 * np.sin(2 * np.pi * (120 + 40 * s) * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
            path = tmp_path / "speech" / f"s{s}_{k}.wav"
            save_wav(path, wav)
            utts.append(Utterance(str(path), n / SR, "some words", speaker=f"spk{s}"))
    write_manifest(tmp_path / "speech.jsonl", utts)
    return tmp_path / "speech.jsonl"


def test_babble_length_and_not_silent(tmp_path):
    utts = read_manifest(_speech_manifest(tmp_path))
    x = babble(utts, n_speakers=3, seconds=3.0, seed=0)
    assert x.shape == (3 * SR,) and x.dtype == np.float32
    assert np.max(np.abs(x)) == pytest.approx(0.9, abs=1e-6)
    # Not silent anywhere: every 250 ms window has energy (3 overlapping talkers with short pauses).
    windows = x[: len(x) // 4000 * 4000].reshape(-1, 4000)
    assert (np.sqrt(np.mean(windows**2, axis=1)) > 0.01).all()
    np.testing.assert_array_equal(x, babble(utts, 3, 3.0, seed=0))
    # Plain paths work too (no speakers: every stream draws from all utterances).
    assert babble([u.audio_filepath for u in utts], 2, 1.0).shape == (SR,)


def test_prepare_noise_manifests_load_and_parse(tmp_path, monkeypatch):
    speech = _speech_manifest(tmp_path)
    out = tmp_path / "noise"
    kwargs = dict(n_rirs=3, n_noise=4, n_babble=2, noise_seconds=1.5, babble_speakers=(2, 3))
    noise_path, rir_path = prepare_noise(out, speech, **kwargs)
    assert (noise_path, rir_path) == (out / "noise.jsonl", out / "rir.jsonl")

    noise, rirs = read_manifest(noise_path), read_manifest(rir_path)
    assert [u.extra["kind"] for u in noise] == ["white", "pink", "brown", "blue", "babble", "babble"]
    assert len(rirs) == 3 and all(u.text == "" for u in noise + rirs)
    for u in noise:
        assert u.duration == pytest.approx(1.5) and np.abs(load_audio(u.audio_filepath)).max() > 0.5
    for u in rirs:
        assert 0.2 <= u.extra["rt60"] <= 0.9
        assert schroeder_rt60(load_audio(u.audio_filepath)) == pytest.approx(u.extra["rt60"], rel=0.15)
    # Paths are stored relative to the manifest's folder: the folder can move.
    first = json.loads(noise_path.read_text().splitlines()[0])
    assert first["audio_filepath"].startswith("noise/")

    # Idempotent: a rerun rewrites nothing and gives the same manifests.
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.wav")}
    manifests = noise_path.read_text(), rir_path.read_text()
    prepare_noise(out, speech, **kwargs)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.wav")} == before
    assert (noise_path.read_text(), rir_path.read_text()) == manifests
    # Resumable: a lost clip is regenerated identically.
    lost = next(iter(sorted(before)))
    data = lost.read_bytes()
    lost.unlink()
    prepare_noise(out, speech, **kwargs)
    assert lost.read_bytes() == data

    monkeypatch.chdir(tmp_path)
    aug = parse_augmentation([
        {"type": "noise", "params": {"noise_manifest_path": "noise/noise.jsonl", "min_snr_dB": 10,
                                     "max_snr_dB": 30}, "prob": 1.0},
        {"type": "impulse", "params": {"impulse_manifest_path": "noise/rir.jsonl"}, "prob": 1.0}])
    assert len(aug.waveform[0].bank.lengths) == 6 and len(aug.waveform[1].bank.lengths) == 3
    wav, length = aug.apply_waveform(np.zeros(SR, np.float32) + 0.1, SR)
    assert int(length) == SR and np.isfinite(wav.numpy()).all()


def test_prepare_noise_without_speech(tmp_path):
    noise_path, rir_path = prepare_noise(tmp_path, n_rirs=1, n_noise=2, noise_seconds=0.5)
    assert [u.extra["kind"] for u in read_manifest(noise_path)] == ["white", "pink"]
    assert len(read_manifest(rir_path)) == 1
    with pytest.raises(ValueError, match="rt60_range"):
        prepare_noise(tmp_path, rt60_range=(0.9, 0.2))


def test_noisy_copy_hits_the_drawn_snr(tmp_path):
    rng = np.random.default_rng(0)
    utts = []
    for i in range(6):  # quiet "speech" (peak 0.05): no mix comes near clipping, so noisy - clean = the noise
        wav = (0.05 * np.sin(2 * np.pi * 200 * np.arange(int(rng.uniform(0.4, 1.5) * SR)) / SR)).astype(np.float32)
        save_wav(tmp_path / "clean" / f"{i}.wav", wav)
        utts.append(Utterance(str(tmp_path / "clean" / f"{i}.wav"), wav.size / SR, "a b", speaker=f"s{i % 2}"))
    speech = tmp_path / "clean" / "dev.jsonl"
    write_manifest(speech, utts)
    noise_path, _ = prepare_noise(tmp_path / "noise", None, n_rirs=0, n_noise=4, noise_seconds=0.7)
    path = noisy_copy(speech, noise_path, tmp_path / "noisy", snr_db=(0.0, 10.0), seed=1)
    noisy = read_manifest(path)
    assert path == tmp_path / "noisy" / "dev.jsonl" and len(noisy) == len(utts)
    snrs = [u.extra["snr_db"] for u in noisy]
    assert all(0.0 <= s < 10.0 for s in snrs) and max(snrs) - min(snrs) > 3
    for c, u in zip(read_manifest(speech), noisy):
        assert (u.text, u.speaker) == (c.text, c.speaker) and u.duration == pytest.approx(c.duration)
        x, y = load_audio(c.audio_filepath).astype(np.float64), load_audio(u.audio_filepath).astype(np.float64)
        assert 10 * np.log10(np.sum(x**2) / np.sum((y - x) ** 2)) == pytest.approx(u.extra["snr_db"], abs=0.05)
    # Deterministic: a rerun writes the same audio.
    before = [load_audio(u.audio_filepath) for u in noisy]
    noisy_copy(speech, noise_path, tmp_path / "noisy", snr_db=(0.0, 10.0), seed=1)
    for a, u in zip(before, read_manifest(path)):
        np.testing.assert_array_equal(a, load_audio(u.audio_filepath))
