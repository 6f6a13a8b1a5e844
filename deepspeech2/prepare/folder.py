"""Your own recordings: a folder of audio files with a transcript beside each, or a table of audio path and
transcript (Mozilla DeepSpeech's CSV, Common Voice's TSV, or any `.csv`/`.tsv` with such columns).

What `corpus_dir` holds decides how it is read, in this order:

    train.tsv dev.tsv test.tsv (or .csv)   tables that name the splits: one manifest per table present.
                                           Common Voice (`client_id path sentence ...`, audio in clips/),
                                           DeepSpeech (`wav_filename,wav_filesize,transcript`).
    **/<name>.<audio> + <name>.txt         a transcript beside each audio file, at any depth (`.lab`, as TTS
                                           corpora ship them, when there is no `.txt`); the speaker is the
                                           folder holding the file. `.txt` wins over `.lab`.
    <one table>.tsv or .csv                one table, e.g. Hugging Face audiofolder's `metadata.csv`
                                           (`file_name,transcription`); `corpus_dir` may also be the table file.

Audio is anything libsndfile reads (WAV, FLAC, MP3, Ogg Vorbis/Opus, AIFF, ...); what isn't 16 kHz mono
16-bit WAV is converted into `output_dir/wav/` once (`importer.build_split`). A table's relative paths resolve
against the table's folder, Common Voice's (a table with a `client_id` column) against its `clips/`.

Columns are matched by name, case-insensitively (`PATH_COLUMNS`, `TEXT_COLUMNS`, `SPEAKER_COLUMNS`); a table
without a path or a transcript column is an error naming the file, the columns it has and those expected.
A row with more or fewer fields than the header, or no path, is skipped and reported as `file:line`;
missing or unreadable audio, an empty transcript and one the normalizer can't read confidently are skipped
and reported by utterance id. Common Voice's speaker metadata (`age`, `gender`, `accents`, ...) is kept on
each manifest line, so `ds2-eval --group_by accents` breaks results down by it.

Input that doesn't name its splits gives one manifest, `train`; `dev_fraction` and `test_fraction` hold out
whole speakers for dev and test (deterministically: speakers ordered by a hash of the seed and their name),
so that no speaker is in two splits.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from deepspeech2.data.manifest import Utterance
from deepspeech2.prepare.importer import (Entry, Skip, build_split, find_root, no_layout, normalized,
                                          read_text_lines, select_splits)
from deepspeech2.text import normalize

CORPUS = "folder"
SPLITS = ("train", "dev", "test")
TABLE_SUFFIXES = (".tsv", ".csv")
# Listed so that a file libsndfile can't decode (m4a, wma) is reported as unreadable rather than passed over.
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".aiff", ".aif", ".au", ".sph", ".w64",
                  ".m4a", ".wma")
TRANSCRIPT_SUFFIXES = (".txt", ".lab")  # in order of preference
PATH_COLUMNS = ("path", "wav_filename", "audio_filepath", "audio", "file_name", "filename", "file")
TEXT_COLUMNS = ("sentence", "transcript", "transcription", "text")
SPEAKER_COLUMNS = ("client_id", "speaker", "speaker_id")
# Common Voice's speaker metadata, kept for per-group scores (ds2-eval --group_by accents).
EXTRA_COLUMNS = ("age", "gender", "accents", "accent", "variant", "locale")
LAYOUT = ("train.tsv/dev.tsv/test.tsv or train.csv/dev.csv/test.csv (Common Voice, DeepSpeech); audio files with a "
          "transcript beside each (<name>.wav + <name>.txt or .lab, any depth); or one .tsv/.csv table of audio path "
          "and transcript")


def read_table(
    path: Path,
    language: str,
    speaker: str | None = None,
) -> tuple[list[Entry], list[Skip]]:
    """Entries of one `.tsv`/`.csv` table, and its rows that can't be read (`file:line`).

    Args:
        path: the table; its first line names the columns.
        language: "en" or "zh", the transcripts' normalizer.
        speaker: every row's speaker when the table has no speaker column (None: unknown).

    Raises:
        ValueError: the table is empty, or lacks a path or a transcript column.
    """
    path = Path(path)
    tsv = path.suffix.lower() == ".tsv"
    # Common Voice's TSVs are unquoted (a sentence may open with `"`); CSVs quote fields holding commas.
    rows = csv.reader(io.StringIO("\n".join(read_text_lines(path))), delimiter="\t" if tsv else ",",
                      quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL)
    try:
        header = [name.strip().lower() for name in next(rows)]
    except StopIteration:
        raise ValueError(f"table `{path}` is empty; expected a header line naming a path column (one of "
                         f"{', '.join(PATH_COLUMNS)}) and a transcript column (one of {', '.join(TEXT_COLUMNS)})")
    except csv.Error as e:
        raise ValueError(f"table `{path}`, line 1: {e}") from None
    column = {name: i for i, name in reversed(list(enumerate(header)))}  # the first of a repeated name
    path_col = next((column[c] for c in PATH_COLUMNS if c in column), None)
    text_col = next((column[c] for c in TEXT_COLUMNS if c in column), None)
    if path_col is None or text_col is None:
        lacking = " and ".join(what for what, col in (("an audio path column", path_col),
                                                      ("a transcript column", text_col)) if col is None)
        raise ValueError(f"table `{path}` has the columns {header} ({'tab' if tsv else 'comma'}-separated) but "
                         f"lacks {lacking}; expected a path column named one of {list(PATH_COLUMNS)} and a transcript "
                         f"column named one of {list(TEXT_COLUMNS)} on its first line")
    speaker_col = next((column[c] for c in SPEAKER_COLUMNS if c in column), None)
    extra_cols = [(c, column[c]) for c in EXTRA_COLUMNS if c in column]
    # Common Voice lists clip names relative to clips/ beside its TSVs.
    base = path.parent / "clips" if "client_id" in column else path.parent

    entries, skipped = [], []
    end = 1  # the line the previous row ended on (a quoted CSV field may span lines)
    while True:
        start = end + 1
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as e:
            end = rows.line_num
            skipped.append(Skip(f"{path}:{start}", f"not a {'TSV' if tsv else 'CSV'} row: {e}", is_path=True))
            continue
        end = rows.line_num
        if not any(field.strip() for field in row):
            continue
        where = f"{path}:{start}"
        if len(row) != len(header):
            skipped.append(Skip(where, f"{len(row)} fields where the header has {len(header)} ({header}): "
                                       f"{_clip(row)}", is_path=True))
            continue
        audio = row[path_col].strip()
        if not audio:
            skipped.append(Skip(where, f"no audio path in column `{header[path_col]}`", is_path=True))
            continue
        file = Path(os.path.normpath(base / Path(audio).expanduser()))  # an absolute path stays as it is
        text, problem = normalized(normalize, row[text_col], language=language)
        who = row[speaker_col].strip() if speaker_col is not None else ""
        extra = {name: row[i].strip() for name, i in extra_cols if row[i].strip()}
        entries.append(Entry(_utterance_id(file, base), file, text, who or speaker, extra=extra, problem=problem))
    return entries, skipped


def _clip(row: Sequence[str], width: int = 120) -> str:
    text = repr(row)
    return text if len(text) <= width else text[:width - 3] + "..."


def _utterance_id(file: Path, base: Path) -> str:
    # The path below the table's (or folder's) base without its suffix: unique, and readable in reports.
    try:
        rel = file.relative_to(base)
    except ValueError:
        rel = file
    return rel.with_suffix("").as_posix()


def scan_folder(
    root: Path,
    language: str,
    speaker: str | None = None,
    exclude: Path | None = None,
) -> tuple[list[Entry], list[Skip]]:
    """Entries for every audio file below `root` with a `.txt` (or `.lab`) transcript beside it.

    An audio file without one, and a transcript without audio in a folder that holds audio, are reported.
    The speaker is `speaker`, or else the name of the folder holding the file. The folder `exclude` (the
    import's output, when it lies inside the recordings) is not read.
    """
    entries, skipped = [], []
    exclude = exclude.resolve() if exclude is not None else None
    for dirpath, dirnames, names in os.walk(root, followlinks=True):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if (here / d).resolve() != exclude)
        stems: dict[str, dict[str, str]] = {}  # stem -> {lower-case suffix: file name}
        for name in sorted(names):
            stem, suffix = os.path.splitext(name)
            stems.setdefault(stem, {}).setdefault(suffix.lower(), name)
        has_audio = any(s in AUDIO_SUFFIXES for found in stems.values() for s in found)
        for stem, found in stems.items():
            audio = [found[s] for s in AUDIO_SUFFIXES if s in found]
            transcript = next((found[s] for s in TRANSCRIPT_SUFFIXES if s in found), None)
            if not audio:
                if transcript is not None and has_audio:
                    skipped.append(Skip(str(here / transcript), "a transcript with no audio file beside it "
                                        f"(`{stem}` with one of {', '.join(AUDIO_SUFFIXES)})", is_path=True))
                continue
            utt = _utterance_id(here / stem, root)
            if len(audio) > 1:  # rec.wav and rec.mp3: which one the transcript belongs to is a guess
                skipped.append(Skip(utt, f"several audio files share the transcript's name: {audio}; keep one"))
                continue
            if transcript is None:
                skipped.append(Skip(utt, f"no transcript beside `{here / audio[0]}` (`{stem}.txt` or `{stem}.lab`)"))
                continue
            raw = " ".join(read_text_lines(here / transcript))
            text, problem = normalized(normalize, raw, language=language)
            entries.append(Entry(utt, here / audio[0], text, speaker or here.name, problem=problem))
    return entries, skipped


def hold_out_speakers(
    entries: Sequence[Entry],
    dev_fraction: float,
    test_fraction: float,
    seed: int = 0,
) -> dict[str, list[Entry]]:
    """Split `entries` into train, dev and test by speaker: no speaker is in two splits.

    Speakers are taken in the order of a hash of (`seed`, their name), which doesn't depend on the other
    speakers, so adding recordings moves no speaker already placed unless the split sizes shift. Test takes
    speakers until it holds at least `test_fraction` of the utterances, then dev likewise; train keeps the
    rest, and at least one speaker.

    Returns:
        {"train": ..., "dev": ..., "test": ...}, dev and test only when their fraction is above 0.

    Raises:
        ValueError: a fraction outside [0, 1), fractions summing to 1 or more, an utterance without a
            speaker, or too few speakers for each requested split to get one.
    """
    for name, value in (("dev_fraction", dev_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"`{name}` must be in [0, 1), got {value!r}")
    if dev_fraction + test_fraction >= 1.0:
        raise ValueError(f"`dev_fraction` + `test_fraction` must be below 1 (training needs some), got "
                         f"{dev_fraction} + {test_fraction}")
    held_out = [(split, f) for split, f in (("test", test_fraction), ("dev", dev_fraction)) if f > 0]
    if not held_out:
        return {"train": list(entries)}
    unknown = [e.id for e in entries if not e.speaker]
    if unknown:
        raise ValueError(f"holding out dev/test by speaker needs every utterance's speaker; {len(unknown)} have none "
                         f"(e.g. `{unknown[0]}`): give the table a speaker column ({', '.join(SPEAKER_COLUMNS)}), or "
                         "set `dev_fraction` and `test_fraction` to 0 and make dev and test yourself")
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.speaker] = counts.get(e.speaker, 0) + 1
    if len(counts) < 1 + len(held_out):
        raise ValueError(f"holding out {' and '.join(s for s, _ in held_out)} by speaker needs at least "
                         f"{1 + len(held_out)} speakers, found {len(counts)} ({sorted(counts)}); put each speaker's "
                         "recordings in a folder of their own (the folder names the speaker), or set `dev_fraction` "
                         "and `test_fraction` to 0")
    order = sorted(counts, key=lambda s: hashlib.sha256(f"{seed}\0{s}".encode()).hexdigest())
    split_of: dict[str, str] = {}
    for k, (split, fraction) in enumerate(held_out):
        later = len(held_out) - k  # splits still to fill after this one, train included: a speaker each
        held = 0
        while len(order) > later and (held == 0 or held < fraction * len(entries)):
            speaker = order.pop(0)
            split_of[speaker] = split
            held += counts[speaker]
    out: dict[str, list[Entry]] = {s: [] for s in SPLITS if s == "train" or s in split_of.values()}
    for e in entries:
        out[split_of.get(e.speaker, "train")].append(e)
    return out


def find_inputs(corpus_dir: str | os.PathLike) -> tuple[Path, dict[str, Path]]:
    """The folder `corpus_dir` names and the tables to read there: {split: table}.

    The tables named train/dev/test (.tsv before .csv), or the table `corpus_dir` is; {} for a folder read as
    audio with transcripts beside (or as its one table, when it holds no such audio: `prepare_folder`).
    """
    path = Path(corpus_dir).expanduser()
    if path.is_file():
        if path.suffix.lower() not in TABLE_SUFFIXES:
            raise ValueError(f"`corpus_dir` {str(path)!r} is a file but not a .tsv or .csv table; pass the folder of "
                             "recordings, or a table of audio path and transcript")
        path = path.resolve()
        return path.parent, {path.stem.lower() if path.stem.lower() in SPLITS else "train": path}
    root = find_root(path, [], LAYOUT)
    named = {}
    for split in SPLITS:
        table = next((root / f"{split}{s}" for s in TABLE_SUFFIXES if (root / f"{split}{s}").is_file()), None)
        if table is not None:
            named[split] = table
    return root, named


def prepare_folder(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    language: str = "en",
    speaker: str | None = None,
    dev_fraction: float = 0.0,
    test_fraction: float = 0.0,
    seed: int = 0,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
) -> dict[str, list[Utterance]]:
    """Import your own recordings: write `output_dir/<split>.jsonl` (+ `.report.json`).

    Args:
        corpus_dir: the folder (audio with transcripts beside, split tables, or one table), or a table file.
        output_dir: where manifests, reports and converted audio (`wav/`) go.
        language: "en" or "zh": how transcripts are normalized, and the manifests' `language`.
        speaker: every utterance's speaker, instead of the audio's folder name (a folder) or the table's
            speaker column (Common Voice's `client_id`).
        dev_fraction, test_fraction: for input that doesn't name its splits, hold out at least this share
            of the utterances as dev and test, whole speakers at a time (`hold_out_speakers`).
        seed: which speakers are held out.
        num_workers: parallel audio checks and conversions.
        splits: the splits to write (e.g. ["test"] of a Common Voice release); None: all of them.

    Returns:
        {split: utterances}: the splits the tables name, or "train" (and "dev", "test" when held out).

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: nothing in `corpus_dir` looks like recordings with transcripts; a table without a path or
            transcript column; hold-out fractions for input that names its splits, or that can't be met;
            `language` other than "en" or "zh"; `splits` the input doesn't have.
    """
    if language not in ("en", "zh"):
        raise ValueError(f"`language` must be 'en' or 'zh', got {language!r}")
    root, tables = find_inputs(corpus_dir)
    named = bool(tables) and all(t.stem.lower() in SPLITS for t in tables.values())
    if named and (dev_fraction or test_fraction):
        raise ValueError(f"`corpus_dir` {str(corpus_dir)!r} names its splits ({', '.join(sorted(tables))}): "
                         "`dev_fraction` and `test_fraction` apply only to a folder or a table of another name")
    scanned: dict[str, tuple[list[Entry], list[Skip]]] = {}
    if not tables:
        entries, skipped = scan_folder(root, language, speaker, exclude=Path(output_dir))
        others = sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() in TABLE_SUFFIXES)
        if entries:
            scanned["train"] = (entries, skipped)
        elif len(others) == 1:  # audio listed in a table (Hugging Face audiofolder's metadata.csv)
            tables = {"train": others[0]}
        elif others:
            raise ValueError(f"`corpus_dir` {str(corpus_dir)!r} holds no audio with a transcript beside it but the "
                             f"tables {[p.name for p in others]}: pass one of them as `corpus_dir`, or name them train, "
                             "dev and test")
        elif skipped:
            raise ValueError(f"`corpus_dir` {str(corpus_dir)!r} holds audio but no transcript beside any of it "
                             f"(first: `{skipped[0].what}`: {skipped[0].reason}); expected {LAYOUT}")
        else:
            raise no_layout(corpus_dir, LAYOUT)
    for split, table in tables.items():
        scanned[split] = read_table(table, language, speaker)
    if not named:  # one set: hold speakers out of it; what the scan skipped goes to train's report
        entries, skipped = scanned.pop("train")
        scanned = {split: (part, skipped if split == "train" else [])
                   for split, part in hold_out_speakers(entries, dev_fraction, test_fraction, seed).items()}
    # Converted copies keep their path below the common folder of all the audio (whichever splits are written),
    # so two `1.mp3` of different folders never share one copy.
    folders = [str(e.audio.parent) for entries, _ in scanned.values() for e in entries]
    common = Path(os.path.commonpath(folders)) if folders else root
    scanned = {split: scanned[split] for split in select_splits(list(scanned), splits, CORPUS)}
    return {split: build_split(CORPUS, split, entries, skipped, corpus_root=common, output_dir=Path(output_dir),
                               language=language, num_workers=num_workers)
            for split, (entries, skipped) in scanned.items()}
