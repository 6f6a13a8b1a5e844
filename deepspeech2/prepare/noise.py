"""Synthetic noise and room impulse responses, so the tiny corpus can be augmented without downloads.

`prepare_noise` writes coloured noise, babble (from a speech manifest) and synthetic RIRs as 16-bit WAVs
with the two manifests that `noise` and `impulse` augmentation entries read (deepspeech2/data/augment/waveform.py).
`noisy_copy` mixes a manifest with that noise at a fixed SNR range: a noisy dev or test set.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from deepspeech2.audio import SAMPLE_RATE, audio_info, load_audio, save_wav
from deepspeech2.data.manifest import Utterance, read_manifest, write_manifest
from deepspeech2.progress import progress_bar

# Power spectral density ∝ 1 / f^alpha.
NOISE_EXPONENTS = {"white": 0.0, "pink": 1.0, "brown": 2.0, "blue": -1.0}
PEAK = 0.9  # peak amplitude of generated clips: 16-bit headroom
RIR_TAIL_DB = 80.0  # an RIR stops where its envelope is 80 dB down, so its Schroeder curve is right to -60 dB
DECAY_DB = 60.0  # RT60: the time for the energy to fall by 60 dB (Sabine)
EARLY_MS = (2.0, 40.0)  # early reflections arrive within ~40 ms of the direct sound in ordinary rooms
NOISY_SNR_DB = (0.0, 10.0)  # the noisy dev set's SNRs (bench/ablations.py): noisier than the tiny recipe's
# training noise (15-35 dB), where noise augmentation (DS2 §5.2) should show


def synth_rir(
    rt60: float,
    sample_rate: int = SAMPLE_RATE,
    *,
    drr_db: float = 0.0,
    n_early: int = 6,
    predelay_ms: float = 0.0,
    seed: int = 0,
) -> np.ndarray:
    """A synthetic room impulse response: direct path, early reflections, exponentially decaying noise.

    The diffuse tail is Gaussian noise under the envelope `10^(-3 t / rt60)`, so its energy falls 60 dB
    in `rt60` seconds. `n_early` sparse reflections of random sign land 2-40 ms after the direct path,
    each a few times the tail's level there. The reverberant part (tail + reflections) is scaled to the
    direct-to-reverberant ratio `drr_db`.

    Args:
        rt60: reverberation time, seconds (> 0).
        sample_rate: Hz.
        drr_db: direct-to-reverberant energy ratio, dB.
        n_early: number of early reflections.
        predelay_ms: silence before the direct path, ms.
        seed: the same seed gives the same response.

    Returns:
        float32 (predelay + rt60 * 80/60 seconds of samples,), peak |h| = 1 at the direct path.
    """
    if not rt60 > 0:
        raise ValueError(f"`rt60` must be > 0 seconds, got {rt60!r}")
    if predelay_ms < 0 or n_early < 0:
        raise ValueError(f"`predelay_ms` and `n_early` must be >= 0, got {predelay_ms!r}, {n_early!r}")
    rng = np.random.default_rng(seed)
    start = int(round(predelay_ms * sample_rate / 1000))
    n_tail = int(math.ceil(rt60 * RIR_TAIL_DB / DECAY_DB * sample_rate))
    t = np.arange(1, n_tail + 1) / sample_rate  # seconds after the direct path
    envelope = 10.0 ** (-(DECAY_DB / 20.0) * t / rt60)  # amplitude: energy is down 60 dB at t = rt60
    reverb = rng.standard_normal(n_tail) * envelope
    delays = rng.uniform(*EARLY_MS, size=n_early) / 1000.0
    for d in delays:
        k = min(int(d * sample_rate), n_tail - 1)
        reverb[k] += rng.choice([-1.0, 1.0]) * rng.uniform(1.0, 3.0) * envelope[k]
    reverb *= math.sqrt(10.0 ** (-drr_db / 10.0) / np.sum(reverb**2))  # direct energy is 1
    h = np.zeros(start + 1 + n_tail, np.float64)
    h[start] = 1.0
    h[start + 1:] = reverb
    return (h / np.max(np.abs(h))).astype(np.float32)


def coloured_noise(kind: str, seconds: float, seed: int = 0, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Gaussian noise with PSD ∝ 1/f^alpha: white 0, pink 1, brown 2, blue -1 (shaped in the FFT domain).

    Returns:
        float32 (round(seconds * sample_rate),), zero mean, peak `PEAK`.
    """
    if kind not in NOISE_EXPONENTS:
        raise ValueError(f"`kind` must be one of {sorted(NOISE_EXPONENTS)}, got {kind!r}")
    n = int(round(seconds * sample_rate))
    if n <= 0:
        raise ValueError(f"`seconds` must be > 0, got {seconds!r}")
    rng = np.random.default_rng(seed)
    spectrum = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1.0 / sample_rate)
    shape = np.zeros_like(f)
    shape[1:] = f[1:] ** (-NOISE_EXPONENTS[kind] / 2.0)  # amplitude ∝ f^(-alpha/2); no DC
    x = np.fft.irfft(spectrum * shape, n)
    return _peak_normalize(x)


def babble(
    utterances: Sequence[Utterance | str | os.PathLike],
    n_speakers: int,
    seconds: float,
    seed: int = 0,
    sample_rate: int = SAMPLE_RATE,
) -> np.ndarray:
    """Babble: `n_speakers` streams of back-to-back utterances, each at the same RMS, summed.

    Each stream draws its utterances from one speaker when the utterances carry speakers and there are
    enough of them (different voices sound like a crowd), else from all utterances. Unreadable files are
    skipped.

    Returns:
        float32 (round(seconds * sample_rate),), peak `PEAK`.
    """
    if n_speakers < 1:
        raise ValueError(f"`n_speakers` must be >= 1, got {n_speakers!r}")
    n = int(round(seconds * sample_rate))
    if n <= 0:
        raise ValueError(f"`seconds` must be > 0, got {seconds!r}")
    utts = [u if isinstance(u, Utterance) else Utterance(str(u), 0.0, "") for u in utterances]
    if not utts:
        raise ValueError("`utterances` is empty; babble needs speech to mix")
    rng = np.random.default_rng(seed)
    by_speaker: dict[str, list[Utterance]] = {}
    for u in utts:
        by_speaker.setdefault(u.speaker, []).append(u)
    speakers = sorted(s for s in by_speaker if s is not None)
    pools = ([by_speaker[s] for s in rng.choice(speakers, n_speakers, replace=False)]
             if len(speakers) >= n_speakers else [utts] * n_speakers)
    cache: dict[tuple, np.ndarray | None] = {}

    def load(u: Utterance) -> np.ndarray | None:
        key = (u.audio_filepath, u.offset, u.duration)
        if key not in cache:
            try:
                cache[key] = load_audio(u.audio_filepath, u.offset, u.duration or None, sample_rate)
            except (ValueError, FileNotFoundError):
                cache[key] = None
        return cache[key]

    mix = np.zeros(n, np.float64)
    for pool in pools:
        # Start up to 2 s "before" the clip, so the streams' utterance boundaries don't line up.
        stream, filled, failures = np.zeros(n), -int(rng.uniform(0, 2.0) * sample_rate), 0
        while filled < n:
            wav = load(pool[rng.integers(len(pool))])
            if wav is None or wav.size == 0:
                failures += 1
                if failures > 10 * len(pool):
                    raise ValueError("babble: none of the utterances could be read")
                continue
            lo, hi = max(filled, 0), min(filled + wav.size, n)
            if hi > lo:
                stream[lo:hi] += wav[lo - filled:hi - filled]
            filled += wav.size + int(rng.uniform(0.05, 0.3) * sample_rate)  # a short pause between turns
        rms = math.sqrt(np.mean(stream**2))
        if rms > 0:
            mix += stream / rms
    return _peak_normalize(mix)


def prepare_noise(
    output_dir: str | os.PathLike,
    speech_manifest: str | os.PathLike | None = None,
    *,
    n_rirs: int = 20,
    rt60_range: tuple[float, float] = (0.2, 0.9),
    drr_range: tuple[float, float] = (0.0, 6.0),
    n_noise: int = 8,
    n_babble: int = 4,
    babble_speakers: tuple[int, int] = (3, 6),
    noise_seconds: float = 10.0,
    seed: int = 0,
    sample_rate: int = SAMPLE_RATE,
) -> tuple[Path, Path]:
    """Write synthetic noise and RIRs with their manifests under `output_dir`.

    Layout: `noise/{white,pink,brown,blue,babble}_NNN_<hash>.wav`, `rir/rir_NNN_<hash>.wav`,
    `noise.jsonl` (text "", `kind` per line) and `rir.jsonl` (text "", `rt60` and `drr_db` per line).
    Each clip depends only on its own index and the arguments, and its name carries a hash of them, so a
    rerun skips the clips already written (resumable) and changed arguments never reuse stale files.

    Args:
        output_dir: where to write.
        speech_manifest: utterances to make babble from; None writes no babble.
        n_rirs: number of impulse responses.
        rt60_range: RT60 drawn uniformly from this range, seconds.
        drr_range: direct-to-reverberant ratio drawn uniformly from this range, dB.
        n_noise: number of coloured-noise clips (kinds in turn: white, pink, brown, blue).
        n_babble: number of babble clips (with `speech_manifest`).
        babble_speakers: talkers per babble clip, drawn uniformly from this inclusive range.
        noise_seconds: length of each noise and babble clip.
        seed: base seed.
        sample_rate: Hz.

    Returns:
        `(noise_manifest_path, rir_manifest_path)`.
    """
    _check_arguments(rt60_range, drr_range, babble_speakers, n_rirs, n_noise, n_babble, noise_seconds)
    out = Path(output_dir)
    speech, speech_digest = _babble_speech(speech_manifest) if n_babble > 0 else ([], "")
    kinds = list(NOISE_EXPONENTS)

    # One job per clip: (manifest, kind, index, generating arguments, extra manifest fields, make()).
    jobs = []
    for i in range(n_noise):
        kind = kinds[i % len(kinds)]
        args = dict(kind=kind, i=i, seed=seed, seconds=noise_seconds, sr=sample_rate)
        jobs.append(("noise", kind, i, args, {}, lambda kind=kind, i=i: coloured_noise(
            kind, noise_seconds, seed=_seed(seed, 1, i), sample_rate=sample_rate)))
    for i in range(n_babble if speech else 0):
        rng = np.random.default_rng(_seed(seed, 2, i))
        talkers = int(rng.integers(babble_speakers[0], babble_speakers[1] + 1))
        args = dict(kind="babble", i=i, seed=seed, seconds=noise_seconds, sr=sample_rate, talkers=talkers,
                    speech=speech_digest)
        jobs.append(("noise", "babble", i, args, {"speakers": talkers}, lambda i=i, talkers=talkers: babble(
            speech, talkers, noise_seconds, seed=_seed(seed, 3, i), sample_rate=sample_rate)))
    for i in range(n_rirs):
        rng = np.random.default_rng(_seed(seed, 4, i))
        rt60 = round(float(rng.uniform(*rt60_range)), 3)
        drr = round(float(rng.uniform(*drr_range)), 2)
        args = dict(kind="rir", i=i, seed=seed, rt60=rt60, drr=drr, sr=sample_rate)
        jobs.append(("rir", "rir", i, args, {"rt60": rt60, "drr_db": drr}, lambda i=i, rt60=rt60, drr=drr:
                     synth_rir(rt60, sample_rate, drr_db=drr, seed=_seed(seed, 5, i))))

    entries = _write_clips(jobs, out, sample_rate)
    noise_path, rir_path = out / "noise.jsonl", out / "rir.jsonl"
    write_manifest(noise_path, entries["noise"])
    write_manifest(rir_path, entries["rir"])
    return noise_path, rir_path


def _check_arguments(rt60_range, drr_range, babble_speakers, n_rirs, n_noise, n_babble, noise_seconds) -> None:
    if not 0 < rt60_range[0] <= rt60_range[1]:
        raise ValueError(f"`rt60_range` must be 0 < low <= high seconds, got {rt60_range!r}")
    if not drr_range[0] <= drr_range[1]:
        raise ValueError(f"`drr_range` must be low <= high dB, got {drr_range!r}")
    if not 1 <= babble_speakers[0] <= babble_speakers[1]:
        raise ValueError(f"`babble_speakers` must be 1 <= low <= high, got {babble_speakers!r}")
    if min(n_rirs, n_noise, n_babble) < 0 or not noise_seconds > 0:
        raise ValueError("`n_rirs`, `n_noise`, `n_babble` must be >= 0 and `noise_seconds` > 0, got "
                         f"{n_rirs!r}, {n_noise!r}, {n_babble!r}, {noise_seconds!r}")


def _babble_speech(speech_manifest: str | os.PathLike | None) -> tuple[list[Utterance], str]:
    """The utterances to make babble from, and the manifest's hash (a babble clip's name carries it, so another
    manifest never reuses its clips); none without a manifest."""
    if speech_manifest is None:
        return [], ""
    speech = [u for u in read_manifest(speech_manifest) if u.duration > 0]
    if not speech:
        raise ValueError(f"speech manifest `{speech_manifest}` has no utterances to make babble from")
    speech_digest = hashlib.sha1(Path(speech_manifest).read_bytes()).hexdigest()
    return speech, speech_digest


def _write_clips(jobs: list, out: Path, sample_rate: int) -> dict[str, list[Utterance]]:
    """Write each job's clip unless a file of its name exists; the manifests' lines, by manifest."""
    entries: dict[str, list[Utterance]] = {"noise": [], "rir": []}
    for manifest, kind, i, args, extra, make in progress_bar(jobs, desc="noise and RIRs", unit="clip"):
        digest = hashlib.sha1(json.dumps(args, sort_keys=True).encode()).hexdigest()[:8]
        path = out / manifest / f"{kind}_{i:03d}_{digest}.wav"
        if path.exists():  # save_wav is atomic: an existing file is complete
            frames = audio_info(path)[2]
        else:
            wav = make()
            save_wav(path, wav, sample_rate)
            frames = wav.size
        entries[manifest].append(Utterance(str(path.resolve()), frames / sample_rate, "",
                                           extra={"kind": kind, **extra}))
    return entries


def noisy_copy(
    manifest: str | os.PathLike,
    noise_manifest: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    snr_db: tuple[float, float] = NOISY_SNR_DB,
    seed: int = 0,
    sample_rate: int = SAMPLE_RATE,
) -> Path:
    """A noisy copy of `manifest`: each utterance plus a random stretch of a random clip of `noise_manifest`
    (the bank `prepare_noise` writes) at an SNR drawn uniformly from `snr_db`.

    The mixing is the `noise` augmentation's own (`NoisePerturb`: power measured over the utterance and
    the noise stretch, a clip shorter than the utterance looped), so test noise is mixed as training noise
    is. A mix that would clip is scaled down as a whole, which leaves the SNR as drawn. Each utterance's
    draws depend only on `seed` and its line number, so a rerun writes the same files.

    Writes `output_dir/wav/NNNNN.wav` and `output_dir/<manifest's name>`, whose lines keep their text,
    speaker and other keys and add `snr_db`.

    Returns:
        The path of the noisy manifest.
    """
    import tensorflow as tf

    from deepspeech2.data.augment.waveform import NoisePerturb
    from deepspeech2.data.manifest import load_utterance

    low, high = snr_db
    if not low <= high:
        raise ValueError(f"`snr_db` must be (low, high) with low <= high, got {snr_db!r}")
    mixer = NoisePerturb(str(noise_manifest), low, high, sample_rate=sample_rate)
    out = Path(output_dir)
    noisy = []
    for i, u in enumerate(progress_bar(read_manifest(manifest), desc="noisy copy", unit="utt")):
        wav = load_utterance(u, sample_rate)
        draws = np.random.default_rng(_seed(seed, 6, i)).random(NoisePerturb.num_draws).astype(np.float32)
        mixed, _ = mixer.apply(tf.constant(wav), tf.constant(wav.size), tf.constant(draws))
        mixed = mixed.numpy()
        peak = float(np.max(np.abs(mixed))) if mixed.size else 0.0
        if peak > PEAK:
            mixed *= PEAK / peak
        path = out / "wav" / f"{i:05d}.wav"
        save_wav(path, mixed, sample_rate)
        extra = {**u.extra, "snr_db": round(float(low + draws[2] * (high - low)), 3)}  # NoisePerturb's SNR
        noisy.append(Utterance(str(path.resolve()), mixed.size / sample_rate, u.text, speaker=u.speaker,
                               language=u.language, extra=extra))
    path = out / Path(manifest).name
    write_manifest(path, noisy)
    return path


def _seed(*parts: int) -> int:
    """A seed for one clip, independent of how many clips of other kinds there are."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])


def _peak_normalize(x: np.ndarray) -> np.ndarray:
    peak = np.max(np.abs(x)) if x.size else 0.0
    return (x * (PEAK / peak) if peak > 0 else x).astype(np.float32)
