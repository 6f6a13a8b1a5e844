"""Each augmentation component against a numpy reference, the config parser, and the tf.data pipeline."""

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.signal
import tensorflow as tf

from deepspeech2.audio import load_audio, save_wav
from deepspeech2.data.augment.augmentation import Augmentation
from deepspeech2.data.augment.banks import trim_tail
from deepspeech2.data.augment.config import parse_augmentation
from deepspeech2.data.augment.features import SpecAugment
from deepspeech2.data.augment.fft import (FFT_SIZES, SPEED_RESAMPLE_PAD, change_speed, fft_size, smooth_sizes,
                                          speed_fft_sizes)
from deepspeech2.data.augment.waveform import (BayesianNormalization, Equalizer, ImpulseResponse, NoisePerturb,
                                               ShiftPerturb, SpeedPerturb, Telephone, VolumePerturb, shift_samples)
from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2.data.telephone import telephone

SR = 16000
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "augmentation.example.json"


def _speech_like(n=SR, seed=0):
    """Noise with a syllable-rate envelope: non-stationary, like speech."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SR
    return (0.2 * rng.standard_normal(n) * (0.55 + 0.45 * np.sin(2 * np.pi * 4 * t))).astype(np.float32)


def _db(x):
    return 10 * np.log10(np.mean(np.square(x, dtype=np.float64)))


def _manifest(tmp_path, name, clips):
    utts = []
    for i, clip in enumerate(clips):
        path = tmp_path / f"{name}_{i}.wav"
        save_wav(path, clip)
        utts.append(Utterance(str(path), len(clip) / SR, ""))
    write_manifest(tmp_path / f"{name}.jsonl", utts)
    return str(tmp_path / f"{name}.jsonl")


def _run(component, wav, length=None):
    length = len(wav) if length is None else length
    out, n = component(tf.constant(wav), tf.constant(length, tf.int32))
    return out.numpy(), int(n)


def test_volume_gain_in_db():
    x = _speech_like()
    y, n = _run(VolumePerturb(6.0, 6.0), x)
    assert n == len(x)
    assert _db(y) - _db(x) == pytest.approx(6.0, abs=1e-3)


def _is_smooth(k, primes=(2, 3, 5, 7)):
    for p in primes:
        while k % p == 0:
            k //= p
    return k == 1


def test_fft_size_table_against_brute_force():
    small = smooth_sizes(limit=5000)
    np.testing.assert_array_equal(small, [k for k in range(1, 5001) if _is_smooth(k)])
    assert FFT_SIZES[-1] < 2**31 and np.all(np.diff(FFT_SIZES) > 0)
    assert all(_is_smooth(int(k)) for k in FFT_SIZES[::50])
    for k in (1, 2, 11, 97, 1024, 81024, 81232, 99199, 480000):
        expected = next(j for j in range(k, 2 * k + 1) if _is_smooth(j))
        assert int(fft_size(tf.constant(k))) == expected


def test_speed_fft_sizes_are_smooth_close_and_in_range():
    rng = np.random.default_rng(0)
    for _ in range(100):
        need, rate = int(rng.uniform(0.5, 30) * SR), float(rng.uniform(0.9, 1.1))
        n, m = (int(v) for v in speed_fft_sizes(tf.constant(need), tf.constant(rate), 0.9, 1.1))
        assert n >= need and _is_smooth(n) and _is_smooth(m)
        assert n / m == pytest.approx(rate, rel=0.004) and 0.9 <= n / m <= 1.1
        if need >= SR:
            assert n / m == pytest.approx(rate, rel=0.0025)
    # A ratio of 7-smooth sizes is exact when the rate is one, e.g. 0.9 = 9 / 10.
    n, m = (int(v) for v in speed_fft_sizes(tf.constant(SR), tf.constant(0.9, tf.float64)))
    assert n * 10 == m * 9


@pytest.mark.parametrize("rate", [0.9, 1.1])
def test_speed_length_frequency_and_fourier_reference(rate):
    x = (0.5 * np.sin(2 * np.pi * 440 * np.arange(SR) / SR)).astype(np.float32)
    y, n = _run(SpeedPerturb(rate, rate), x)
    # The sizes the resampler uses: the applied rate is their ratio, within 0.25% of the one asked for.
    sizes = speed_fft_sizes(tf.constant(SR + SPEED_RESAMPLE_PAD), tf.constant(rate), rate, rate)
    n_fft, m_fft = (int(v) for v in sizes)
    applied = n_fft / m_fft
    assert applied == pytest.approx(rate, rel=0.0025)
    assert n == len(y) == SR * m_fft // n_fft == int(SR / applied + 1e-9)
    peak_hz = np.argmax(np.abs(np.fft.rfft(y * np.hanning(n)))) * SR / n
    assert peak_hz == pytest.approx(440 * applied, abs=1.5)  # bins are ~1 Hz wide
    # scipy's Fourier resampler on the same zero-padded signal (at least SPEED_RESAMPLE_PAD zeros).
    padded = np.pad(x, (0, n_fft - SR)).astype(np.float64)
    ref = scipy.signal.resample(padded, m_fft)[:n]
    np.testing.assert_allclose(y, ref, atol=1e-4)


@pytest.mark.parametrize("length, rate", [(12345, 0.93), (20000, 1.07), (7001, 1.0)])
def test_change_speed_matches_scipy_at_any_length(length, rate):
    t = np.arange(length) / SR
    x = (0.3 * np.sin(2 * np.pi * 300 * t) + 0.2 * np.sin(2 * np.pi * 2100 * t + 1)).astype(np.float32)
    y, n = change_speed(tf.constant(np.pad(x, (0, 50))), tf.constant(length), tf.constant(rate))
    sizes = speed_fft_sizes(tf.constant(length + SPEED_RESAMPLE_PAD), tf.constant(rate))
    n_fft, m_fft = (int(v) for v in sizes)
    assert int(n) == y.shape[0] == length * m_fft // n_fft
    ref = scipy.signal.resample(np.pad(x, (0, n_fft - length)).astype(np.float64), m_fft)[:int(n)]
    np.testing.assert_allclose(y.numpy(), ref, atol=1e-4)


@pytest.mark.parametrize("shift_ms", [2.0, -3.0])
def test_shift_moves_by_samples_with_zeros(shift_ms):
    x = np.concatenate([_speech_like(4000), np.full(500, 7.0, np.float32)])  # 500 padding samples
    y, n = _run(ShiftPerturb(shift_ms, shift_ms), x, length=4000)
    s = int(shift_ms * SR / 1000)
    assert n == 4000 and y.shape == x.shape
    ref = np.zeros_like(x)
    if s > 0:
        ref[:4000 - s] = x[s:4000]
    else:
        ref[-s:4000] = x[:4000 + s]
    np.testing.assert_array_equal(y, ref)


def test_shift_beyond_the_length_gives_silence():
    x = _speech_like(1000)
    for shift in (1000, 1500, -1000, -1500):
        y = shift_samples(tf.constant(x), tf.constant(1000), tf.constant(shift)).numpy()
        assert y.shape == x.shape and not y.any()


def test_noise_snr_and_looping(tmp_path):
    rng = np.random.default_rng(1)
    short = (0.3 * rng.standard_normal(3000)).astype(np.float32)  # shorter than the utterance: looped
    path = _manifest(tmp_path, "noise", [short])
    x = _speech_like(SR)
    comp = NoisePerturb(path, 15.0, 15.0)
    clip = load_audio(tmp_path / "noise_0.wav")
    for _ in range(3):
        y, n = _run(comp, x)
        d = y.astype(np.float64) - x
        assert n == len(x)
        assert _db(x) - _db(d) == pytest.approx(15.0, abs=0.5)
        np.testing.assert_allclose(d[:-len(clip)], d[len(clip):], atol=1e-5)  # the clip, looped
        # d is a scaled, rotated copy of the clip.
        gain = np.sqrt(np.sum(d[:len(clip)] ** 2) / np.sum(clip**2))
        corr = max(np.abs(np.dot(d[:len(clip)], np.roll(clip, -k))) for k in range(len(clip)))
        assert corr == pytest.approx(gain * np.sum(clip**2), rel=1e-3)


def test_noise_longer_clip_and_padding(tmp_path):
    rng = np.random.default_rng(2)
    path = _manifest(tmp_path, "noise", [(0.3 * rng.standard_normal(3 * SR)).astype(np.float32)])
    x = np.concatenate([_speech_like(SR), np.zeros(800, np.float32)])
    y, _ = _run(NoisePerturb(path, 20.0, 20.0), x, length=SR)
    assert _db(x[:SR]) - _db(y[:SR] - x[:SR]) == pytest.approx(20.0, abs=0.5)
    np.testing.assert_array_equal(y[SR:], 0.0)


def test_noise_bank_is_captured_not_embedded_in_the_graph(tmp_path):
    # A bank built as a graph constant is copied on every tf.data call; captured, it is passed by reference.
    clip = (0.1 * np.random.default_rng(4).standard_normal(3 * SR)).astype(np.float32)
    comp = NoisePerturb(_manifest(tmp_path, "noise", [clip]), 10.0, 20.0)
    graph = tf.function(lambda w: comp(w, tf.shape(w)[0])[0]).get_concrete_function(
        tf.TensorSpec([None], tf.float32)).graph
    consts = [tf.make_ndarray(op.get_attr("value")).size
              for op in graph.get_operations() if op.type == "Const"]
    assert max(consts) < len(clip)


def test_impulse_delta_two_tap_and_peak_alignment(tmp_path):
    delta = np.zeros(64, np.float32)
    delta[0] = 1.0
    two_tap = np.array([1.0, 0.5], np.float32)
    late_peak = np.array([0.0, 0.2, 0.9, -0.3, 0.1], np.float32)
    x = _speech_like(5000)

    y, n = _run(ImpulseResponse(_manifest(tmp_path, "delta", [delta])), x)
    assert n == len(x)
    np.testing.assert_allclose(y, x, atol=1e-5)

    for name, ir, peak in (("two", two_tap, 0), ("late", late_peak, 2)):
        path = _manifest(tmp_path, name, [ir])
        h = load_audio(tmp_path / f"{name}_0.wav")  # the 16-bit values actually used
        ref = np.convolve(x.astype(np.float64), h)[peak:peak + len(x)]
        ref *= np.sqrt(np.sum(x.astype(np.float64) ** 2) / np.sum(ref**2))  # the input's RMS
        y, _ = _run(ImpulseResponse(path), x)
        np.testing.assert_allclose(y, ref, atol=1e-5)


def _equalizer_curve(hz, u, max_gain_db, num_bands):
    """Equalizer's gain in dB at `hz`: the mel-spaced cosines weighted by the draws, in numpy."""
    def mel(f):
        return 2595 * np.log10(1 + f / 700)
    return sum((2 * u[k - 1] - 1) * max_gain_db / num_bands * np.cos(np.pi * k * mel(hz) / mel(SR / 2))
               for k in range(1, num_bands + 1))


def _equalizer_reference(x, u, max_gain_db, num_bands):
    """Equalizer in numpy, float64: the gain curve on an FFT padded past the end, RMS kept."""
    n = int(FFT_SIZES[np.searchsorted(FFT_SIZES, len(x) + SPEED_RESAMPLE_PAD)])
    curve = _equalizer_curve(np.fft.rfftfreq(n, 1 / SR), u, max_gain_db, num_bands)
    y = np.fft.irfft(np.fft.rfft(x.astype(np.float64), n) * 10 ** (curve / 20), n)[:len(x)]
    return y * np.sqrt(np.sum(x.astype(np.float64) ** 2) / np.sum(y**2)), curve


@pytest.mark.parametrize("num_bands, u", [(1, [0.9]), (4, [0.1, 0.8, 0.35, 0.6]), (6, [0.0] * 6)])
def test_equalizer_matches_numpy_and_keeps_length_padding_and_rms(num_bands, u):
    x = _speech_like(12000)
    wav = np.concatenate([x, np.full(500, 0.3, np.float32)])  # samples past `length` are padding
    eq = Equalizer(max_gain_dB=9.0, num_bands=num_bands)
    out, n = eq.apply(tf.constant(wav), tf.constant(len(x)), tf.constant(u, tf.float32))
    out = out.numpy()
    ref, curve = _equalizer_reference(x, np.array(u), 9.0, num_bands)
    assert int(n) == len(x) and out.shape == wav.shape and not out[len(x):].any()
    np.testing.assert_allclose(out[:len(x)], ref, atol=2e-5)
    assert abs(_db(out[:len(x)]) - _db(x)) < 0.01
    assert np.abs(curve).max() <= 9.0 + 1e-9
    # The filter does what the curve says: band energies move by the curve's gain there (RMS aside).
    spec_in, spec_out = (np.abs(np.fft.rfft(v.astype(np.float64))) ** 2 for v in (x, out[:len(x)]))
    hz = np.fft.rfftfreq(len(x), 1 / SR)
    want = _equalizer_curve(hz, u, 9.0, num_bands)
    for lo, hi in ((100, 400), (1000, 1500), (3000, 4000), (6500, 7500)):
        band = (hz >= lo) & (hz < hi)
        moved = 10 * np.log10(spec_out[band].sum() / spec_in[band].sum())
        expected = 10 * np.log10(np.mean(10 ** (want[band] / 10) * spec_in[band]) / np.mean(spec_in[band]))
        offset = 10 * np.log10(np.sum(spec_out) / np.sum(spec_in * 10 ** (want / 10)))  # the RMS rescale
        assert abs(moved - expected - offset) < 0.2, (lo, hi, moved, expected, offset)


def test_equalizer_at_zero_gain_is_the_identity_and_parses():
    x = _speech_like(5000)
    y, n = _run(Equalizer(max_gain_dB=0.0, num_bands=3), x)
    np.testing.assert_allclose(y, x, atol=1e-5)
    aug = parse_augmentation([{"type": "eq", "params": {"max_gain_dB": 6, "num_bands": 2}, "prob": 0.5}])
    assert aug.waveform == (Equalizer(6, 2, prob=0.5),) and not aug.feature
    assert parse_augmentation(aug.to_config()) == aug
    for params, word in (({"max_gain_dB": -1}, "max_gain_dB"), ({"num_bands": 0}, "num_bands"),
                         ({"num_bands": 2.5}, "integer"), ({"gain": 3}, "gain")):
        with pytest.raises(ValueError, match=word):
            parse_augmentation([{"type": "eq", "params": params, "prob": 1}])


def test_trim_tail_at_60_db_of_remaining_energy():
    rng = np.random.default_rng(3)
    h = rng.standard_normal(8000) * 10.0 ** (-3 * np.arange(8000) / 4000)  # energy -60 dB at sample 4000
    h = np.concatenate([[0.0, 0.1], 5 * h[:1], h[1:]]).astype(np.float32)
    cut = trim_tail(h)
    remaining = np.array([np.sum(h[k:].astype(np.float64) ** 2) for k in range(len(h) + 1)])
    k = np.flatnonzero(remaining < remaining[0] * 1e-6)[0]  # brute force
    assert len(cut) == k and 3600 < k < 4100
    np.testing.assert_array_equal(cut, h[:k])
    # Never before the peak; a delta is cut right after it; silence is kept whole.
    late = np.array([0.001, 0.0, 0.0, 1.0], np.float32)
    np.testing.assert_array_equal(trim_tail(late), late)
    np.testing.assert_array_equal(trim_tail(np.array([1.0, 0.0, 0.0], np.float32)), [1.0])
    assert len(trim_tail(np.zeros(5, np.float32))) == 5


def _seed_online_bayesian(x, target_db, prior_db, prior_samples, startup_delay, sr=SR):
    """A per-sample loop port of the seed's AudioSegment.normalize_online_bayesian."""
    x = x.astype(np.float64)
    startup = min(len(x) - 1, int(sr * startup_delay))
    running, sums = 0.0, []
    for v in x:
        running += v * v
        sums.append(running)
    out = np.empty_like(x)
    prior_sum = 10.0 ** (prior_db / 10.0) * prior_samples
    for i, v in enumerate(x):
        j = max(i, startup)
        mean_square = (sums[j] + prior_sum) / (j + 1 + prior_samples)
        gain_db = target_db - 10 * np.log10(mean_square)
        out[i] = v * 10.0 ** (gain_db / 20.0)
    return out


@pytest.mark.parametrize("startup_delay", [0.0, 0.05])
def test_bayesian_normal_matches_seed_loop(startup_delay):
    x = _speech_like(4000) * np.linspace(0.1, 2.0, 4000, dtype=np.float32)
    comp = BayesianNormalization(target_db=-20, prior_db=-30, prior_samples=100, startup_delay=startup_delay)
    y, n = _run(comp, np.concatenate([x, np.zeros(100, np.float32)]), length=4000)
    ref = _seed_online_bayesian(x, -20, -30, 100, startup_delay)
    assert n == 4000
    np.testing.assert_allclose(y[:4000], ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(y[4000:], 0.0)


def _zero_runs(flags):
    """Lengths of the runs of True in a boolean vector."""
    edges = np.diff(np.concatenate([[0], flags.astype(int), [0]]))
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


def test_specaugment_masks_within_bounds():
    frames, dim, length = 100, 40, 80
    feats = np.random.default_rng(0).uniform(1.0, 2.0, (frames, dim)).astype(np.float32)
    comp = SpecAugment(F=8, T=10, n_freq_masks=2, n_time_masks=2, p=1.0)
    fn = tf.function(lambda f: comp(f, tf.constant(length)))
    saw_masks = False
    for _ in range(30):
        out = fn(tf.constant(feats)).numpy()
        np.testing.assert_array_equal(out[length:], feats[length:])  # padding untouched
        zero = out[:length] == 0
        rows, cols = zero.all(axis=1), zero.all(axis=0)
        # Every zero lies in a fully masked row (time) or a column masked over all valid frames (freq).
        assert not (zero & ~rows[:, None] & ~cols[None, :]).any()
        np.testing.assert_array_equal(out[:length][~zero], feats[:length][~zero])
        assert rows.sum() <= 2 * 10 and cols.sum() <= 2 * 8
        assert all(r <= 2 * 10 for r in _zero_runs(rows)) and all(c <= 2 * 8 for c in _zero_runs(cols))
        saw_masks |= rows.any() and cols.any()
    assert saw_masks


def test_specaugment_p_caps_time_masks_and_mean_value():
    frames, dim, length = 120, 20, 100
    feats = np.random.default_rng(1).uniform(1.0, 2.0, (frames, dim)).astype(np.float32)
    comp = SpecAugment(F=0, T=50, n_freq_masks=1, n_time_masks=3, p=0.05, replace_with_zero=False)
    mean = feats[:length].mean()
    for _ in range(10):
        out = comp(tf.constant(feats), tf.constant(length)).numpy()
        masked = np.isclose(out[:length], mean, atol=1e-6).all(axis=1) & ~np.isclose(
            feats[:length], mean, atol=1e-6).all(axis=1)
        assert all(r <= 3 * 5 for r in _zero_runs(masked))  # each mask <= int(0.05 * 100) frames
        assert masked.sum() <= 3 * 5


def test_specaugment_time_warp_monotone_and_inside_length():
    frames, dim, length = 100, 4, 90
    ramp = np.repeat(np.arange(frames, dtype=np.float32)[:, None], dim, axis=1)
    comp = SpecAugment(F=0, T=0, n_freq_masks=0, n_time_masks=0, W=10)
    changed = False
    for _ in range(10):
        out = comp(tf.constant(ramp), tf.constant(length)).numpy()
        np.testing.assert_array_equal(out[length:], ramp[length:])
        valid = out[:length, 0]
        assert np.all(np.diff(valid) >= -1e-4) and valid.min() >= 0 and valid.max() <= length - 1
        changed |= not np.allclose(valid, ramp[:length, 0])
    assert changed
    # Too short to warp (length <= 2W): unchanged.
    np.testing.assert_array_equal(comp(tf.constant(ramp), tf.constant(20)).numpy(), ramp)


def test_prob_zero_leaves_input_unchanged_and_prob_half_fires_about_half():
    aug = parse_augmentation([
        {"type": "volume", "params": {"min_gain_dBFS": 6, "max_gain_dBFS": 6}, "prob": 0.0},
        {"type": "speed", "params": {"min_speed_rate": 1.1, "max_speed_rate": 1.1}, "prob": 0.0},
        {"type": "specaugment", "params": {"F": 5, "T": 5, "n_freq_masks": 1, "n_time_masks": 1},
         "prob": 0.0}])
    x = _speech_like(3000)
    y, n = aug.apply_waveform(x, 3000)
    np.testing.assert_array_equal(y.numpy(), x)
    assert int(n) == 3000
    feats = np.ones((30, 8), np.float32)
    np.testing.assert_array_equal(aug.apply_features(feats, 30).numpy(), feats)

    tf.random.set_seed(0)
    half = parse_augmentation([{"type": "volume", "params": {"min_gain_dBFS": 6, "max_gain_dBFS": 6},
                                "prob": 0.5}])
    fn = tf.function(lambda w: half.apply_waveform(w, 3000)[0])
    fired = np.mean([not np.allclose(fn(tf.constant(x)).numpy(), x) for _ in range(200)])
    assert 0.38 < fired < 0.62


@pytest.mark.parametrize("config, words", [
    ([{"type": "reverb", "params": {}, "prob": 1}], ["entry 0", "reverb", "volume"]),
    ([{"type": "volume", "params": {"min_gain_dBFS": 1, "max_gain_dBFS": 2}, "prob": 1},
      {"type": "volume", "params": {"min_gain_dB": 1, "max_gain_dBFS": 2}, "prob": 1}],
     ["entry 1", "volume", "min_gain_dB", "min_gain_dBFS"]),
    ([{"type": "shift", "params": {"min_shift_ms": -5}, "prob": 1}], ["entry 0", "shift", "max_shift_ms"]),
    ([{"type": "shift", "params": {"min_shift_ms": -5, "max_shift_ms": 5}, "prob": 1.5}], ["prob", "1.5"]),
    ([{"type": "shift", "params": {"min_shift_ms": -5, "max_shift_ms": 5}}], ["missing", "prob"]),
    ([{"type": "shift", "params": {"min_shift_ms": -5, "max_shift_ms": 5}, "prob": 1, "rate": 2}],
     ["unknown", "rate"]),
    ([{"type": "speed", "params": {"min_speed_rate": 0, "max_speed_rate": 1.1}, "prob": 1}],
     ["min_speed_rate", "> 0"]),
    ([{"type": "specaugment", "params": {"F": 2.5, "T": 3, "n_freq_masks": 1, "n_time_masks": 1},
       "prob": 1}], ["specaugment", "`F`", "integer"]),
    ({"type": "volume"}, ["list"]),
    ("[{not json", ["JSON"]),
])
def test_bad_config_errors_name_the_problem(config, words):
    with pytest.raises(ValueError) as e:
        parse_augmentation(json.dumps(config) if not isinstance(config, str) else config)
    for word in words:
        assert word in str(e.value)


def test_missing_manifest_and_config_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        parse_augmentation([{"type": "noise", "params": {"noise_manifest_path": "nope.jsonl",
                                                         "min_snr_dB": 10, "max_snr_dB": 20}, "prob": 1}])
    with pytest.raises(FileNotFoundError, match="missing.json"):
        parse_augmentation(tmp_path / "missing.json")


def test_example_config_parses_and_round_trips(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    noise_dir = tmp_path / "data" / "tiny" / "noise"
    noise_dir.mkdir(parents=True)
    _manifest(noise_dir, "noise", [(0.1 * rng.standard_normal(SR)).astype(np.float32)])
    _manifest(noise_dir, "rir", [np.array([1.0, 0.3, 0.1], np.float32)])
    monkeypatch.chdir(tmp_path)  # the example's manifest paths are relative to the working directory
    aug = parse_augmentation(EXAMPLE)
    assert [c.type for c in aug.waveform] == ["speed", "shift", "impulse", "noise", "volume"]
    assert [c.type for c in aug.feature] == ["specaugment"]
    assert parse_augmentation(aug.to_config()) == aug
    assert parse_augmentation(EXAMPLE.read_text()) == aug


def test_pipeline_runs_in_tf_data_graph_mode(tmp_path):
    rng = np.random.default_rng(0)
    noise = _manifest(tmp_path, "noise", [(0.1 * rng.standard_normal(n)).astype(np.float32)
                                          for n in (2000, 9000)])
    rir = _manifest(tmp_path, "rir", [np.exp(-np.arange(800) / 100.0).astype(np.float32)
                                      * rng.choice([-1, 1], 800)])
    aug = parse_augmentation([
        {"type": "speed", "params": {"min_speed_rate": 0.9, "max_speed_rate": 1.1}, "prob": 0.5},
        {"type": "shift", "params": {"min_shift_ms": -5, "max_shift_ms": 5}, "prob": 1.0},
        {"type": "impulse", "params": {"impulse_manifest_path": rir}, "prob": 0.5},
        {"type": "noise", "params": {"noise_manifest_path": noise, "min_snr_dB": 10, "max_snr_dB": 30},
         "prob": 0.5},
        {"type": "volume", "params": {"min_gain_dBFS": -6, "max_gain_dBFS": 6}, "prob": 1.0},
        {"type": "bayesian_normal", "params": {"target_db": -20, "prior_db": -20, "prior_samples": 100},
         "prob": 0.5},
        {"type": "specaugment", "params": {"F": 5, "T": 5, "n_freq_masks": 2, "n_time_masks": 2, "W": 3},
         "prob": 0.8},
    ])
    lengths = [4000, 6500, 5000]
    wavs = [_speech_like(n, seed=n) for n in lengths]

    def augment(wav, length):
        wav, length = aug.apply_waveform(wav, length)
        frames = length // 160
        feats = tf.reshape(wav[:frames * 160], [frames, 160])  # stand-in for the real features
        return wav, length, aug.apply_features(feats, frames)

    ds = tf.data.Dataset.from_generator(
        lambda: ((w, len(w)) for w in wavs),
        output_signature=(tf.TensorSpec([None], tf.float32), tf.TensorSpec([], tf.int32)))
    ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE).repeat(2)
    out = list(ds.as_numpy_iterator())
    assert len(out) == 6
    for (wav, length, feats), n in zip(out, lengths * 2):
        assert wav.shape == (length,) and int(n / 1.1) <= length <= int(n / 0.9)
        assert np.isfinite(wav).all() and np.isfinite(feats).all() and feats.shape == (length // 160, 160)
    assert not np.array_equal(out[0][0], out[3][0])  # fresh draws every epoch


def test_empty_config():
    for config in (None, "", "[]", []):
        aug = parse_augmentation(config)
        assert aug == Augmentation() and not aug


def test_draws_are_a_function_of_the_seed_alone(tmp_path):
    # Stateless draws: the same key gives the same augmentation, in eager mode, in a tf.function and
    # in parallel tf.data calls; another key gives another. No key: fresh draws every call.
    rng = np.random.default_rng(0)
    noise = _manifest(tmp_path, "noise", [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in (2000, 9000)])
    aug = parse_augmentation([
        {"type": "speed", "params": {"min_speed_rate": 0.9, "max_speed_rate": 1.1}, "prob": 0.5},
        {"type": "noise", "params": {"noise_manifest_path": noise, "min_snr_dB": 10, "max_snr_dB": 30}, "prob": 1},
        {"type": "volume", "params": {"min_gain_dBFS": -6, "max_gain_dBFS": 6}, "prob": 1.0},
        {"type": "specaugment", "params": {"F": 5, "T": 5, "n_freq_masks": 2, "n_time_masks": 2, "W": 3},
         "prob": 0.8}])
    x = _speech_like(6000)
    feats = np.random.default_rng(1).normal(size=(60, 20)).astype(np.float32)

    def run(key):
        wav, n = aug.apply_waveform(x, 6000, key)
        return np.concatenate([wav.numpy()[: int(n)], aug.apply_features(feats, 60, key).numpy().ravel()])

    keys = [tf.constant([7, k], tf.int64) for k in range(12)]
    outs = [run(k) for k in keys]
    np.testing.assert_array_equal(run(keys[3]), outs[3])
    assert all(not np.array_equal(outs[0], o) for o in outs[1:])
    traced = tf.function(lambda k: aug.apply_waveform(x, 6000, k))
    wav, n = traced(keys[5])
    np.testing.assert_allclose(wav.numpy()[: int(n)], outs[5][: int(n)], atol=1e-6)
    ds = tf.data.Dataset.from_tensor_slices(tf.stack(keys)).map(
        lambda k: aug.apply_features(feats, 60, k), num_parallel_calls=4, deterministic=False)
    parallel = sorted(o.tobytes() for o in ds.as_numpy_iterator())
    assert parallel == sorted(o[-feats.size:].astype(np.float32).tobytes() for o in outs)
    # The coin of a prob < 1 component is part of the key too: over the keys speed fires some times only.
    lengths = {len(o) - feats.size for o in outs}
    assert 6000 in lengths and len(lengths) > 1
    # Without a key, each call draws afresh (over a few calls: one may not fire, prob 0.8).
    assert len({aug.apply_features(feats, 60).numpy().tobytes() for _ in range(4)}) > 1


def test_vtlp_moves_formants_by_alpha_and_keeps_the_band_edges():
    from deepspeech2.data.augment.features import VTLP, warp_frequency

    bins = np.arange(161, dtype=np.float32)
    spectrum = np.exp(-0.5 * ((bins - 40.0) / 3.0) ** 2)[None, :].repeat(5, axis=0)  # a formant at bin 40
    for alpha in (0.9, 1.0, 1.1):
        warped = warp_frequency(tf.constant(spectrum), alpha).numpy()
        assert np.argmax(warped[0]) == round(40 * alpha)  # below the knee: k -> alpha k
        np.testing.assert_allclose(warped[:, -1], spectrum[:, -1], atol=1e-6)  # the top bin stays
        np.testing.assert_allclose(warped[:, 0], spectrum[:, 0], atol=1e-6)  # and so does DC
    np.testing.assert_allclose(warp_frequency(tf.constant(spectrum), 1.0).numpy(), spectrum, atol=1e-6)
    aug = parse_augmentation([{"type": "vtlp", "params": {"min_warp": 0.9, "max_warp": 1.1}, "prob": 1.0}])
    assert aug.feature == (VTLP(0.9, 1.1),) and not aug.waveform
    out = aug.apply_features(tf.constant(spectrum), 5, seed=tf.constant([1, 2], tf.int64)).numpy()
    assert 36 <= np.argmax(out[0]) <= 44
    with pytest.raises(ValueError, match="`min_warp`"):
        parse_augmentation([{"type": "vtlp", "params": {"min_warp": 1.2, "max_warp": 1.1}, "prob": 1.0}])


def test_telephone_is_the_numpy_channel_in_the_graph_with_padding_kept():
    """One copy of the rule: the augmentation gives what ds2-eval --channel g711 hears, eagerly and in tf.data."""
    aug = parse_augmentation([{"type": "telephone", "params": {}, "prob": 1.0}])
    assert aug.waveform == (Telephone(),) and parse_augmentation(aug.to_config()) == aug
    x = _speech_like(9000, seed=3)
    padded = np.concatenate([x, np.ones(700, np.float32)])  # non-zero padding, to see it dropped
    y, n = _run(Telephone(), padded, length=len(x))
    assert n == len(x) and y.shape == padded.shape
    np.testing.assert_array_equal(y[:n], telephone(x, SR))
    assert not y[n:].any()
    assert _db(y[:n] - x) - _db(x) > -6  # it changed the audio: 61% of white noise lies outside 300-3400 Hz
    ds = tf.data.Dataset.from_tensors((padded, len(x))).map(lambda w, k: aug.apply_waveform(w, k, tf.constant([1, 2])))
    [(wav, length)] = list(ds.as_numpy_iterator())
    np.testing.assert_array_equal(wav, y)
    assert length == n
    # At 8 kHz (a narrowband model) it is the codec and the band-pass alone.
    narrow = parse_augmentation([{"type": "telephone", "params": {}, "prob": 1.0}], sample_rate=8000)
    np.testing.assert_array_equal(_run(narrow.waveform[0], x)[0], telephone(x, 8000))


def test_telephone_config_errors():
    with pytest.raises(ValueError, match=r"unknown param\(s\) \['codec'\]"):
        parse_augmentation([{"type": "telephone", "params": {"codec": "alaw"}, "prob": 1.0}])
    with pytest.raises(ValueError, match="`prob` must be <= 1.0, got 2"):
        parse_augmentation([{"type": "telephone", "params": {}, "prob": 2}])
    with pytest.raises(ValueError, match="`sample_rate` must be >= 8000 Hz.*6000"):
        parse_augmentation([{"type": "telephone", "params": {}, "prob": 1.0}], sample_rate=6000)
