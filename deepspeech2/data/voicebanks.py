"""Voice banks for the tiny corpus: English voices built from recordings of real people, in Debian's contrib and
non-free sections.

- `mbrola` (Debian `mbrola` + `mbrola-us1`, `-us2`, `-us3`, `-en1`): diphones cut from four people's recordings
  (us1 an American woman, us2 and us3 American men, en1 a British man), joined by MBROLA; espeak-ng reads the
  text and writes the phonemes, durations and pitch (`espeak-ng -v mb-us1`).
- `rhvoice` (Debian `rhvoice` + `rhvoice-english`): statistical parametric (HTS) voices of five people: `alan`
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
deepspeech2/data/tiny.py), so the rate and pitch come out as asked and every formant is k times higher. All three
are much faster than real time (MBROLA about 400x, Pico 250x, RHVoice 30x on one core).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from deepspeech2.audio import audio_info, load_audio, shifted_rate

ENGINES = ("mbrola", "rhvoice", "pico")
# (engine, voice, gender): every English voice the three packages ship, less RHVoice's `slt` (see above).
VOICES = (("mbrola", "us1", "F"), ("rhvoice", "bdl", "M"), ("pico", "en-US", "F"), ("mbrola", "us2", "M"),
          ("rhvoice", "clb", "F"), ("mbrola", "us3", "M"), ("rhvoice", "alan", "M"), ("pico", "en-GB", "F"),
          ("mbrola", "en1", "M"), ("rhvoice", "lyubov", "F"), ("rhvoice", "evgeniy-eng", "M"))
APT_HINT = "install them with `tools/apt-deps.sh voices` as root (Debian contrib/non-free .deb files, SHA-256 pinned)"
PACKAGES = {"mbrola": ("mbrola", "mbrola-us1", "mbrola-us2", "mbrola-us3", "mbrola-en1"),
            "rhvoice": ("rhvoice", "rhvoice-english"),
            "pico": ("libttspico-utils",)}
_TOOLS = {"mbrola": ("espeak-ng", "mbrola"), "rhvoice": ("RHVoice-test",), "pico": ("pico2wave",)}
ESPEAK_DEFAULT_WPM = 175
ESPEAK_PITCH_PER_OCTAVE = 70  # espeak-ng's -p units per octave of F0 with MBROLA voices (measured: p 20 -> 80 is x1.77)
RHVOICE_MIN_PERCENT = 50  # RHVoice-test clamps -r and -t below this


def missing() -> list[str]:
    """The programs these engines need that are not on PATH (empty: all three can speak)."""
    return [t for tools in _TOOLS.values() for t in tools if shutil.which(t) is None]


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
    with tempfile.TemporaryDirectory(prefix=f"ds2-{engine}-") as tmp:
        wav = Path(tmp) / "out.wav"
        if engine == "mbrola":
            # espeak-ng's 0-99 pitch scale, 50 = the voice's default.
            p = int(np.clip(round(50 + ESPEAK_PITCH_PER_OCTAVE * math.log2(pitch)), 0, 99))
            cmd = ["espeak-ng", "-v", f"mb-{voice}", "-s", str(round(ESPEAK_DEFAULT_WPM * rate)), "-p", str(p),
                   "-w", str(wav)]
            stdin = text  # espeak-ng's --stdout writes nothing with MBROLA voices: a file it is
        elif engine == "rhvoice":
            cmd = ["RHVoice-test", "-p", voice, "-r", str(max(RHVOICE_MIN_PERCENT, round(100 * rate))),
                   "-t", str(max(RHVOICE_MIN_PERCENT, round(100 * pitch))), "-o", str(wav)]
            stdin = text
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
