"""`ds2-prepare folder` (deepspeech2/prepare/folder.py): your own recordings as a folder of audio with transcripts
beside, or a table of path and text. Each of its three input shapes is also imported, re-imported and checked
against its fixture in tests/test_corpora.py; here: the hold-out by speaker, tables with the wrong columns or
bad rows, Mandarin, the one-table layouts and the command line."""

import json
import os
import re
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
    fx = corpus_fixtures.make_common_voice(tmp_path / "cv")  # one split of a release
    assert list(prepare_folder(fx.corpus_dir, tmp_path / "cv_out", splits=["test"])) == ["test"]
    assert sorted(p.name for p in (tmp_path / "cv_out").glob("*.jsonl")) == ["test.jsonl"]
    (folder / "metadata.csv").rename(folder / "test.csv")
    assert list(prepare_folder(folder / "test.csv", tmp_path / "out3")) == ["test"]
    with pytest.raises(ValueError, match=r"`splits` \['train'\] not found in the folder corpus; available: \['test'\]"):
        prepare_folder(folder / "test.csv", tmp_path / "out3", splits=["train"])
    (folder / "other.csv").write_text("path,text\n")
    assert list(prepare_folder(folder, tmp_path / "out4")) == ["test"]  # test.csv names its split; other.csv is not read


def test_output_inside_the_recordings_is_not_read_back(tmp_path):
    # The converted copies in OUT/wav would otherwise come back as audio without transcripts on a second run.
    corpus = tmp_path / "rec"
    for i in range(2):  # 22.05 kHz: converted
        corpus_fixtures._write(corpus / "ann" / f"{i}.wav", 5513, 22050, i, "WAV")
        (corpus / "ann" / f"{i}.txt").write_text("hello")
    first = prepare_folder(corpus, corpus / "manifests")
    assert len(list((corpus / "manifests/wav").rglob("*.wav"))) == 2
    report = (corpus / "manifests/train.report.json").read_text()
    assert prepare_folder(corpus, corpus / "manifests") == first and len(first["train"]) == 2
    assert (corpus / "manifests/train.report.json").read_text() == report and json.loads(report)["skipped"] == []


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


# ------------------------------------------------------------------------------------- the README (slow)

REPO = Path(__file__).resolve().parents[1]
README = REPO / "examples" / "folder" / "README.md"
# The README's commands unchanged except how much they do: the tiny model, one epoch, a small grid and beam.
TINY = {"ds2-small": "tiny", "--epochs 30": "--epochs 1 --batch_size 4 --warmup_steps 1",
        "--num_alphas 5 --num_betas 5": "--num_alphas 2 --num_betas 2 --beam_size 8"}
VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-029")
SENTENCES = ("the cat sat on the mat", "open the door please", "it is five o'clock", "we went home early",
             "she likes green apples")


def readme_blocks() -> list[str]:
    """The ```bash blocks of examples/folder/README.md, in order."""
    return re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_blocks_are_the_six_steps():
    script = "\n".join(readme_blocks())
    for command in ("ds2-prepare folder", "ds2-build-vocab", "ds2-prepare validate", "ds2-make-shards",
                    "ds2-compute-stats", "ds2-train", "ds2-eval", "ds2-export", "ds2-build-lm", "ds2-tune"):
        assert command in script, command
    for old in TINY:
        assert old in script, f"the README no longer says `{old}`: update TINY"


@pytest.mark.slow
def test_readme_commands_run_as_written(tmp_path):
    """examples/folder/README.md's commands as written (at tiny size), in a fresh folder whose `data/` is a symlink
    to another folder, on `~/recordings`: four espeak-ng voices (22.05 kHz WAV, converted), five sentences each."""
    import jiwer

    home = tmp_path / "home"
    for voice in VOICES:
        for i, sentence in enumerate(SENTENCES):
            wav = home / "recordings" / voice / f"{i:02d}.wav"
            wav.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["espeak-ng", "-v", voice, "-w", str(wav), sentence], check=True, capture_output=True)
            wav.with_suffix(".txt").write_text(sentence.capitalize() + ".\n")
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "disk" / "data").mkdir(parents=True)
    (work / "data").symlink_to(tmp_path / "disk" / "data")
    (work / ".venv").symlink_to(Path(sys.executable).parents[1])  # `source .venv/bin/activate`
    (work / "examples").symlink_to(REPO / "examples")
    script = "\n".join(readme_blocks())
    for old, new in TINY.items():
        script = script.replace(old, new)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env |= {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin"}  # the commands come from the activated venv
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                         timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]

    data, run = work / "data" / "mine", work / "runs" / "mine"
    speakers = {s: {u.speaker for u in read_manifest(data / f"{s}.jsonl")} for s in ("train", "dev", "test")}
    assert [len(speakers[s]) for s in ("train", "dev", "test")] == [2, 1, 1]
    assert set().union(*speakers.values()) == set(VOICES)
    assert len(list((tmp_path / "disk" / "data" / "mine" / "wav").rglob("*.wav"))) == len(VOICES) * len(SENTENCES)
    for path in (data / "shards/train/index.json", data / "shards/dev/index.json", data / "mean_std.npz",
                 run / "model" / "model.keras", data / "lm" / "words3.bin", run / "tune.json"):
        assert path.is_file(), path
    assert list((run / "export" / "ds2").iterdir()) == [run / "export" / "ds2" / "1"]
    assert (run / "export" / "ds2" / "1" / "saved_model.pb").is_file()
    test = {u.text for u in read_manifest(data / "test.jsonl")}
    assert test and test <= set(SENTENCES)
    for kind in ("greedy", "lm"):
        report = json.loads((run / f"test_{kind}.json").read_text())
        refs, hyps = [u["reference"] for u in report["utterances"]], [u["hypothesis"] for u in report["utterances"]]
        assert sorted(refs) == sorted(test)
        assert report["totals"]["wer"] == pytest.approx(jiwer.wer(refs, hyps))
        assert report["totals"]["cer"] == pytest.approx(jiwer.cer(refs, hyps))
        assert list(report["groups"]["speaker"]) == sorted(speakers["test"])
    assert json.loads((run / "test_lm.json").read_text())["decoder"]["lm_path"].endswith("words3.bin")
