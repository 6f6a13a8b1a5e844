"""The telephone channel: what a voice goes through on a narrowband phone call, for scoring a model on phone audio
(`ds2-eval --channel g711`) and for training on it (the `telephone` augmentation, `deepspeech2.data.augment`). Both
call `telephone`, the one copy of the rule.

    (samples,) at the model's rate -> resampled to 8 kHz (G.711's rate; the resampler's anti-alias filter removes
        what lies above 4 kHz) -> band-passed 300-3400 Hz (the telephone band of ITU-T G.712) -> 16-bit PCM, G.711
        μ-law encoded and decoded (8 bits a sample) -> resampled back to the model's rate -> (samples,)

It is deterministic (no noise, no dither), keeps the length and the alignment (the band-pass runs forward and
backward: zero phase), and reuses the package's resampler and codec (`deepspeech2.audio.resample`,
`mulaw_encode`, `mulaw_decode`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.signal

from deepspeech2.audio import SAMPLE_RATE, from_pcm16, mulaw_decode, mulaw_encode, resample, save_wav, to_pcm16
from deepspeech2.data.manifest import Utterance, load_utterance, replace
from deepspeech2.progress import progress_bar

TELEPHONE_RATE = 8000  # Hz: G.711 codes 8000 samples a second
BAND_HZ = (300.0, 3400.0)  # the telephone band (ITU-T G.712's passband)
# Butterworth band-pass of order 4 at each edge, run forward and backward (sosfiltfilt), so its magnitude counts
# twice: -6 dB at 300 and 3400 Hz, within 0.1 dB from 500 to 3000 Hz, -30 dB at 200 and 3600 Hz, -78 dB at 100 Hz.
# Above 4 kHz the resampler's anti-alias filter takes over.
BANDPASS_ORDER = 4
_BANDPASS = scipy.signal.butter(BANDPASS_ORDER, BAND_HZ, btype="bandpass", fs=TELEPHONE_RATE, output="sos")


def telephone(wav: np.ndarray, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """`wav` as heard over a G.711 μ-law phone line, at its own rate and length.

    Args:
        wav: float (samples,) in [-1, 1]; louder samples clip, as on a line.
        sample_rate: Hz of `wav`, at least `TELEPHONE_RATE`.

    Returns:
        float32 (samples,) at `sample_rate`.

    Raises:
        ValueError: `wav` is not one-dimensional, or `sample_rate` is below 8000 Hz.
    """
    wav = np.asarray(wav, dtype=np.float32)
    if wav.ndim != 1:
        raise ValueError(f"`wav` must be one channel of samples (samples,), got shape {wav.shape}")
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)) \
            or sample_rate < TELEPHONE_RATE:
        raise ValueError(f"`sample_rate` must be an integer >= {TELEPHONE_RATE} Hz (the phone line's rate), "
                         f"got {sample_rate!r}")
    if wav.size == 0:
        return wav
    narrow = resample(wav, sample_rate, TELEPHONE_RATE)
    # sosfiltfilt extends the signal at both ends (odd reflection) to start without a transient; a very short
    # input can't lend it its full length.
    narrow = scipy.signal.sosfiltfilt(_BANDPASS, narrow, padlen=min(3 * (2 * len(_BANDPASS) + 1), narrow.size - 1))
    heard = from_pcm16(mulaw_decode(mulaw_encode(to_pcm16(narrow))))
    out = resample(heard, TELEPHONE_RATE, sample_rate)[:wav.size]
    return np.pad(out, (0, wav.size - out.size)).astype(np.float32)


def telephone_copies(utterances: Sequence[Utterance], out_dir: str | os.PathLike, sample_rate: int = SAMPLE_RATE,
                     max_seconds: float | None = None, progress: bool = False) -> list[Utterance]:
    """Write each utterance's audio as heard over the phone (`telephone`) into `out_dir`, as 16-bit WAV at
    `sample_rate`, and return the utterances pointing at the copies (whole files: offsets are cut out).

    An utterance whose audio can't be read, or is longer than `max_seconds`, is returned unchanged, so that
    whoever reads it next reports it as it would without the channel.

    Args:
        utterances: manifest lines.
        out_dir: folder for the copies (`000000.wav`, ... by position), created if missing.
        sample_rate: Hz to read, transmit and write at (the model's rate).
        max_seconds: longer audio is left unread (None: no limit).
        progress: show a progress bar.

    Returns:
        One utterance per input, in order.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    heard = []
    for i, u in enumerate(progress_bar(utterances, desc="telephone channel", unit="utt", show=progress)):
        try:
            wav = load_utterance(u, sample_rate=sample_rate, max_seconds=max_seconds)
        except (ValueError, FileNotFoundError):  # TooLongError is a ValueError
            heard.append(u)
            continue
        path = out_dir / f"{i:06d}.wav"
        save_wav(path, telephone(wav, sample_rate), sample_rate)
        heard.append(replace(u, audio_filepath=str(path), offset=None, duration=wav.size / sample_rate))
    return heard
