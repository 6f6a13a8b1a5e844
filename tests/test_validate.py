import json
import subprocess
import sys

import numpy as np
import soundfile as sf

from deepspeech2.data.manifest import read_manifest
from deepspeech2.data.validate import ValidationConfig, ctc_frames, ctc_min_steps, validate_manifest, write_clean
from deepspeech2.testing import make_clip, make_manifest
from deepspeech2.vocab import Vocabulary


def test_ctc_min_steps_brute_force():
    # Reference: the shortest CTC path is the label sequence with blanks inserted only between repeats.
    for labels in ["", "a", "aa", "aab", "abab", "hello", "aaa"]:
        path = []
        for i, c in enumerate(labels):
            if i and labels[i - 1] == c:
                path.append("_")
            path.append(c)
        assert ctc_min_steps(labels) == len(path)


def test_ctc_frames():
    assert ctc_frames(1.0, 1) == 99  # 1 + (16000 - 320) // 160
    assert ctc_frames(1.0, 4) == 25
    assert ctc_frames(0.01, 1) == 0


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
    report = validate_manifest(manifest, ValidationConfig(vocab=Vocabulary.english(), time_stride=4),
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
    missing = subprocess.run(cli + [str(tmp_path / "nope.jsonl")], capture_output=True, text=True)
    assert missing.returncode != 0
    # One readable line, last (TensorFlow's own import-time log lines may come before it).
    assert missing.stderr.strip().splitlines()[-1] == (
        f"ds2-prepare validate: error: manifest `{tmp_path / 'nope.jsonl'}` does not exist")
