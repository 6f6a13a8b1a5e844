"""One utterance of the tiny corpus: what it is rendered with (`Job`: the text, the speaker, and the utterance's
own rate, pitch, level, padding and recording channel, drawn by `make_job`), the synthesizer that speaks it
(espeak-ng and flite run as processes; the neural voices and the voice banks through neural.py and voicebanks.py),
and what is done to the output before it is stored (`trim_level_pad`: silent ends trimmed, 16 kHz, the peak
level, silence around it; then the channel).

A job's WAV is written atomically under a name that hashes everything that went into it (`Job.key`), so a render
that finds its file reuses it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2.audio import SAMPLE_RATE, audio_info, decode_audio_bytes, resample, save_wav, shifted_rate
from deepspeech2_synthetic import neural, voicebanks
from deepspeech2_synthetic.channel import Channel, apply_channel, draw_channel
from deepspeech2_synthetic.voices import SPLITS, Speaker

# Bump when synthesis or post-processing changes, so resumed runs don't reuse stale audio.
SYNTH_VERSION = 1
ESPEAK_DEFAULT_WPM = 175  # espeak-ng's default rate in words per minute: a rate factor of 1
UTT_JITTER = (0.93, 1.07)  # per-utterance factor on rate and pitch, around the speaker's base
ESPEAK_AMPLITUDE = (40, 80)  # espeak-ng -a (default 100 clips some variants)
PEAK_DBFS = (-14.0, -1.0)  # per-utterance output level: peak in dB below full scale
PAD_SECONDS = (0.05, 0.35)  # random silence added before and after the trimmed speech
TRIM_THRESHOLD = 1e-3  # |x| below this at either end is synthesizer silence and is trimmed


@dataclass(frozen=True)
class Synthesizers:
    """What a corpus speaks with: the espeak-ng and flite programs, and the neural engines its speakers use."""

    espeak: str  # espeak-ng's executable
    flite: str | None = None  # flite's executable; None when no speaker is a flite voice
    neural: tuple[neural.Engine, ...] = ()  # one engine object per neural engine the speakers use (`Speaker.engine`)

    def neural_engine(self, name: str) -> neural.Engine:
        """The engine a speaker names (`Speaker.engine`: "hibari", "piper" or "kokoro").

        Raises:
            ValueError: no engine of that name was given.
        """
        for engine in self.neural:
            if engine.name == name:
                return engine
        raise ValueError(f"no `{name}` engine among the corpus' neural engines "
                         f"({', '.join(e.name for e in self.neural) or 'none'})")


@dataclass(frozen=True)
class Job:
    """One utterance to render: its text and speaker, with the utterance's own draws (`make_job`)."""

    split: str
    index: int
    text: str  # normalized: what is read and what the manifest says
    speaker: Speaker
    rate: float
    pitch: float
    amplitude: int  # espeak-ng -a
    peak_dbfs: float
    lead: float  # seconds of silence before the speech
    trail: float  # and after
    channel: Channel | None = None  # the recording channel it is heard through (None: clean)

    def key(self) -> str:
        """A hash of everything that went into the audio: the WAV's name, so a changed job renders anew."""
        speaker = dataclasses.asdict(self.speaker)
        for field, default in (("formant", 1.0), ("intonation", 1.0), ("breath", 0.0), ("variation", 0.0),
                               ("blend", 1.0)):
            if speaker[field] == default:  # out of the hash at their defaults: voices without them keep their names
                del speaker[field]
        fields = [SYNTH_VERSION, self.text, speaker, self.rate, self.pitch, self.amplitude, self.peak_dbfs, self.lead,
                  self.trail]
        if self.channel is not None:  # clean utterances keep their files
            fields.append(self.channel.to_dict())
        payload = json.dumps(fields, ensure_ascii=False)
        return hashlib.sha1(payload.encode("utf-8")).hexdigest()[:10]

    def path(self, out_dir: Path) -> Path:
        """Where the job's WAV goes: `out_dir/wav/<split>/<speaker>/<index>-<key>.wav`."""
        return out_dir / "wav" / self.split / self.speaker.id / f"{self.index:06d}-{self.key()}.wav"


def make_job(split: str, index: int, text: str, speaker: Speaker, seed: int, channel_share: float = 0.0) -> Job:
    """Utterance `index` of `split`: `text` read by `speaker`, with its own rate, pitch, level and padding drawn
    from (`seed`, split, index), and in training a recording channel for `channel_share` of the utterances."""
    # One generator per (seed, split, index): a job never depends on which jobs ran before it. The channel has
    # generators of its own, so a share of 0 leaves every other draw as it is without channels.
    rng = np.random.default_rng([seed, 2, SPLITS.index(split), index])
    channel = None
    if split == "train" and channel_share:
        channel_rng = np.random.default_rng([seed, 3, index])
        if channel_rng.random() < channel_share:
            channel = draw_channel(channel_rng)
    return Job(split=split, index=index, text=text, speaker=speaker, channel=channel,
                rate=round(speaker.rate * float(rng.uniform(*UTT_JITTER)), 4),
                pitch=round(speaker.pitch * float(rng.uniform(*UTT_JITTER)), 4),
                amplitude=int(rng.integers(ESPEAK_AMPLITUDE[0], ESPEAK_AMPLITUDE[1] + 1)),
                peak_dbfs=round(float(rng.uniform(*PEAK_DBFS)), 2),
                lead=round(float(rng.uniform(*PAD_SECONDS)), 3), trail=round(float(rng.uniform(*PAD_SECONDS)), 3))


def synthesize(job: Job, engines: Synthesizers) -> tuple[np.ndarray, int]:
    """Raw synthesizer output: float32 (samples,) and its sample rate."""
    sp = job.speaker
    espeak, flite = engines.espeak, engines.flite
    if sp.engine in neural.ENGINES:
        voice = neural.NeuralVoice(pitch=job.pitch, intonation=sp.intonation, formant=sp.formant, breath=sp.breath,
                                   variation=sp.variation, voice=sp.voice, blend=sp.blend)
        return engines.neural_engine(sp.engine)(job.text, job.rate, voice, seed=int(job.key(), 16))
    if sp.engine in voicebanks.ENGINES:
        return voicebanks.synthesize(sp.engine, sp.voice, job.text, job.rate, job.pitch, sp.formant)
    if sp.engine == "espeak-ng":
        pitch = int(np.clip(round(50 + 100 * math.log2(job.pitch)), 0, 99))  # 0-99 scale, 50 = voice default
        cmd = [espeak, "-v", f"{sp.voice}+{sp.variant}", "-s", str(round(ESPEAK_DEFAULT_WPM * job.rate)),
               "-p", str(pitch), "-a", str(job.amplitude), "-g", str(sp.word_gap), "--stdout"]
        # The text goes through stdin, so nothing in it can be taken for an option.
        proc = subprocess.run(cmd, input=job.text.encode("utf-8"), capture_output=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"espeak-ng exited {proc.returncode}: {proc.stderr.decode(errors='replace').strip()}")
        return decode_audio_bytes(proc.stdout, "espeak-ng's output")
    with tempfile.TemporaryDirectory(prefix="ds2-flite-") as tmp:
        wav, txt = Path(tmp) / "out.wav", Path(tmp) / "text.txt"
        txt.write_text(job.text + "\n", encoding="utf-8")
        # A formant factor k: slower and k times lower at synthesis, then read as if sampled k times faster,
        # so the rate and F0 come out as asked and every formant k times higher.
        k = sp.formant
        cmd = [flite, "-voice", sp.voice, "--setf", f"duration_stretch={k / job.rate:.4f}",
               "--setf", f"int_f0_target_mean={sp.f0 * job.pitch / k:.1f}", "-f", str(txt), "-o", str(wav)]
        proc = subprocess.run(cmd, capture_output=True, timeout=60)
        if proc.returncode != 0 or not wav.exists():
            raise RuntimeError(f"flite exited {proc.returncode}: {proc.stderr.decode(errors='replace').strip()}")
        samples, sr = decode_audio_bytes(wav.read_bytes(), "flite's output")
        return samples, shifted_rate(sr, k)


def render(job: Job, out_dir: Path, engines: Synthesizers) -> tuple[float, bool]:
    """Write the job's WAV unless a valid one exists. Returns `(duration_seconds, reused)`."""
    path = job.path(out_dir)
    if path.exists():
        try:
            sr, channels, frames = audio_info(path)
            if sr == SAMPLE_RATE and channels == 1 and frames > 0:
                return frames / SAMPLE_RATE, True
        except ValueError:
            pass  # unreadable (should not happen with atomic writes): synthesize it again
    wav, sr = synthesize(job, engines)
    wav = trim_level_pad(wav, sr, job.peak_dbfs, job.lead, job.trail)
    if job.channel is not None:
        wav = apply_channel(wav, SAMPLE_RATE, job.channel)
    save_wav(path, wav, SAMPLE_RATE)
    return len(wav) / SAMPLE_RATE, False


def trim_level_pad(wav: np.ndarray, sr: int, peak_dbfs: float, lead: float, trail: float) -> np.ndarray:
    """A synthesizer's output as the corpus stores it: its silent ends trimmed, at 16 kHz, the peak at
    `peak_dbfs`, and `lead`/`trail` seconds of silence added.

    Raises:
        RuntimeError: the output is all silence.
    """
    voiced = np.flatnonzero(np.abs(wav) > TRIM_THRESHOLD)
    if voiced.size == 0:
        raise RuntimeError("the synthesizer returned silence")
    wav = resample(wav[voiced[0]:voiced[-1] + 1], sr, SAMPLE_RATE)
    wav *= 10 ** (peak_dbfs / 20) / max(float(np.abs(wav).max()), 1e-9)
    return np.concatenate([np.zeros(round(lead * SAMPLE_RATE), np.float32), wav,
                           np.zeros(round(trail * SAMPLE_RATE), np.float32)])
