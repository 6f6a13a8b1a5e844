"""ds2-prepare poetry: the chinese-poetry tarball -> Simplified, deduplicated documents -> every document near a
held-out sentence left out -> normalized LM sentences. On a small tarball built here in the package's layout;
the download is tested against a file:// URL."""

import hashlib
import io
import json
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from deepspeech2.data.manifest import Utterance, write_manifest
from deepspeech2_synthetic.poetry import PoetryTextConfig, documents, near_held_out, prepare_poetry, read_tarball

# Two Tang poems in Traditional characters (as quantangshi has them), a Song ci in Simplified ones.
TANG = [{"author": "李白", "title": "靜夜思", "paragraphs": ["床前明月光，疑是地上霜。", "舉頭望明月，低頭思故鄉。"]},
        {"author": "孟浩然", "title": "春曉", "paragraphs": ["春眠不覺曉，處處聞啼鳥。", "夜來風雨聲，花落知多少。"]},
        {"author": "王之涣", "title": "登鹳雀楼", "paragraphs": ["白日依山尽，黄河入海流。", "欲穷千里目，更上一层楼。"]}]
SONGCI = [{"rhythmic": "江城子", "author": "苏轼", "paragraphs": ["十年生死两茫茫，不思量，自难忘。", "夜来幽梦忽还乡，小轩窗，正梳妆。"]},
          {"rhythmic": "如梦令", "author": "李清照", "paragraphs": ["昨夜雨疏风骤，浓睡不消残酒。"]}]


def _tarball(path, extra=()):
    files = {"package/dist/quantangshi/poet.tang.0.json": TANG,
             "package/dist/quantangshi/poet.tang.1000.json": TANG[:1],  # a duplicate document
             "package/dist/songci/ci.song.0.json": SONGCI,
             "package/dist/lunyu/lunyu.json": [{"chapter": "学而篇", "paragraphs": ["子曰：学而时习之，不亦说乎？"]}],
             "package/dist/youmengying/youmengying.json": [{"content": "读书最乐。", "comment": ["不读"]}],
             "package/dist/quantangshi/authors.tang.json": [{"name": "李白", "desc": "字太白，隴西成紀人。"}],
             "package/dist/yudingquantangshi/json/001.json": [{"paragraphs": ["御定全唐詩的一首詩。"]}],
             "package/dist/rank/poet/poet.tang.0.json": [{"author": "李白", "baidu": 1}],
             "package/dist/quantangshi/表面结构字.json": {"{上/貝}": ["x"]},
             **dict(extra)}
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            raw = data if isinstance(data, bytes) else json.dumps(data, ensure_ascii=False).encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return path


def _manifest(path, texts):
    write_manifest(path, [Utterance(f"a{i}.wav", 1.0, t) for i, t in enumerate(texts)])
    return str(path)


def test_documents_take_the_text_fields_of_each_document():
    assert documents(TANG[0]) == ["床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。"]
    assert documents([{"content": ["甲", {"x": "乙"}], "title": "丙"}, {"para": "丁"}, {"title": "戊"}]) == ["甲乙", "丁"]
    assert documents({"{上/貝}": ["x"]}) == [] and documents(["x", 1]) == []


def test_near_held_out_matches_a_brute_force_search():
    rng = random.Random(0)
    alphabet = "山水风月花"  # a small alphabet, so runs are shared often
    docs = ["".join(rng.choice(alphabet + "，。") for _ in range(rng.randint(0, 60))) for _ in range(300)]
    held = ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 12))) for _ in range(40)]
    for n in (4, 7):
        flat = [d.replace("，", "").replace("。", "") for d in docs]
        expected = {i for i, d in enumerate(flat)
                    if any((s in d) if len(s) <= n else any(s[j:j + n] in d for j in range(len(s) - n + 1))
                           for s in held)}
        assert near_held_out(docs, held, n) == expected
        assert 0 < len(expected) < len(docs)
    assert near_held_out(docs, [], 7) == set() and near_held_out([], held, 7) == set()


def test_near_held_out_ignores_punctuation_and_never_spans_two_documents():
    held = ["明月光疑是地上"]
    assert near_held_out(["床前明月光，疑是地上霜。"], held) == {0}
    assert near_held_out(["床前明月光", "疑是地上霜"], held) == set()  # split over two documents
    assert near_held_out(["明月光疑是地"], held) == set()  # 6 of the 7 characters


def test_prepare_poetry(tmp_path):
    tarball = _tarball(tmp_path / "cp.tgz", {"package/dist/chuci/chuci.json": b"{not json"})
    dev = _manifest(tmp_path / "dev.jsonl", ["夜来幽梦忽还乡"])  # in the Song ci: that whole ci goes
    test = _manifest(tmp_path / "test.jsonl", ["举头望明月低头", "学而"])  # 7 characters of a Tang poem; a short one
    out = tmp_path / "lm" / "poetry.txt"
    report = prepare_poetry(PoetryTextConfig(out=str(out), held_out=(dev, test), tarball=str(tarball),
                                             progress=False))
    lines = out.read_text().splitlines()
    assert lines == ["春眠不觉晓处处闻啼鸟", "夜来风雨声花落知多少",  # Traditional -> Simplified
                     "白日依山尽黄河入海流", "欲穷千里目更上一层楼", "昨夜雨疏风骤浓睡不消残酒", "读书最乐"]
    text = "".join(lines)
    assert "床前" not in text and "十年生死" not in text and "子曰" not in text  # the documents near held-out
    assert "御定" not in text and "隴西" not in text and "太白" not in text  # skipped folders and author notes
    assert (report.documents, report.duplicates, report.near_held_out) == (7, 1, 3)
    assert report.malformed == ["package/dist/chuci/chuci.json"]
    assert (report.sentences, report.characters) == (len(lines), len(text))
    saved = json.loads((tmp_path / "lm" / "poetry.txt.json").read_text())
    assert saved["near_held_out"] == 3 and saved["config"]["held_out"] == [dev, test]
    assert sorted(p.name for p in out.parent.iterdir()) == ["poetry.txt", "poetry.txt.json"]


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="`tarball`"):
        prepare_poetry(PoetryTextConfig(out=str(tmp_path / "p.txt"), tarball=str(tmp_path / "missing.tgz")))
    with tarfile.open(tmp_path / "other.tgz", "w:gz") as tar:
        info = tarfile.TarInfo("package/index.js")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ValueError, match="no dist/.*chinese-poetry"):
        list(read_tarball(tmp_path / "other.tgz"))
    for bad in (dict(out=""), dict(out="p.txt", ngram=1)):
        with pytest.raises(ValueError, match="`out`|`ngram`"):
            PoetryTextConfig(**bad)
    assert not (tmp_path / "p.txt").exists()


def test_the_tarball_is_downloaded_once_and_its_hash_checked(tmp_path):
    src = _tarball(tmp_path / "src.tgz")
    config = dict(out=str(tmp_path / "p.txt"), url=src.as_uri(), cache_dir=str(tmp_path / "cache"), progress=False)
    with pytest.raises(ValueError, match="src.tgz: SHA-256 .*, expected 0{64}"):
        prepare_poetry(PoetryTextConfig(**config, sha256="0" * 64))
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    prepare_poetry(PoetryTextConfig(**config, sha256=digest))
    src.unlink()  # the cached copy serves from now on
    assert prepare_poetry(PoetryTextConfig(**config, sha256=digest)).tarball == str(tmp_path / "cache" / "src.tgz")
    with pytest.raises(RuntimeError, match="by hand and pass it with --tarball"):
        prepare_poetry(PoetryTextConfig(**{**config, "cache_dir": str(tmp_path / "empty")}, sha256=digest))


def test_cli(tmp_path):
    tarball = _tarball(tmp_path / "cp.tgz")
    test = _manifest(tmp_path / "test.jsonl", ["举头望明月低头"])
    cli = [sys.executable, str(Path(__file__).parents[1] / "bin" / "ds2_prepare.py"), "poetry"]
    done = subprocess.run(cli + ["--out", str(tmp_path / "p.txt"), "--held_out", test, "--tarball", str(tarball)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and "1 near a held-out sentence left out" in done.stdout
    assert "床前" not in (tmp_path / "p.txt").read_text()
    done = subprocess.run(cli + ["--out", str(tmp_path / "q.txt"), "--tarball", str(tmp_path / "no.tgz")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("ds2-prepare poetry: error:")
