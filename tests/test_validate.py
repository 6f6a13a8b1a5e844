import json
import subprocess
import sys

import numpy as np
import soundfile as sf

from deepspeech2.audio import save_wav
from deepspeech2.data.manifest import read_manifest
from deepspeech2.data.validate import ValidationConfig, validate_manifest, write_clean
from deepspeech2.model import DS2_SMALL, TINY
from deepspeech2.testing import make_clip, make_manifest
from deepspeech2.vocab import Vocabulary


def _broken_manifest(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=3)
    wav = tmp_path / "wav"
    sf.write(wav / "stereo.wav", np.zeros((16000, 2)) + 0.1, 16000, subtype="PCM_16")
    sf.write(wav / "8k.wav", make_clip(1.0, sample_rate=8000), 8000, subtype="PCM_16")
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
    assert [n for n, _ in report.good] == [1, 2, 3]
    assert report.bad_lines() == list(range(4, 14))
    by_line = {p.line: p for p in report.problems}
    assert "not found" in by_line[4].message
    assert "2 channels" in by_line[5].message
    assert "8000 Hz" in by_line[6].message
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
    assert len(read_manifest(tmp_path / "clean.jsonl")) == 3
    rows = [json.loads(line) for line in dropped.read_text().splitlines()]
    assert [r["line"] for r in rows] == list(range(4, 14)) and all(r["reasons"] for r in rows)


def test_segments_with_offset(tmp_path):
    manifest, utts = make_manifest(tmp_path, n=1, min_seconds=2.0, max_seconds=2.0)
    ok = {"audio_filepath": "wav/utt000.wav", "offset": 0.5, "duration": 1.0, "text": "hello"}
    late = {"audio_filepath": "wav/utt000.wav", "offset": 1.5, "duration": 1.0, "text": "hello"}
    manifest.write_text(json.dumps(ok) + "\n" + json.dumps(late) + "\n")
    report = validate_manifest(manifest, progress=False)
    assert [n for n, _ in report.good] == [1] and report.bad_lines() == [2]


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
    clean = subprocess.run(cli + [str(bad), "--write_clean", str(tmp_path / "clean.jsonl")],
                           capture_output=True, text=True)
    assert clean.returncode == 0 and len(read_manifest(tmp_path / "clean.jsonl")) == 3
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
    save_wav(tmp_path / "one.wav", make_clip(1.0))
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
