"""Recording channels (synthetic/channel.py) and the MP3 round trip they use (deepspeech2/audio.py)."""

import numpy as np
import pytest
import scipy.signal

from deepspeech2.audio import MP3_KBPS_LEVELS, mp3_roundtrip
from deepspeech2_synthetic import synthesis, tiny, voices
from deepspeech2_synthetic.channel import (BAND_LIMIT_PROB, CHANNEL_KBPS, HIGHPASS_HZ, LOWPASS_HZ, Channel, apply_channel,
                                         draw_channel)

SR = 16000


def _speechlike(seconds=2.0, seed=0):
    """A 150 Hz pulse train through two formant resonances, its loudness wavering like syllables."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SR)
    source = np.zeros(n)
    source[::SR // 150] = 1.0
    x = source + 0.01 * rng.standard_normal(n)
    for hz in (700, 1800):
        b, a = scipy.signal.iirpeak(hz, 5, fs=SR)
        x = scipy.signal.lfilter(b, a, x)
    x *= 0.6 + 0.4 * np.sin(2 * np.pi * 4 * np.arange(n) / SR)
    return (0.5 * x / np.abs(x).max()).astype(np.float32)


def _band_db(x, lo, hi):
    f, p = scipy.signal.welch(x, SR, nperseg=1024)
    return 10 * np.log10(p[(f >= lo) & (f < hi)].mean())


@pytest.mark.parametrize("kbps", sorted(MP3_KBPS_LEVELS))
def test_mp3_roundtrip_keeps_length_and_time_and_loses_a_little(kbps):
    x = _speechlike()
    y = mp3_roundtrip(x, SR, kbps)
    assert y.dtype == np.float32 and y.shape == x.shape
    # aligned: the cross-correlation peaks at lag 0 (the codec's delay of ~1k samples at <= 32 kbit/s is removed)
    lags = np.arange(-200, 201)
    corr = [np.dot(x[200:-200], np.roll(y, -lag)[200:-200]) for lag in lags]
    assert lags[int(np.argmax(corr))] == 0
    error = np.sqrt(np.mean((y - x) ** 2) / np.mean(x ** 2))
    assert 0.005 < error < (0.3 if kbps <= 24 else 0.15), error  # lossy, but the same sound


def test_mp3_roundtrip_rejects_a_rate_it_cannot_write():
    with pytest.raises(ValueError, match="`kbps` must be one of"):
        mp3_roundtrip(np.zeros(100, np.float32), SR, 128)
    assert mp3_roundtrip(np.zeros(0, np.float32), SR, 32).size == 0


def test_a_band_limited_channel_cuts_outside_its_band_and_keeps_the_peak():
    rng = np.random.default_rng(1)
    x = (0.3 * rng.standard_normal(2 * SR)).astype(np.float32)
    y = apply_channel(x, SR, Channel(64, highpass_hz=200.0, lowpass_hz=4000.0))
    assert y.shape == x.shape and np.abs(y).max() == pytest.approx(np.abs(x).max(), rel=1e-5)
    passband = _band_db(y, 800, 3000)
    assert passband - _band_db(y, 6000, 7500) > 25  # a 4th-order low-pass an octave up, and MP3's own
    assert passband - _band_db(y, 20, 60) > 20
    assert abs((passband - _band_db(x, 800, 3000)) - (_band_db(y, 1000, 1500) - _band_db(x, 1000, 1500))) < 3


def test_channels_drawn_cover_the_rates_and_bands():
    rng = np.random.default_rng(0)
    drawn = [draw_channel(rng) for _ in range(400)]
    assert {c.mp3_kbps for c in drawn} == set(CHANNEL_KBPS)
    limited = [c for c in drawn if c.lowpass_hz]
    assert abs(len(limited) / len(drawn) - BAND_LIMIT_PROB) < 0.08
    assert all(HIGHPASS_HZ[0] <= c.highpass_hz <= HIGHPASS_HZ[1] and LOWPASS_HZ[0] <= c.lowpass_hz <= LOWPASS_HZ[1]
               for c in limited)
    with pytest.raises(ValueError, match="mp3_kbps"):
        Channel(100)
    with pytest.raises(ValueError, match="highpass_hz"):
        Channel(32, highpass_hz=5000.0, lowpass_hz=4000.0)


def test_the_tiny_corpus_puts_channels_on_a_share_of_training_only():
    sp = voices.Speaker("espeak-en-us-m1", "espeak-ng", "en-us", "m1", "M", rate=1.0, pitch=1.0)
    jobs = {split: [synthesis.make_job(split, i, "hello there friend", sp, seed=0, channel_share=0.3)
                    for i in range(400)] for split in voices.SPLITS}
    heard = [j for j in jobs["train"] if j.channel is not None]
    assert abs(len(heard) / 400 - 0.3) < 0.07
    assert all(j.channel is None for split in ("dev", "test") for j in jobs[split])
    # a clean utterance is the same job, file name included, whatever the share: a corpus keeps its WAVs
    for split, js in jobs.items():
        for j in js:
            clean = synthesis.make_job(split, j.index, "hello there friend", sp, seed=0)
            if j.channel is None:
                assert j == clean and j.key() == clean.key()
            else:
                assert j.key() != clean.key() and j.rate == clean.rate and j.peak_dbfs == clean.peak_dbfs
    with pytest.raises(ValueError, match="channel_share"):
        tiny.TinyCorpusConfig(out_dir="x", channel_share=1.5)
