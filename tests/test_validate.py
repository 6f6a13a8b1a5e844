import json
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from deepspeech2.audio import DURATION_TOLERANCE, load_audio, save_wav, speech_like_clip
from deepspeech2.data.manifest import read_manifest
from deepspeech2.data.shards import ShardConfig, load_index, make_shards, read_shards, shard_paths
from deepspeech2.features import FeatureConfig, compute_features
from deepspeech2.model_config import DS2_SMALL, TINY
from deepspeech2.prepare.stats import compute_mean_std
from deepspeech2.prepare.validate import ValidationConfig, validate_manifest, write_clean
from deepspeech2.vocab import Vocabulary

from factories import make_manifest


def _broken_manifest(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=3)
    wav = tmp_path / "wav"
    sf.write(wav / "stereo.wav", np.zeros((16000, 2)) + 0.1, 16000, subtype="PCM_16")
    sf.write(wav / "8k.wav", speech_like_clip(1.0, sample_rate=8000), 8000, subtype="PCM_16")
    (wav / "corrupt.wav").write_bytes(b"RIFF not really a wav")
    sf.write(wav / "silent.wav", np.zeros(16000), 16000, subtype="PCM_16")
    lines = manifest.read_text().splitlines()
    extra = [
        {"audio_filepath": "wav/missing.wav", "duration": 1.0, "text": "gone"},  # line 4
        {"audio_filepath": "wav/stereo.wav", "duration": 1.0, "text": "two channels"},  # 5
        {"audio_filepath": "wav/8k.wav", "duration": 1.0, "text": "narrow band"},  # 6
        {"audio_filepath": "wav/corrupt.wav", "duration": 1.0, "text": "broken"},  # 7
        {"audio_filepath": lines and "wav/utt000.wav", "duration": utts[0].duration + 1, "text": "hello"},  # 8
        {"audio_filepath": "wav/utt001.wav", "duration": utts[1].duration, "text": ""},  # 9
        {"audio_filepath": "wav/utt001.wav", "duration": utts[1].duration, "text": "HELLO#"},  # 10
        {"audio_filepath": "wav/utt002.wav", "duration": utts[2].duration, "text": "a" * 200},  # 11: CTC
        {"audio_filepath": "wav/silent.wav", "duration": 1.0, "text": "quiet"},  # 12
    ]
    manifest.write_text("\n".join(lines + [json.dumps(e) for e in extra] + ["{oops"]) + "\n")  # 13: JSON
    return manifest


def test_validate_finds_every_problem(tmp_path):
    manifest = _broken_manifest(tmp_path)
    report = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english(), model=DS2_SMALL),
                               progress=False)
    assert report.total == 13
    # Stereo and 8 kHz are converted by make-shards and compute-stats: warnings, the lines stay.
    assert [n for n, _ in report.good] == [1, 2, 3, 5, 6]
    assert report.bad_lines() == [4] + list(range(7, 14)) and report.warned_lines() == [5, 6]
    warned = {p.line: p for p in report.warnings}
    assert "2 channels, downmixed" in warned[5].message
    assert "8000 Hz, resampled to 16000 Hz" in warned[6].message and "4000 Hz stays empty" in warned[6].message
    by_line = {p.line: p for p in report.problems}
    assert "not found" in by_line[4].message
    assert "unreadable" in by_line[7].message
    assert by_line[8].field == "duration" and "set duration to" in by_line[8].fix
    assert "empty transcript" in by_line[9].message
    assert "outside the vocabulary" in by_line[10].message and "#" in by_line[10].message
    assert "CTC-infeasible" in by_line[11].message
    assert "all zeros" in by_line[12].message
    assert by_line[13].field == "json"


def test_write_clean(tmp_path):
    manifest = _broken_manifest(tmp_path)
    report = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english()), progress=False)
    dropped = write_clean(report, tmp_path / "clean.jsonl")
    assert len(read_manifest(tmp_path / "clean.jsonl")) == 5
    rows = [json.loads(line) for line in dropped.read_text().splitlines()]
    assert [r["line"] for r in rows] == [4] + list(range(7, 14)) and all(r["reasons"] for r in rows)
    # --strict: what the pipeline would convert is a problem too.
    strict = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english(), strict=True), progress=False)
    assert [n for n, _ in strict.good] == [1, 2, 3] and strict.bad_lines() == list(range(4, 14))
    assert not strict.warnings


def test_write_clean_with_no_usable_line_is_an_error(tmp_path):
    manifest = _broken_manifest(tmp_path)
    lines = manifest.read_text().splitlines()
    manifest.write_text("\n".join(lines[3:4] + lines[6:]) + "\n")  # the 8 lines with problems
    report = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english()), progress=False)
    assert not report.good and report.total == 8
    with pytest.raises(ValueError, match=r"none of the 8 lines .* is usable, so `.*clean.jsonl` was not written"):
        write_clean(report, tmp_path / "clean.jsonl")
    assert not (tmp_path / "clean.jsonl").exists()
    assert len((tmp_path / "clean.jsonl.dropped.jsonl").read_text().splitlines()) == 8


def test_non_finite_and_non_utf8_lines_are_dropped_like_any_malformed_line(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=2)
    good = manifest.read_bytes().splitlines()
    bad = [b'{"audio_filepath": "wav/utt000.wav", "duration": NaN, "text": "hello world"}',  # line 2
           b'{"audio_filepath": "wav/utt000.wav", "duration": Infinity, "text": "hello world"}',  # 3
           '{"audio_filepath": "wav/utt001.wav", "duration": 1.0, "text": "caf\u00e9"}'.encode("latin-1")]  # 4
    manifest.write_bytes(b"\n".join(good[:1] + bad + good[1:]) + b"\n")
    report = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english()), progress=False)
    assert report.total == 5 and [n for n, _ in report.good] == [1, 5] and report.bad_lines() == [2, 3, 4]
    by_line = {p.line: p for p in report.problems}
    assert {p.field for p in report.problems} == {"json"}
    assert "`duration` must be a non-negative, finite" in by_line[2].message and "got nan" in by_line[2].message
    assert "`duration` must be a non-negative, finite" in by_line[3].message and "got inf" in by_line[3].message
    assert "not valid UTF-8 (byte 0xe9" in by_line[4].message
    dropped = write_clean(report, tmp_path / "clean.jsonl")
    assert read_manifest(tmp_path / "clean.jsonl") == utts
    rows = [json.loads(line) for line in dropped.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in rows] == [2, 3, 4]
    assert rows[0]["entry"] == bad[0].decode() and rows[2]["entry"].endswith('"caf\\xe9"}')  # the byte, shown


def test_a_symlinked_data_folder_through_validate_clean_and_shards(tmp_path):
    # `data` -> `disk/real` (another disk, mounted at another depth): the clean manifest written through
    # the link must still reach every file.
    real = tmp_path / "disk" / "real"
    make_manifest(real / "t", n=4)
    (tmp_path / "data").symlink_to(real, target_is_directory=True)
    folder = tmp_path / "data" / "t"
    report = validate_manifest(folder / "manifest.jsonl", ValidationConfig(vocab=Vocabulary.english()),
                               progress=False)
    assert report.ok and len(report.good) == 4
    write_clean(report, folder / "clean.jsonl")
    lines = [json.loads(line) for line in (folder / "clean.jsonl").read_text().splitlines()]
    assert [line["audio_filepath"] for line in lines] == [f"wav/utt{i:03d}.wav" for i in range(4)]
    index = make_shards(folder / "clean.jsonl", Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=2),
                        progress=False)
    assert index["total_count"] == 4 and index["skipped"] == []


def _talk(tmp_path):
    """A 10 s 'talk': a quiet first 2 s, then loud; returns its path and int16 samples."""
    quiet, loud = 0.1 * speech_like_clip(2.0, seed=1), speech_like_clip(8.0, seed=2)
    save_wav(tmp_path / "talk.wav", np.concatenate([quiet, loud]))
    return tmp_path / "talk.wav", sf.read(tmp_path / "talk.wav", dtype="int16")[0]


def test_segment_at_offset_zero_through_validate_clean_shards_and_stats(tmp_path):
    # The first segment of a talk starts at 0. It must stay the 2 s segment everywhere, not become the
    # whole 10 s file with a 2 s transcript.
    path, pcm = _talk(tmp_path)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": "talk.wav", "offset": 0, "duration": 2.0,
                                    "text": "hello world"}) + "\n")
    report = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english()), progress=False)
    assert report.ok and not report.warnings and [n for n, _ in report.good] == [1]
    write_clean(report, tmp_path / "clean.jsonl")
    line = json.loads((tmp_path / "clean.jsonl").read_text())
    assert line["offset"] == 0.0 and line["duration"] == 2.0

    make_shards(tmp_path / "clean.jsonl", Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=1),
                progress=False)
    (record,) = list(read_shards(shard_paths(tmp_path / "s")))
    np.testing.assert_array_equal(record["pcm"].numpy(), pcm[:32000])
    assert load_index(tmp_path / "s")["shards"][0]["durations"] == [2.0]

    norm = compute_mean_std([tmp_path / "clean.jsonl"], FeatureConfig(), num_samples=None)
    ref, n = compute_features(load_audio(path)[:32000], 32000, FeatureConfig())
    assert norm.num_frames == int(n) == 199
    np.testing.assert_allclose(norm.mean, ref.numpy().mean(0), rtol=1e-4, atol=1e-4)

    # CTC is judged on the 2 s too: 49 output steps on ds2-small, not the file's 249.
    long_text = "ab" * 30  # 60 labels
    manifest.write_text(json.dumps({"audio_filepath": "talk.wav", "offset": 0, "duration": 2.0,
                                    "text": long_text}) + "\n")
    (problem,) = validate_manifest(manifest, progress=False).problems
    assert "49 output steps for 2.000s" in problem.message
    # Without `offset` the line is the whole file, and its duration is wrong; the fix names both readings.
    manifest.write_text(json.dumps({"audio_filepath": "talk.wav", "duration": 2.0, "text": "hello"}) + "\n")
    (problem,) = validate_manifest(manifest, progress=False).problems
    assert problem.field == "duration" and "set duration to 10.000" in problem.fix and "`offset`" in problem.fix


def test_tools_agree_on_what_they_convert_and_on_one_duration_tolerance(tmp_path):
    # validate, make-shards and compute-stats take and skip the same lines: files the pipeline resamples
    # or downmixes are used (a warning in validate), durations within DURATION_TOLERANCE of the audio pass
    # (an MP3 decoded a few tens of ms longer or shorter), and farther ones are skipped by all three.
    wav = tmp_path / "wav"
    wav.mkdir()
    sf.write(wav / "22k.wav", speech_like_clip(1.0, sample_rate=22050), 22050, subtype="PCM_16")
    sf.write(wav / "stereo.wav", np.stack([speech_like_clip(1.0), speech_like_clip(1.0, seed=3)], 1), 16000,
             subtype="PCM_16")
    lines = [{"audio_filepath": "wav/22k.wav", "duration": 1.0, "text": "resampled"},
             {"audio_filepath": "wav/stereo.wav", "duration": 1.0, "text": "downmixed"}]
    tol = DURATION_TOLERANCE
    for i, (seconds, ok) in enumerate([(1.0 + 0.3 * tol, True), (1.0 - 0.3 * tol, True),
                                       (1.0 + 1.5 * tol, False), (1.0 - 1.5 * tol, False)]):
        save_wav(wav / f"mp3_{i}.wav", speech_like_clip(seconds, seed=10 + i))
        lines.append({"audio_filepath": f"wav/mp3_{i}.wav", "duration": 1.0, "text": "ok" if ok else "off"})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    usable = [1, 2, 3, 4]

    report = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english()), progress=False)
    assert [n for n, _ in report.good] == usable and report.warned_lines() == [1, 2]
    assert report.bad_lines() == [5, 6] and all(p.field == "duration" for p in report.problems)
    write_clean(report, tmp_path / "clean.jsonl")
    assert len(read_manifest(tmp_path / "clean.jsonl")) == len(usable)

    index = make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=1),
                        progress=False)
    assert index["total_count"] == len(usable) and [s["line"] for s in index["skipped"]] == [5, 6]
    assert all("manifest says 1.000s" in s["reason"] for s in index["skipped"])
    # Whole files are stored whole (at 16 kHz, mono), whatever the small duration error.
    samples = sorted(s for shard in index["shards"] for s in shard["num_samples"])
    assert samples == sorted([16000, 16000, int((1.0 + 0.3 * tol) * 16000), int((1.0 - 0.3 * tol) * 16000)])

    norm = compute_mean_std([manifest], FeatureConfig(), num_samples=None)
    assert (norm.num_utterances, norm.num_skipped) == (len(usable), 2)
    assert norm.num_frames == sum(1 + (s - 320) // 160 for s in samples)  # the same audio as the shards

    manifest, utts = make_manifest(tmp_path, n=1, min_seconds=2.0, max_seconds=2.0)
    ok = {"audio_filepath": "wav/utt000.wav", "offset": 0.5, "duration": 1.0, "text": "hello"}
    late = {"audio_filepath": "wav/utt000.wav", "offset": 1.5, "duration": 1.0, "text": "hello"}
    manifest.write_text(json.dumps(ok) + "\n" + json.dumps(late) + "\n")
    report = validate_manifest(manifest, progress=False)
    assert [n for n, _ in report.good] == [1] and report.bad_lines() == [2]


def test_lines_longer_than_training_takes_are_a_warning(tmp_path):
    """validate says what make-shards will do with a line over `max_duration`: skip it. The line stays (an
    evaluation manifest may hold it)."""
    from deepspeech2.data.pipeline import PipelineConfig

    manifest, utts = make_manifest(tmp_path, n=4, min_seconds=0.5, max_seconds=2.5)
    report = validate_manifest(manifest, ValidationConfig(max_duration=1.5, model=None), progress=False)
    long_lines = [n for n, u in enumerate(utts, start=1) if u.duration > 1.5]
    assert 0 < len(long_lines) < 4 and report.ok and len(report.good) == 4
    assert report.warned_lines() == long_lines
    assert all("over the 1.5 s make-shards, compute-stats and training take" in w.message for w in report.warnings)
    index = make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "s"), num_shards=1,
                                                                   max_duration=1.5), progress=False)
    assert [s["line"] for s in index["skipped"]] == long_lines  # what validate warned of
    assert ValidationConfig().max_duration == PipelineConfig().max_duration

def test_cli_exit_codes(tmp_path):
    good, _ = make_manifest(tmp_path / "good", n=2)
    Vocabulary.english().save(tmp_path / "vocab.txt")
    cli = [sys.executable, "bin/ds2_prepare.py", "validate", "--vocab", str(tmp_path / "vocab.txt")]
    ok = subprocess.run(cli + [str(good)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = _broken_manifest(tmp_path / "bad")
    out = subprocess.run(cli + [str(bad)], capture_output=True, text=True)
    assert out.returncode == 1
    problem_lines = [line for line in out.stdout.splitlines() if ":line " in line]
    assert len(problem_lines) >= 10 and all(" -> " in line for line in problem_lines)
    assert sum(": warning: " in line for line in problem_lines) == 2
    assert f"{bad}: 5/13 lines OK (2 with warnings), 8 with problems" in out.stdout
    clean = subprocess.run(cli + [str(bad), "--write_clean", str(tmp_path / "clean.jsonl")],
                           capture_output=True, text=True)
    assert clean.returncode == 0 and len(read_manifest(tmp_path / "clean.jsonl")) == 5
    strict = subprocess.run(cli + [str(bad), "--strict", "--write_clean", str(tmp_path / "strict.jsonl")],
                            capture_output=True, text=True)
    assert strict.returncode == 0 and len(read_manifest(tmp_path / "strict.jsonl")) == 3
    # Only warnings: exit 0.
    warn_only = bad.parent / "warn.jsonl"  # relative audio paths resolve against its folder
    warn_only.write_text("".join(line + "\n" for line in bad.read_text().splitlines()[4:6]))
    warned = subprocess.run(cli + [str(warn_only)], capture_output=True, text=True)
    assert warned.returncode == 0 and "2/2 lines OK (2 with warnings), 0 with problems" in warned.stdout
    # No usable line with --write_clean: an error saying why, not an empty manifest and exit 0.
    none = bad.parent / "none.jsonl"
    none.write_text("".join(line + "\n" for line in bad.read_text().splitlines()[6:]))
    empty = subprocess.run(cli + [str(none), "--write_clean", str(tmp_path / "none.clean.jsonl")],
                           capture_output=True, text=True)
    assert empty.returncode == 1 and not (tmp_path / "none.clean.jsonl").exists()
    error = empty.stderr.strip().splitlines()[-1]
    assert error.startswith("ds2-prepare validate: error: none of the 7 lines of") and "none.clean.jsonl" in error
    assert (tmp_path / "none.clean.jsonl.dropped.jsonl").exists()
    # --model: the same 1 s line with 25 labels fails on ds2-small (the default) and passes on tiny.
    one = _one_second(tmp_path, [(NEEDS_25, {})])
    small = subprocess.run(cli + [str(one)], capture_output=True, text=True)
    assert small.returncode == 1 and "CTC-infeasible: model ds2-small has 24 output steps" in small.stdout
    tiny = subprocess.run(cli + [str(one), "--model", "tiny"], capture_output=True, text=True)
    assert tiny.returncode == 0, tiny.stdout + tiny.stderr
    missing = subprocess.run(cli + [str(tmp_path / "nope.jsonl")], capture_output=True, text=True)
    assert missing.returncode != 0
    # One readable line, last (TensorFlow's own import-time log lines may come before it).
    assert missing.stderr.strip().splitlines()[-1] == (
        f"ds2-prepare validate: error: manifest `{tmp_path / 'nope.jsonl'}` does not exist")


# 1 s of audio is 99 frames; ds2-small's two "valid" 3x3 convs of time stride 2 leave (99-3)//2+1 = 49, then
# (49-3)//2+1 = 24 output steps (not ceil(99 / 4) = 25); TINY's one conv (kernel 3, stride 2) leaves 49.
FITS_24 = "abcdefghijklmnopqrstuvwx"  # 24 labels, no repeats
NEEDS_25 = "abcdefghijklmnopqrstuvwxy"
NEEDS_25_REPEATS = "aabcdefghijklmnopqrstuvw"  # 24 characters, but the "aa" needs a blank: 25 steps


def _one_second(tmp_path, lines):
    save_wav(tmp_path / "one.wav", speech_like_clip(1.0))
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"audio_filepath": "one.wav", "duration": 1.0, "text": t, **extra})
                                + "\n" for t, extra in lines))
    return manifest


def test_ctc_feasibility_is_the_models_output_steps(tmp_path):
    manifest = _one_second(tmp_path, [(FITS_24, {}), (NEEDS_25, {}), (NEEDS_25_REPEATS, {})])
    report = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english()), progress=False)  # ds2-small
    assert [n for n, _ in report.good] == [1] and report.bad_lines() == [2, 3]
    for p in report.problems:
        assert p.field == "text" and "CTC-infeasible" in p.message
        assert "ds2-small" in p.message and "24 output steps" in p.message and "need 25" in p.message
    # Another model, other steps; no model, no check.
    report = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english(), model=TINY), progress=False)
    assert report.ok
    assert validate_manifest(manifest, ValidationConfig(model=None), progress=False).ok


def test_ctc_feasibility_on_the_real_audio_length(tmp_path):
    # The manifest claims 3 s (74 steps on ds2-small, plenty for 25 labels) but the file holds 1 s: what
    # training sees is 1 s, 24 steps.
    manifest = _one_second(tmp_path, [(NEEDS_25, {"duration": 3.0})])
    report = validate_manifest(manifest, progress=False)
    fields = {p.field: p for p in report.problems}
    assert set(fields) == {"duration", "text"}
    assert "24 output steps for 1.000s" in fields["text"].message
    # A segment running past the end of its file: judged on the part that exists (0.5 s -> 11 steps).
    manifest.write_text(json.dumps({"audio_filepath": "one.wav", "offset": 0.5, "duration": 2.0,
                                    "text": FITS_24[:12]}) + "\n")
    problems = validate_manifest(manifest, progress=False).problems
    assert any("11 output steps for 0.500s" in p.message for p in problems), problems
