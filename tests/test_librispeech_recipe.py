"""examples/librispeech/run.sh as written, on a miniature LibriSpeech laid out as openslr's tarballs unpack: the seven
splits, SPEAKERS.TXT, CHAPTERS.TXT and BOOKS.TXT, `<split>/<spk>/<chapter>/<spk>-<chapter>-<utt>.flac` with
`<spk>-<chapter>.trans.txt` (capitals, apostrophes), and librispeech-lm-norm.txt.gz beside it. The audio is
espeak-ng's (the tiny corpus' synthesis), two speakers a split; the model is the tiny preset for one epoch, the LM a
2-gram, so the whole recipe runs in a few minutes. Then `--download` against Python's http.server on 127.0.0.1
serving that tree as openslr's tarballs: a stopped download resumed, a missing split, a bad checksum."""

import concurrent.futures
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import jiwer
import pytest
import soundfile as sf

from deepspeech2.audio import SAMPLE_RATE, to_pcm16
from deepspeech2.decode.lm import find_kenlm_tool
from deepspeech2.prepare.librispeech import EVAL_SPLITS, SPLITS, TRAIN_SPLITS
from deepspeech2_synthetic.synthesis import Synthesizers, make_job, synthesize, trim_level_pad
from deepspeech2_synthetic.voices import Speaker

import corpus_fixtures
from factories import FileServer

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
try:
    find_kenlm_tool("lmplz"), find_kenlm_tool("build_binary")
    HAVE_KENLM = True
except FileNotFoundError:
    HAVE_KENLM = False

SENTENCES = ("HE DIDN'T KNOW WHERE THE ROAD WOULD LEAD", "IT'S A FINE DAY FOR A WALK", "THE OLD MAN'S DOG SAT BY "
             "THE FIRE", "SHE SAID THAT THEY WOULD COME BACK SOON", "WE CAN'T SEE THE SEA FROM HERE",
             "THE CHILDREN RAN DOWN TO THE RIVER", "I'LL TELL YOU WHAT I SAW THAT NIGHT",
             "THEIR HOUSE STOOD AT THE END OF THE LANE", "YOU MUSTN'T BE AFRAID OF THE DARK",
             "A LITTLE BIRD SANG IN THE GARDEN", "THE CAPTAIN'S SHIP WAS READY AT DAWN",
             "WHAT WOULD YOU HAVE DONE IN MY PLACE")
# LibriSpeech-like reader ids, two a split, each reading one chapter: (speaker, chapter, sex, espeak-ng variant)
READERS = {"train-clean-100": ((19, 198, "F", "f2"), (26, 495, "M", "m3")),
           "train-clean-360": ((14, 208, "F", "f4"), (16, 122, "F", "f1")),
           "train-other-500": ((20, 205, "F", "f3"), (22, 121, "M", "m1")),
           "dev-clean": ((84, 121123, "F", "f5"), (174, 50561, "M", "m2")),
           "dev-other": ((116, 288045, "M", "m4"), (1255, 90407, "M", "m5")),
           "test-clean": ((1089, 134686, "M", "m6"), (1188, 133604, "M", "m7")),
           "test-other": ((1688, 142285, "M", "m8"), (1998, 15444, "F", "f2"))}
UTTS_PER_CHAPTER = 3
BROKEN = ("train-clean-100", "19-198-0003")  # garbage bytes named .flac, with a transcript line
NO_AUDIO = ("dev-clean", "84-121123-0003")  # a transcript line whose FLAC is not there


def make_mini_librispeech(root: Path) -> dict[str, dict[str, str]]:
    """The miniature corpus in `root` (LibriSpeech/ and librispeech-lm-norm.txt.gz); returns {split: {utt id:
    normalized transcript}} of the utterances a correct import keeps."""
    base = root / "LibriSpeech"
    base.mkdir(parents=True)
    speakers = [";ID  |SEX| SUBSET           |MINUTES| NAME"]
    chapters = [";ID    |READER|MINUTES| SUBSET           | PROJ.|BOOK ID| CH. TITLE           | PROJECT TITLE"]
    books = [";ID    | TITLE"]
    kept: dict[str, dict[str, str]] = {}
    index = 0
    for split, readers in READERS.items():
        role = "train" if split.startswith("train") else "dev" if split.startswith("dev") else "test"
        for n, (spk, chapter, sex, variant) in enumerate(readers):
            speakers.append(f"{spk:<5}| {sex} | {split:<17}| 0.10  | Reader {spk}")
            chapters.append(f"{chapter:<7}| {spk:<5}| 0.10  | {split:<17}| {spk:<5}| {1000 + spk:<6}| Chapter {n + 1}"
                            f"           | Book of reader {spk}")
            books.append(f"{1000 + spk:<6}| Book of reader {spk}")
            voice = Speaker(id=str(spk), engine="espeak-ng", voice="en-us", variant=variant, gender=sex, rate=1.1,
                            pitch=1.0)
            folder = base / split / str(spk) / str(chapter)
            folder.mkdir(parents=True)
            lines = []
            for u in range(UTTS_PER_CHAPTER):
                utt = f"{spk}-{chapter}-{u:04d}"
                text = SENTENCES[index % len(SENTENCES)]
                job = make_job(role, index, text.lower(), voice, seed=53)
                index += 1
                wav, rate = synthesize(job, Synthesizers("espeak-ng"))
                wav = trim_level_pad(wav, rate, job.peak_dbfs, job.lead, job.trail)
                sf.write(folder / f"{utt}.flac", to_pcm16(wav), SAMPLE_RATE, format="FLAC", subtype="PCM_16")
                lines.append(f"{utt} {text}")
                kept.setdefault(split, {})[utt] = text.lower()
            for bad_split, bad in (BROKEN, NO_AUDIO):
                if split == bad_split and bad.startswith(f"{spk}-{chapter}-"):
                    lines.append(f"{bad} THIS LINE IS NOT SCORED")
            if (split, f"{spk}-{chapter}-") == (BROKEN[0], BROKEN[1][:-4]):
                (folder / f"{BROKEN[1]}.flac").write_bytes(corpus_fixtures.GARBAGE)
            (folder / f"{spk}-{chapter}.trans.txt").write_text("\n".join(lines) + "\n")
    for name, lines in (("SPEAKERS.TXT", speakers), ("CHAPTERS.TXT", chapters), ("BOOKS.TXT", books)):
        (base / name).write_text("; the LibriSpeech layout in miniature, pipe-separated\n" + "\n".join(lines) + "\n")
    # librispeech-lm-norm.txt: one normalized sentence a line, capitals and apostrophes, gzipped.
    with gzip.open(root / "librispeech-lm-norm.txt.gz", "wt", encoding="utf-8") as f:
        for sentence in SENTENCES * 3 + ("THE ROAD LED DOWN TO THE SEA", "SHE DIDN'T SEE THE BIRD"):
            f.write(sentence + "\n")
    return kept


def _run(args, env, timeout=1500) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "examples/librispeech/run.sh", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _mtimes(*folders: Path) -> dict[str, int]:
    """Every file's mtime, less the lock a command takes on its folder (ds2-train's on RUN records its PID)."""
    return {str(p): p.stat().st_mtime_ns for folder in folders for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_KENLM, reason="needs `make kenlm` (lmplz, build_binary)")
def test_librispeech_recipe_runs_end_to_end(tmp_path):
    corpus = tmp_path / "corpus"
    kept = make_mini_librispeech(corpus)
    data, run = tmp_path / "data", tmp_path / "run"
    (tmp_path / "disk2" / "data").mkdir(parents=True)
    data.symlink_to(tmp_path / "disk2" / "data")  # DATA on another disk, through a symlink
    env = {**os.environ, "DATA": str(data), "RUN": str(run), "BIN": str(VENV_BIN), "SUBSET": "960", "LM": "build",
           "LM_ORDER": "2", "LM_PRUNE": "", "BEAM": "8", "TUNE_BEAM": "8", "NUM_SHARDS": "2", "DS2_PROGRESS": "0",
           "GRID": "--alpha_from 0 --alpha_to 1 --num_alphas 2 --beta_from 0 --beta_to 1 --num_betas 2",
           "TRAIN_FLAGS": "--model=tiny --epochs=1 --batch_frames=0 --batch_size=4 --warmup_steps=1 "
                          "--checkpoint_every_steps=10"}
    out = _run([str(corpus)], env)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    for stage in range(1, 11):
        assert f"==> [{stage}/10]" in out.stdout, f"stage {stage} not announced"

    # Import: every split, the FLACs used in place; the broken FLAC and the line without audio listed and skipped.
    for split in SPLITS:
        lines = [json.loads(line) for line in (data / f"{split}.jsonl").read_text().splitlines()]
        assert {u["id"]: u["text"] for u in lines} == kept[split]
        assert all(u["audio_filepath"].endswith(".flac") and Path(u["audio_filepath"]).resolve().is_relative_to(
            corpus.resolve()) for u in lines)
        assert {u["speaker"] for u in lines} == {str(r[0]) for r in READERS[split]}
    assert not (data / "wav").exists()  # no WAV copy of the corpus
    for (split, utt), why in ((BROKEN, "could not be read"), (NO_AUDIO, "is missing")):
        [skip] = json.loads((data / f"{split}.report.json").read_text())["skipped"]
        assert skip["id"] == utt and why in skip["reason"]
        assert f"  skipped {utt}: " in out.stdout and f"listed in {data / f'{split}.report.json'}" in out.stdout

    # Every stage's output.
    for path in ["vocab.txt", "mean_std.npz", "lm/lm-norm-2gram.bin", "lm/lm-norm-2gram.unigrams.txt",
                 *[f"{s}.clean.jsonl" for s in (*TRAIN_SPLITS, "dev-clean")],
                 *[f"shards/{s}/index.json" for s in (*TRAIN_SPLITS, "dev-clean")]]:
        assert (data / path).is_file() and (data / path).stat().st_size > 0, path
    assert "didn't" in (data / "lm/lm-norm-2gram.unigrams.txt").read_text().split()  # lower-cased LM words
    for path in ["model/model.keras", "tune.json", "tune.png", "export/ds2/1/saved_model.pb", "results.md",
                 "results.json", *[f"eval/{s}_{k}.json" for s in EVAL_SPLITS for k in ("greedy", "lm")]]:
        assert (run / path).is_file(), path
    tune = json.loads((run / "tune.json").read_text())

    # One results table, WER and CER per split, greedy and with the LM, as jiwer scores the reports' utterances.
    results = json.loads((run / "results.json").read_text())
    table = (run / "results.md").read_text()
    assert results["missing"] == [] and list(results["splits"]) == list(EVAL_SPLITS)
    assert (results["lm"]["alpha"], results["lm"]["beta"]) == (tune["best_alpha"], tune["best_beta"])
    for split in EVAL_SPLITS:
        row = results["splits"][split]
        for kind in ("greedy", "lm"):
            report = json.loads((run / "eval" / f"{split}_{kind}.json").read_text())
            refs = [u["reference"] for u in report["utterances"]]
            hyps = [u["hypothesis"] for u in report["utterances"]]
            assert sorted(refs) == sorted(kept[split].values())
            assert row[kind]["wer"] == pytest.approx(jiwer.wer(refs, hyps))
            assert row[kind]["cer"] == pytest.approx(jiwer.cer(refs, hyps))
            assert sorted(report["groups"]["speaker"]) == sorted(str(r[0]) for r in READERS[split])
        assert (f"| {split} | {len(kept[split])} | {100 * row['greedy']['wer']:.2f}% | {100 * row['lm']['wer']:.2f}% "
                f"| {100 * row['greedy']['cer']:.2f}% | {100 * row['lm']['cer']:.2f}% |") in table
        assert row["beam_size"] == 8
    assert table in out.stdout

    # A second run does nothing: every output as it was.
    before = _mtimes(data, run)
    again = _run([str(corpus)], env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert _mtimes(data, run) == before
    assert "already trained to epoch 1" in again.stdout

    # A stage that fails stops the script with that command's own message: a 3-gram LM from a corrupt text.
    (corpus / "librispeech-lm-norm.txt.gz").write_bytes(b"not gzip")
    failed = _run([str(corpus)], {**env, "LM_ORDER": "3"})
    assert failed.returncode == 1
    assert "==> [5/10]" in failed.stdout and "==> [6/10]" not in failed.stdout
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("ds2-build-lm: error: `") and "librispeech-lm-norm.txt.gz` could not be read" in last


@pytest.mark.slow
def test_librispeech_recipe_downloads_resumes_and_refuses_a_bad_checksum(tmp_path):
    """run.sh --download against a local openslr (http.server on 127.0.0.1, Range requests): a stopped tarball
    resumed where it stopped, the tree unpacked as the corpus has it, a split the subset lacks reported, a
    checksum mismatch refused in one line naming the file."""
    corpus = tmp_path / "corpus"
    make_mini_librispeech(corpus)
    table = corpus_fixtures.librispeech_tarballs(corpus, tmp_path / "www")
    (tmp_path / "checksums.json").write_text(json.dumps(table))
    dl = tmp_path / "dl"
    dl.mkdir()
    tarball = (tmp_path / "www/resources/12/train-clean-100.tar.gz").read_bytes()
    half = len(tarball) // 2
    (dl / "train-clean-100.tar.gz.part").write_bytes(tarball[:half])  # what a dropped connection leaves
    with FileServer(tmp_path / "www") as server:
        env = {**os.environ, "DATA": str(tmp_path / "data"), "RUN": str(tmp_path / "run"), "BIN": str(VENV_BIN),
               "SUBSET": "100", "LM": "build", "MIRROR": server.url, "CHECKSUMS": str(tmp_path / "checksums.json"),
               "STOP_AFTER": "2", "DS2_PROGRESS": "0"}
        out = _run(["--download", str(dl)], env, timeout=600)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert "==> [1/10] download" in out.stdout and "stopped after stage 2" in out.stdout
        fetched = {path.rsplit("/", 1)[-1]: start for path, start, _ in server.requests}
        assert fetched == {"train-clean-100.tar.gz": half, **{f"{s}.tar.gz": 0 for s in EVAL_SPLITS},
                           "librispeech-lm-norm.txt.gz": 0}  # resumed at the half it had; the rest whole
        for split in ("train-clean-100", *EVAL_SPLITS):
            src, got = corpus / "LibriSpeech" / split, dl / "LibriSpeech" / split
            files = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
            assert sorted(p.relative_to(got) for p in got.rglob("*") if p.is_file()) == files
            assert all((got / f).read_bytes() == (src / f).read_bytes() for f in files)
            assert (tmp_path / "data" / f"{split}.jsonl").is_file()
        assert sorted(p.name for p in dl.iterdir()) == [".download.json", ".lock", "LibriSpeech",
                                                        "librispeech-lm-norm.txt.gz"]  # the tarballs deleted

        # Again: nothing is fetched; a subset whose training split is missing stops at once, saying which.
        del server.requests[:]
        again = _run(["--download", str(dl)], env, timeout=600)
        assert again.returncode == 0 and server.requests == [], again.stderr[-3000:]
        short = _run([str(dl)], {**env, "SUBSET": "460"}, timeout=600)
        assert short.returncode == 1 and "==> [3/10]" not in short.stdout
        assert f"train-clean-360: not in {dl}/LibriSpeech, skipped" in short.stdout
        assert short.stderr.strip().splitlines() == [
            f"examples/librispeech/run.sh: error: SUBSET=460 trains on train-clean-100 train-clean-360 and tunes on "
            f"dev-clean, but train-clean-360 is not in {dl}/LibriSpeech: unpack it there (or run "
            f"examples/librispeech/run.sh --download {dl}), or choose a smaller SUBSET"]

        # A tarball that doesn't match its published checksum: refused, in one line naming it.
        table["test-other.tar.gz"]["md5"] = "0" * 32
        (tmp_path / "bad.json").write_text(json.dumps(table))
        bad = _run(["--download", str(tmp_path / "dl2")], {**env, "CHECKSUMS": str(tmp_path / "bad.json")},
                   timeout=600)
    assert bad.returncode == 1 and "==> [2/10]" not in bad.stdout
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("ds2-prepare download: error: test-other.tar.gz: MD5 ")
    assert f"expected {'0' * 32}" in line  # and the bad copy deleted:
    assert not [p for p in (tmp_path / "dl2").iterdir() if p.name.startswith("test-other")]


def test_the_readme_names_only_flags_and_knobs_that_exist():
    """Every `ds2-... --flag` examples/librispeech/README.md shows is a flag of that command (its --help), every
    environment override it lists is one run.sh reads, and it numbers as many stages as run.sh announces."""
    import re

    readme = (REPO / "examples/librispeech/README.md").read_text(encoding="utf-8")
    script = (REPO / "examples/librispeech/run.sh").read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```", "", readme, flags=re.S)  # the code blocks run run.sh itself
    spans = [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", prose)]
    used: dict[str, set[str]] = {}
    for span in spans:
        # ds2-prepare's flags are its command's (`ds2-prepare librispeech --help`)
        command = re.match(r"(ds2-[a-z-]+)\b( (?:download|librispeech|validate)\b)?", span)
        flags = set(re.findall(r"--([a-z_]+)", span)) - {"flagfile"}  # absl's own
        if command and (VENV_BIN / command[1]).is_file() and flags:  # not the presets (`ds2-paper-en`)
            used.setdefault(command[0], set()).update(flags)
    assert {"ds2-prepare download", "ds2-prepare librispeech", "ds2-prepare validate", "ds2-build-lm",
            "ds2-make-shards", "ds2-tune", "ds2-eval", "ds2-export"} <= set(used)

    def help_of(command: str) -> str:
        name, *sub = command.split()
        return subprocess.run([str(VENV_BIN / name), *sub, "--help"], capture_output=True, text=True, timeout=120).stdout

    with concurrent.futures.ThreadPoolExecutor(len(used)) as pool:  # the commands' --help, side by side
        helps = dict(zip(used, pool.map(help_of, used)))
    for command, names in used.items():
        help_text = helps[command]
        for name in names:
            assert any(re.search(rf"^\s+--(\[no\])?{n}: ", help_text, re.M)
                       for n in (name, name[2:] if name.startswith("no") else name)), f"{command} --{name}"
    knobs = readme[readme.index("Overrides by environment:"):].split("\n\n")[0]
    for knob in re.findall(r"`([A-Z_]+)`", knobs):
        assert f"{knob}=${{{knob}" in script, knob
    assert max(int(n) for n in re.findall(r"^\s*(\d+)\. \*\*", readme, re.M)) == int(re.search(r"^N=(\d+)$", script,
                                                                                                re.M)[1]) == 10


def test_the_readme_estimates_are_bench_flops_figures():
    """The README's FLOPs table is what bench/flops.py prints (its last line, JSON), rounded as written there."""
    import re

    out = subprocess.run([sys.executable, str(REPO / "bench/flops.py")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["hours"] == pytest.approx(960.9)
    readme = (REPO / "examples/librispeech/README.md").read_text(encoding="utf-8")
    for r in figures["estimates"]:
        row = re.search(rf"^\| `{r['model']}` \| (.*) \|$", readme, re.M)[1].split(" | ")
        gpu = [float(x) for x in row[3].split(" / ")]
        assert [float(row[0]), float(row[1]), float(row[2])] == pytest.approx(
            [r["forward_gflop_per_audio_second"], r["train_tflop_per_step"], r["epoch_pflop"]], rel=0.02)
        assert gpu == pytest.approx([r["gpu_hours_per_epoch"][t] for t in ("10", "30", "100")], rel=0.05)
        cpu = float(re.search(r"≈ ([\d,]+)", row[4])[1].replace(",", ""))
        assert cpu == pytest.approx(r["cpu_hours_per_epoch"], rel=0.05)
        # a training step is 3 forward passes of 240 s of audio
        assert r["train_tflop_per_step"] * 1e3 == pytest.approx(3 * 240 * r["forward_gflop_per_audio_second"])
