"""Speech from a synthesizer the tiny corpus never uses: festival's English voices read a manifest's sentences.

The tiny corpus is read by espeak-ng and flite only; its test voices are unseen *speakers* of those two
engines. A model can learn an engine's way of speaking as well as English, so this set measures the other
thing: the same sentences (the tiny test split's, which the LM never saw) read by festival voices, one
utterance per sentence and voice:

    ked_diphone             a man no training voice is, festival's diphone engine   (festvox-kdlpc16k)
    kal_diphone             the speaker of flite's kal16 (a training voice), by festival's diphone engine
                            rather than flite's                                     (festvox-kallpc16k)
    cmu_us_slt_arctic_hts   a woman, flite's test voice slt, by HTS: a statistical parametric engine, unlike
                            the concatenative and formant engines training hears     (festvox-us-slt-hts)

    out/<name>.jsonl                               the manifest (speaker "festival-<voice>", paths relative)
    out/<name>/wav/<speaker>/<id>.wav              16 kHz mono 16-bit audio, trimmed, peak-normalised, padded

`name` is "heldout" for the test sentences (`make demo-heldout`); "heldout_dev" reads the dev sentences, so
that a recipe change can be judged across engines on dev, never on test.

Voices whose package is missing are skipped with a warning (none at all is an error naming the packages).
Each WAV is written atomically under a name that hashes its text and voice, so a re-run reuses them. A failed
utterance is skipped, counted and logged. It is not a substitute for real recordings: it shows how far the
model's accuracy carries to a synthesizer it never heard.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2.audio import SAMPLE_RATE, audio_info, load_audio, save_wav
from deepspeech2.data.manifest import Utterance, read_manifest, write_manifest
from deepspeech2.progress import progress_bar
from deepspeech2_synthetic.synthesis import trim_level_pad

log = logging.getLogger(__name__)

# (festival voice, the Debian package that has it)
FESTIVAL_VOICES = (("ked_diphone", "festvox-kdlpc16k"), ("kal_diphone", "festvox-kallpc16k"),
                   ("cmu_us_slt_arctic_hts", "festvox-us-slt-hts"))
FESTIVAL_VOICE_DIRS = ("/usr/share/festival/voices", "/usr/lib/festival/voices")
PEAK_DBFS = -3.0
PAD_SECONDS = 0.2


@dataclass(frozen=True)
class HeldoutConfig:
    manifest: str  # whose sentences to read (the tiny test split's: data/tiny/test.clean.jsonl)
    out_dir: str  # writes out_dir/<name>.jsonl and out_dir/<name>/wav/
    name: str = "heldout"
    voices: tuple[str, ...] = tuple(v for v, _ in FESTIVAL_VOICES)
    max_sentences: int = 0  # > 0: only the manifest's first N sentences
    num_workers: int = 2
    progress: bool = True


def festival_voices_installed() -> set[str]:
    """The festival voices installed (folder names under festival's voice directories)."""
    return {p.name for d in FESTIVAL_VOICE_DIRS if Path(d).is_dir() for p in Path(d).glob("*/*") if p.is_dir()}


def _festival(text: str, voice: str, text2wave: str) -> np.ndarray:
    """festival's rendering of `text`, float32 at 16 kHz (the voices render at 16 and 32 kHz)."""
    with tempfile.TemporaryDirectory(prefix="ds2-festival-") as tmp:
        txt, wav = Path(tmp) / "text.txt", Path(tmp) / "out.wav"
        txt.write_text(text + "\n", encoding="utf-8")  # a file, so nothing in the text is read as Scheme
        proc = subprocess.run([text2wave, "-eval", f"(voice_{voice})", str(txt), "-o", str(wav)],
                              capture_output=True, timeout=120)
        if proc.returncode != 0 or not wav.exists():
            raise RuntimeError(f"text2wave exited {proc.returncode}: {proc.stderr.decode(errors='replace').strip()}")
        return load_audio(wav)


def _render(text: str, voice: str, path: Path, text2wave: str) -> float:
    """Writes `path` unless it exists; returns its duration in seconds."""
    if not path.exists():
        wav = trim_level_pad(_festival(text, voice, text2wave), SAMPLE_RATE, PEAK_DBFS, PAD_SECONDS, PAD_SECONDS)
        save_wav(path, wav, SAMPLE_RATE)
    sr, _, frames = audio_info(path)
    return frames / sr


def prepare_heldout(config: HeldoutConfig) -> list[Utterance]:
    """Synthesize `config.manifest`'s sentences with each festival voice into `config.out_dir`.

    Returns:
        The utterances written to out_dir/<name>.jsonl (absolute audio paths).

    Raises:
        FileNotFoundError: festival's text2wave or every voice is missing (the message names the packages).
        ValueError: the manifest has no sentences, `voices` names one this module doesn't know, or `name` is
            not a plain file name.
        RuntimeError: most utterances fail (festival is broken, not one sentence).
    """
    if not config.name or Path(config.name).name != config.name or config.name in (".", ".."):
        raise ValueError(f"`name` must be a plain file name (out_dir/<name>.jsonl), got {config.name!r}")
    packages = dict(FESTIVAL_VOICES)
    unknown = [v for v in config.voices if v not in packages]
    if unknown:
        raise ValueError(f"`voices`: unknown festival voices {unknown}; choose from {list(packages)}")
    hint = "apt-get install festival " + " ".join(packages[v] for v in config.voices)
    text2wave = shutil.which("text2wave")
    if text2wave is None:
        raise FileNotFoundError(f"`text2wave` (festival) is not on PATH; install it with `{hint}` "
                                "(or `tools/apt-deps.sh heldout`)")
    installed = festival_voices_installed()
    voices = [v for v in config.voices if v in installed]
    for v in config.voices:
        if v not in installed:
            log.warning("heldout: festival voice %s is not installed (apt-get install %s): skipped", v, packages[v])
    if not voices:
        raise FileNotFoundError(f"no festival voice of {list(config.voices)} is installed; install them with "
                                f"`{hint}` (or `tools/apt-deps.sh heldout`)")
    sentences = list(dict.fromkeys(u.text for u in read_manifest(config.manifest)))
    sentences = sentences[:config.max_sentences] if config.max_sentences > 0 else sentences
    if not sentences:
        raise ValueError(f"{config.manifest}: no sentences to read")
    out_dir = Path(config.out_dir).expanduser().resolve()
    jobs = []
    for voice in voices:
        for text in sentences:
            key = hashlib.sha1(f"{voice}\n{text}".encode()).hexdigest()[:10]
            wav = out_dir / config.name / "wav" / f"festival-{voice}" / f"{len(jobs):06d}-{key}.wav"
            jobs.append((text, voice, wav))
    utterances, failed = [], []
    with concurrent.futures.ThreadPoolExecutor(config.num_workers, thread_name_prefix="heldout") as pool:
        futures = [pool.submit(_render, text, voice, path, text2wave) for text, voice, path in jobs]
        for (text, voice, path), future in progress_bar(zip(jobs, futures), total=len(jobs), unit="utt",
                                                        desc="festival voices", show=config.progress):
            try:
                duration = future.result()
            except Exception as e:  # one bad utterance is skipped, counted and reported
                failed.append(f"{voice} {text!r}: {e}")
                log.warning("heldout: skipped %s %r: %s", voice, text, e)
                continue
            utterances.append(Utterance(audio_filepath=str(path), duration=round(duration, 4), text=text,
                                        speaker=f"festival-{voice}", language="en", extra={"engine": "festival"}))
    if len(failed) > len(utterances):
        raise RuntimeError(f"festival failed on {len(failed)} of {len(jobs)} utterances; the last error: "
                           f"{failed[-1]}")
    write_manifest(out_dir / f"{config.name}.jsonl", utterances)
    log.info("heldout: %d utterances from %d festival voices (%d failed) in %s", len(utterances), len(voices),
             len(failed), out_dir / f"{config.name}.jsonl")
    return utterances

