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
Beside espeak-ng, the config's voice sources (`voices`, sources.py) each give their share of the training speakers:
`Flite`, `NeuralVoices` (neural.py: hibari's woman and Piper's man, spread into many speakers by pitch, intonation,
vocal-tract length, breathiness and rate), `VoiceBanks` of real people (voicebanks.py: MBROLA's, RHVoice's and
Pico's eleven English voices, spread by rate, pitch, vocal-tract length and gender) and `Kokoro` (neural.py:
Kokoro-82M's, mixes of two of its 28 English voices; training only, for its cost). Test has none of the neural
voices and voice banks, so no test voice is ever a training voice; dev's sentences, read by its espeak-ng speakers up
to `dev_minutes`, are read again by dev's own speakers of the neural voices and voice banks (each sentence once
more, by a neural voice's or a voice bank's speaker in turn, with settings no training speaker has), so that the dev
set where alpha and beta are tuned holds those kinds of voice too (tuned on espeak-ng's voices alone, the word bonus
comes out too large for any other engine's: examples/tiny/RESULTS.md#dev-voices).
The synthesizers read the normalized transcript itself, so audio and text always agree.

Everything derives from `seed` by utterance index (a job's sentence, speaker and parameters never depend
on the order in which workers finish), and the synthesizers are deterministic, so the same seed gives
byte-identical audio and manifests. Each WAV is written atomically under a name that hashes its content
(text, voice, parameters), so an interrupted run resumes by reusing what exists; manifests are written
last. A split stops as soon as the accepted utterances (an in-order prefix of the job list) reach its
duration target; WAVs under `out/wav` that no manifest lists (renders past the target, another seed) are
removed. A failed utterance is skipped, counted in the log and in speakers.json.

The stages, a module each: sentences.py (fortunes -> normalized sentences, the LM text less dev and test),
voices.py (the speakers of each split), synthesis.py (one utterance: its draws, its synthesizer, its trimming and
level, its channel), and here the corpus (the sentences of each split, the jobs rendered in order on
`num_workers` threads up to each split's duration, the manifests, lm_text.txt and speakers.json).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import itertools
import logging
import math
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2.fileio import atomic_write, write_json
from deepspeech2.progress import progress_bar
from deepspeech2.text import normalize_english
from deepspeech2_synthetic import neural, voicebanks
from deepspeech2_synthetic.sentences import APT_HINT, FORTUNES_DIR, exclude_held_out, load_sentences
from deepspeech2_synthetic.sources import SOURCES, Flite, Kokoro, NeuralVoices, VoiceBanks
from deepspeech2_synthetic.synthesis import (ESPEAK_AMPLITUDE, ESPEAK_DEFAULT_WPM, PAD_SECONDS, PEAK_DBFS,
                                             SYNTH_VERSION, UTT_JITTER, Job, Synthesizers, make_job, render)
from deepspeech2_synthetic.voices import FLITE_VOICES, SPEAKER_PITCH, SPEAKER_RATE, SPLITS, Speaker, make_speakers

log = logging.getLogger(__name__)

# The fewest seconds an utterance can last (3 short words at the fastest rate plus padding): dev and test
# reserve `minutes * 60 / MIN_UTT_SECONDS` sentences, so they never run out before their target.
MIN_UTT_SECONDS = 0.75
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
    # hour of audio shows each character often enough to learn it (examples/tiny_zh/RESULTS.md#ceiling); 0: all
    train_speakers: int = 40  # speakers in train (en: 3 of them flite voices); beyond the number of training
    # variants, espeak-ng speakers reuse variants with other accents, rates, pitches and word gaps
    dev_speakers: int = 8  # dev's espeak-ng speakers, unseen in training (with neural or voice-bank training voices,
    # dev's own speakers of those read its sentences again: voices.DEV_NEURAL_VOICES, DEV_VOICEBANKS)
    test_speakers: int = 8  # unseen speakers in test (en: 1 flite voice)
    voices: tuple = (Flite(),)  # the voice sources beside espeak-ng's (sources.py: Flite, NeuralVoices, VoiceBanks,
    # Kokoro), at most one of each; without a Flite no flite voice speaks
    channel_share: float = 0.0  # this fraction of the training utterances are heard through a recording channel
    # (channel.py: MP3 at 32-64 kbit/s, half of them band-limited too); dev and test stay clean
    fortunes_dir: str = FORTUNES_DIR  # the Debian fortunes files
    train_text: str = ""  # en: a file of more training sentences, one a line (e.g. `ds2-prepare english`'s
    # output), normalized as the transcripts are (deepspeech2/text.py); lines outside `min_words`-`max_words` or
    # holding a dev or test sentence are left out
    train_text_share: float = 0.0  # this fraction of the training sentences come from `train_text`, spread evenly
    # among fortunes'; dev and test stay fortunes
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
        self._check_voices()
        if isinstance(self.channel_share, bool) or not isinstance(self.channel_share, (int, float)) \
                or not 0 <= self.channel_share <= 1:
            raise ValueError(f"`channel_share` must be in [0, 1], got {self.channel_share!r}")
        if isinstance(self.train_text_share, bool) or not isinstance(self.train_text_share, (int, float)) \
                or not 0 <= self.train_text_share < 1:
            raise ValueError(f"`train_text_share` must be in [0, 1), got {self.train_text_share!r}")
        if bool(self.train_text_share) != bool(self.train_text):
            raise ValueError(f"`train_text` and `train_text_share` go together, got {self.train_text!r} and "
                             f"{self.train_text_share!r}: name a file of sentences and the share of training "
                             f"sentences to take from it")
        if self.train_text and self.language != "en":
            raise ValueError(f"`train_text` is for English (`language`='en'), got `language`={self.language!r}")
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
            flite = len(FLITE_VOICES[split]) if self.language == "en" and self.source(Flite) else 0
            if not isinstance(n, int) or n < flite + 1:
                raise ValueError(f"`{split}_speakers` must be an integer >= {flite + 1} (the {flite} flite "
                                 f"voice(s) plus at least one espeak-ng voice), got {n!r}")

    def _check_voices(self):
        if not isinstance(self.voices, tuple):
            raise ValueError(f"`voices` must be a tuple of voice sources, got {self.voices!r}")
        for voice in self.voices:
            if not isinstance(voice, SOURCES):
                raise ValueError(f"`voices` holds {voice!r}; a voice source is one of "
                                 f"{', '.join(kind.__name__ for kind in SOURCES)}")
            if sum(isinstance(v, type(voice)) for v in self.voices) > 1:
                raise ValueError(f"`voices` holds more than one {type(voice).__name__}: give each source once")
        taken = 0.0  # the sources' shares stack up; espeak-ng keeps what they leave
        for kind in SOURCES:
            voice = self.source(kind)
            if voice is None:
                continue
            if not taken + voice.share < 1:
                raise ValueError(f"`{kind.__name__}.share` ({voice.share:g}) must leave room for espeak-ng voices "
                                 f"beside the sources before it ({taken:g} together)")
            taken += voice.share
            if voice.share and kind is not Flite and self.language != "en":
                raise ValueError(f"`{kind.__name__}.share` ({voice.share:g}) is for English (`language`='en'), "
                                 f"got `language`={self.language!r}")

    def source(self, kind: type) -> Flite | NeuralVoices | VoiceBanks | Kokoro | None:
        """The voice source of `kind` (sources.Flite, ...) in `voices`; None without one."""
        return next((voice for voice in self.voices if isinstance(voice, kind)), None)

    def share(self, kind: type) -> float:
        """The share of the training speakers `kind`'s source gives (0 without one)."""
        voice = self.source(kind)
        return voice.share if voice is not None else 0.0


@dataclass
class _SplitResult:
    utterances: list[Utterance]
    seconds: float = 0.0
    reused: int = 0
    failed: list[str] = dataclasses.field(default_factory=list)  # "index: error"
    exhausted: bool = False  # ran out of sentences before reaching the target


def _run_split(jobs: Iterator[Job], target_seconds: float, out_dir: Path, language: str,
               pool: concurrent.futures.Executor, window: int, engines: Synthesizers,
               progress: bool, desc: str) -> _SplitResult:
    """Render jobs in order until the accepted prefix lasts `target_seconds`; at most `window` in flight."""
    result = _SplitResult([])
    pending: dict[int, tuple[Job, concurrent.futures.Future]] = {}  # by position in `jobs`
    submitted = next_commit = 0
    jobs = iter(jobs)
    exhausted = False
    bar = progress_bar(total=None if math.isinf(target_seconds) else round(target_seconds), unit="s", desc=desc,
                       show=progress, leave=False)
    try:
        while result.seconds < target_seconds:
            while not exhausted and len(pending) < window:
                job = next(jobs, None)
                if job is None:
                    exhausted = True
                    break
                pending[submitted] = (job, pool.submit(render, job, out_dir, engines))
                submitted += 1
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
            bar.update(round(min(result.seconds, target_seconds)) - bar.n)
    finally:
        bar.close()
        for _, future in pending.values():  # work past the target: not part of the corpus
            future.cancel()
        concurrent.futures.wait([f for _, f in pending.values()])
    return result


def _train_text(config: TinyCorpusConfig, held_out: Sequence[str]) -> list[str]:
    """`config.train_text`'s sentences within the length limits, less any holding a held-out one, shuffled."""
    path = Path(config.train_text).expanduser()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"`train_text` {str(path)!r} cannot be read ({e}); make it with `ds2-prepare english "
                         f"--out {path}`") from e
    lines = [normalize_english(line) for line in lines]  # as the synthesizers will read them (a no-op on
    # ds2-prepare english's lines)
    lines = [line for line in dict.fromkeys(lines) if config.min_words <= len(line.split()) <= config.max_words]
    lines = exclude_held_out(lines, held_out, config.language)
    if not lines:
        raise ValueError(f"`train_text` {str(path)!r} has no sentence of {config.min_words}-{config.max_words} "
                         f"words that holds no dev or test sentence")
    return [lines[i] for i in np.random.default_rng([config.seed, 2]).permutation(len(lines))]


def mix_sentences(first: Sequence[str], second: Sequence[str], share: float) -> list[str]:
    """`first` and `second` interleaved so that `share` of every prefix comes from `second` (to within one),
    as long as neither runs out."""
    n = min(math.floor(len(first) / (1 - share)), math.floor(len(second) / share) if share else math.inf)
    mixed, taken = [], 0
    for i in range(n):
        if math.floor((i + 1) * share) > taken:
            mixed.append(second[taken])
            taken += 1
        else:
            mixed.append(first[i - taken])
    return mixed


def _jobs(split: str, sentences: Sequence[str], speakers: Sequence[Speaker], seed: int,
          cycle: bool, channel_share: float = 0.0) -> Iterator[Job]:
    """Jobs in order: sentence i (cycled for train) read by speakers in turn, shifted every cycle so a
    repeated sentence gets a different speaker."""
    indices = itertools.count() if cycle else range(len(sentences))
    for i in indices:
        sentence = sentences[i % len(sentences)]
        speaker = speakers[(i + i // len(sentences)) % len(speakers)]
        yield make_job(split, i, sentence, speaker, seed, channel_share)


def _reread_jobs(utterances: Sequence[Utterance], speakers: Sequence[Speaker], first_index: int, seed: int
                 ) -> Iterator[Job]:
    """Dev's sentences once more: utterance i read by a speaker of the engine families `speakers` has (neural
    voices, voice banks) in turn, each family's speakers in turn; job indices from `first_index` on, past dev's own."""
    families = [f for f in ([sp for sp in speakers if sp.engine in neural.ENGINES],
                            [sp for sp in speakers if sp.engine in voicebanks.ENGINES]) if f]
    for i, u in enumerate(utterances):
        family = families[i % len(families)]
        yield make_job("dev", first_index + i, u.text, family[i // len(families) % len(family)], seed)


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


def _split_sentences(config: TinyCorpusConfig) -> tuple[list[str], dict[str, list[str]]]:
    """Every fortunes sentence (for the LM text) and each split's sentences: dev's and test's reserved first
    from one seeded shuffle of those within the length limits, training's the rest (and `train_text`'s share)."""
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
    if config.train_text_share:
        sentences["train"] = mix_sentences(sentences["train"],
                                           _train_text(config, sentences["dev"] + sentences["test"]),
                                           config.train_text_share)
    return everything, sentences


def _synthesizers(config: TinyCorpusConfig, speakers: dict[str, list[Speaker]]) -> tuple[Synthesizers, dict]:
    """The programs and engines the speakers need, found and loaded before the first utterance (so that a missing
    one stops the run at once), and the versions of each engine beside espeak-ng and flite, for speakers.json."""
    espeak = _tool("espeak-ng")
    flite = _tool("flite") if config.language == "en" and config.source(Flite) else None
    used = {sp.engine for split in speakers.values() for sp in split}
    kokoro = config.source(Kokoro) or Kokoro()
    engines = [engine for engine in (neural.HibariEngine(), neural.PiperEngine(), neural.KokoroEngine(kokoro.cache_dir))
               if engine.name in used]
    for engine in engines:
        engine.load()
    # Training's voice banks: dev has speakers of them only when training has (voices.DEV_VOICEBANKS).
    bank_engines = sorted({sp.engine for sp in speakers["train"] if sp.engine in voicebanks.ENGINES})
    if bank_engines and voicebanks.missing():
        raise FileNotFoundError(f"`VoiceBanks` needs {', '.join(voicebanks.missing())}, not on PATH; "
                                f"{voicebanks.APT_HINT}")
    versions = {"espeak-ng": _version(espeak)} | ({"flite": _version(flite)} if flite else {})
    versions |= {e.name: e.versions() for e in sorted(engines, key=lambda e: e.name)}
    versions |= {engine: voicebanks.version(engine) for engine in bank_engines}
    return Synthesizers(espeak, flite, tuple(engines)), versions


def _render_splits(config: TinyCorpusConfig, sentences: dict[str, list[str]], speakers: dict[str, list[Speaker]],
                   engines: Synthesizers, out_dir: Path) -> dict[str, _SplitResult]:
    """Dev, test and train rendered in turn up to their durations; dev's neural and voice-bank speakers read its
    sentences again once its own (espeak-ng) reach the target."""
    targets = {"train": config.hours * 3600, "dev": config.dev_minutes * 60, "test": config.test_minutes * 60}
    rereaders = [sp for sp in speakers["dev"] if sp.engine in neural.ENGINES + voicebanks.ENGINES]
    readers = dict(speakers, dev=[sp for sp in speakers["dev"] if sp not in rereaders])
    results = {}
    with concurrent.futures.ThreadPoolExecutor(config.num_workers, thread_name_prefix="tiny") as pool:
        def run(jobs, target, desc):
            return _run_split(jobs, target, out_dir, config.language, pool, 4 * config.num_workers, engines,
                              config.progress, f"tiny {config.language} {desc}")

        for split in ("dev", "test", "train"):
            r = results[split] = run(_jobs(split, sentences[split], readers[split], config.seed,
                                           cycle=split == "train", channel_share=config.channel_share),
                                     targets[split], split)
            if split == "dev" and rereaders:
                more = run(_reread_jobs(r.utterances, rereaders, len(sentences["dev"]), config.seed), math.inf,
                           "dev, other engines")
                r.utterances += more.utterances
                r.seconds, r.reused, r.failed = r.seconds + more.seconds, r.reused + more.reused, r.failed + more.failed
            log.info("tiny %s: %d utterances, %.1f min (%d reused, %d failed)", split, len(r.utterances),
                     r.seconds / 60, r.reused, len(r.failed))
            if r.exhausted:
                log.warning("tiny %s: ran out of sentences at %.1f of %.1f min", split, r.seconds / 60,
                            targets[split] / 60)
    return results


def _recorded_config(config: TinyCorpusConfig) -> dict:
    """The settings speakers.json records: the config less where and how it ran, its voice sources under the
    names of `ds2-prepare tiny`'s flags (`flite_share`, `neural_share`, ...) in their place, so that a corpus'
    record reads the same however its config was built."""
    flite, neural_voices, banks, kokoro = (config.source(kind) or kind() for kind in SOURCES)
    sources = {"use_flite": config.source(Flite) is not None, "flite_share": flite.share,
               "flite_formants": flite.formants, "flite_female": flite.female, "neural_share": neural_voices.share,
               "piper_variation": neural_voices.piper_variation, "voicebank_share": banks.share,
               "kokoro_share": kokoro.share}
    settings = {}
    for name, value in dataclasses.asdict(config).items():
        if name == "voices":
            settings |= sources
        elif name not in ("out_dir", "num_workers", "progress"):
            settings[name] = value
    return settings


def _write_records(config: TinyCorpusConfig, out_dir: Path, everything: Sequence[str],
                   speakers: dict[str, list[Speaker]], results: dict[str, _SplitResult], versions: dict) -> None:
    """lm_text.txt (fortunes less every dev and test sentence), speakers.json and the manifests, written last."""
    held_out = {u.text for s in ("dev", "test") for u in results[s].utterances}
    with atomic_write(out_dir / "lm_text.txt") as f:
        for text in exclude_held_out(everything, held_out, config.language):
            f.write(text + "\n")
    write_json(out_dir / "speakers.json", {
        "language": config.language,
        "config": _recorded_config(config),
        "engines": versions,
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


def prepare_tiny(config: TinyCorpusConfig) -> dict[str, list[Utterance]]:
    """Synthesize the tiny corpus into `config.out_dir` (see the module docstring for the layout).

    Safe to run again: existing WAVs are reused, so an interrupted run resumes, and a finished one is
    rebuilt from its files in seconds. WAVs no manifest lists (from another seed or size) are removed.

    Returns:
        `{"train": [...], "dev": [...], "test": [...]}` utterances (absolute audio paths).

    Raises:
        FileNotFoundError: espeak-ng, flite, a voice source's engine or the fortunes files are missing.
        ValueError: too few sentences or variants for the requested sizes.
        RuntimeError: the synthesizer fails on most utterances (it is broken, not one sentence).
    """
    out_dir = Path(config.out_dir).expanduser().resolve()
    everything, sentences = _split_sentences(config)
    speakers = make_speakers(config, _tool("espeak-ng"))
    engines, versions = _synthesizers(config, speakers)
    results = _render_splits(config, sentences, speakers, engines, out_dir)
    _write_records(config, out_dir, everything, speakers, results, versions)
    removed = _remove_orphans(out_dir / "wav", {Path(u.audio_filepath) for r in results.values()
                                                for u in r.utterances})
    if removed:
        log.info("tiny: removed %d WAVs that no manifest lists", removed)
    failed = sum(len(r.failed) for r in results.values())
    if failed:
        log.warning("tiny: %d utterances failed to synthesize and were skipped (see speakers.json)", failed)
    return {s: results[s].utterances for s in SPLITS}
