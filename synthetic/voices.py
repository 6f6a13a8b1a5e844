"""The tiny corpus' voices: who speaks each split. A *speaker* is a fixed (engine, voice, variant) combination,
e.g. espeak-ng `en-gb-scotland` + variant `m3`, or flite `slt`, with its own base rate and pitch (and, for the
flite, neural and voice-bank speakers, its own vocal tract). Train, dev and test never share a speaker nor an
espeak-ng variant; the test split alone has the Caribbean accent (`en-029`) and flite's `slt`; the neural voices
(neural.py) and the voice banks (voicebanks.py) speak in training and, as speakers of their own (DEV_NEURAL_VOICES,
DEV_VOICEBANKS, drawn from dev's streams), in dev, where they read dev's sentences again (tiny.py); Kokoro's speakers
speak in training only.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from deepspeech2_synthetic import neural, voicebanks
from deepspeech2_synthetic.sources import Flite, Kokoro, NeuralVoices, VoiceBanks

if TYPE_CHECKING:
    from deepspeech2_synthetic.tiny import TinyCorpusConfig

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")

# espeak-ng voices (accents) read English; `en` is the same voice as `en-gb`, so it is left out.
EN_TRAIN_ACCENTS = ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-rp", "en-gb-x-gbcwmd",
                    "en-us-nyc")
EN_TEST_ONLY_ACCENT = "en-029"  # Caribbean: an accent the model never hears in training
# espeak-ng 1.51's `cmn` voice reads its own pinyin with the English voice ("lan2" -> "lan two");
# `cmn-latn-pinyin` uses the same dictionary with Mandarin phonemes and tones.
ZH_VOICES = ("cmn-latn-pinyin", "cmn")

# espeak-ng variants (voices/!v/). Left out: robotic or effect voices (robosoft*, RicishayMax*, UniRobot,
# anikaRobot, announcer, Demonic, Tweaky, AnxiousAndy), `fast` (a test voice), `Mr serious` (a space in
# its name), and `klatt6` and `caleb`, which sound exactly like `klatt`.
FEMALE_VARIANTS = ("f1", "f2", "f3", "f4", "f5", "whisperf", "Alicia", "Andrea", "Annie", "aunty", "belinda",
                   "linda", "steph", "steph2", "steph3", "anika", "grandma")
MALE_VARIANTS = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "klatt", "klatt2", "klatt3", "klatt4",
                 "klatt5", "croak", "whisper", "Alex", "Andy", "Denis", "Diogo", "Gene", "Gene2", "Henrique",
                 "Hugo", "Jacky", "Lee", "Marco", "Mario", "Michael", "Mike", "Nguyen", "Storm", "adam",
                 "antonio", "benjamin", "boris", "david", "ed", "edward", "edward2", "grandpa", "gustave",
                 "iven", "iven2", "iven3", "iven4", "john", "kaukovalta", "marcelo", "max", "michel", "miguel",
                 "norbert", "pablo", "paul", "pedro", "quincy", "rob", "robert", "sandro", "shelby", "travis",
                 "victor", "zac")
# flite voices (16 kHz) by split, with their gender and approximate mean F0 in Hz (the `pitch` factor
# scales it; `rms` ignores it). `kal` (8 kHz) and `awb_time` (a copy of awb) are left out. With two
# training voices the model learned those two, not flite: the held-out `rms` stayed at 50-60% CER where
# unseen espeak-ng voices reached 7-12% (examples/tiny/RESULTS.md); so three train and `slt` is the test's.
FLITE_VOICES = {"train": (("kal16", "M", 105.0), ("awb", "M", 110.0), ("rms", "M", 100.0)),
                "dev": (),
                "test": (("slt", "F", 170.0),)}

# Speaking-style ranges. `rate` and `pitch` are factors around the engine's default (espeak-ng: 175 words
# per minute and pitch 50 of 0-99; flite: duration_stretch 1 and the voice's mean F0).
SPEAKER_RATE = (0.85, 1.15)  # a speaker's base rate factor
SPEAKER_PITCH = (0.8, 1.25)  # a speaker's base pitch factor
SPEAKER_WORD_GAP = (0, 4)  # espeak-ng -g: a speaker's extra pause between words, in 10 ms units
# flite's training voices are three men; the held-out one is a woman (slt), so flite speakers past the
# first of each voice spread the pitch up to the female range.
FLITE_EXTRA_PITCH = (0.8, 1.7)
# ... and their vocal tracts toward the female range: formants 0-25% higher (women's are ~15-20% above men's).
FLITE_EXTRA_FORMANT = (1.0, 1.25)
# A woman's vocal tract for `flite_female` of the extra flite speakers: formants and pitch raised together
# (formants alone, with the pitch drawn apart, leave most shifted speakers neither man nor woman).
FLITE_FEMALE_FORMANT = (1.12, 1.25)
FLITE_FEMALE_PITCH = (1.5, 2.1)  # x the voice's F0 (kal16 105 Hz, awb 110 Hz): 160-230 Hz
# Neural voices (neural.py): (engine, voice, gender). Each is spread into many speakers; hibari's
# woman also becomes men (F0 about halved, formants 8-20% lower).
NEURAL_VOICES = (("hibari", neural.HIBARI_VOICE, "F"), ("piper", "joe", "M"))
# Dev's speakers of the neural voices and the voice banks training uses (when it uses them): two of each neural voice
# and one of each voice bank, with settings of their own, so that dev (where alpha/beta are tuned) holds every kind of
# voice training has, not espeak-ng's alone (examples/tiny/RESULTS.md#dev-voices). Test has none: no test voice is
# ever heard before.
DEV_NEURAL_VOICES = NEURAL_VOICES * 2
DEV_VOICEBANKS = voicebanks.VOICES
HIBARI_MALE_PITCH = (0.5, 0.7)  # x heart's F0 (about 185 Hz): 90-130 Hz
HIBARI_MALE_FORMANT = (0.8, 0.92)
HIBARI_FEMALE_PITCH = (0.85, 1.25)  # 155-230 Hz
HIBARI_FEMALE_FORMANT = (0.95, 1.1)
# Voice banks (voicebanks.py): a speaker keeps the person's gender, with a pitch and vocal tract
# around theirs, or (VOICEBANK_CROSS of them) takes the other's: a man's F0 and formants raised, a woman's lowered.
VOICEBANK_FORMANT = (0.92, 1.08)
VOICEBANK_CROSS = 0.3
VOICEBANK_TO_FEMALE = {"pitch": (1.45, 1.8), "formant": (1.1, 1.2)}
VOICEBANK_TO_MALE = {"pitch": (0.55, 0.7), "formant": (0.84, 0.92)}
HIBARI_INTONATION = (0.6, 1.5)  # factor on the F0 curve's excursions: flat to lively
HIBARI_BREATH_DB = (-6.0, 6.0)  # gain of the noise part
PIPER_FORMANT = (0.9, 1.3)  # joe's vocal tract and pitch (about 110 Hz) together: 100-145 Hz
# Kokoro's speakers (training only): a gender, two of its English voices of that gender mixed with a weight drawn
# from KOKORO_BLEND, and a rate.
KOKORO_BLEND = (0.0, 1.0)


@dataclass(frozen=True)
class Speaker:
    """A fixed synthetic voice: one engine, voice and variant, with a base rate and pitch."""

    id: str  # "espeak-en-gb-scotland-m3", "flite-slt": the manifest's `speaker` and the wav folder
    engine: str  # "espeak-ng", "flite", "hibari", "piper", "kokoro", "mbrola", "rhvoice" or "pico"
    voice: str  # espeak-ng voice ("en-us", "cmn-latn-pinyin"), flite voice ("slt") or neural voice ("heart")
    variant: str | None  # espeak-ng variant ("m3"), None for flite
    gender: str  # "M" or "F"
    rate: float  # base speaking-rate factor (1 = the engine's default)
    pitch: float  # base pitch factor (1 = the voice's default)
    f0: float | None = None  # flite: the voice's mean F0 in Hz that `pitch` scales
    word_gap: int = 0  # espeak-ng: extra pause between words, in 10 ms units (-g)
    formant: float = 1.0  # flite: vocal-tract factor, formants scaled by it (a shorter tract above 1); the
    # output is played this much faster, its duration and F0 set that much lower at synthesis (hibari: the
    # envelopes warped; Piper and the voice banks: as flite)
    intonation: float = 1.0  # hibari: factor on the F0 curve's excursions around its mean
    breath: float = 0.0  # hibari: gain of the noise part, in dB
    variation: float = 0.0  # Piper: its generator's noise times this (`NeuralVoices.piper_variation`)
    blend: float = 1.0  # Kokoro: the first of its two voices' weight in the mix (`voice`: "af_bella+af_sarah")


def _espeak_data_dir(exe: str) -> Path | None:
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Data at:\s*(\S+)", out)
    return Path(m.group(1)) if m else None


def _espeak_voices(exe: str) -> set[str]:
    out = subprocess.run([exe, "--voices"], capture_output=True, text=True).stdout
    return {line.split()[1] for line in out.splitlines()[1:] if len(line.split()) > 1}


def variant_pitch_range(path: str | os.PathLike) -> float | None:
    """Hz an espeak-ng variant file's `pitch <base> <top>` line spans (`top - base`); None without one.

    espeak-ng scales every pitch movement by this span (voices.c: `pitch_range = (top - base) * 108`), so a
    variant with `top <= base` (`aunty`: `pitch 204 176`) turns rises into falls. Harmless for English
    intonation, but it inverts Mandarin's lexical tones: measured, `aunty` reads ma2 falling 190 -> 178 Hz
    and ma4 rising 185 -> 192 Hz, where `f1` rises 149 -> 167 and falls 165 -> 149 Hz.
    """
    for line in Path(path).read_text(errors="replace").splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "pitch":
            try:
                return float(fields[2]) - float(fields[1])
            except ValueError:
                return None
    return None


def _available_variants(exe: str, tonal: bool = False) -> tuple[list[str], list[str]]:
    """The female and male variants this espeak-ng has; `tonal`: only those that keep a tone's direction."""
    data = _espeak_data_dir(exe)
    if data is None or not (data / "voices" / "!v").is_dir():
        return list(FEMALE_VARIANTS), list(MALE_VARIANTS)  # can't check: assume the standard set
    folder = data / "voices" / "!v"
    have = {p.name for p in folder.iterdir()}
    if tonal:
        inverted = {v for v in have if (span := variant_pitch_range(folder / v)) is not None and span <= 0}
        if inverted & set(FEMALE_VARIANTS + MALE_VARIANTS):
            log.info("Mandarin leaves out espeak-ng variants whose pitch range is inverted (their tones come "
                     "out reversed): %s", ", ".join(sorted(inverted & set(FEMALE_VARIANTS + MALE_VARIANTS))))
        have -= inverted
    return [v for v in FEMALE_VARIANTS if v in have], [v for v in MALE_VARIANTS if v in have]


def _split_variants(female: Sequence[str], male: Sequence[str], sizes: dict[str, int],
                    rng: np.random.Generator) -> dict[str, list[tuple[str, str]]]:
    """Disjoint (variant, gender) lists for test and dev (of `sizes[split]`) and train (the rest), with
    about the same share of female variants in each."""
    female = [female[i] for i in rng.permutation(len(female))]
    male = [male[i] for i in rng.permutation(len(male))]
    share = len(female) / max(1, len(female) + len(male))
    out = {}
    for split in ("test", "dev"):
        n = sizes[split]
        n_f = min(len(female), max(1 if n >= 2 else 0, round(n * share)))
        n_m = n - n_f
        if n_m > len(male):
            raise ValueError(f"`{split}_speakers` is too large: only {len(female) + len(male)} espeak-ng "
                             f"variants are available for all three splits")
        out[split] = [(v, "F") for v in female[:n_f]] + [(v, "M") for v in male[:n_m]]
        female, male = female[n_f:], male[n_m:]
    train = [(v, "F") for v in female] + [(v, "M") for v in male]
    out["train"] = [train[i] for i in rng.permutation(len(train))]
    return out


def _source_voices(config: TinyCorpusConfig) -> tuple[dict[str, tuple], dict[str, tuple], dict[str, tuple], int]:
    """The voice sources' voices in each split: flite's (name, gender, F0), the neural voices' and the voice banks'
    (engine, voice, gender), each repeated to its share of the training speakers, and the number of Kokoro's."""
    en = config.language == "en"
    flite = {s: FLITE_VOICES[s] if en and config.source(Flite) else () for s in SPLITS}
    if flite["train"]:
        wanted = max(len(flite["train"]), round(config.share(Flite) * config.train_speakers))
        flite["train"] = tuple(flite["train"][j % len(flite["train"])] for j in range(wanted))
    wanted = round(config.share(NeuralVoices) * config.train_speakers) if en else 0
    neural_voices = {"train": tuple(NEURAL_VOICES[j % len(NEURAL_VOICES)] for j in range(wanted)),
                     "dev": DEV_NEURAL_VOICES if wanted else (), "test": ()}
    wanted = round(config.share(VoiceBanks) * config.train_speakers) if en else 0
    banks = {"train": tuple(voicebanks.VOICES[j % len(voicebanks.VOICES)] for j in range(wanted)),
             "dev": DEV_VOICEBANKS if wanted else (), "test": ()}
    kokoro = round(config.share(Kokoro) * config.train_speakers) if en else 0
    return flite, neural_voices, banks, kokoro


def _accents(voices: set[str], en: bool, rng: np.random.Generator) -> dict[str, list[str]]:
    """The espeak-ng voices each split's variants speak with in turn: English accents in a seeded order (test's
    own Caribbean one first), or the Mandarin voice."""
    if en:
        train_accents = [a for a in EN_TRAIN_ACCENTS if a in voices] or ["en-us"]
        rest = [train_accents[i] for i in rng.permutation(len(train_accents))]
        return {"train": rest, "dev": rest,
                "test": ([EN_TEST_ONLY_ACCENT] if EN_TEST_ONLY_ACCENT in voices else []) + rest}
    zh_voice = next((v for v in ZH_VOICES if v in voices), ZH_VOICES[0])
    if zh_voice != ZH_VOICES[0]:
        log.warning("espeak-ng has no `%s` voice; using `%s`, which some versions read as English pinyin",
                    ZH_VOICES[0], zh_voice)
    return {s: [zh_voice] for s in SPLITS}


def make_speakers(config: TinyCorpusConfig, espeak: str = "espeak-ng") -> dict[str, list[Speaker]]:
    """The speakers of each split, disjoint across splits (no variant is shared either).

    en: espeak-ng accent x variant pairs (each variant used once; `en-029` only in test) plus the voice sources'
    (config.voices); zh: the espeak-ng Mandarin voice with a different variant per speaker, less the variants whose
    inverted pitch range reverses the tones (`variant_pitch_range`).

    Raises:
        ValueError: more speakers requested than there are variants.
    """
    rng = np.random.default_rng([config.seed, 1])
    formant_rng = np.random.default_rng([config.seed, 4])  # its own draws: the other speakers stay the same
    female_rng = np.random.default_rng([config.seed, 5])  # likewise
    en = config.language == "en"
    female, male = _available_variants(espeak, tonal=not en)
    voices = _espeak_voices(espeak)
    flite, neural_voices, banks, kokoro = _source_voices(config)
    # `dev_speakers` counts dev's espeak-ng speakers: its neural and voice-bank speakers read the same sentences again
    sizes = {s: getattr(config, f"{s}_speakers") - len(flite[s])
             - (len(neural_voices[s]) + len(banks[s]) + kokoro if s == "train" else 0) for s in SPLITS}
    variants = _split_variants(female, male, sizes, rng)
    accents = _accents(voices, en, rng)
    flite_source = config.source(Flite) or Flite()
    neural_source = config.source(NeuralVoices) or NeuralVoices()
    out = {}
    for k, split in enumerate(SPLITS):
        # Each split draws its speakers' rates, pitches and word gaps from its own stream, so that dev and
        # test stay the same voices whatever the size of training (`train_speakers`, the sources' shares).
        rng = np.random.default_rng([config.seed, 1, k])
        seen = collections.Counter()
        speakers = _espeak_speakers(split, accents[split], variants[split], sizes[split], rng, seen)
        speakers += _flite_speakers(flite[split], flite_source, rng, formant_rng, female_rng, seen)
        tag = "dev" if split == "dev" else ""  # ids apart from training's (hibari-heart-dev1, not hibari-heart-1)
        speakers += _neural_speakers(neural_voices[split], np.random.default_rng([config.seed, 6, k]),
                                     neural_source.piper_variation, tag)
        speakers += _voicebank_speakers(banks[split], np.random.default_rng([config.seed, 7, k]), tag)
        if split == "train":
            speakers += _kokoro_speakers(kokoro, np.random.default_rng([config.seed, 8]))
        out[split] = speakers
    return out


def _espeak_speakers(split: str, accents: Sequence[str], variants: Sequence[tuple[str, str]], size: int,
                     rng: np.random.Generator, seen: collections.Counter) -> list[Speaker]:
    """`size` espeak-ng speakers: each variant once, with the split's accents in turn; training can ask for more
    speakers than it has variants: then further (accent, variant) pairs, every variant with every accent before
    any pair repeats (a repeated pair gets a numbered id and its own rate, pitch and word gap)."""
    pool = [(accents[j % len(accents)], variant, gender) for j, (variant, gender) in enumerate(variants)]
    if split == "train" and size > len(pool):
        pairs = [(a, v, g) for a in accents for v, g in variants]
        pairs = [pairs[i] for i in rng.permutation(len(pairs))]
        pool += [p for p in pairs if p not in pool]
        pool += [pool[j % len(pool)] for j in range(size - len(pool))]
    elif size > len(pool):
        raise ValueError(f"`{split}_speakers` is too large: only {len(pool)} espeak-ng variants are left "
                         f"for {split} (dev and test never share a variant with training)")
    speakers = []
    for voice, variant, gender in pool[:size]:
        rate, pitch = float(rng.uniform(*SPEAKER_RATE)), float(rng.uniform(*SPEAKER_PITCH))
        gap = int(rng.integers(SPEAKER_WORD_GAP[0], SPEAKER_WORD_GAP[1] + 1))
        name = f"espeak-{voice}-{variant}".lower()
        seen[name] += 1
        speakers.append(Speaker(id=name if seen[name] == 1 else f"{name}-{seen[name]}", engine="espeak-ng",
                                voice=voice, variant=variant, gender=gender, rate=round(rate, 3),
                                pitch=round(pitch, 3), word_gap=gap))
    return speakers


def _flite_speakers(voices: Sequence[tuple[str, str, float]], source: Flite, rng: np.random.Generator,
                    formant_rng: np.random.Generator, female_rng: np.random.Generator,
                    seen: collections.Counter) -> list[Speaker]:
    """One speaker per (voice, gender, F0) entry; a voice's first keeps its own pitch range, the extra ones get
    FLITE_EXTRA_PITCH and, per `source`, raised formants or a woman's formants and pitch."""
    speakers = []
    for name, gender, f0 in voices:
        seen[name] += 1
        rate = float(rng.uniform(*SPEAKER_RATE))
        pitch = float(rng.uniform(*(SPEAKER_PITCH if seen[name] == 1 else FLITE_EXTRA_PITCH)))
        extra = seen[name] > 1 and source.formants
        formant = float(formant_rng.uniform(*FLITE_EXTRA_FORMANT)) if extra else 1.0
        if seen[name] > 1 and female_rng.random() < source.female:
            gender = "F"
            formant = float(female_rng.uniform(*FLITE_FEMALE_FORMANT))
            pitch = float(female_rng.uniform(*FLITE_FEMALE_PITCH))
        speakers.append(Speaker(id=f"flite-{name}" if seen[name] == 1 else f"flite-{name}-{seen[name]}",
                                engine="flite", voice=name, variant=None, gender=gender, rate=round(rate, 3),
                                pitch=round(pitch, 3), f0=f0, formant=round(formant, 3)))
    return speakers


def _neural_speakers(voices: Sequence[tuple[str, str, str]], rng: np.random.Generator,
                     piper_variation: float = 0.0, tag: str = "") -> list[Speaker]:
    """One speaker per (engine, voice, gender) entry, each with its own draw of the engine's spreads; ids
    `<engine>-<voice>-<tag><n>`."""
    speakers, seen = [], collections.Counter()
    for engine, voice, gender in voices:
        seen[voice] += 1
        rate = float(rng.uniform(*SPEAKER_RATE))
        if engine == "hibari":
            gender = "M" if rng.random() < 0.5 else "F"
            pitch = float(rng.uniform(*(HIBARI_MALE_PITCH if gender == "M" else HIBARI_FEMALE_PITCH)))
            formant = float(rng.uniform(*(HIBARI_MALE_FORMANT if gender == "M" else HIBARI_FEMALE_FORMANT)))
            intonation, breath = float(rng.uniform(*HIBARI_INTONATION)), float(rng.uniform(*HIBARI_BREATH_DB))
        else:  # piper: one factor moves the vocal tract and the pitch together
            pitch, formant, intonation, breath = 1.0, float(rng.uniform(*PIPER_FORMANT)), 1.0, 0.0
        speakers.append(Speaker(id=f"{engine}-{voice}-{tag}{seen[voice]}", engine=engine, voice=voice, variant=None,
                                gender=gender, rate=round(rate, 3), pitch=round(pitch, 3), formant=round(formant, 3),
                                intonation=round(intonation, 3), breath=round(breath, 2),
                                variation=piper_variation if engine == "piper" else 0.0))
    return speakers


def _voicebank_speakers(voices: Sequence[tuple[str, str, str]], rng: np.random.Generator,
                        tag: str = "") -> list[Speaker]:
    """One speaker per (engine, voice, gender) entry: the person's rate, pitch and vocal tract spread, some of
    them crossed to the other gender; ids `<engine>-<voice>-<tag><n>`."""
    speakers, seen = [], collections.Counter()
    for engine, voice, gender in voices:
        seen[voice] += 1
        rate, pitch = float(rng.uniform(*SPEAKER_RATE)), float(rng.uniform(*SPEAKER_PITCH))
        formant = float(rng.uniform(*VOICEBANK_FORMANT))
        if rng.random() < VOICEBANK_CROSS:
            spread = VOICEBANK_TO_FEMALE if gender == "M" else VOICEBANK_TO_MALE
            gender = "F" if gender == "M" else "M"
            pitch, formant = float(rng.uniform(*spread["pitch"])), float(rng.uniform(*spread["formant"]))
        speakers.append(Speaker(id=f"{engine}-{voice}-{tag}{seen[voice]}", engine=engine, voice=voice, variant=None,
                                gender=gender, rate=round(rate, 3), pitch=round(pitch, 3), formant=round(formant, 3)))
    return speakers


def _kokoro_speakers(n: int, rng: np.random.Generator) -> list[Speaker]:
    """`n` Kokoro speakers, ids `kokoro-<n>`: each a gender (half and half), two of Kokoro's English voices of that
    gender mixed (`voice` "a+b", `blend` a's weight) and a base rate."""
    speakers = []
    for j in range(n):
        gender = "M" if rng.random() < 0.5 else "F"
        pool = neural.KOKORO_MEN if gender == "M" else neural.KOKORO_WOMEN
        a, b = (pool[i] for i in rng.choice(len(pool), 2, replace=False))
        blend, rate = float(rng.uniform(*KOKORO_BLEND)), float(rng.uniform(*SPEAKER_RATE))
        speakers.append(Speaker(id=f"kokoro-{j + 1}", engine="kokoro", voice=f"{a}+{b}", variant=None, gender=gender,
                                rate=round(rate, 3), pitch=1.0, blend=round(blend, 3)))
    return speakers
