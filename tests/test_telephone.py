"""The telephone channel (deepspeech2.data.telephone) and the G.711 μ-law codec it uses (deepspeech2.audio):
the codec against libsndfile's and Python's own μ-law and against the standard's segment rule and formula; the
channel's spectrum on sines and noise (numpy FFT), its length, rate and determinism; the manifest copies."""

import io
import warnings

import numpy as np
import pytest
import soundfile as sf

from deepspeech2.audio import load_audio, mulaw_decode, mulaw_encode
from deepspeech2.data.manifest import Utterance
from deepspeech2.data.telephone import telephone, telephone_copies

from factories import make_manifest

SR = 16000
ALL_PCM = np.arange(-32768, 32768, dtype=np.int16)
ALL_CODES = np.arange(256, dtype=np.uint8)


def _audioop():
    """Python's audioop (Sun's g711.c; deprecated in 3.11, gone in 3.13), or a skip."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pytest.importorskip("audioop")


def _sndfile_encode(pcm: np.ndarray) -> np.ndarray:
    buf = io.BytesIO()
    sf.write(buf, pcm, 8000, subtype="ULAW", format="RAW")
    return np.frombuffer(buf.getvalue(), np.uint8)


def _sndfile_decode(codes: np.ndarray) -> np.ndarray:
    pcm, _ = sf.read(io.BytesIO(codes.tobytes()), samplerate=8000, channels=1, subtype="ULAW", format="RAW",
                     dtype="int16")
    return pcm


# ---------------------------------------------------------------------------------------------------------
# G.711 μ-law


def test_mulaw_decode_equals_libsndfile_for_every_code():
    np.testing.assert_array_equal(mulaw_decode(ALL_CODES), _sndfile_decode(ALL_CODES))
    assert mulaw_decode(np.array([0xFF, 0x7F, 0x80, 0x00], np.uint8)).tolist() == [0, 0, 32124, -32124]


def test_mulaw_equals_audioop():
    audioop = _audioop()
    np.testing.assert_array_equal(mulaw_decode(ALL_CODES),
                                  np.frombuffer(audioop.ulaw2lin(ALL_CODES.tobytes(), 2), np.int16))
    # Sun's g711.c (audioop) and G.191 agree on non-negative samples; for negative ones audioop negates the
    # truncated value where G.191 takes the one's complement (next test).
    positive = ALL_PCM[ALL_PCM >= 0]
    np.testing.assert_array_equal(mulaw_encode(positive),
                                  np.frombuffer(audioop.lin2ulaw(positive.tobytes(), 2), np.uint8))


def test_mulaw_encode_equals_libsndfile_on_non_negative_samples_and_is_symmetric_about_minus_half():
    positive = ALL_PCM[ALL_PCM >= 0]
    np.testing.assert_array_equal(mulaw_encode(positive), _sndfile_encode(positive))
    negative = ALL_PCM[ALL_PCM < 0]
    # G.191: a negative sample codes as its one's complement (~x = -x - 1 >= 0) with the sign bit cleared.
    np.testing.assert_array_equal(mulaw_encode(negative), mulaw_encode(~negative) & 0x7F)


def _segment_and_step(codes):
    inverted = 0xFF ^ codes.astype(np.int64)
    return (inverted >> 4) & 7, inverted & 0xF


def test_mulaw_quantizer_follows_the_standards_segments():
    """Each code's interval is its reconstruction value ± half a step; a segment's 16 steps are equal, each
    twice the step of the segment below (8, 16, ..., 1024 in 16-bit units); louder samples clip."""
    codes = mulaw_encode(ALL_PCM)
    segment, _ = _segment_and_step(codes)
    step = 8 << segment
    error = ALL_PCM.astype(np.int64) - mulaw_decode(codes)
    inside = np.abs(ALL_PCM.astype(np.int64)) <= 32635  # 4 * 8159 + 3: the coded range
    assert np.all(np.abs(error[inside]) <= step[inside] // 2)
    assert set(mulaw_decode(codes[~inside]).tolist()) == {32124, -32124}
    # Reconstruction values rise by a step inside segment s (8 << s), and by half of each step across a segment end.
    positive = mulaw_decode(np.arange(0xFF, 0x7F, -1).astype(np.uint8)).astype(np.int64).reshape(8, 16)
    steps = 8 << np.arange(8)
    np.testing.assert_array_equal(np.diff(positive, axis=1), np.repeat(steps[:, None], 15, axis=1))
    np.testing.assert_array_equal(positive[1:, 0] - positive[:-1, -1], steps[:-1] // 2 + steps[1:] // 2)


def test_mulaw_segment_ends_lie_on_the_mu_law_curve():
    """G.711 approximates F(x) = ln(1 + 255|x|) / ln(256) by 8 chords: where segment s begins, F = s / 8."""
    seg_start = np.array([mulaw_decode(np.array([0x7F ^ (s << 4) | 0x80], np.uint8))[0] - (4 << s)
                          for s in range(8)], np.float64)  # the lowest sample of each segment's first step
    full_scale = mulaw_decode(np.array([0x80], np.uint8))[0] + 512  # top of the last step: 32636
    expected = full_scale * (256.0 ** (np.arange(8) / 8) - 1) / 255  # F^-1(s / 8)
    np.testing.assert_allclose(seg_start, expected, atol=4)  # the bias 33 (not 8159 / 255 = 32) puts them <= 4 lower


def test_mulaw_codec_refuses_other_dtypes():
    with pytest.raises(ValueError, match="`pcm` must be int16.*float32"):
        mulaw_encode(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="`codes` must be uint8.*int16"):
        mulaw_decode(np.zeros(3, np.int16))


# ---------------------------------------------------------------------------------------------------------
# The channel


def _gain_db(x, y):
    """Output over input power, dB, on the middle half (away from the filters' ends)."""
    mid = slice(len(x) // 4, 3 * len(x) // 4)
    return 10 * np.log10(max(np.mean(np.square(y[mid], dtype=np.float64)), 1e-30)
                         / np.mean(np.square(x[mid], dtype=np.float64)))


def _sine(hz, seconds=1.0, amp=0.3, rate=SR):
    return (amp * np.sin(2 * np.pi * hz * np.arange(int(seconds * rate)) / rate)).astype(np.float32)


@pytest.mark.parametrize("hz", [500, 1000, 2000, 3000])
def test_passband_sines_keep_their_level_and_shape(hz):
    x = _sine(hz)
    y = telephone(x, SR)
    assert abs(_gain_db(x, y)) < 0.5
    # What is left besides the sine is μ-law's quantization noise, ~38 dB down for a loud signal (G.711).
    mid = slice(SR // 4, 3 * SR // 4)
    residual = y[mid] - x[mid]
    assert 10 * np.log10(np.mean(residual ** 2) / np.mean(x[mid] ** 2)) < -30


@pytest.mark.parametrize("hz, most_db", [(50, -45), (100, -45), (150, -45), (200, -25), (3600, -30), (4000, -30),
                                         (4500, -40), (5000, -40), (6000, -40), (7500, -40)])
def test_sines_outside_the_band_are_strongly_attenuated(hz, most_db):
    x = _sine(hz)
    assert _gain_db(x, telephone(x, SR)) < most_db  # all the output's power, aliases included


def test_noise_spectrum_is_the_telephone_band():
    x = (0.1 * np.random.default_rng(0).standard_normal(4 * SR)).astype(np.float32)
    y = telephone(x, SR)
    seg = 1024
    window = np.hanning(seg)

    def power(v):  # mean periodogram over 1024-sample frames
        frames = v[:len(v) // seg * seg].reshape(-1, seg) * window
        return np.mean(np.abs(np.fft.rfft(frames)) ** 2, axis=0)

    hz = np.fft.rfftfreq(seg, 1 / SR)
    px, py = power(x), power(y)

    def band_db(lo, hi):
        m = (hz >= lo) & (hz < hi)
        return 10 * np.log10(py[m].mean() / px[m].mean())

    assert abs(band_db(500, 3000)) < 0.3
    assert band_db(0, 200) < -30  # what is left is μ-law's noise floor, which the line adds after its filter
    assert band_db(3600, 4000) < -30
    assert band_db(4000, 8000) < -45


@pytest.mark.parametrize("rate, n", [(16000, 16000), (16000, 12345), (16000, 7), (22050, 22051), (8000, 999),
                                     (44100, 1)])
def test_length_rate_dtype_and_determinism(rate, n):
    x = (0.2 * np.random.default_rng(n).standard_normal(n)).astype(np.float32)
    y = telephone(x, rate)
    assert y.shape == (n,) and y.dtype == np.float32 and np.isfinite(y).all()
    np.testing.assert_array_equal(telephone(x, rate), y)
    assert telephone(np.zeros(0, np.float32), rate).shape == (0,)


def test_alignment_is_kept():
    """Zero phase: a tone burst comes out where it went in."""
    x = np.zeros(SR, np.float32)
    x[6000:7000] = _sine(1000, seconds=1000 / SR)
    y = telephone(x, SR)
    lags = np.arange(-50, 51)
    corr = [np.dot(x, np.roll(y, -lag)) for lag in lags]
    assert lags[int(np.argmax(corr))] == 0


def test_at_8_khz_the_output_is_on_the_mu_law_grid():
    y = telephone(_sine(1000, rate=8000), 8000)
    pcm = np.round(y * 32768).astype(np.int64)
    np.testing.assert_array_equal(pcm, y * 32768)  # exact 16-bit values
    assert set(np.unique(pcm)) <= set(mulaw_decode(ALL_CODES).astype(np.int64).tolist())


def test_loud_input_clips_as_on_a_line():
    y = telephone(_sine(1000, amp=4.0, rate=8000), 8000)  # at the line's rate: no resampler's ringing after it
    assert np.abs(y).max() == 32124 / 32768  # μ-law's largest value
    assert np.mean(np.abs(y) == 32124 / 32768) > 0.5  # a square wave, mostly


@pytest.mark.parametrize("wav, rate, words", [
    (np.zeros((2, 100), np.float32), SR, ["`wav`", "(2, 100)"]),
    (np.zeros(100, np.float32), 6000, ["`sample_rate`", "6000"]),
    (np.zeros(100, np.float32), 16000.0, ["`sample_rate`", "16000.0"]),
])
def test_bad_input_is_refused_by_name(wav, rate, words):
    with pytest.raises(ValueError) as e:
        telephone(wav, rate)
    for word in words:
        assert word in str(e.value)


def test_copies_are_the_channel_at_the_model_rate(tmp_path):
    _, utts = make_manifest(tmp_path, n=2)
    # A 44.1 kHz file and a segment of it: read at 16 kHz and cut, then sent over the line.
    wide = load_audio(utts[0].audio_filepath, sample_rate=44100)
    sf.write(tmp_path / "wide.wav", wide, 44100)
    segment = Utterance(str(tmp_path / "wide.wav"), 0.5, "a segment", offset=0.25)
    missing = Utterance(str(tmp_path / "nope.wav"), 1.0, "missing")
    heard = telephone_copies([utts[1], segment, missing], tmp_path / "g711", SR)
    assert heard[2] == missing  # left for the reader to report
    for u, copy in zip([utts[1], segment], heard):
        assert copy.offset is None and copy.text == u.text and copy.speaker == u.speaker
        expected = telephone(load_audio(u.audio_filepath, u.offset, u.duration), SR)
        got, rate = sf.read(copy.audio_filepath, dtype="float32")
        assert rate == SR and got.shape == expected.shape and copy.duration == pytest.approx(len(got) / SR)
        np.testing.assert_allclose(got, expected, atol=1.5 / 32768)  # 16-bit WAV
