"""The tiny synthetic corpus: Debian fortunes read aloud by espeak-ng, flite, neural voices and voice banks.

It is the default data of the demo, so the whole pipeline runs with no download:

    out/train.jsonl, dev.jsonl, test.jsonl     manifests (speaker, engine and language set, paths relative)
    out/wav/<split>/<speaker>/<id>.wav         16 kHz mono 16-bit audio
    out/lm_text.txt                            normalized fortunes sentences, less any containing a dev/test one
    out/speakers.json                          the speaker split and the generation parameters

Sentences come from the `fortunes` (English) or `fortunes-zh` (Mandarin, Simplified characters only)
Debian packages, split, cleaned and normalized (deepspeech2/text.py). A *speaker* is a fixed
(engine, voice, variant) combination, e.g. espeak-ng `en-gb-scotland` + variant `m3`, or flite `slt`,
with its own base rate and pitch; each utterance jitters rate, pitch and level around them. Train, dev
and test are disjoint by sentence and by speaker: the dev and test speakers use espeak variants that
training never hears, the test split alone has the Caribbean accent (`en-029`) and a flite voice (`slt`,
flite's only woman: flite has four usable voices, and a model that hears two of them learns those two rather
than flite's way of speaking, so training gets three and dev none). Mandarin uses espeak-ng's
`cmn-latn-pinyin` voice with the variants as speakers, less those whose inverted pitch range reverses the tones.
`neural_share` of the training speakers are neural voices (deepspeech2/data/neural.py: hibari's woman and
Piper's man, spread into many speakers by pitch, intonation, vocal-tract length, breathiness and rate), and
`voicebank_share` are voice banks of real people (deepspeech2/data/voicebanks.py: MBROLA's, RHVoice's and Pico's
eleven English voices, spread by rate, pitch, vocal-tract length and gender); dev and test have neither, so no
test voice is ever a training voice. The synthesizers read the normalized transcript itself,
so audio and text always agree.

Everything derives from `seed` by utterance index (a job's sentence, speaker and parameters never depend
on the order in which workers finish), and the synthesizers are deterministic, so the same seed gives
byte-identical audio and manifests. Each WAV is written atomically under a name that hashes its content
(text, voice, parameters), so an interrupted run resumes by reusing what exists; manifests are written
last. A split stops as soon as the accepted utterances (an in-order prefix of the job list) reach its
duration target; WAVs under `out/wav` that no manifest lists (renders past the target, another seed) are
removed. A failed utterance is skipped, counted in the log and in speakers.json.
"""

from __future__ import annotations

import bisect
import collections
import concurrent.futures
import dataclasses
import hashlib
import itertools
import json
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2.audio import SAMPLE_RATE, audio_info, decode_audio_bytes, resample, save_wav, shifted_rate
from deepspeech2.data import neural, voicebanks
from deepspeech2.data.channel import Channel, apply_channel, draw_channel
from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2.fileio import atomic_write, write_json
from deepspeech2.progress import progress_bar
from deepspeech2.text import normalize_english, normalize_mandarin

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
FORTUNES_DIR = "/usr/share/games/fortunes"  # Debian packages `fortunes` and `fortunes-zh`
ZH_FORTUNE_FILES = ("chinese", "tang300", "song100")  # fortunes-zh (UTF-8, mostly Simplified)
# Pictures and code, not sentences; and fortune-anarchism's and fortunes-bofh-excuses' files (`tools/apt-deps.sh
# lmtext`, english_text.py's sources), which would change the tiny corpus' sentences wherever they are installed.
EN_FORTUNE_SKIP = ("ascii-art", "perl", "anarchism", "bofh-excuses") + ZH_FORTUNE_FILES
APT_HINT = "install it with `apt-get install espeak-ng flite fortunes fortunes-zh` (or `tools/apt-deps.sh base`)"

# Bump when synthesis or post-processing changes, so resumed runs don't reuse stale audio.
SYNTH_VERSION = 1

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
# unseen espeak-ng voices reached 7-12% (docs/experiments.md, E4); so three train and `slt` is the test's.
FLITE_VOICES = {"train": (("kal16", "M", 105.0), ("awb", "M", 110.0), ("rms", "M", 100.0)),
                "dev": (),
                "test": (("slt", "F", 170.0),)}

# Speaking-style ranges. `rate` and `pitch` are factors around the engine's default (espeak-ng: 175 words
# per minute and pitch 50 of 0-99; flite: duration_stretch 1 and the voice's mean F0).
ESPEAK_DEFAULT_WPM = 175
SPEAKER_RATE = (0.85, 1.15)  # a speaker's base rate factor
SPEAKER_PITCH = (0.8, 1.25)  # a speaker's base pitch factor
SPEAKER_WORD_GAP = (0, 4)  # espeak-ng -g: a speaker's extra pause between words, in 10 ms units
# flite's training voices are three men; the held-out one is a woman (slt), so flite speakers past the
# first of each voice spread the pitch up to the female range.
FLITE_EXTRA_PITCH = (0.8, 1.7)
# ... and their vocal tracts toward the female range: formants 0-25% higher (women's are ~15-20% above men's).
FLITE_EXTRA_FORMANT = (1.0, 1.25)
# A woman's vocal tract for `flite_female` of the extra flite speakers: formants and pitch raised together
# (E8's formants alone, with the pitch drawn apart, left most shifted speakers neither man nor woman).
FLITE_FEMALE_FORMANT = (1.12, 1.25)
FLITE_FEMALE_PITCH = (1.5, 2.1)  # x the voice's F0 (kal16 105 Hz, awb 110 Hz): 160-230 Hz
# Neural training voices (deepspeech2/data/neural.py): (engine, voice, gender) by split. Each is spread into many
# speakers; hibari's woman also becomes men (F0 about halved, formants 8-20% lower).
NEURAL_VOICES = {"train": (("hibari", neural.HIBARI_VOICE, "F"), ("piper", "joe", "M")), "dev": (), "test": ()}
HIBARI_MALE_PITCH = (0.5, 0.7)  # x heart's F0 (about 185 Hz): 90-130 Hz
HIBARI_MALE_FORMANT = (0.8, 0.92)
HIBARI_FEMALE_PITCH = (0.85, 1.25)  # 155-230 Hz
HIBARI_FEMALE_FORMANT = (0.95, 1.1)
# Voice banks (deepspeech2/data/voicebanks.py): a speaker keeps the person's gender, with a pitch and vocal tract
# around theirs, or (VOICEBANK_CROSS of them) takes the other's: a man's F0 and formants raised, a woman's lowered.
VOICEBANK_FORMANT = (0.92, 1.08)
VOICEBANK_CROSS = 0.3
VOICEBANK_TO_FEMALE = {"pitch": (1.45, 1.8), "formant": (1.1, 1.2)}
VOICEBANK_TO_MALE = {"pitch": (0.55, 0.7), "formant": (0.84, 0.92)}
HIBARI_INTONATION = (0.6, 1.5)  # factor on the F0 curve's excursions: flat to lively
HIBARI_BREATH_DB = (-6.0, 6.0)  # gain of the noise part
PIPER_FORMANT = (0.9, 1.3)  # joe's vocal tract and pitch (about 110 Hz) together: 100-145 Hz
UTT_JITTER = (0.93, 1.07)  # per-utterance factor on both, around the speaker's base
ESPEAK_AMPLITUDE = (40, 80)  # espeak-ng -a (default 100 clips some variants)
PEAK_DBFS = (-14.0, -1.0)  # per-utterance output level: peak in dB below full scale
PAD_SECONDS = (0.05, 0.35)  # random silence added before and after the trimmed speech
TRIM_THRESHOLD = 1e-3  # |x| below this at either end is synthesizer silence and is trimmed
# The fewest seconds an utterance can last (3 short words at the fastest rate plus padding): dev and test
# reserve `minutes * 60 / MIN_UTT_SECONDS` sentences, so they never run out before their target.
MIN_UTT_SECONDS = 0.75
ZH_CLAUSE_SPLIT_CHARS = 20  # zh: a sentence longer than this is split into its clauses
LM_MAX_WORDS = 40  # lm_text also keeps sentences longer than `max_words` (but not whole paragraphs)
DURATION_DECIMALS = 4  # manifests store seconds to 0.1 ms (manifest.Utterance.to_json); so do we
# A synthesizer that fails this often is broken (not one odd sentence): stop with its error.
MAX_FAILURES = 20


@dataclass(frozen=True)
class TinyCorpusConfig:
    """How to synthesize the tiny corpus. Equal configs give identical corpora."""

    out_dir: str | os.PathLike  # where manifests, wav/, lm_text.txt and speakers.json go
    hours: float = 1.0  # hours of TRAIN audio; generation stops once reached
    dev_minutes: float = 5.0  # minutes of dev audio
    test_minutes: float = 5.0  # minutes of test audio
    seed: int = 0  # the same seed gives the same sentences, speakers, parameters and audio
    language: str = "en"  # "en" (fortunes, espeak-ng + flite) or "zh" (fortunes-zh, espeak-ng Mandarin)
    num_workers: int = 2  # synthesizer processes running at once
    min_words: int = 3  # en: shortest sentence, in words
    max_words: int = 15  # en: longest sentence, in words
    min_chars: int = 4  # zh: shortest sentence, in characters
    max_chars: int = 20  # zh: longest sentence, in characters
    common_chars: int = 0  # zh: only sentences made of fortunes-zh's N most frequent characters, so that an
    # hour of audio shows each character often enough to learn it (docs/experiments.md, Mandarin); 0: all
    train_speakers: int = 40  # speakers in train (en: 3 of them flite voices); beyond the number of training
    # variants, espeak-ng speakers reuse variants with other accents, rates, pitches and word gaps
    dev_speakers: int = 8  # unseen speakers in dev (en: espeak-ng only)
    test_speakers: int = 8  # unseen speakers in test (en: 1 flite voice)
    use_flite: bool = True  # en: add the flite voices to the speaker pool
    flite_share: float = 0.0  # en: at least this fraction of the training speakers are flite voices (its
    # three training voices again with other rates and pitches); 0: each training flite voice once
    flite_formants: bool = False  # en: those extra flite speakers also get formants up to 25% higher
    # (FLITE_EXTRA_FORMANT), toward the female range none of flite's training voices has
    flite_female: float = 0.0  # en: this share of the extra flite speakers get a woman's formants and pitch
    # together (FLITE_FEMALE_FORMANT, FLITE_FEMALE_PITCH): flite's three training voices are men
    neural_share: float = 0.0  # en: this fraction of the training speakers are neural voices (NEURAL_VOICES in
    # turn, each speaker its own pitch, intonation, vocal tract, breathiness and rate); 0: none
    voicebank_share: float = 0.0  # en: this fraction of the training speakers are voice banks of real people
    # (deepspeech2/data/voicebanks.py: MBROLA, RHVoice, Pico; VOICES in turn, each its own rate, pitch, vocal
    # tract and gender); 0: none
    channel_share: float = 0.0  # this fraction of the training utterances are heard through a recording channel
    # (deepspeech2/data/channel.py: MP3 at 32-64 kbit/s, half of them band-limited too); dev and test stay clean
    fortunes_dir: str = FORTUNES_DIR  # the Debian fortunes files
    progress: bool = True  # show a progress bar per split

    def __post_init__(self):
        if self.language not in ("en", "zh"):
            raise ValueError(f"`language` must be 'en' or 'zh', got {self.language!r}")
        for name in ("hours", "dev_minutes", "test_minutes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"`{name}` must be a positive number, got {value!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"`seed` must be a non-negative integer, got {self.seed!r}")
        if not isinstance(self.num_workers, int) or self.num_workers < 1:
            raise ValueError(f"`num_workers` must be an integer >= 1, got {self.num_workers!r}")
        if not 0 <= self.flite_share < 1:
            raise ValueError(f"`flite_share` must be in [0, 1), got {self.flite_share!r}")
        if not 0 <= self.neural_share < 1 or not 0 <= self.flite_share + self.neural_share < 1:
            raise ValueError(f"`neural_share` must be in [0, 1) and leave room for espeak-ng voices beside "
                             f"`flite_share` ({self.flite_share}), got {self.neural_share!r}")
        if not 0 <= self.voicebank_share < 1 or not self.flite_share + self.neural_share + self.voicebank_share < 1:
            raise ValueError(f"`voicebank_share` must be in [0, 1) and leave room for espeak-ng voices beside "
                             f"`flite_share` ({self.flite_share}) and `neural_share` ({self.neural_share}), got "
                             f"{self.voicebank_share!r}")
        for name in ("neural_share", "voicebank_share"):
            if getattr(self, name) and self.language != "en":
                raise ValueError(f"`{name}` ({getattr(self, name)}) is for English (`language`='en'), got "
                                 f"`language`={self.language!r}")
        if isinstance(self.channel_share, bool) or not isinstance(self.channel_share, (int, float)) \
                or not 0 <= self.channel_share <= 1:
            raise ValueError(f"`channel_share` must be in [0, 1], got {self.channel_share!r}")
        if not 0 <= self.flite_female <= 1:
            raise ValueError(f"`flite_female` must be in [0, 1], got {self.flite_female!r}")
        if not 1 <= self.min_words <= self.max_words:
            raise ValueError(f"need 1 <= `min_words` <= `max_words`, got {self.min_words!r} and {self.max_words!r}")
        if not 1 <= self.min_chars <= self.max_chars:
            raise ValueError(f"need 1 <= `min_chars` <= `max_chars`, got {self.min_chars!r} and {self.max_chars!r}")
        if isinstance(self.common_chars, bool) or not isinstance(self.common_chars, int) or self.common_chars < 0:
            raise ValueError(f"`common_chars` must be an int >= 0 (0: every character), got {self.common_chars!r}")
        if self.common_chars and self.language != "zh":
            raise ValueError(f"`common_chars` ({self.common_chars}) is for Mandarin (`language`='zh'), got "
                             f"`language`={self.language!r}")
        for split in SPLITS:
            n = getattr(self, f"{split}_speakers")
            flite = len(FLITE_VOICES[split]) if self.language == "en" and self.use_flite else 0
            if not isinstance(n, int) or n < flite + 1:
                raise ValueError(f"`{split}_speakers` must be an integer >= {flite + 1} (the {flite} flite "
                                 f"voice(s) plus at least one espeak-ng voice), got {n!r}")


@dataclass(frozen=True)
class Speaker:
    """A fixed synthetic voice: one engine, voice and variant, with a base rate and pitch."""

    id: str  # "espeak-en-gb-scotland-m3", "flite-slt": the manifest's `speaker` and the wav folder
    engine: str  # "espeak-ng", "flite", "hibari", "piper", "mbrola", "rhvoice" or "pico"
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


@dataclass(frozen=True)
class _Job:
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
        speaker = dataclasses.asdict(self.speaker)
        for field, default in (("formant", 1.0), ("intonation", 1.0), ("breath", 0.0)):
            if speaker[field] == default:  # fields that came later: voices without them keep their files
                del speaker[field]
        fields = [SYNTH_VERSION, self.text, speaker, self.rate, self.pitch, self.amplitude, self.peak_dbfs, self.lead,
                  self.trail]
        if self.channel is not None:  # clean utterances keep their files
            fields.append(self.channel.to_dict())
        payload = json.dumps(fields, ensure_ascii=False)
        return hashlib.sha1(payload.encode("utf-8")).hexdigest()[:10]

    def path(self, out_dir: Path) -> Path:
        return out_dir / "wav" / self.split / self.speaker.id / f"{self.index:06d}-{self.key()}.wav"


# ------------------------------------------------------------------------------------------- sentences

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OVERSTRIKE = re.compile(r".\x08")  # nroff-style bold/underline: "_\bw" -> "w"
_BOX = re.compile(r"[\u2500-\u257f]")  # box-drawing characters (Debian reference card fortunes)

# English: characters a clean sentence may have. No ':' (dialogue labels, times), no brackets, slashes,
# '@', '_', '#', '=', '*', '<>': those mean code, URLs, e-mail, markup or editorial notes.
_EN_CLEAN = re.compile(r"^[A-Za-z0-9 ,;'\"!?.\-()$%&]+$")
_EN_SENTENCE_END = re.compile(r"[.!?]+[\"')]*(?=\s|$)")
_EN_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr vs etc prof gen col capt lt sgt mt inc ltd co rev hon gov sen rep ft ave".split())
# Abbreviations are written out as they are read (espeak-ng says "mister" for "mr", LibriSpeech writes
# MISTER); a sentence with any other abbreviation ("St." is saint or street) is dropped.
_EN_EXPANSIONS = {"mr": "mister", "mrs": "missus", "dr": "doctor", "vs": "versus", "etc": "et cetera",
                  "prof": "professor", "jr": "junior", "sr": "senior"}
_EN_ABBREVIATION = re.compile(r"\b([A-Za-z]+)\.(?=\s+\S)")
_EN_ACRONYM = re.compile(r"[A-Z]{2,}|\w\.\w")  # "NASA", "U.S.": spoken letter by letter, not as words
_EN_URLISH = re.compile(r"www|http|\.com|\.org", re.IGNORECASE)
_EN_ATTRIBUTION = re.compile(r"^\s*(--|-\s|~~|\u2014)")
_EN_MAX_SYMBOL_FRACTION = 0.1  # more punctuation than this is a table, a list or a joke in symbols

_ZH_CLAUSE = re.compile(r"[，、：,:]")


def _fortunes(path: Path) -> Iterator[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    text = _OVERSTRIKE.sub("", _ANSI.sub("", text)).replace("\r", "")
    for fortune in re.split(r"^%\s*$", text, flags=re.MULTILINE):
        if fortune.strip():
            yield fortune


def _en_paragraphs(fortune: str) -> Iterator[str]:
    for para in re.split(r"\n\s*\n", fortune):
        lines = []
        for line in para.split("\n"):
            if _EN_ATTRIBUTION.match(line):
                break  # "-- Mark Twain" and its continuation lines
            lines.append(line.strip())
        para = " ".join(lines).strip()
        if para:
            yield re.sub(r"\s+", " ", para)


def _en_split(para: str) -> Iterator[str]:
    start = 0
    for m in _EN_SENTENCE_END.finditer(para):
        before = para[start:m.start()].rsplit(" ", 1)[-1].lstrip("\"'(")
        if m.group(0) == "." and (before.lower() in _EN_ABBREVIATIONS or re.fullmatch(r"[A-Z]", before)):
            continue  # "Mr. Smith", "J. R. R. Tolkien"
        yield para[start:m.end()].strip()
        start = m.end()
    if para[start:].strip():
        yield para[start:].strip()


def _en_clean(sentence: str) -> str | None:
    """The normalized sentence, or None when it has oddities that a reader would not say as written."""
    s = sentence.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    if not _EN_CLEAN.match(s) or _EN_URLISH.search(s) or _EN_ACRONYM.search(s):
        return None
    first = re.search(r"[A-Za-z0-9]", s)
    if first is None or s[first.start()].islower() or re.match(r"\W*\d+[.)]", s):
        return None  # a fragment of a sentence split in the wrong place, or a list item ("8) Use ...")
    symbols = sum(1 for c in s if not (c.isalnum() or c.isspace()))
    if symbols > _EN_MAX_SYMBOL_FRACTION * len(s) + 2:
        return None
    for m in _EN_ABBREVIATION.finditer(s):
        if m.group(1).lower() in _EN_ABBREVIATIONS and m.group(1).lower() not in _EN_EXPANSIONS:
            return None
    s = _EN_ABBREVIATION.sub(lambda m: _EN_EXPANSIONS.get(m.group(1).lower(), m.group(0)), s)
    s = re.sub(r"\b(\w+)\.?$", lambda m: _EN_EXPANSIONS.get(m.group(1).lower(), m.group(0)), s)
    return normalize_english(s) or None


def _zh_lines(fortune: str) -> Iterator[str]:
    for para in re.split(r"\n\s*\n", fortune):
        kept = []
        for line in para.split("\n"):
            line = _BOX.sub("", line).strip()
            if not line or line.startswith(("--", "——", "题目")) or "作者" in line:
                continue  # an attribution, a title ("题目:《塞上》") or an author
            if re.fullmatch(r"[《〈][^，。！？；]*", line) or (len(line) <= 5 and not re.search(r"[，。！？；]", line)):
                continue  # a title ("《感遇・其一》") or a heading ("其一")
            kept.append(line)
        if kept:
            yield "".join(kept)  # Chinese wraps lines mid-sentence: join without a space


# Text of Han characters and Chinese punctuation only (the bulk of poetry) normalizes to its Han characters: the
# fast path `_zh_plain` skips normalize_mandarin's readings there, 5x faster on the 16 M characters of
# deepspeech2.data.poetry (tests/test_tiny.py checks it against normalize_mandarin).
_ZH_PLAIN = re.compile(r"[\u4e00-\u9fff\s，。、！？；：“”‘’《》〈〉「」『』（）…—·]*")
_ZH_NOT_HAN = re.compile(r"[^\u4e00-\u9fff]+")


def _zh_plain(piece: str) -> str | None:
    """`normalize_mandarin(piece)` for Han characters and Chinese punctuation only; None for anything else."""
    return _ZH_NOT_HAN.sub("", piece) if _ZH_PLAIN.fullmatch(piece) else None


def _zh_normalize(piece: str) -> str:
    if (plain := _zh_plain(piece)) is not None:
        return plain
    # normalize_mandarin reads digits as numerals; serial numbers and huge values are not sentences.
    return "" if re.search(r"[0-9０-９]{9,}", piece) else normalize_mandarin(piece)


def _zh_clean(piece: str) -> str | None:
    if re.search(r"[A-Za-z\\/@_#=<>|{}\[\]*~^$%&]", piece):
        return None  # Latin (commands, names) or code: espeak-ng would read it as English
    text = _zh_normalize(piece)
    if not text:
        return None
    try:
        text.encode("gb2312")  # GB2312 has Simplified characters only (and no rare ones espeak-ng lacks)
    except UnicodeEncodeError:
        return None
    return text


def _zh_length(sentence: str) -> int:
    # The length as read, Latin letters kept: a sentence that can't be normalized as a whole (Latin, an
    # ambiguous number) is still split, so its good clauses survive and only the doubtful one is dropped.
    if (plain := _zh_plain(sentence)) is not None:
        return len(plain or sentence)
    return len(normalize_mandarin(sentence, keep_latin=True) or sentence)


def _zh_split(para: str, max_chars: int) -> Iterator[str]:
    for m in re.finditer(r"[^。！？；!?;…]+(?:[。！？；!?;…]+[”’」』）)]*)?", para):
        sentence = m.group(0)
        if _zh_length(sentence) > max_chars:
            yield from _ZH_CLAUSE.split(sentence)  # long sentences: their clauses
        else:
            yield sentence


def zh_sentences(paragraph: str, max_len: int | None = None) -> Iterator[str]:
    """A paragraph of Chinese text as normalized sentences of 2+ characters, split at clauses when longer than
    `max_len` (default ZH_CLAUSE_SPLIT_CHARS); sentences with Latin, code or a character outside GB2312
    (Traditional or rare) are dropped."""
    for piece in _zh_split(paragraph, max_len or ZH_CLAUSE_SPLIT_CHARS):
        text = _zh_clean(piece)
        if text and len(text) >= 2:
            yield text


def load_sentences(language: str, fortunes_dir: str | os.PathLike = FORTUNES_DIR,
                   max_len: int | None = None) -> list[str]:
    """Normalized, deduplicated fortunes sentences in file order.

    Args:
        language: "en" (every fortunes file but pictures, code and Chinese) or "zh" (fortunes-zh, sentences
            in Simplified characters only, split at clauses when longer than `max_len` characters).
        fortunes_dir: folder of the fortunes files.
        max_len: en: longest sentence kept, words (default LM_MAX_WORDS); zh: clause-split threshold.

    Raises:
        FileNotFoundError: the fortunes files are not installed.
    """
    root = Path(fortunes_dir)
    if language == "en":
        files = sorted(p for p in root.glob("*") if p.is_file() and "." not in p.name
                       and p.name not in EN_FORTUNE_SKIP) if root.is_dir() else []
        package = "fortunes"
    else:
        files = [root / name for name in ZH_FORTUNE_FILES if (root / name).is_file()]
        package = "fortunes-zh"
    if not files:
        raise FileNotFoundError(f"no {package} files in `fortunes_dir` {str(root)!r}; {APT_HINT}")
    seen, out = set(), []
    for path in files:
        for fortune in _fortunes(path):
            if language == "en":
                candidates = (_en_clean(s) for para in _en_paragraphs(fortune) for s in _en_split(para))
                limit = max_len or LM_MAX_WORDS
                texts = (t for t in candidates if t and len(t.split()) <= limit)
            else:
                texts = (t for para in _zh_lines(fortune) for t in zh_sentences(para, max_len))
            for text in texts:
                if text not in seen:
                    seen.add(text)
                    out.append(text)
    return out


def exclude_held_out(lines: Sequence[str], held_out: Iterable[str], language: str) -> list[str]:
    """The LM lines that contain no held-out sentence, so the LM never saw a dev or test transcript.

    A held-out sentence can sit inside a longer line ("i will fight no more" in "... i will fight no more
    forever"), so dropping exact matches is not enough: a line goes if any held-out sentence occurs in it,
    on word boundaries for English ("he ran" is not in "she ran") and anywhere for Mandarin (no spaces).
    Both sides must be normalized the same way (they are: both come from `load_sentences`).

    Args:
        lines: normalized LM sentences, one per item (no newlines).
        held_out: normalized dev and test transcripts.
        language: "en" (words separated by single spaces) or "zh" (characters).

    Returns:
        `lines` in order, less those containing a held-out sentence.
    """
    pad = " " if language == "en" else ""
    # One joined text and str.find per held-out sentence: C-speed scans, not lines x sentences Python loops.
    # The newlines keep a match inside one line (no needle contains one).
    joined = "\n".join(f"{pad}{line}{pad}" for line in lines)
    starts = list(itertools.accumulate((len(line) + 2 * len(pad) + 1 for line in lines[:-1]), initial=0))
    leaking = set()
    for sentence in set(held_out):
        if not sentence:
            continue
        needle = f"{pad}{sentence}{pad}"
        i = joined.find(needle)
        while i != -1:
            leaking.add(bisect.bisect_right(starts, i) - 1)
            i = joined.find(needle, i + 1)
    return [line for k, line in enumerate(lines) if k not in leaking]


# -------------------------------------------------------------------------------------------- speakers


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


def make_speakers(config: TinyCorpusConfig, espeak: str = "espeak-ng") -> dict[str, list[Speaker]]:
    """The speakers of each split, disjoint across splits (no variant is shared either).

    en: espeak-ng accent x variant pairs (each variant used once; `en-029` only in test) plus the flite
    voices; zh: the espeak-ng Mandarin voice with a different variant per speaker, less the variants whose
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
    flite = {s: FLITE_VOICES[s] if en and config.use_flite else () for s in SPLITS}
    if flite["train"]:
        wanted = max(len(flite["train"]), round(config.flite_share * config.train_speakers))
        flite["train"] = tuple(flite["train"][j % len(flite["train"])] for j in range(wanted))
    wanted = round(config.neural_share * config.train_speakers) if en else 0
    neural_voices = {s: tuple(NEURAL_VOICES[s][j % len(NEURAL_VOICES[s])] for j in range(wanted if NEURAL_VOICES[s]
                                                                                        else 0)) for s in SPLITS}
    wanted = round(config.voicebank_share * config.train_speakers) if en else 0
    banks = {"train": tuple(voicebanks.VOICES[j % len(voicebanks.VOICES)] for j in range(wanted)), "dev": (),
             "test": ()}
    sizes = {s: getattr(config, f"{s}_speakers") - len(flite[s]) - len(neural_voices[s]) - len(banks[s])
             for s in SPLITS}
    variants = _split_variants(female, male, sizes, rng)
    if en:
        train_accents = [a for a in EN_TRAIN_ACCENTS if a in voices] or ["en-us"]
        rest = [train_accents[i] for i in rng.permutation(len(train_accents))]
        accents = {"train": rest, "dev": rest,
                   "test": ([EN_TEST_ONLY_ACCENT] if EN_TEST_ONLY_ACCENT in voices else []) + rest}
    else:
        zh_voice = next((v for v in ZH_VOICES if v in voices), ZH_VOICES[0])
        if zh_voice != ZH_VOICES[0]:
            log.warning("espeak-ng has no `%s` voice; using `%s`, which some versions read as English pinyin",
                        ZH_VOICES[0], zh_voice)
        accents = {s: [zh_voice] for s in SPLITS}
    out = {}
    for k, split in enumerate(SPLITS):
        # Each split draws its speakers' rates, pitches and word gaps from its own stream, so that dev and
        # test stay the same voices whatever the size of training (`train_speakers`, `flite_share`).
        rng = np.random.default_rng([config.seed, 1, k])
        # Each variant once, with the split's accents in turn; training can ask for more speakers than it
        # has variants: then further (accent, variant) pairs, every variant with every accent before any
        # pair repeats (a repeated pair gets a numbered id and its own rate, pitch and word gap).
        pool = [(accents[split][j % len(accents[split])], variant, gender)
                for j, (variant, gender) in enumerate(variants[split])]
        if split == "train" and sizes[split] > len(pool):
            pairs = [(a, v, g) for a in accents[split] for v, g in variants[split]]
            pairs = [pairs[i] for i in rng.permutation(len(pairs))]
            pool += [p for p in pairs if p not in pool]
            pool += [pool[j % len(pool)] for j in range(sizes[split] - len(pool))]
        elif sizes[split] > len(pool):
            raise ValueError(f"`{split}_speakers` is too large: only {len(pool)} espeak-ng variants are left "
                             f"for {split} (dev and test never share a variant with training)")
        speakers, seen = [], collections.Counter()
        for voice, variant, gender in pool[:sizes[split]]:
            rate, pitch = float(rng.uniform(*SPEAKER_RATE)), float(rng.uniform(*SPEAKER_PITCH))
            gap = int(rng.integers(SPEAKER_WORD_GAP[0], SPEAKER_WORD_GAP[1] + 1))
            name = f"espeak-{voice}-{variant}".lower()
            seen[name] += 1
            speakers.append(Speaker(id=name if seen[name] == 1 else f"{name}-{seen[name]}", engine="espeak-ng",
                                    voice=voice, variant=variant, gender=gender, rate=round(rate, 3),
                                    pitch=round(pitch, 3), word_gap=gap))
        for name, gender, f0 in flite[split]:
            seen[name] += 1
            rate = float(rng.uniform(*SPEAKER_RATE))
            pitch = float(rng.uniform(*(SPEAKER_PITCH if seen[name] == 1 else FLITE_EXTRA_PITCH)))
            extra = seen[name] > 1 and config.flite_formants
            formant = float(formant_rng.uniform(*FLITE_EXTRA_FORMANT)) if extra else 1.0
            if seen[name] > 1 and female_rng.random() < config.flite_female:
                gender = "F"
                formant = float(female_rng.uniform(*FLITE_FEMALE_FORMANT))
                pitch = float(female_rng.uniform(*FLITE_FEMALE_PITCH))
            speakers.append(Speaker(id=f"flite-{name}" if seen[name] == 1 else f"flite-{name}-{seen[name]}",
                                    engine="flite", voice=name, variant=None, gender=gender, rate=round(rate, 3),
                                    pitch=round(pitch, 3), f0=f0, formant=round(formant, 3)))
        speakers += _neural_speakers(neural_voices[split], np.random.default_rng([config.seed, 6, k]))
        speakers += _voicebank_speakers(banks[split], np.random.default_rng([config.seed, 7, k]))
        out[split] = speakers
    return out


def _neural_speakers(voices: Sequence[tuple[str, str, str]], rng: np.random.Generator) -> list[Speaker]:
    """One speaker per (engine, voice, gender) entry, each with its own draw of the engine's spreads."""
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
        speakers.append(Speaker(id=f"{engine}-{voice}-{seen[voice]}", engine=engine, voice=voice, variant=None,
                                gender=gender, rate=round(rate, 3), pitch=round(pitch, 3), formant=round(formant, 3),
                                intonation=round(intonation, 3), breath=round(breath, 2)))
    return speakers


def _voicebank_speakers(voices: Sequence[tuple[str, str, str]], rng: np.random.Generator) -> list[Speaker]:
    """One speaker per (engine, voice, gender) entry: the person's rate, pitch and vocal tract spread, some of
    them crossed to the other gender."""
    speakers, seen = [], collections.Counter()
    for engine, voice, gender in voices:
        seen[voice] += 1
        rate, pitch = float(rng.uniform(*SPEAKER_RATE)), float(rng.uniform(*SPEAKER_PITCH))
        formant = float(rng.uniform(*VOICEBANK_FORMANT))
        if rng.random() < VOICEBANK_CROSS:
            spread = VOICEBANK_TO_FEMALE if gender == "M" else VOICEBANK_TO_MALE
            gender = "F" if gender == "M" else "M"
            pitch, formant = float(rng.uniform(*spread["pitch"])), float(rng.uniform(*spread["formant"]))
        speakers.append(Speaker(id=f"{engine}-{voice}-{seen[voice]}", engine=engine, voice=voice, variant=None,
                                gender=gender, rate=round(rate, 3), pitch=round(pitch, 3), formant=round(formant, 3)))
    return speakers


# -------------------------------------------------------------------------------------------- synthesis


def _make_job(split: str, index: int, text: str, speaker: Speaker, seed: int, channel_share: float = 0.0) -> _Job:
    # One generator per (seed, split, index): a job never depends on which jobs ran before it. The channel has
    # generators of its own, so a share of 0 leaves every other draw as it was.
    rng = np.random.default_rng([seed, 2, SPLITS.index(split), index])
    channel = None
    if split == "train" and channel_share:
        channel_rng = np.random.default_rng([seed, 3, index])
        if channel_rng.random() < channel_share:
            channel = draw_channel(channel_rng)
    return _Job(split=split, index=index, text=text, speaker=speaker, channel=channel,
                rate=round(speaker.rate * float(rng.uniform(*UTT_JITTER)), 4),
                pitch=round(speaker.pitch * float(rng.uniform(*UTT_JITTER)), 4),
                amplitude=int(rng.integers(ESPEAK_AMPLITUDE[0], ESPEAK_AMPLITUDE[1] + 1)),
                peak_dbfs=round(float(rng.uniform(*PEAK_DBFS)), 2),
                lead=round(float(rng.uniform(*PAD_SECONDS)), 3), trail=round(float(rng.uniform(*PAD_SECONDS)), 3))


def _synthesize(job: _Job, espeak: str, flite: str | None) -> tuple[np.ndarray, int]:
    """Raw synthesizer output: float32 (samples,) and its sample rate."""
    sp = job.speaker
    if sp.engine in neural.ENGINES:
        voice = neural.NeuralVoice(pitch=job.pitch, intonation=sp.intonation, formant=sp.formant, breath=sp.breath)
        return neural.synthesize(sp.engine, job.text, job.rate, voice, seed=int(job.key(), 16))
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


def _render(job: _Job, out_dir: Path, espeak: str, flite: str | None) -> tuple[float, bool]:
    """Write the job's WAV unless a valid one exists. Returns `(duration_seconds, reused)`."""
    path = job.path(out_dir)
    if path.exists():
        try:
            sr, channels, frames = audio_info(path)
            if sr == SAMPLE_RATE and channels == 1 and frames > 0:
                return frames / SAMPLE_RATE, True
        except ValueError:
            pass  # unreadable (should not happen with atomic writes): synthesize it again
    wav, sr = _synthesize(job, espeak, flite)
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


@dataclass
class _SplitResult:
    utterances: list[Utterance]
    seconds: float = 0.0
    reused: int = 0
    failed: list[str] = dataclasses.field(default_factory=list)  # "index: error"
    exhausted: bool = False  # ran out of sentences before reaching the target


def _run_split(jobs: Iterator[_Job], target_seconds: float, out_dir: Path, language: str,
               pool: concurrent.futures.Executor, window: int, espeak: str, flite: str | None,
               progress: bool, desc: str) -> _SplitResult:
    """Render jobs in order until the accepted prefix lasts `target_seconds`; at most `window` in flight."""
    result = _SplitResult([])
    pending: dict[int, tuple[_Job, concurrent.futures.Future]] = {}
    next_commit = 0
    jobs = iter(jobs)
    exhausted = False
    bar = progress_bar(total=round(target_seconds), unit="s", desc=desc, show=progress, leave=False)
    try:
        while result.seconds < target_seconds:
            while not exhausted and len(pending) < window:
                job = next(jobs, None)
                if job is None:
                    exhausted = True
                    break
                pending[job.index] = (job, pool.submit(_render, job, out_dir, espeak, flite))
            if next_commit not in pending:
                result.exhausted = True
                break
            job, future = pending.pop(next_commit)
            next_commit += 1
            try:
                duration, reused = future.result()
            except Exception as e:  # one bad utterance is skipped, counted and reported
                result.failed.append(f"{job.index} ({job.speaker.id}, {job.text!r}): {e}")
                log.warning("tiny %s: skipped utterance %d: %s", job.split, job.index, e)
                if len(result.failed) >= MAX_FAILURES and len(result.failed) > len(result.utterances):
                    raise RuntimeError(f"synthesis keeps failing ({len(result.failed)} of {next_commit} "
                                       f"utterances); the last error: {e}") from None
                continue
            duration = round(duration, DURATION_DECIMALS)
            result.utterances.append(Utterance(
                audio_filepath=str(job.path(out_dir)), duration=duration, text=job.text,
                speaker=job.speaker.id, language=language, extra={"engine": job.speaker.engine}))
            result.seconds += duration
            result.reused += reused
            bar.update(min(round(result.seconds), round(target_seconds)) - bar.n)
    finally:
        bar.close()
        for _, future in pending.values():  # work past the target: not part of the corpus
            future.cancel()
        concurrent.futures.wait([f for _, f in pending.values()])
    return result


def _jobs(split: str, sentences: Sequence[str], speakers: Sequence[Speaker], seed: int,
          cycle: bool, channel_share: float = 0.0) -> Iterator[_Job]:
    """Jobs in order: sentence i (cycled for train) read by speakers in turn, shifted every cycle so a
    repeated sentence gets a different speaker."""
    indices = itertools.count() if cycle else range(len(sentences))
    for i in indices:
        sentence = sentences[i % len(sentences)]
        speaker = speakers[(i + i // len(sentences)) % len(speakers)]
        yield _make_job(split, i, sentence, speaker, seed, channel_share)


def _remove_orphans(wav_root: Path, keep: set[Path]) -> int:
    """Delete WAVs (and temp files of interrupted writes) under `wav_root` that no manifest lists."""
    removed = 0
    if not wav_root.is_dir():
        return 0
    for path in sorted(wav_root.rglob("*")):
        if path.is_file() and (path.name.endswith(".tmp") or (path.suffix == ".wav" and path.resolve() not in keep)):
            path.unlink()
            removed += 1
    for d in sorted((p for p in wav_root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(d.iterdir()):
            d.rmdir()
    return removed


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise FileNotFoundError(f"`{name}` is not on PATH; {APT_HINT}")
    return exe


def _version(exe: str) -> str:
    out = subprocess.run([exe, "--version"], capture_output=True, text=True)
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "?"


def prepare_tiny(config: TinyCorpusConfig) -> dict[str, list[Utterance]]:
    """Synthesize the tiny corpus into `config.out_dir` (see the module docstring for the layout).

    Safe to run again: existing WAVs are reused, so an interrupted run resumes, and a finished one is
    rebuilt from its files in seconds. WAVs no manifest lists (from another seed or size) are removed.

    Returns:
        `{"train": [...], "dev": [...], "test": [...]}` utterances (absolute audio paths).

    Raises:
        FileNotFoundError: espeak-ng, flite or the fortunes files are missing.
        ValueError: too few sentences or variants for the requested sizes.
        RuntimeError: the synthesizer fails on most utterances (it is broken, not one sentence).
    """
    out_dir = Path(config.out_dir).expanduser().resolve()
    espeak = _tool("espeak-ng")
    flite = _tool("flite") if config.language == "en" and config.use_flite else None
    en = config.language == "en"
    lo, hi = (config.min_words, config.max_words) if en else (config.min_chars, config.max_chars)
    everything = load_sentences(config.language, config.fortunes_dir, None if en else config.max_chars)
    pool = [s for s in everything if lo <= (len(s.split()) if en else len(s)) <= hi]
    if config.common_chars:
        counts = collections.Counter("".join(everything))
        common = {c for c, _ in counts.most_common(config.common_chars)}
        pool = [s for s in pool if common.issuperset(s)]
    pool = [pool[i] for i in np.random.default_rng([config.seed, 0]).permutation(len(pool))]
    reserve = {s: math.ceil(getattr(config, f"{s}_minutes") * 60 / MIN_UTT_SECONDS) for s in ("dev", "test")}
    if reserve["dev"] + reserve["test"] >= len(pool):
        raise ValueError(f"`dev_minutes` + `test_minutes` ({config.dev_minutes} + {config.test_minutes}) need up to "
                         f"{reserve['dev'] + reserve['test']} sentences, but only {len(pool)} fit the length limits")
    sentences = {"dev": pool[:reserve["dev"]], "test": pool[reserve["dev"]:reserve["dev"] + reserve["test"]],
                 "train": pool[reserve["dev"] + reserve["test"]:]}
    speakers = make_speakers(config, espeak)
    neural_engines = sorted({sp.engine for split in speakers.values() for sp in split if sp.engine in neural.ENGINES})
    versions = {engine: neural.load(engine) for engine in neural_engines}
    bank_engines = sorted({sp.engine for sp in speakers["train"] if sp.engine in voicebanks.ENGINES})
    if bank_engines and voicebanks.missing():
        raise FileNotFoundError(f"`voicebank_share` needs {', '.join(voicebanks.missing())}, not on PATH; "
                                f"{voicebanks.APT_HINT}")
    versions |= {engine: voicebanks.version(engine) for engine in bank_engines}
    targets = {"train": config.hours * 3600, "dev": config.dev_minutes * 60, "test": config.test_minutes * 60}

    results = {}
    with concurrent.futures.ThreadPoolExecutor(config.num_workers, thread_name_prefix="tiny") as pool_:
        for split in ("dev", "test", "train"):
            results[split] = _run_split(
                _jobs(split, sentences[split], speakers[split], config.seed, cycle=split == "train",
                      channel_share=config.channel_share),
                targets[split], out_dir, config.language, pool_, 4 * config.num_workers, espeak, flite,
                config.progress, f"tiny {config.language} {split}")
            r = results[split]
            log.info("tiny %s: %d utterances, %.1f min (%d reused, %d failed)", split, len(r.utterances),
                     r.seconds / 60, r.reused, len(r.failed))
            if r.exhausted:
                log.warning("tiny %s: ran out of sentences at %.1f of %.1f min", split, r.seconds / 60,
                            targets[split] / 60)

    held_out = {u.text for s in ("dev", "test") for u in results[s].utterances}
    with atomic_write(out_dir / "lm_text.txt") as f:
        for text in exclude_held_out(everything, held_out, config.language):
            f.write(text + "\n")
    engines = {"espeak-ng": _version(espeak)} | ({"flite": _version(flite)} if flite else {}) | versions
    settings = {k: v for k, v in dataclasses.asdict(config).items()
                if k not in ("out_dir", "num_workers", "progress")}
    write_json(out_dir / "speakers.json", {
        "language": config.language,
        "config": settings,
        "engines": engines,
        "params": {"speaker_rate": SPEAKER_RATE, "speaker_pitch": SPEAKER_PITCH, "utterance_jitter": UTT_JITTER,
                   "espeak_default_wpm": ESPEAK_DEFAULT_WPM, "espeak_amplitude": ESPEAK_AMPLITUDE,
                   "peak_dbfs": PEAK_DBFS, "pad_seconds": PAD_SECONDS, "synth_version": SYNTH_VERSION},
        "splits": {s: [dataclasses.asdict(sp) for sp in speakers[s]] for s in SPLITS},
        "stats": {s: {"utterances": len(results[s].utterances), "seconds": round(results[s].seconds, 2),
                      "failed": len(results[s].failed), "failures": results[s].failed[:50],
                      "ran_out_of_sentences": results[s].exhausted} for s in SPLITS},
    })
    for split in SPLITS:
        write_manifest(out_dir / f"{split}.jsonl", results[split].utterances)
    removed = _remove_orphans(out_dir / "wav", {Path(u.audio_filepath) for r in results.values()
                                                for u in r.utterances})
    if removed:
        log.info("tiny: removed %d WAVs that no manifest lists", removed)
    failed = sum(len(r.failed) for r in results.values())
    if failed:
        log.warning("tiny: %d utterances failed to synthesize and were skipped (see speakers.json)", failed)
    return {s: results[s].utterances for s in SPLITS}
