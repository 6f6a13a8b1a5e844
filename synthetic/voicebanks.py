"""Voice banks for the tiny corpus: English voices built from recordings of real people, in Debian's contrib and
non-free sections.

- `mbrola` (Debian `mbrola` + `mbrola-us1`, `-us2`, `-us3`, `-en1`): diphones cut from four people's recordings
  (us1 an American woman, us2 and us3 American men, en1 a British man), joined by MBROLA; espeak-ng reads the
  text and writes the phonemes, durations and pitch (`espeak-ng -v mb-us1`).
- `rhvoice` (Debian `librhvoice5` + `rhvoice-english`): statistical parametric (HTS) voices of five people: `alan`
  (a Scottish man), `bdl` (an American man, CMU ARCTIC), `clb` (an American woman, ARCTIC), `evgeniy-eng` (a
  Russian man) and `lyubov` (a woman). Its sixth English voice, `slt`, is left out: she is flite's `slt` (a test
  voice) and festival's `slt` (the held-out yardstick) by another engine.
- `pico` (Debian `libttspico-utils`, SVOX Pico): two women, American (`en-US`) and British (`en-GB`).

Most systems list only Debian's main section, so `tools/apt-deps.sh voices` fetches these packages' .deb files
from deb.debian.org's pool by pinned SHA-256 and installs them with apt. Everything runs offline. Their licences
are Debian's non-free ones (MBROLA's voices: non-commercial use; RHVoice's `evgeniy-eng` and `lyubov`: CC BY-NC-ND):
fine for training a research model, worth reading before a product is trained on them.

One voice becomes many speakers by its rate, its pitch and a vocal-tract factor `formant` = k: the engine speaks k
times slower and k times lower and its output is read as if sampled k times faster (flite's formant shift in
synthesis.py), so the rate and pitch come out as asked and every formant is k times higher. All three
are much faster than real time on one core (MBROLA about 400x, Pico 250x, RHVoice 40x).

MBROLA and Pico run as a process per utterance. RHVoice runs in this process, through its C library (Debian's
`librhvoice5`, `RHVoice.h`, by ctypes): a process per utterance (`RHVoice-test`) spent about 0.1 s loading the voice
before 0.02 s per second of speech, while the library loads each voice on its first utterance and keeps it. It
speaks one utterance at a time (two threads at once are not safe in it). Its output is RHVoice-test's, sample for
sample: the same engine, voice profile and relative rate, pitch and volume (tests/test_voicebanks.py compares
them; bench/voicebanks.py times both).
"""

from __future__ import annotations

import ctypes
import functools
import math
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from deepspeech2.audio import audio_info, from_pcm16, load_audio, shifted_rate

ENGINES = ("mbrola", "rhvoice", "pico")
# (engine, voice, gender): every English voice the three packages ship, less RHVoice's `slt` (see above).
VOICES = (("mbrola", "us1", "F"), ("rhvoice", "bdl", "M"), ("pico", "en-US", "F"), ("mbrola", "us2", "M"),
          ("rhvoice", "clb", "F"), ("mbrola", "us3", "M"), ("rhvoice", "alan", "M"), ("pico", "en-GB", "F"),
          ("mbrola", "en1", "M"), ("rhvoice", "lyubov", "F"), ("rhvoice", "evgeniy-eng", "M"))
APT_HINT = "install them with `tools/apt-deps.sh voices` as root (Debian contrib/non-free .deb files, SHA-256 pinned)"
PACKAGES = {"mbrola": ("mbrola", "mbrola-us1", "mbrola-us2", "mbrola-us3", "mbrola-en1"),
            "rhvoice": ("librhvoice5", "rhvoice-english"),
            "pico": ("libttspico-utils",)}
_TOOLS = {"mbrola": ("espeak-ng", "mbrola"), "pico": ("pico2wave",)}
RHVOICE_LIBRARY = "libRHVoice.so.5"  # Debian's librhvoice5: RHVoice's C API (RHVoice.h), version 1.8
ESPEAK_DEFAULT_WPM = 175
ESPEAK_PITCH_PER_OCTAVE = 70  # espeak-ng's -p units per octave of F0 with MBROLA voices (measured: p 20 -> 80 is x1.77)
RHVOICE_MIN_PERCENT = 50  # RHVoice clamps a rate or pitch below this percent of the voice's own


def missing() -> list[str]:
    """The programs (on PATH) and the library these engines need that are not installed (empty: all three can
    speak)."""
    programs = [t for tools in _TOOLS.values() for t in tools if shutil.which(t) is None]
    return programs + ([RHVOICE_LIBRARY] if _rhvoice_library() is None else [])


def version(engine: str) -> str:
    """The Debian package versions behind `engine`, e.g. "mbrola 3.3+dfsg-9, mbrola-us1 0.3+repack2-5"."""
    out = []
    for package in PACKAGES[engine]:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
        out.append(f"{package} {proc.stdout.strip() or '?'}")
    return ", ".join(out)


def synthesize(engine: str, voice: str, text: str, rate: float = 1.0, pitch: float = 1.0,
               formant: float = 1.0) -> tuple[np.ndarray, int]:
    """`text` spoken by `voice` of `engine`: float32 samples and the sample rate to read them at.

    `rate` and `pitch` are factors on the voice's own (1: as shipped); `formant` is the vocal-tract factor k.

    Raises:
        ValueError: an unknown engine or voice, or a factor out of range.
        FileNotFoundError: RHVoice's library is not installed (`missing()` says what is).
        RuntimeError: the engine failed or wrote no audio.
    """
    if (engine, voice) not in {(e, v) for e, v, _ in VOICES}:
        raise ValueError(f"unknown voice bank {engine!r} {voice!r}; expected one of "
                         f"{', '.join(f'{e}/{v}' for e, v, _ in VOICES)}")
    for name, value in (("rate", rate), ("pitch", pitch), ("formant", formant)):
        if not 0.25 <= value <= 4:
            raise ValueError(f"`{name}` must be a factor in [0.25, 4], got {value!r}")
    k = formant
    rate, pitch = rate / k, pitch / k  # what the engine is asked for, before the output is read k times faster
    if engine == "rhvoice":
        samples, sr = _RHVOICE.speak(voice, text, rhvoice_percent(rate), rhvoice_percent(pitch))
        return samples, shifted_rate(sr, k)
    with tempfile.TemporaryDirectory(prefix=f"ds2-{engine}-") as tmp:
        wav = Path(tmp) / "out.wav"
        if engine == "mbrola":
            # espeak-ng's 0-99 pitch scale, 50 = the voice's default.
            p = int(np.clip(round(50 + ESPEAK_PITCH_PER_OCTAVE * math.log2(pitch)), 0, 99))
            cmd = ["espeak-ng", "-v", f"mb-{voice}", "-s", str(round(ESPEAK_DEFAULT_WPM * rate)), "-p", str(p),
                   "-w", str(wav)]
            stdin = text  # espeak-ng's --stdout writes nothing with MBROLA voices: a file it is
        else:
            # pico2wave takes the text as an argument (after `--`, so it is never an option) and reads its
            # <speed>/<pitch> markup; the corpus's normalized text holds no '<'.
            markup = f'<speed level="{round(100 * rate)}"><pitch level="{round(100 * pitch)}">{text}</pitch></speed>'
            cmd, stdin = ["pico2wave", "-l", voice, "-w", str(wav), "--", markup], ""
        proc = subprocess.run(cmd, input=stdin.encode("utf-8"), capture_output=True, timeout=60)
        if proc.returncode != 0 or not wav.exists() or wav.stat().st_size <= 44:
            raise RuntimeError(f"{cmd[0]} ({engine} {voice}) exited {proc.returncode} without audio: "
                               f"{proc.stderr.decode(errors='replace').strip()[:300]}")
        sr = audio_info(wav)[0]
        samples = load_audio(wav, sample_rate=None)
    return samples, shifted_rate(sr, k)


def rhvoice_percent(factor: float) -> int:
    """A rate or pitch factor as RHVoice's whole percent of the voice's own (RHVoice-test's `-r` and `-t`)."""
    return max(RHVOICE_MIN_PERCENT, round(100 * factor))


# RHVoice.h and RHVoice_common.h (librhvoice-dev 1.8.0), field for field.
_SAMPLE_RATE_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_SPEECH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_uint, ctypes.c_void_p)


class _Callbacks(ctypes.Structure):
    _fields_ = [("set_sample_rate", _SAMPLE_RATE_CALLBACK), ("play_speech", _SPEECH_CALLBACK),
                ("process_mark", ctypes.c_void_p), ("word_starts", ctypes.c_void_p), ("word_ends", ctypes.c_void_p),
                ("sentence_starts", ctypes.c_void_p), ("sentence_ends", ctypes.c_void_p),
                ("play_audio", ctypes.c_void_p), ("done", ctypes.c_void_p)]


class _InitParams(ctypes.Structure):
    _fields_ = [("data_path", ctypes.c_char_p), ("config_path", ctypes.c_char_p),
                ("resource_paths", ctypes.POINTER(ctypes.c_char_p)), ("callbacks", _Callbacks),
                ("options", ctypes.c_uint)]


class _SynthParams(ctypes.Structure):
    _fields_ = [("voice_profile", ctypes.c_char_p), ("absolute_rate", ctypes.c_double),
                ("absolute_pitch", ctypes.c_double), ("absolute_volume", ctypes.c_double),
                ("relative_rate", ctypes.c_double), ("relative_pitch", ctypes.c_double),
                ("relative_volume", ctypes.c_double), ("punctuation_mode", ctypes.c_int),
                ("punctuation_list", ctypes.c_char_p), ("capitals_mode", ctypes.c_int), ("flags", ctypes.c_int)]


_RHVOICE_MESSAGE_TEXT = 0  # RHVoice_message_text: plain text, as RHVoice-test reads it


@functools.cache
def _rhvoice_library() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL(RHVOICE_LIBRARY)
    except OSError:
        return None
    lib.RHVoice_new_tts_engine.restype = ctypes.c_void_p
    lib.RHVoice_new_tts_engine.argtypes = [ctypes.POINTER(_InitParams)]
    lib.RHVoice_new_message.restype = ctypes.c_void_p
    lib.RHVoice_new_message.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint, ctypes.c_int,
                                        ctypes.POINTER(_SynthParams), ctypes.c_void_p]
    lib.RHVoice_speak.argtypes = [ctypes.c_void_p]
    lib.RHVoice_delete_message.argtypes = [ctypes.c_void_p]
    return lib


class _RHVoice:
    """One RHVoice engine for the process, made on the first utterance; each voice loads on its own first
    utterance and stays. Its calls take turns: RHVoice 1.8's library is not safe to speak from two threads at
    once (measured here: about one utterance in 500 came out changed, with one engine or with one per thread),
    and the corpus must be the same for a seed. ctypes lets go of the GIL while the library speaks, so the
    corpus's other worker thread goes on with the other engines meanwhile."""

    def __init__(self):
        self._lock = threading.Lock()
        self._engine = None
        self._chunks: list[np.ndarray] = []  # the int16 samples of the utterance being spoken
        self._rates: list[int] = []  # the sample rates RHVoice announced for it
        # The callbacks live as long as the engine (for ever): ctypes must keep them.
        self._callbacks = _Callbacks(_SAMPLE_RATE_CALLBACK(self._on_sample_rate),
                                     _SPEECH_CALLBACK(self._on_speech))

    def _on_sample_rate(self, sample_rate, user_data):
        self._rates.append(sample_rate)
        return 1

    def _on_speech(self, samples, count, user_data):
        self._chunks.append(np.ctypeslib.as_array(samples, (count,)).copy())
        return 1

    def _start(self):
        lib = _rhvoice_library()
        if lib is None:
            raise FileNotFoundError(f"RHVoice's library `{RHVOICE_LIBRARY}` is not installed; {APT_HINT}")
        # No paths: RHVoice's own defaults, /usr/share/RHVoice and /etc/RHVoice, as RHVoice-test's.
        engine = lib.RHVoice_new_tts_engine(ctypes.byref(_InitParams(None, None, None, self._callbacks, 0)))
        if not engine:
            raise RuntimeError(f"{RHVOICE_LIBRARY} started no engine (no voices under /usr/share/RHVoice?); "
                               f"{APT_HINT}")
        self._engine = engine

    def speak(self, voice: str, text: str, rate_percent: int, pitch_percent: int) -> tuple[np.ndarray, int]:
        """`text` by RHVoice's `voice` as RHVoice-test -p voice -r rate -t pitch speaks it: float32 samples and
        their rate."""
        # RHVoice-test sets the relative rate, pitch and volume to its percents / 100 and leaves the absolute ones
        # at the document's defaults; these, with absolute 0, give its samples exactly (tests/test_voicebanks.py).
        params = _SynthParams(voice.encode(), 0.0, 0.0, 0.0, rate_percent / 100, pitch_percent / 100, 1.0, 0, None,
                              0, 0)
        data = text.encode("utf-8")
        with self._lock:
            if self._engine is None:
                self._start()
            lib = _rhvoice_library()
            self._chunks, self._rates = [], []
            message = lib.RHVoice_new_message(self._engine, data, len(data), _RHVOICE_MESSAGE_TEXT,
                                              ctypes.byref(params), None)
            if not message:
                raise RuntimeError(f"RHVoice ({voice}) refused the text {text[:80]!r}")
            try:
                ok = lib.RHVoice_speak(message)
            finally:
                lib.RHVoice_delete_message(message)
            chunks, rates = self._chunks, self._rates
        if not ok or not chunks or len(set(rates)) != 1:
            raise RuntimeError(f"RHVoice ({voice}) failed on {text[:80]!r}: spoke {ok}, {len(chunks)} blocks of "
                               f"audio at sample rates {rates}")
        return from_pcm16(np.concatenate(chunks)), rates[0]  # what reading RHVoice-test's 16-bit WAV gives


_RHVOICE = _RHVoice()
