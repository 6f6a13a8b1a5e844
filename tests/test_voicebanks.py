"""The voice banks (synthetic/voicebanks.py): each English voice speaks one sentence offline at 16-24 kHz,
at a plausible length and level; rate, pitch and the vocal-tract factor do what they say, measured on the output;
RHVoice through its library speaks exactly as RHVoice-test, a process per utterance, did."""

import concurrent.futures
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from deepspeech2.audio import audio_info, load_audio, shifted_rate
from deepspeech2_synthetic import voicebanks

SENTENCE = "the quick brown fox jumps over the lazy dog"
RHVOICE_VOICES = [v for e, v, _ in voicebanks.VOICES if e == "rhvoice"]
pytestmark = pytest.mark.skipif(bool(voicebanks.missing()), reason=f"needs {voicebanks.missing()}: "
                                f"{voicebanks.APT_HINT}")


def f0_median(wav: np.ndarray, sr: int) -> float:
    """Median F0 of the loud frames, by autocorrelation (60-400 Hz)."""
    frame, hop, out = int(0.04 * sr), int(0.01 * sr), []
    for i in range(0, len(wav) - frame, hop):
        w = wav[i:i + frame] - wav[i:i + frame].mean()
        if np.sqrt(np.mean(w ** 2)) < 0.2 * np.abs(wav).max() / 3:
            continue
        ac = np.correlate(w, w, "full")[frame - 1:]
        lo, hi = int(sr / 400), int(sr / 60)
        lag = lo + int(np.argmax(ac[lo:hi]))
        if ac[lag] > 0.5 * ac[0]:
            out.append(sr / lag)
    return float(np.median(out))


def test_every_voice_speaks_offline_at_a_usable_level(tmp_path):
    """All eleven voices, in a child process with no network at all (a new network namespace)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux's unshare for a network-free namespace")
    script = ("import json, sys, numpy as np\n"
              "from deepspeech2_synthetic import voicebanks as vb\n"
              "out = {}\n"
              "for engine, voice, _ in vb.VOICES:\n"
              f"    wav, sr = vb.synthesize(engine, voice, {SENTENCE!r})\n"
              "    out[f'{engine}/{voice}'] = [sr, len(wav), float(np.abs(wav).max()), str(wav.dtype)]\n"
              "print(json.dumps(out))\n")
    proc = subprocess.run(["unshare", "--map-root-user", "--net", sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and "unshare" in proc.stderr:
        pytest.skip(f"this system allows no new network namespace: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert sorted(results) == sorted(f"{e}/{v}" for e, v, _ in voicebanks.VOICES)
    assert "rhvoice/slt" not in results  # a test voice's person (flite's slt) by another engine: never trained on
    for name, (sr, n, peak, dtype) in results.items():
        assert dtype == "float32" and sr in (16000, 24000), name
        assert 1.5 < n / sr < 5.5, (name, n / sr)  # 9 words at 2-6 words a second
        assert 0.05 < peak <= 1.0, (name, peak)


@pytest.mark.parametrize("engine,voice", [("mbrola", "us2"), ("rhvoice", "bdl"), ("pico", "en-US")])
def test_rate_pitch_and_vocal_tract_do_what_they_say(engine, voice):
    wav, sr = voicebanks.synthesize(engine, voice, SENTENCE)
    base_seconds, base_f0 = len(wav) / sr, f0_median(wav, sr)
    slow, sr_slow = voicebanks.synthesize(engine, voice, SENTENCE, rate=0.8)
    assert sr_slow == sr and 1.1 < len(slow) / len(wav) < 1.4
    high, _ = voicebanks.synthesize(engine, voice, SENTENCE, pitch=1.3)
    assert 1.15 < f0_median(high, sr) / base_f0 < 1.45
    # Vocal tract k = 1.15: read k times faster, so the rate and F0 must come out as asked (1x), not k times up.
    tract, sr_tract = voicebanks.synthesize(engine, voice, SENTENCE, formant=1.15)
    assert sr_tract == round(sr * 1.15 / 400) * 400
    assert 0.9 < (len(tract) / sr_tract) / base_seconds < 1.1
    assert 0.85 < f0_median(tract, sr_tract) / base_f0 < 1.15
    again, _ = voicebanks.synthesize(engine, voice, SENTENCE)
    np.testing.assert_array_equal(wav, again)  # deterministic: the corpus is byte-identical for a seed


def test_bad_requests_are_clear_errors():
    with pytest.raises(ValueError, match="unknown voice bank 'rhvoice' 'slt'"):
        voicebanks.synthesize("rhvoice", "slt", SENTENCE)
    with pytest.raises(ValueError, match="`formant` must be a factor"):
        voicebanks.synthesize("pico", "en-US", SENTENCE, formant=0)
    with pytest.raises(RuntimeError, match=r"RHVoice \(bdl\) refused the text ''"):
        voicebanks.synthesize("rhvoice", "bdl", "")
    assert voicebanks.version("mbrola").startswith("mbrola 3.")


def rhvoice_test(tmp_path, voice: str, text: str, rate: float, pitch: float, formant: float):
    """The reference: RHVoice-test, a process per utterance (voicebanks' RHVoice path until the library), asked
    for the rate and pitch before the vocal-tract factor's resampling, its WAV read as float32."""
    wav = tmp_path / "reference.wav"
    cmd = ["RHVoice-test", "-p", voice, "-r", str(voicebanks.rhvoice_percent(rate / formant)),
           "-t", str(voicebanks.rhvoice_percent(pitch / formant)), "-o", str(wav)]
    subprocess.run(cmd, input=text.encode("utf-8"), capture_output=True, timeout=60, check=True)
    return load_audio(wav, sample_rate=None), shifted_rate(audio_info(wav)[0], formant)


@pytest.mark.skipif(shutil.which("RHVoice-test") is None, reason="needs RHVoice-test (Debian `rhvoice`), the "
                    f"reference: {voicebanks.APT_HINT}")
def test_rhvoice_library_speaks_sample_for_sample_as_rhvoice_test(tmp_path):
    """Every RHVoice voice, as shipped and as a speaker (rate, pitch, vocal tract; one past RHVoice's clamp)."""
    texts = [SENTENCE, "it's a long way to the top if you wanna rock and roll"]
    speakers = [(0.8, 1.3, 1.0), (1.25, 0.6, 1.1), (1.1, 1.6, 0.92), (0.3, 3.0, 1.0), (0.95, 0.9, 1.2)]
    for i, voice in enumerate(RHVOICE_VOICES):
        for text, (rate, pitch, formant) in [(texts[0], (1.0, 1.0, 1.0)), (texts[1], speakers[i])]:
            wav, sr = voicebanks.synthesize("rhvoice", voice, text, rate, pitch, formant)
            expected, expected_sr = rhvoice_test(tmp_path, voice, text, rate, pitch, formant)
            assert sr == expected_sr and wav.dtype == expected.dtype == np.float32, (voice, rate, pitch, formant)
            np.testing.assert_array_equal(wav, expected, err_msg=f"{voice} {rate} {pitch} {formant}")


def test_rhvoice_worker_threads_share_its_engine():
    """The corpus's two worker threads ask RHVoice's one engine at once, for two voices or one voice twice: each
    utterance comes out as it does alone (the library is not safe from two threads: the calls take turns)."""
    voices = RHVOICE_VOICES[:2] + [v for v in RHVOICE_VOICES[2:4] for _ in range(2)]
    jobs = [(voice, f"{SENTENCE} number {n}", 0.8 + 0.1 * n, 1.2 - 0.1 * n) for n, voice in enumerate(voices)]
    alone = [voicebanks.synthesize("rhvoice", *job) for job in jobs]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        together = list(pool.map(lambda job: voicebanks.synthesize("rhvoice", *job), jobs))
    for job, (wav, sr), (again, sr_again) in zip(jobs, alone, together):
        assert sr == sr_again, job
        np.testing.assert_array_equal(wav, again, err_msg=str(job))
