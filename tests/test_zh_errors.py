"""examples/tiny_zh/errors.py sorts a Mandarin model's substitutions by what espeak-ng says: checked on a
hand-made report whose answers are known from pinyin."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")


def test_errors_sorts_tone_homophone_and_other(tmp_path):
    # 知 zhi1 -> 之 zhi1: a homophone; 该 gai1 -> 改 gai3: a tone; 道 dao4 -> 好 hao3: another syllable;
    # one character deleted, one inserted; an empty hypothesis deletes all of its reference.
    utts = [{"reference": "知道该", "hypothesis": "之好改"},
            {"reference": "你们好", "hypothesis": "你好"},
            {"reference": "大家", "hypothesis": "大大家"},
            {"reference": "中国", "hypothesis": ""}]
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"utterances": utts}, ensure_ascii=False), encoding="utf-8")
    out = subprocess.run([sys.executable, str(ROOT / "examples/tiny_zh/errors.py"), str(report)],
                         capture_output=True, text=True, check=True)
    counts = json.loads(out.stdout.strip().splitlines()[-1])[str(report)]
    assert counts == {"substitutions": 3, "same_toned_syllable": 1, "other_tone": 1, "other_syllable": 1,
                      "deletions": 3, "insertions": 1, "unreadable": 0}
    assert "3 substitutions: 1 wrong tone (33%), 1 homophones (33%)" in out.stdout
