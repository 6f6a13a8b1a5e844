"""Audio I/O outside the graph: decode any file soundfile reads, resample, write 16-bit WAV.

Inside tf.data and exported graphs we use `tf.audio.decode_wav` or int16 PCM from shards instead
(tensorflow-io is deliberately not a dependency: its kernels fail to load with TF > 2.16).
"""

from __future__ import annotations

import io
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import scipy.signal
import soundfile as sf

from deepspeech2.fileio import atomic_path

SAMPLE_RATE = 16000  # Hz; every model input is 16 kHz mono (DS2 §7, and all the corpora we import)
# Seconds a manifest's `duration` may differ from the audio it describes, in every tool (validate, make-shards,
# compute-stats, load_audio). Audio decoded from MP3 without its gapless (LAME) header is longer than the
# original by the codec's delay and frame padding: 1105 + up to 1151 samples at 44.1 kHz (51 ms), + up to 575
# at 22.05 kHz (76 ms); 0.1 s lets such files through and still catches a wrong file or a cut recording.
DURATION_TOLERANCE = 0.1
# Longest utterance training keeps, seconds (`PipelineConfig.max_duration`; PaddlePaddle DS2's default): memory
# grows with the longest utterance of a batch. make-shards and compute-stats skip longer ones by their header,
# before decoding any of it, so a 2-hour recording in a training manifest costs nothing.
MAX_DURATION = 27.0


def audio_info(path: str | os.PathLike) -> tuple[int, int, int]:
    """Return `(sample_rate, channels, frames)` of an audio file without decoding it all.

    Raises:
        ValueError: if the file is not audio soundfile can read.
        FileNotFoundError: if it doesn't exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"audio file `{path}` does not exist")
    try:
        info = sf.info(str(path))
    except Exception as e:  # soundfile raises LibsndfileError / RuntimeError for corrupt files
        raise ValueError(f"audio file `{path}` could not be read: {e}") from None
    return info.samplerate, info.channels, info.frames


def load_audio(
    path: str | os.PathLike,
    offset: float | None = 0.0,
    duration: float | None = None,
    sample_rate: int | None = SAMPLE_RATE,
) -> np.ndarray:
    """Decode an audio file (WAV/FLAC/OGG/MP3/NIST SPHERE) to mono float32 in [-1, 1].

    Args:
        path: the audio file.
        offset: start of the segment, seconds (None: 0).
        duration: length of the segment, seconds; None reads to the end. A segment may run past the end of
            the file by up to `DURATION_TOLERANCE` (it is cut there).
        sample_rate: resample to this rate; None keeps the file's rate.

    Returns:
        float32 array of shape (samples,).

    Raises:
        ValueError: unreadable audio, or a segment outside the file.
    """
    sr, _, frames = audio_info(path)
    start = int(round((offset or 0.0) * sr))
    stop = frames if duration is None else start + int(round(duration * sr))
    if start < 0 or start > frames or stop > frames + int(DURATION_TOLERANCE * sr):
        raise ValueError(
            f"segment offset={offset}s duration={duration}s is outside `{path}` "
            f"({frames / sr:.3f}s long); fix the manifest's offset/duration"
        )
    return read_frames(path, start, min(stop, frames), sample_rate)


def decode_audio_bytes(data: bytes, what: str = "audio") -> tuple[np.ndarray, int]:
    """A whole audio file held in memory, downmixed to mono: `(float32 samples, sample rate)`. Any format
    libsndfile reads, including a WAV stream whose header sizes are placeholders (espeak-ng --stdout).

    Raises:
        ValueError: the bytes can't be decoded (the message names `what`).
    """
    try:
        wav, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except Exception as e:
        raise ValueError(f"{what} ({len(data)} bytes) could not be decoded: {e}") from None
    return _mono(wav), sr


def _mono(frames: np.ndarray) -> np.ndarray:
    """`(samples, channels)` float32 as `(samples,)`: the channels' mean."""
    return frames.mean(axis=1) if frames.shape[1] > 1 else frames[:, 0]


def read_frames(path: str | os.PathLike, start: int, stop: int, sample_rate: int | None = SAMPLE_RATE) -> np.ndarray:
    """Decode frames `[start, stop)` of an audio file (at its own rate), downmixed to mono and resampled.

    Args:
        path: the audio file.
        start, stop: frame indices into the file, 0 <= start <= stop <= its frames.
        sample_rate: resample to this rate; None keeps the file's rate.

    Returns:
        float32 (samples,), in [-1, 1].

    Raises:
        ValueError: the file can't be decoded.
    """
    try:
        data, sr = sf.read(str(path), start=start, stop=stop, dtype="float32", always_2d=True)
    except Exception as e:
        raise ValueError(f"audio file `{path}` could not be decoded: {e}") from None
    wav = _mono(data)
    if sample_rate is not None and sr != sample_rate:
        wav = resample(wav, sr, sample_rate)
    return np.ascontiguousarray(wav, dtype=np.float32)


def resample(wav: np.ndarray, orig_sr: int, target_sr: int) -> np.ndarray:
    """Band-limited polyphase resampling (scipy's Kaiser-windowed FIR).

    Args:
        wav: (samples,) float array.
    Returns:
        (ceil(samples * target_sr / orig_sr),) float32 array.
    """
    if orig_sr == target_sr:
        return wav.astype(np.float32)
    ratio = Fraction(target_sr, orig_sr)
    return scipy.signal.resample_poly(wav, ratio.numerator, ratio.denominator).astype(np.float32)


SHIFT_STEP_HZ = 400  # `shifted_rate` rounds to this, so resampling from it uses small polyphase factors


def shifted_rate(sample_rate: int, factor: float, step: int = SHIFT_STEP_HZ) -> int:
    """The rate to read audio sampled at `sample_rate` so that it plays `factor` times faster (pitch, formants and
    tempo all up by `factor`), rounded to `step` Hz. The synthesizers' vocal-tract trick: speak `factor` times slower
    and lower, then read the samples at this rate."""
    return round(sample_rate * factor / step) * step


PCM_SCALE = 32768.0  # float samples = int16 / 2^15, as soundfile and tf.audio.decode_wav read 16-bit audio


def to_pcm16(wav) -> np.ndarray:
    """Float samples as int16: times 2^15, rounded, clipped to [-32768, 32767]. `from_pcm16` undoes it exactly for
    samples that came from int16, so audio read from a 16-bit file and written back is unchanged."""
    return np.clip(np.round(np.asarray(wav, np.float32) * PCM_SCALE), -PCM_SCALE, PCM_SCALE - 1).astype(np.int16)


def from_pcm16(pcm) -> np.ndarray:
    """int16 samples (an array, or little-endian bytes) as float32 in [-1, 1)."""
    if isinstance(pcm, (bytes, bytearray, memoryview)):
        pcm = np.frombuffer(pcm, "<i2")
    return np.asarray(pcm).astype(np.float32) / PCM_SCALE


def save_wav(path: str | os.PathLike, wav: np.ndarray, sample_rate: int = SAMPLE_RATE) -> None:
    """Write mono 16-bit PCM WAV atomically. Float input goes through `to_pcm16` (clipped to int16's range)."""
    wav = np.asarray(wav)
    if wav.dtype != np.int16:
        wav = to_pcm16(wav)
    with atomic_path(path) as tmp:
        sf.write(str(tmp), wav, sample_rate, subtype="PCM_16", format="WAV")


# G.711 μ-law (ITU-T G.711, table 2a; bit for bit as ITU-T G.191's reference code `ulaw_compress`/`ulaw_expand`):
# 8-bit codes of 14-bit linear samples, a sign and 8 segments of 16 equal steps, each segment twice the step of the
# one below: a piecewise-linear approximation of F(x) = sgn(x) ln(1 + 255|x|) / ln(256) (μ = 255). With the bias of
# 33 the segment ends sit at 2^(6+s) - 33 (s = 0..7: 31, 95, 223, ..., 8159) in 14-bit units.
MULAW_BIAS = 33  # 14-bit units added to the magnitude before the segment is found
MULAW_MAX = 0x1FFF  # largest biased 14-bit magnitude: 8159 + 33; louder samples clip


def mulaw_encode(pcm: np.ndarray) -> np.ndarray:
    """G.711 μ-law encoding of 16-bit linear PCM (the 14 most significant bits are coded).

    Negative samples take the magnitude of their one's complement (G.191): -1 codes as +0 does, so the quantizer
    is symmetric about -1/2, as the two's complement range is.

    Args:
        pcm: int16 array, any shape.

    Returns:
        uint8 codes of the same shape, as sent on the line (bits inverted: silence is 0xFF).

    Raises:
        ValueError: `pcm` is not int16.
    """
    pcm = np.asarray(pcm)
    if pcm.dtype != np.int16:
        raise ValueError(f"`pcm` must be int16 samples, got dtype {pcm.dtype}")
    x = pcm.astype(np.int32)
    biased = np.minimum((np.where(x < 0, ~x, x) >> 2) + MULAW_BIAS, MULAW_MAX)  # 33..8191
    segment = np.searchsorted(2 ** np.arange(6, 14), biased, side="right")  # floor(log2(biased)) - 5: 0..7
    step = (biased >> (segment + 1)) & 0xF  # the 16 steps of the segment
    sign = np.where(x >= 0, 0x80, 0)
    return (sign | (0x7F ^ ((segment << 4) | step))).astype(np.uint8)


def mulaw_decode(codes: np.ndarray) -> np.ndarray:
    """G.711 μ-law decoding: each code's reconstruction value, the middle of its step, as 16-bit linear PCM.

    Args:
        codes: uint8 array, any shape.

    Returns:
        int16 array of the same shape, within ±32124.

    Raises:
        ValueError: `codes` is not uint8.
    """
    codes = np.asarray(codes)
    if codes.dtype != np.uint8:
        raise ValueError(f"`codes` must be uint8 μ-law codes, got dtype {codes.dtype}")
    inverted = 0xFF ^ codes.astype(np.int32)
    segment, step = (inverted >> 4) & 0x7, inverted & 0xF
    magnitude = (((step << 3) + 4 * MULAW_BIAS) << segment) - 4 * MULAW_BIAS
    return np.where(codes < 0x80, -magnitude, magnitude).astype(np.int16)


# MPEG-2 Layer III (what libsndfile writes at 16-24 kHz) in constant bit rate: libsndfile's compression level
# for each rate, measured at 16 kHz mono (its levels pick LAME's rate steps).
MP3_KBPS_LEVELS = {64: 0.62, 56: 0.68, 48: 0.73, 40: 0.78, 32: 0.84, 24: 0.88, 16: 0.93}
MP3_MAX_DELAY = 4096  # samples: the encoder and decoder delays together are about 1.1k at 16 kHz, <= 32 kbit/s


def mp3_roundtrip(wav: np.ndarray, sample_rate: int, kbps: int) -> np.ndarray:
    """`wav` through an MP3 encoder at `kbps` (constant bit rate) and back: the codec's loss, none of its delay.

    The decoded audio is aligned to the input (the lag of the largest cross-correlation within MP3_MAX_DELAY)
    and cut or zero-padded to its length.

    Raises:
        ValueError: `kbps` is not one of MP3_KBPS_LEVELS.
    """
    if kbps not in MP3_KBPS_LEVELS:
        raise ValueError(f"`kbps` must be one of {sorted(MP3_KBPS_LEVELS)} (MPEG-2 Layer III rates), got {kbps!r}")
    wav = np.asarray(wav, np.float32)
    if wav.size == 0:
        return wav
    buffer = io.BytesIO()
    sf.write(buffer, np.clip(wav, -1.0, 1.0), sample_rate, format="MP3", subtype="MPEG_LAYER_III",
             compression_level=MP3_KBPS_LEVELS[kbps], bitrate_mode="CONSTANT")
    decoded, _ = decode_audio_bytes(buffer.getvalue(), "the MP3 encoder's output")
    n = min(wav.size, decoded.size)
    lags = min(MP3_MAX_DELAY, decoded.size - n) + 1
    if lags > 1:  # correlation of the input's start with the output at each lag, by FFT
        size = 1 << (n + lags - 1).bit_length()
        spectrum = np.fft.rfft(decoded[:n + lags - 1], size) * np.conj(np.fft.rfft(wav[:n], size))
        lag = int(np.argmax(np.fft.irfft(spectrum, size)[:lags]))
        decoded = decoded[lag:]
    out = decoded[:wav.size]
    return np.pad(out, (0, wav.size - out.size)).astype(np.float32)



def speech_like_clip(seconds: float, seed: int = 0, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """A synthetic speech-like clip for load tests, benchmarks and tests (no data, no TTS): five harmonics of a
    90-220 Hz pitch that wobbles by 5%, under a 3 Hz syllable envelope, plus a little noise.

    Returns:
        float32 `(seconds * sample_rate,)`, peak about 0.3.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    f0 = rng.uniform(90, 220) * (1 + 0.05 * np.sin(2 * np.pi * rng.uniform(1, 4) * t))
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    wav = sum(np.sin(k * phase) / k for k in range(1, 6)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t) ** 2)
    wav = 0.3 * wav / np.max(np.abs(wav)) + 0.01 * rng.standard_normal(len(t))
    return wav.astype(np.float32)
