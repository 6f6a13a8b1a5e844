"""`ds2-prepare folder` (deepspeech2/prepare/folder.py): your own recordings as a folder of audio with transcripts
beside, or a table of path and text. Each of its three input shapes is also imported, re-imported and checked
against its fixture in tests/test_corpora.py; here: the hold-out by speaker, tables with the wrong columns or
bad rows, Mandarin, the one-table layouts and the command line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepspeech2.data.manifest import read_manifest
from deepspeech2.prepare.folder import hold_out_speakers, prepare_folder
from deepspeech2.prepare.importer import Entry

import corpus_fixtures

VENV_BIN = Path(sys.executable).parent


def _speakers_folder(root: Path, sizes: dict[str, int]) -> Path:
    """`root/<speaker>/<n>.wav` + `<n>.txt` for each speaker, `sizes[speaker]` recordings each (16 kHz, 0.25 s)."""
    seed = 0
    for speaker, n in sizes.items():
        for i in range(n):
            corpus_fixtures._write(root / speaker / f"{i:03d}.wav", 4000, 16000, seed, "WAV")
            (root / speaker / f"{i:03d}.txt").write_text(f"recording {i} of {speaker}\n")
            seed += 1
    return root


SIZES = {"ann": 5, "ben": 3, "cat": 8, "dan": 2, "eve": 4, "fay": 6, "gus": 1, "hal": 7, "ida": 3, "jon": 5}


def test_hold_out_by_speaker(tmp_path):
    corpus = _speakers_folder(tmp_path / "rec", SIZES)
    out = prepare_folder(corpus, tmp_path / "out", dev_fraction=0.15, test_fraction=0.2)
    total = sum(SIZES.values())
    assert sorted(out) == ["dev", "test", "train"]
    speakers = {split: {u.speaker for u in utts} for split, utts in out.items()}
    assert set().union(*speakers.values()) == set(SIZES)
    assert not (speakers["train"] & speakers["dev"] or speakers["train"] & speakers["test"]
                or speakers["dev"] & speakers["test"])  # no speaker in two splits
    for split, fraction in (("test", 0.2), ("dev", 0.15)):
        held = len(out[split])
        assert held == sum(SIZES[s] for s in speakers[split])  # whole speakers
        assert held >= fraction * total  # at least the share asked for
        assert held - max(SIZES[s] for s in speakers[split]) < fraction * total  # and no speaker more than needed
    for split, utts in out.items():  # what the manifests on disk hold
        assert read_manifest(tmp_path / "out" / f"{split}.jsonl") == utts

    # The same input and seed, the same splits; other seeds hold out other speakers.
    again = prepare_folder(corpus, tmp_path / "out2", dev_fraction=0.15, test_fraction=0.2)
    assert {s: [u.extra["id"] for u in utts] for s, utts in again.items()} == \
        {s: [u.extra["id"] for u in utts] for s, utts in out.items()}
    entries = [Entry(f"{s}/{i}", Path("x.wav"), "text", s) for s, n in SIZES.items() for i in range(n)]
    draws = {frozenset(e.speaker for e in hold_out_speakers(entries, 0.15, 0.2, seed)["test"]) for seed in range(6)}
    assert len(draws) > 1


def test_hold_out_only_test(tmp_path):
    entries = [Entry(f"{s}/{i}", Path("x.wav"), "text", s) for s, n in SIZES.items() for i in range(n)]
    split = hold_out_speakers(entries, 0.0, 0.3)
    assert sorted(split) == ["test", "train"] and len(split["train"]) + len(split["test"]) == len(entries)
    assert hold_out_speakers(entries, 0.0, 0.0) == {"train": entries}
    # Few speakers: each requested split still gets one, train keeps one, whatever the fractions ask.
    three = [e for e in entries if e.speaker in ("ann", "ben", "cat")]
    split = hold_out_speakers(three, 0.45, 0.45)
    assert [len({e.speaker for e in split[s]}) for s in ("train", "dev", "test")] == [1, 1, 1]


@pytest.mark.parametrize("dev, test, match", [
    (1.0, 0.0, r"`dev_fraction` must be in \[0, 1\), got 1.0"),
    (0.0, -0.1, r"`test_fraction` must be in \[0, 1\), got -0.1"),
    (0.5, 0.5, r"must be below 1 \(training needs some\)"),
])
def test_hold_out_fractions_are_checked(dev, test, match):
    entries = [Entry(f"{s}/{i}", Path("x.wav"), "text", s) for s, n in SIZES.items() for i in range(n)]
    with pytest.raises(ValueError, match=match):
        hold_out_speakers(entries, dev, test)


def test_hold_out_needs_speakers(tmp_path):
    one = _speakers_folder(tmp_path / "one", {"ann": 4})
    with pytest.raises(ValueError, match=r"needs at least 3 speakers, found 1 \(\['ann'\]\); put each speaker's"):
        prepare_folder(one, tmp_path / "out", dev_fraction=0.1, test_fraction=0.1)
    with pytest.raises(ValueError, match="needs at least 2 speakers"):
        prepare_folder(one, tmp_path / "out", test_fraction=0.1)
    # --speaker names one speaker for all: a hold-out by speaker is then impossible, and says so.
    many = _speakers_folder(tmp_path / "many", {"ann": 2, "ben": 2, "cat": 2})
    with pytest.raises(ValueError, match=r"found 1 \(\['me'\]\)"):
        prepare_folder(many, tmp_path / "out", speaker="me", test_fraction=0.3)
    (u,) = {u.speaker for u in prepare_folder(many, tmp_path / "out_me", speaker="me")["train"]}
    assert u == "me"
    # A table without a speaker column has no speakers to hold out.
    table = tmp_path / "t" / "metadata.csv"
    corpus_fixtures._write(tmp_path / "t" / "a.wav", 4000, 16000, 0, "WAV")
    table.write_text("file_name,transcription\na.wav,hello there\n")
    with pytest.raises(ValueError, match=r"needs every utterance's speaker; 1 have none \(e.g. `a`\): give the table"):
        prepare_folder(table.parent, tmp_path / "out", dev_fraction=0.2)
    # Tables that name their splits are not split again.
    fx = corpus_fixtures.make_deepspeech(tmp_path / "ds")
    with pytest.raises(ValueError, match=r"names its splits \(dev, test, train\): `dev_fraction` and `test_fraction`"):
        prepare_folder(fx.corpus_dir, tmp_path / "out", dev_fraction=0.1)


@pytest.mark.parametrize("name, content, match", [
    ("data.csv", "file_path,words\na.wav,hello\n", r"`{table}` has the columns \['file_path', 'words'\] "
     r"\(comma-separated\) but lacks an audio path column and a transcript column; expected a path column named one "
     r"of \['path', 'wav_filename'"),
    ("data.csv", "path;text\na.wav;hello\n", r"has the columns \['path;text'\] \(comma-separated\)"),
    ("data.tsv", "path\tspeaker\na.wav\tann\n", r"lacks a transcript column; expected .*'sentence', 'transcript'"),
    ("data.tsv", "", r"table `{table}` is empty; expected a header line"),
])
def test_table_columns_are_checked(tmp_path, name, content, match):
    table = tmp_path / name
    table.write_text(content)
    with pytest.raises(ValueError, match=match.format(table=str(table.resolve()))):
        prepare_folder(table, tmp_path / "out")


def test_bad_rows_are_reported_with_their_line(tmp_path):
    """A quoted transcript may span lines: the rows after it are still reported at their own line (blank lines are
    passed over)."""
    corpus_fixtures._write(tmp_path / "a.wav", 8000, 16000, 0, "WAV")
    corpus_fixtures._write(tmp_path / "b.wav", 8000, 16000, 1, "WAV")
    table = tmp_path / "list.csv"
    table.write_text('path,text,speaker\n'
                     'a.wav,"a transcript\nover two lines",ann\n'  # lines 2-3
                     '\n'                                           # line 4
                     'b.wav,too,many,fields\n'                      # line 5
                     ',no path,ben\n'                               # line 6
                     'b.wav,"the score was 3-2",ben\n')             # line 7
    out = prepare_folder(table, tmp_path / "out")
    (u,) = out["train"]
    assert (u.text, u.speaker, u.extra["id"]) == ("a transcript over two lines", "ann", "a")
    report = json.loads((tmp_path / "out/train.report.json").read_text())
    assert report["kept"] == 1
    assert [(s.get("path") or s["id"], s["reason"].split(" (")[0]) for s in report["skipped"]] == [
        (f"{table.resolve()}:5", "4 fields where the header has 3"),
        (f"{table.resolve()}:6", "no audio path in column `path`"),
        ("b", "transcript can't be normalized confidently"),
    ]


def test_mandarin_transcripts(tmp_path):
    corpus = tmp_path / "zh"
    for i, text in enumerate(["今天天气很好。", "我有3个苹果", "98年的事", "卡拉OK"]):
        corpus_fixtures._write(corpus / "spk1" / f"{i}.wav", 4000, 16000, i, "WAV")
        (corpus / "spk1" / f"{i}.txt").write_text(text + "\n", encoding="utf-8")
    utts = prepare_folder(corpus, tmp_path / "out", language="zh")["train"]
    assert [(u.extra["id"], u.text, u.language) for u in utts] == [("spk1/0", "今天天气很好", "zh"),
                                                                 ("spk1/1", "我有三个苹果", "zh")]
    skipped = {s["id"]: s["reason"] for s in json.loads((tmp_path / "out/train.report.json").read_text())["skipped"]}
    assert sorted(skipped) == ["spk1/2", "spk1/3"]  # 98年: 1998, or 98 years? Latin letters: not Mandarin
    assert all("can't be normalized confidently" in r for r in skipped.values())
    with pytest.raises(ValueError, match="`language` must be 'en' or 'zh', got 'de'"):
        prepare_folder(corpus, tmp_path / "out", language="de")


def test_one_table_layouts(tmp_path):
    """Hugging Face audiofolder (audio + metadata.csv, no transcripts beside), the table file itself as
    `corpus_dir`, and a table named after its split."""
    folder = tmp_path / "hf"
    for i in range(3):
        corpus_fixtures._write(folder / "data" / f"{i}.wav", 4000, 16000, i, "WAV")
    (folder / "metadata.csv").write_text("file_name,transcription\n" + "".join(
        f"data/{i}.wav,sentence number {i}\n" for i in range(3)))
    from_folder = prepare_folder(folder, tmp_path / "out1")
    from_table = prepare_folder(folder / "metadata.csv", tmp_path / "out2")
    assert list(from_folder) == ["train"] and from_folder == from_table
    assert [u.text for u in from_folder["train"]] == [f"sentence number {n}" for n in ("zero", "one", "two")]
    (folder / "metadata.csv").rename(folder / "test.csv")
    assert list(prepare_folder(folder / "test.csv", tmp_path / "out3")) == ["test"]
    (folder / "other.csv").write_text("path,text\n")
    assert list(prepare_folder(folder, tmp_path / "out4")) == ["test"]  # test.csv names its split; other.csv is not read


def test_what_is_not_a_corpus(tmp_path):
    audio_only = tmp_path / "audio_only"
    corpus_fixtures._write(audio_only / "a.wav", 4000, 16000, 0, "WAV")
    with pytest.raises(ValueError, match=r"holds audio but no transcript beside any of it \(first: `a`: no transcript"):
        prepare_folder(audio_only, tmp_path / "out")
    (audio_only / "x.csv").write_text("path,text\n")
    (audio_only / "y.tsv").write_text("path\ttext\n")
    with pytest.raises(ValueError, match=r"no audio with a transcript beside it but the tables \['x.csv', 'y.tsv'\]"):
        prepare_folder(audio_only, tmp_path / "out")
    (tmp_path / "notes.json").write_text("{}")
    with pytest.raises(ValueError, match="is a file but not a .tsv or .csv table"):
        prepare_folder(tmp_path / "notes.json", tmp_path / "out")


def test_same_file_names_in_different_folders_convert_apart(tmp_path):
    # Two `1.flac` (converted: not WAV) listed by absolute path from two folders: two copies, not one.
    for k, name in enumerate(("x", "y")):
        corpus_fixtures._write(tmp_path / name / "1.flac", 4000 * (k + 1), 16000, k, "FLAC")
    table = tmp_path / "t" / "list.tsv"
    table.parent.mkdir()
    table.write_text("path\ttext\n" + "".join(f"{tmp_path / n / '1.flac'}\thello {n}\n" for n in ("x", "y")))
    utts = prepare_folder(table, tmp_path / "out")["train"]
    assert [round(u.duration, 2) for u in utts] == [0.25, 0.5]
    assert len({u.audio_filepath for u in utts}) == 2


def test_cli(tmp_path):
    corpus = _speakers_folder(tmp_path / "rec", SIZES)
    command = [str(VENV_BIN / "ds2-prepare"), "folder", "--corpus_dir", str(corpus), "--out", str(tmp_path / "out"),
               "--dev_fraction", "0.1", "--test_fraction", "0.1", "--seed", "3"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"{tmp_path / 'out'}/{s}.jsonl" for s in ("train", "dev", "test")]
    assert sum(int(line.split(": ")[1].split()[0]) for line in lines) == sum(SIZES.values())
    assert {u.extra["id"] for u in read_manifest(tmp_path / "out/test.jsonl")} == \
        {e.id for e in hold_out_speakers([Entry(u.extra["id"], Path(u.audio_filepath), u.text, u.speaker)
                                          for s in ("train", "dev", "test")
                                          for u in read_manifest(tmp_path / f"out/{s}.jsonl")], 0.1, 0.1, 3)["test"]}

    bad = tmp_path / "bad.csv"
    bad.write_text("file,words\n")
    out = subprocess.run([*command[:3], str(bad), *command[4:6]], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"ds2-prepare folder: error: table `{bad}` has the columns ['file', 'words'] (comma-separated) but lacks a "
        "transcript column; expected a path column named one of ['path', 'wav_filename', 'audio_filepath', 'audio', "
        "'file_name', 'filename', 'file'] and a transcript column named one of ['sentence', 'transcript', "
        "'transcription', 'text'] on its first line"]
