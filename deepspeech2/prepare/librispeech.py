"""LibriSpeech (Panayotov et al., 2015; openslr.org/12): 1000 h of read English audiobooks, 16 kHz FLAC.

Layout as unpacked from the openslr tarballs:

    LibriSpeech/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac
    LibriSpeech/<split>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt   # "<ID> TRANSCRIPT" per line

`<split>` is whatever was unpacked: train-clean-100, train-clean-360, train-other-500, dev-clean,
dev-other, test-clean, test-other. The FLACs (16 kHz mono 16-bit) are used in place: every reader of a manifest
decodes audio with libsndfile, and a WAV copy of the 960 h would take another ~110 GB.

`download_librispeech` fetches the tarballs (openslr resource 12) and the LM files (resource 11) into that
layout, each checked against its published checksum (`CHECKSUMS`), resuming an interrupted download.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deepspeech2.data.manifest import Utterance
from deepspeech2.fileio import exclusive_lock, write_json
from deepspeech2.prepare.download import Checksum, fetch, unpack_tar
from deepspeech2.prepare.importer import (Entry, Skip, build_split, find_root, no_layout, normalized,
                                          read_text_lines, select_splits)
from deepspeech2.text import normalize_english

CORPUS = "librispeech"
TRAIN_SPLITS = ("train-clean-100", "train-clean-360", "train-other-500")
EVAL_SPLITS = ("dev-clean", "dev-other", "test-clean", "test-other")
SPLITS = TRAIN_SPLITS + EVAL_SPLITS
OPENSLR = "https://www.openslr.org"  # mirrors: https://us.openslr.org, https://openslr.elda.org (EU), ...
AUDIO_RESOURCE, LM_RESOURCE = 12, 11  # the files are at <mirror>/resources/<resource>/<name>
# openslr resource 11: the official ARPA models (upper-case words, trained on librispeech-lm-norm), the normalized
# LM text itself (40 M sentences, 800 M words from 14,500 books, none of them a dev or test book), word lists.
LM_FILES = ("3-gram.arpa.gz", "3-gram.pruned.1e-7.arpa.gz", "3-gram.pruned.3e-7.arpa.gz", "4-gram.arpa.gz",
            "librispeech-lm-norm.txt.gz", "librispeech-vocab.txt", "librispeech-lexicon.txt")
# The digests, and where each was found. Tarballs (resource 12): the MD5s of openslr's resources/12/md5sum.txt, as
# PaddlePaddle DS2's data/librispeech/librispeech.py and sdrobert/pytorch-database-prep's librispeech.py copy them
# (the two agree), and the SHA-256s of torchaudio's datasets/librispeech.py. LM files (resource 11, which lists no
# md5sum.txt of its own in the sources searched): the MD5s of sdrobert/pytorch-database-prep's librispeech.py, one
# source only (librispeech-lm-norm.txt.gz's agrees with thu-spmi/CAT's LibriSpeech recipe). A file without an entry
# is refused unverified (`allow_unverified` overrides that).
CHECKSUMS = {
    "dev-clean.tar.gz": Checksum("42e2234ba48799c1f50f24a7926300a1",
                                 "76f87d090650617fca0cac8f88b9416e0ebf80350acb97b343a85fa903728ab3"),
    "dev-other.tar.gz": Checksum("c8d0bcc9cca99d4f8b62fcc847357931",
                                 "12661c48e8c3fe1de2c1caa4c3e135193bfb1811584f11f569dd12645aa84365"),
    "test-clean.tar.gz": Checksum("32fa31d27d2e1cad72775fee3f4849a9",
                                  "39fde525e59672dc6d1551919b1478f724438a95aa55f874b576be21967e6c23"),
    "test-other.tar.gz": Checksum("fb5a50374b501bb3bac4815ee91d3135",
                                  "d09c181bba5cf717b3dee7d4d592af11a3ee3a09e08ae025c5506f6ebe961c29"),
    "train-clean-100.tar.gz": Checksum("2a93770f6d5c6c964bc36631d331a522",
                                       "d4ddd1d5a6ab303066f14971d768ee43278a5f2a0aa43dc716b0e64ecbbbf6e2"),
    "train-clean-360.tar.gz": Checksum("c0e676e450a7ff2f54aeade5171606fa",
                                       "146a56496217e96c14334a160df97fffedd6e0a04e66b9c5af0d40be3c792ecf"),
    "train-other-500.tar.gz": Checksum("d1a0fd59409feb2c614ce4d30c387708",
                                       "ddb22f27f96ec163645d53215559df6aa36515f26e01dd70798188350adcb6d2"),
    "3-gram.arpa.gz": Checksum("74cbb837e582378c26c602e1c8cbcb9c"),
    "3-gram.pruned.1e-7.arpa.gz": Checksum("9a0f1325bcaf3a0f7b7be4be10823c2a"),
    "3-gram.pruned.3e-7.arpa.gz": Checksum("8f67ec741827742eee05799ab7605b50"),
    "4-gram.arpa.gz": Checksum("6abdcd5b055bd482e4f9defe91d40408"),
    "librispeech-lm-norm.txt.gz": Checksum("c83c64c726a1aedfe65f80aa311de402"),
    "librispeech-vocab.txt": Checksum("bf3cc7a50112831ed8b0afa40cae96a5"),
    "librispeech-lexicon.txt": Checksum("28f72663f6bfed7cd346283c064c315b"),
}
VERIFIED = ".download.json"  # in the download folder: the files checked there ({name: [size, mtime_ns]})
LAYOUT = "LibriSpeech/<split>/<speaker>/<chapter>/<speaker>-<chapter>-<utt>.flac plus <speaker>-<chapter>.trans.txt"


def _find_splits(root: Path) -> list[str]:
    return sorted(d.name for d in root.iterdir() if d.is_dir() and next(d.glob("*/*/*.trans.txt"), None))


def scan_split(split_dir: Path) -> tuple[list[Entry], list[Skip]]:
    """Entries from every `*.trans.txt` of one split, plus FLACs that have no transcript line."""
    entries, skipped, seen = [], [], set()
    for trans in sorted(split_dir.glob("*/*/*.trans.txt")):
        speaker = trans.parent.parent.name
        for n, line in enumerate(read_text_lines(trans), start=1):
            if not line.strip():
                continue
            utt_id, _, text = line.strip().partition(" ")
            seen.add(utt_id)
            text, problem = normalized(normalize_english, text)
            entries.append(Entry(utt_id, trans.parent / f"{utt_id}.flac", text, speaker, problem=problem))
    for flac in sorted(split_dir.glob("*/*/*.flac")):
        if flac.stem not in seen:
            skipped.append(Skip(flac.stem, f"no transcript line in `{flac.parent}/*.trans.txt`"))
    return entries, skipped


def prepare_librispeech(
    corpus_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    num_workers: int = 2,
    splits: Iterable[str] | None = None,
) -> dict[str, list[Utterance]]:
    """Import LibriSpeech: write `output_dir/<split>.jsonl` (+ `.report.json`) for each split found.

    Args:
        corpus_dir: the `LibriSpeech` folder, or the folder containing it.
        output_dir: where manifests, reports and converted WAVs (`wav/<split>/...`) go.
        num_workers: parallel audio conversions.
        splits: only these split folders (e.g. ["dev-clean"]); None imports every split present.

    Returns:
        {split: utterances} with English-normalized text, language "en", speaker = LibriSpeech speaker id.

    Raises:
        FileNotFoundError: `corpus_dir` is missing.
        ValueError: no split folder with transcripts is found, or an unknown split is requested.
    """
    root = find_root(corpus_dir, ["LibriSpeech"], LAYOUT)
    found = _find_splits(root)
    if not found:
        raise no_layout(corpus_dir, LAYOUT)
    out = {}
    for split in select_splits(found, splits, CORPUS):
        entries, skipped = scan_split(root / split)
        out[split] = build_split(CORPUS, split, entries, skipped, corpus_root=root, output_dir=Path(output_dir),
                                 language="en", num_workers=num_workers)
    return out


# ------------------------------------------------------------------------------------------------ download


@dataclass(frozen=True)
class LibriSpeechDownloadConfig:
    """What `download_librispeech` fetches, from where, and how it is checked."""

    out_dir: str  # gets LibriSpeech/<split>/ and, beside it, the LM files (the layout `run.sh CORPUS` reads)
    splits: tuple[str, ...] = SPLITS  # the tarballs of resource 12 (a split already unpacked is not fetched)
    lm_files: tuple[str, ...] = ()  # files of resource 11 (LM_FILES), kept as they are
    mirror: str = OPENSLR  # scheme and host (or file:// folder) holding resources/12/ and resources/11/
    checksums: Mapping[str, Checksum] = field(default_factory=dict)  # entries that replace CHECKSUMS' (same names)
    allow_unverified: bool = False  # fetch a file no checksum is known for, unchecked (else: refused)
    keep_archives: bool = False  # keep each tarball after unpacking it (another ~60 GB for the 960 h)
    progress: bool = True

    def __post_init__(self):
        for name in ("splits", "lm_files"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.out_dir:
            raise ValueError("`out_dir` is empty; give the folder to download into, e.g. /data/librispeech")
        unknown = [s for s in self.splits if s not in SPLITS]
        if unknown:
            raise ValueError(f"`splits` {unknown} are not LibriSpeech splits; choose from {list(SPLITS)}")
        unknown = [f for f in self.lm_files if f not in LM_FILES]
        if unknown:
            raise ValueError(f"`lm_files` {unknown} are not files of openslr resource 11; choose from {list(LM_FILES)}")
        if not self.mirror.startswith(("https://", "http://", "file://")):
            raise ValueError(f"`mirror` must be an http(s):// or file:// URL such as {OPENSLR}, got {self.mirror!r}")

    def files(self) -> list[tuple[str, str]]:
        """`(name, url)` of every file to fetch, tarballs first."""
        base = self.mirror.rstrip("/") + "/resources"
        return ([(f"{s}.tar.gz", f"{base}/{AUDIO_RESOURCE}/{s}.tar.gz") for s in self.splits]
                + [(f, f"{base}/{LM_RESOURCE}/{f}") for f in self.lm_files])

    def checksum(self, name: str) -> Checksum:
        return self.checksums[name] if name in self.checksums else CHECKSUMS.get(name, Checksum())


@dataclass(frozen=True)
class Fetched:
    """What `download_librispeech` did with one file."""

    name: str  # "dev-clean.tar.gz", "4-gram.arpa.gz"
    path: Path  # the unpacked split folder, or the LM file
    action: str  # "unpacked", "downloaded", or "there" (found complete: unpacked, or checked before)


def read_checksums(path: str | os.PathLike) -> dict[str, Checksum]:
    """A checksum table from JSON: `{"dev-clean.tar.gz": {"md5": "...", "sha256": "..."}, ...}` (either digest may be
    left out; an entry with neither says the file has no known checksum).

    Raises:
        FileNotFoundError: `path` is missing.
        ValueError: it is not such a table (the message names the entry).
    """
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"checksum table `{path}` is not JSON: {e}") from None
    if not isinstance(table, dict):
        raise ValueError(f"checksum table `{path}` must be an object of file name -> {{md5, sha256}}")
    out = {}
    for name, entry in table.items():
        if not isinstance(entry, dict) or set(entry) - {"md5", "sha256"}:
            raise ValueError(f"checksum table `{path}`: entry {name!r} must be an object with `md5` and/or `sha256`, "
                             f"got {entry!r}")
        out[name] = Checksum(**entry)
    return out


def download_librispeech(config: LibriSpeechDownloadConfig) -> Iterator[Fetched]:
    """Fetch, check and unpack LibriSpeech and its LM files into `config.out_dir`, yielding each file when it is
    done; safe to run again.

    A split whose folder `LibriSpeech/<split>/` exists is not fetched; a tarball is unpacked then deleted (unless
    `keep_archives`); an LM file already there and checked is not read again. See `deepspeech2.prepare.download`
    for the resumed downloads and what happens to a corrupt one.

    Raises:
        ValueError: a file has no known checksum (and not `allow_unverified`), a checksum is wrong (the file is
            deleted), a tarball lacks its split, or another download into `out_dir` is running.
        RuntimeError: a download failed (what arrived is kept; run again to resume).
    """
    out = Path(config.out_dir)
    unknown = [name for name, _ in config.files() if not config.checksum(name)]
    if unknown and not config.allow_unverified:
        raise ValueError(f"no published checksum is known for {', '.join(unknown)}: refused unverified; give the "
                         "checksums in a table (--checksums), or fetch them unchecked with --allow_unverified")
    with exclusive_lock(out, "a LibriSpeech download"):
        verified = _read_verified(out)
        for name, url in config.files():
            checksum = config.checksum(name)
            if name.endswith(".tar.gz"):
                split = name[:-len(".tar.gz")]
                folder = out / "LibriSpeech" / split
                if folder.is_dir():
                    yield Fetched(name, folder, "there")
                    continue
                archive = fetch(url, out / name, checksum, config.progress)
                unpack_tar(archive, out, config.progress)
                if not folder.is_dir():
                    raise ValueError(f"{name} held no LibriSpeech/{split}/ folder; is {url} a LibriSpeech tarball?")
                if not config.keep_archives:
                    archive.unlink()
                yield Fetched(name, folder, "unpacked")
            else:
                path = out / name
                stamp = [path.stat().st_size, path.stat().st_mtime_ns] if path.is_file() else None
                if stamp is None or verified.get(name) != stamp:
                    fetch(url, path, checksum, config.progress)  # checks a copy that is there, fetches one that isn't
                    verified[name] = [path.stat().st_size, path.stat().st_mtime_ns]
                    write_json(out / VERIFIED, verified)
                yield Fetched(name, path, "there" if verified[name] == stamp else "downloaded")


def _read_verified(out: Path) -> dict:
    try:
        return json.loads((out / VERIFIED).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
