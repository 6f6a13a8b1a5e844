"""Recording channels for synthesized training audio: what real recordings go through before a recognizer hears
them (issue 35). A synthesizer writes clean, full-band audio; a person's recording has passed through a
microphone and a line that cut the lows and highs, and often a lossy codec (audiobooks and podcasts are MP3).

A `Channel` is one such path, drawn per utterance by `draw_channel`: an MP3 round trip at 32-64 kbit/s, and with
some probability a band limit (a high-pass at 50-300 Hz and a low-pass at 3.4-7 kHz, 4th-order Butterworth
each). `apply_channel` runs it on a waveform. The tiny corpus gives a share of its training utterances one
(`TinyCorpusConfig.channel_share`); dev and test stay clean.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import scipy.signal

from deepspeech2.audio import MP3_KBPS_LEVELS, mp3_roundtrip

CHANNEL_KBPS = (32, 40, 48, 56, 64)  # MP3 rates drawn from (the 32-64 kbit/s)
BAND_LIMIT_PROB = 0.5  # share of channels with a band limit too
HIGHPASS_HZ = (50.0, 300.0)  # a small microphone's or a line's low cut-off, drawn log-uniformly
LOWPASS_HZ = (3400.0, 7000.0)  # its high cut-off: a telephone band's edge up to a good microphone's
FILTER_ORDER = 4


@dataclass(frozen=True)
class Channel:
    """One recording path: an MP3 round trip at `mp3_kbps`, after a band limit when `lowpass_hz` is set."""

    mp3_kbps: int
    highpass_hz: float = 0.0  # 0: none
    lowpass_hz: float = 0.0  # 0: none

    def __post_init__(self):
        if self.mp3_kbps not in MP3_KBPS_LEVELS:
            raise ValueError(f"`mp3_kbps` must be one of {sorted(MP3_KBPS_LEVELS)}, got {self.mp3_kbps!r}")
        if not 0 <= self.highpass_hz < (self.lowpass_hz or np.inf):
            raise ValueError(f"need 0 <= `highpass_hz` < `lowpass_hz`, got {self.highpass_hz!r} and "
                             f"{self.lowpass_hz!r}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def draw_channel(rng: np.random.Generator) -> Channel:
    """A random channel: an MP3 rate from CHANNEL_KBPS, and a band limit with BAND_LIMIT_PROB."""
    kbps = int(rng.choice(CHANNEL_KBPS))
    if rng.random() >= BAND_LIMIT_PROB:
        return Channel(kbps)
    low = float(np.exp(rng.uniform(*np.log(HIGHPASS_HZ))))
    high = float(np.exp(rng.uniform(*np.log(LOWPASS_HZ))))
    return Channel(kbps, round(low, 1), round(high, 1))


def apply_channel(wav: np.ndarray, sample_rate: int, channel: Channel) -> np.ndarray:
    """`wav` as recorded through `channel`: same length, float32; the peak level is kept (a line's gain)."""
    wav = np.asarray(wav, np.float32)
    if wav.size == 0:
        return wav
    peak = float(np.abs(wav).max())
    out = wav
    if channel.lowpass_hz:
        high = min(channel.lowpass_hz, 0.45 * sample_rate)
        sos = scipy.signal.butter(FILTER_ORDER, [channel.highpass_hz, high] if channel.highpass_hz else high,
                                  btype="bandpass" if channel.highpass_hz else "lowpass", fs=sample_rate,
                                  output="sos")
        out = scipy.signal.sosfilt(sos, out).astype(np.float32)
    out = mp3_roundtrip(out, sample_rate, channel.mp3_kbps)
    if peak > 0 and np.abs(out).max() > 0:
        out *= peak / float(np.abs(out).max())
    return out
