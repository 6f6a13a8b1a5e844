import dataclasses
import json

import numpy as np
import pytest
import scipy.fft
import tensorflow as tf

from deepspeech2.features import (
    HOP_MS,
    NUM_LINEAR_BINS,
    WINDOW_MS,
    FeatureConfig,
    compute_features,
    dct_matrix,
    frame_lengths,
    mel_filterbank,
    num_frames,
    pitch_lags,
)

SR = 16000


def _signal(n, seed=0, freq=440.0):
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SR
    return (0.3 * np.sin(2 * np.pi * freq * t) + 0.05 * rng.standard_normal(n)).astype(np.float32)


# ---- numpy / scipy reference, written independently of the library ----

def _ref_power(wav, cfg):
    w, h = cfg.window_length, cfg.hop_length
    n = max(0, 1 + (len(wav) - w) // h)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(w) / w)  # periodic Hann
    frames = np.stack([wav[i * h:i * h + w] for i in range(n)]) if n else np.zeros((0, w))
    spec = np.fft.rfft(frames.astype(np.float64) * hann, n=w, axis=-1)
    return np.abs(spec) ** 2  # (frames, w // 2 + 1)


def _ref_mel_matrix(cfg):
    """HTK mel, triangles in mel space, DC row zero; loop form of what tf.signal does."""
    mel = lambda f: 1127.0 * np.log(1.0 + f / 700.0)  # noqa: E731
    fmax = cfg.mel_fmax or cfg.sample_rate / 2
    edges = np.linspace(mel(cfg.mel_fmin), mel(fmax), cfg.n_mels + 2)
    freqs = np.linspace(0, cfg.sample_rate / 2, cfg.num_bins)
    m = np.zeros((cfg.num_bins, cfg.n_mels))
    for b in range(1, cfg.num_bins):
        x = mel(freqs[b])
        for j in range(cfg.n_mels):
            lo, c, hi = edges[j], edges[j + 1], edges[j + 2]
            if lo < x <= c:
                m[b, j] = (x - lo) / (c - lo)
            elif c < x < hi:
                m[b, j] = (hi - x) / (hi - c)
    return m


def _ref_pitch(wav, cfg):
    """NCCF by its definition, one lag at a time, read at log-spaced fractional lags."""
    w, h = cfg.window_length, cfg.hop_length
    n = max(0, 1 + (len(wav) - w) // h)
    out = np.zeros((n, cfg.pitch_bins))
    lags = cfg.sample_rate / np.geomspace(cfg.pitch_fmax, cfg.pitch_fmin, cfg.pitch_bins)
    for t in range(n):
        x = wav[t * h:t * h + w] - wav[t * h:t * h + w].mean()

        def nccf(lag):
            a, b = x[:w - lag], x[lag:]
            return a @ b / np.sqrt((a @ a) * (b @ b) + 1e-4 * ((w - lag) / w) ** 2)

        for j, lag in enumerate(lags):
            lo = int(np.floor(lag))
            out[t, j] = (1 - (lag - lo)) * nccf(lo) + (lag - lo) * nccf(lo + 1)
    return out


def _ref_features(wav, cfg):
    if cfg.pitch_bins:
        spectral = _ref_features(wav, dataclasses.replace(cfg, pitch_bins=0))
        return np.concatenate([spectral, _ref_pitch(wav, cfg)], axis=-1)
    power = _ref_power(wav, cfg)
    if cfg.kind == "linear":
        return np.log(power + cfg.eps)
    logmel = np.log(power @ _ref_mel_matrix(cfg) + cfg.eps)
    if cfg.kind == "logmel":
        return logmel
    cep = scipy.fft.dct(logmel, type=2, axis=-1)[:, :cfg.n_mfcc] / np.sqrt(2 * cfg.n_mels)
    c, n = cfg.mfcc_context, len(cep)
    out = np.zeros((n, (2 * c + 1) * cfg.n_mfcc))
    for t in range(n):
        for k, s in enumerate(range(t - c, t + c + 1)):
            if 0 <= s < n:
                out[t, k * cfg.n_mfcc:(k + 1) * cfg.n_mfcc] = cep[s]
    return out


CONFIGS = [
    FeatureConfig(kind="linear"),
    FeatureConfig(kind="logmel", n_mels=40),
    FeatureConfig(kind="mfcc", n_mels=26, n_mfcc=13, mfcc_context=2),
    FeatureConfig(kind="mfcc"),  # DS1: 26 cepstra x 19 frames
    FeatureConfig(kind="linear", pitch_bins=16),
    FeatureConfig(kind="logmel", n_mels=40, pitch_bins=8, pitch_fmin=100.0, pitch_fmax=300.0, window_ms=25.0),
]


def test_constants_and_dims():
    cfg = FeatureConfig()
    assert (WINDOW_MS, HOP_MS) == (20.0, 10.0)
    assert (cfg.window_length, cfg.hop_length, cfg.n_fft, cfg.num_bins) == (320, 160, 320, 161)
    assert cfg.dim == NUM_LINEAR_BINS == 161
    assert FeatureConfig(kind="logmel", n_mels=64).dim == 64
    assert FeatureConfig(kind="mfcc").dim == 26 * 19 == 494
    assert FeatureConfig(kind="mfcc", mfcc_context=0).dim == 26
    pitched = FeatureConfig(pitch_bins=32)
    assert (pitched.spectral_dim, pitched.dim) == (161, 193)


@pytest.mark.parametrize("f0", [75.0, 110.0, 180.0, 260.0, 390.0])
def test_pitch_gram_peaks_at_the_period(f0):
    """A harmonic tone's NCCF is ~1 at its period; the pitch-gram's bins there read it, and its first peak from
    the short-lag side is at f0 (the later ones are at the period's multiples)."""
    cfg = FeatureConfig(pitch_bins=32)
    t = np.arange(SR) / SR
    wav = sum(np.sin(2 * np.pi * k * f0 * t + k) / k for k in range(1, 8)).astype(np.float32) * 0.1
    feats, _ = compute_features(wav, len(wav), cfg)
    gram = feats.numpy()[:, cfg.spectral_dim:].mean(axis=0)
    freqs = np.geomspace(cfg.pitch_fmax, cfg.pitch_fmin, cfg.pitch_bins)
    assert gram.max() > 0.9
    first_peak = np.argmax(gram > 0.9)
    assert abs(np.log2(freqs[first_peak] / f0)) < 0.125  # within 1.5 bins (a bin is ~1 semitone) of f0


def test_pitch_gram_is_low_on_noise_and_silence():
    cfg = FeatureConfig(pitch_bins=32)
    rng = np.random.default_rng(0)
    cases = [(0.1 * rng.standard_normal(SR), 0.35), (np.zeros(SR), 1e-6), (1e-5 * rng.standard_normal(SR), 0.01)]
    for wav, bound in cases:
        feats, _ = compute_features(wav.astype(np.float32), SR, cfg)
        assert np.abs(feats.numpy()[:, 161:]).max(axis=-1).mean() < bound


def test_pitch_lags_interpolate_the_log_spaced_lags():
    cfg = FeatureConfig(pitch_bins=5, pitch_fmin=80.0, pitch_fmax=320.0)
    first, weights = pitch_lags(cfg)
    lags = first + (np.arange(len(weights))[:, None] * weights).sum(axis=0)
    np.testing.assert_allclose(lags, SR / np.geomspace(320.0, 80.0, 5), rtol=1e-6)
    np.testing.assert_allclose(weights.sum(axis=0), 1.0, rtol=1e-6)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.kind}-{c.dim}")
def test_matches_numpy_reference(cfg):
    wavs = [_signal(n, seed=i, freq=300.0 + 500 * i) for i, n in enumerate([16000, 5123, 700])]
    for wav in wavs:
        feats, n = compute_features(wav, len(wav), cfg)
        ref = _ref_features(wav.astype(np.float64), cfg)
        assert int(n) == len(ref) == num_frames(len(wav), cfg)
        np.testing.assert_allclose(feats.numpy(), ref, atol=2e-3, rtol=1e-4)


def test_mel_filterbank_matches_tf_signal():
    cfg = FeatureConfig(kind="logmel", n_mels=80, mel_fmin=20.0, mel_fmax=7600.0)
    expected = tf.signal.linear_to_mel_weight_matrix(80, 161, SR, 20.0, 7600.0, dtype=tf.float64).numpy()
    np.testing.assert_allclose(mel_filterbank(cfg), expected, atol=1e-6)
    assert (mel_filterbank(FeatureConfig(kind="logmel")).max(axis=0) > 0).all()  # no empty filter at 80 mels


def test_dct_matrix_matches_tf_mfcc():
    logmel = np.random.default_rng(0).standard_normal((7, 40)).astype(np.float32)
    expected = tf.signal.mfccs_from_log_mel_spectrograms(logmel).numpy()[:, :13]
    np.testing.assert_allclose(logmel @ dct_matrix(40, 13), expected, atol=1e-5)


def test_linear_peak_at_tone_frequency():
    wav = (0.5 * np.sin(2 * np.pi * 1000.0 * np.arange(SR) / SR)).astype(np.float32)
    feats, _ = compute_features(wav, len(wav), FeatureConfig())
    assert (np.argmax(feats.numpy(), axis=-1) == 1000 // 50).all()  # 50 Hz per bin


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.kind}-{c.dim}")
def test_batch_padding_independent(cfg):
    lengths = [9000, 4000, 321, 100]
    wavs = [_signal(n, seed=i) for i, n in enumerate(lengths)]
    singles = [compute_features(w, len(w), cfg)[0].numpy() for w in wavs]
    rng = np.random.default_rng(1)
    for total in (9000, 12345):  # exact fit, and extra padding
        # Fill the padding with loud noise: valid frames must not see it.
        batch = rng.uniform(-1, 1, (len(wavs), total)).astype(np.float32)
        for i, w in enumerate(wavs):
            batch[i, :len(w)] = w
        feats, n = compute_features(batch, np.array(lengths, np.int64), cfg)
        feats, n = feats.numpy(), n.numpy()
        assert feats.shape == (len(wavs), num_frames(total, cfg), cfg.dim)
        assert n.dtype == np.int32 and list(n) == [num_frames(x, cfg) for x in lengths]
        for i, single in enumerate(singles):
            np.testing.assert_allclose(feats[i, :n[i]], single, atol=1e-4, rtol=1e-5)
            assert not feats[i, n[i]:].any()  # padding frames are exactly zero


def test_num_frames_convention():
    cfg = FeatureConfig()
    cases = {0: 0, 1: 0, 319: 0, 320: 1, 321: 1, 479: 1, 480: 2, 16000: 99, 16160: 100}
    assert {n: num_frames(n, cfg) for n in cases} == cases
    lengths = tf.constant(list(cases), tf.int64)
    assert frame_lengths(lengths, cfg).numpy().tolist() == list(cases.values())
    assert frame_lengths(lengths, cfg).dtype == tf.int32
    assert num_frames(np.array(list(cases)), cfg).tolist() == list(cases.values())  # the same rule elementwise
    for n in (0, 100, 320, 481):  # the graph's own frame count agrees at the batch level too
        feats, _ = compute_features(np.zeros((2, n), np.float32), [n, n], cfg)
        assert feats.shape == (2, num_frames(n, cfg), 161)


def test_graph_mode_unknown_dims_and_tf_data():
    cfg = FeatureConfig(kind="mfcc", n_mfcc=13, mfcc_context=3)
    fn = tf.function(lambda w, n: compute_features(w, n, cfg),
                     input_signature=[tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.int32)])
    for shape in [(2, 4000), (3, 7000)]:
        wav = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 0.1
        lengths = np.full(shape[0], shape[1] - 50, np.int32)
        got, eager = fn(wav, lengths), compute_features(wav, lengths, cfg)
        assert got[0].shape[1:] == (num_frames(shape[1], cfg), cfg.dim)
        np.testing.assert_allclose(got[0].numpy(), eager[0].numpy(), atol=1e-5)
        np.testing.assert_array_equal(got[1].numpy(), eager[1].numpy())

    wavs = [_signal(n, seed=n) for n in (3000, 5000)]
    ds = tf.data.Dataset.from_generator(
        lambda: ((w, len(w)) for w in wavs),
        output_signature=(tf.TensorSpec([None], tf.float32), tf.TensorSpec([], tf.int32)))
    ds = ds.map(lambda w, n: compute_features(w[None], n[None], cfg))
    for (feats, n), w in zip(ds, wavs):
        assert feats.shape == (1, num_frames(len(w), cfg), cfg.dim) and int(n[0]) == num_frames(len(w), cfg)
        np.testing.assert_allclose(feats[0].numpy(), compute_features(w, len(w), cfg)[0].numpy(), atol=1e-5)


def test_config_round_trip_and_errors():
    for cfg in CONFIGS + [FeatureConfig(kind="logmel", mel_fmax=7600.0, window_ms=25.0)]:
        assert FeatureConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="n_fft_size"):
        FeatureConfig.from_dict({"kind": "linear", "n_fft_size": 512})
    bad = [dict(kind="spectrogram"), dict(n_mfcc=40, n_mels=26), dict(hop_ms=30.0), dict(sample_rate=0),
           dict(mfcc_context=-1), dict(mel_fmax=9000.0), dict(eps=0.0), dict(n_mels=0), dict(pitch_bins=-1),
           dict(pitch_bins=True), dict(pitch_fmin=300.0, pitch_fmax=200.0, pitch_bins=4),
           dict(pitch_fmin=60.0, pitch_bins=4)]
    for kwargs in bad:
        field = next(iter(kwargs))
        with pytest.raises(ValueError, match=field):
            FeatureConfig(**kwargs)
    with pytest.raises(ValueError, match="waveforms"):
        compute_features(np.zeros((1, 2, 400), np.float32), [400], FeatureConfig())
