"""The voices the tiny corpus speaks with beside espeak-ng's, one source each with its own settings.

    TinyCorpusConfig(out_dir, voices=(Flite(share=0.1), NeuralVoices(share=0.25), VoiceBanks(share=0.25)))

A source's `share` is the fraction of the training speakers it gives; the shares stack up (in SOURCES' order) and
espeak-ng keeps what they leave, so together they stay below 1. Without a `Flite` the corpus has no flite voice at
all; the other sources with a share of 0 give nothing. Every source but `Flite` speaks English only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def _check_share(owner: str, value, top: float = 1.0, closed: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
            or value > top or (value == top and not closed):
        raise ValueError(f"`{owner}` must be in [0, {top:g}{']' if closed else ')'}, got {value!r}")


@dataclass(frozen=True)
class Flite:
    """flite's voices (voices.FLITE_VOICES): three men in training, `slt` in test; English only."""

    share: float = 0.0  # at least this fraction of the training speakers are flite voices (its three training
    # voices again with other rates and pitches); 0: each training flite voice once
    formants: bool = False  # the extra flite speakers also get formants up to 25% higher (FLITE_EXTRA_FORMANT),
    # toward the female range none of flite's training voices has
    female: float = 0.0  # this share of the extra flite speakers get a woman's formants and pitch together
    # (FLITE_FEMALE_FORMANT, FLITE_FEMALE_PITCH): flite's three training voices are men

    def __post_init__(self):
        _check_share("Flite.share", self.share)
        if not isinstance(self.formants, bool):
            raise ValueError(f"`Flite.formants` must be True or False, got {self.formants!r}")
        _check_share("Flite.female", self.female, closed=True)


@dataclass(frozen=True)
class NeuralVoices:
    """hibari's woman and Piper's man (neural.py), each spread into many speakers by pitch, intonation, vocal
    tract, breathiness and rate; dev has speakers of its own (voices.DEV_NEURAL_VOICES), test none."""

    share: float = 0.0  # this fraction of the training speakers are neural voices (voices.NEURAL_VOICES in turn)
    piper_variation: float = 0.0  # Piper's generator noise (its voice's noise_scale and noise_w) times this, drawn
    # per utterance from the utterance's seed, so it reads each sentence with its own timing and prosody; 0: off
    # (the voice's mean reading); 1: the voice's own noise

    def __post_init__(self):
        _check_share("NeuralVoices.share", self.share)
        _check_share("NeuralVoices.piper_variation", self.piper_variation, top=2.0, closed=True)


@dataclass(frozen=True)
class VoiceBanks:
    """Voice banks of real people (voicebanks.py: MBROLA, RHVoice, Pico; `tools/apt-deps.sh voices`), each spread
    by rate, pitch, vocal tract and gender; dev has speakers of its own (voices.DEV_VOICEBANKS), test none."""

    share: float = 0.0  # this fraction of the training speakers are voice banks (voicebanks.VOICES in turn)

    def __post_init__(self):
        _check_share("VoiceBanks.share", self.share)


@dataclass(frozen=True)
class Kokoro:
    """Kokoro-82M's English voices (neural.py), each speaker a mix of two of one gender; training only, for its
    cost (about 2x faster than real time on one core)."""

    share: float = 0.0  # this fraction of the training speakers are Kokoro's
    cache_dir: str = "data/downloads"  # where npm's kokoro-js tarball (its voices) is kept, downloaded there once

    def __post_init__(self):
        _check_share("Kokoro.share", self.share)
        if not isinstance(self.cache_dir, str) or not self.cache_dir:
            raise ValueError(f"`Kokoro.cache_dir` must be a folder, got {self.cache_dir!r}")


SOURCES = (Flite, NeuralVoices, VoiceBanks, Kokoro)  # the order in which their shares of training stack up
