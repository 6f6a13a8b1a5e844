import json
import subprocess
import sys

import numpy as np
import pytest

from deepspeech2.features import FeatureConfig, Normalizer
from deepspeech2.vocab import BLANK_ID, UNK_CHAR, Vocabulary, normalization_warning


def test_english_layout():
    v = Vocabulary.english()
    assert v.size == 29
    assert v.blank_id == BLANK_ID == 0
    assert v.encode(" ") == [1] and v.encode("'") == [2] and v.encode("az") == [3, 28]
    assert v.decode(v.encode("it's ok")) == "it's ok"
    assert v.decode([0, 3, 0, 0, 4]) == "ab"


def test_from_texts_threshold_and_order():
    v = Vocabulary.from_texts(["ba a", "it's", "q"], count_threshold=0)
    assert v.chars[:2] == (" ", "'")
    assert list(v.chars[2:]) == sorted(v.chars[2:])
    assert "q" not in Vocabulary.from_texts(["ba a", "it's", "q"], count_threshold=1).chars


def test_from_texts_matches_english_on_full_alphabet():
    assert Vocabulary.from_texts(["the quick brown fox jumps over the lazy dog's back"]) == Vocabulary.english()


def test_mandarin_chars():
    v = Vocabulary.from_texts(["我们好", "你好"])
    assert v.size == 6 and " " not in v.chars  # blank, <unk> and 4 characters
    assert v.decode(v.encode("你好")) == "你好"


def test_save_load_roundtrip(tmp_path):
    v = Vocabulary.english()
    v.save(tmp_path / "vocab.txt")
    lines = (tmp_path / "vocab.txt").read_text().splitlines()
    assert lines[:3] == ["<blank>", "<space>", "'"]
    assert Vocabulary.load(tmp_path / "vocab.txt") == v


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="outside the vocabulary.*'#'"):
        Vocabulary.english().encode("a#b")
    (tmp_path / "bad.txt").write_text("a\nb\n")
    with pytest.raises(ValueError, match="line 1"):
        Vocabulary.load(tmp_path / "bad.txt")
    (tmp_path / "bad2.txt").write_text("<blank>\nab\n")
    with pytest.raises(ValueError, match="line 2"):
        Vocabulary.load(tmp_path / "bad2.txt")
    with pytest.raises(FileNotFoundError, match="ds2-build-vocab"):
        Vocabulary.load(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="duplicates"):
        Vocabulary(("a", "a"))
    with pytest.raises(ValueError, match="no characters"):
        Vocabulary.from_texts([])
    with pytest.raises(ValueError, match="no characters.*count_threshold"):
        Vocabulary.from_texts(["", "ab"], count_threshold=1)


def test_a_file_that_is_not_a_vocabulary_is_named(tmp_path):
    # An .npz passed by mistake (e.g. --vocab mean_std.npz), UTF-16 text, raw bytes.
    Normalizer(np.zeros(161, np.float32), np.ones(161, np.float32), FeatureConfig()).save(tmp_path / "mean_std.npz")
    (tmp_path / "utf16.txt").write_text("<blank>\n<space>\na\n", encoding="utf-16")
    (tmp_path / "bytes.bin").write_bytes(bytes(range(256)))
    for name in ("mean_std.npz", "utf16.txt", "bytes.bin"):
        with pytest.raises(ValueError, match=rf"`{tmp_path / name}` is not a vocabulary file.*UTF-8 text, one "
                                             "token per line"):
            Vocabulary.load(tmp_path / name)


def test_normalization_warning():
    assert normalization_warning(["the quick brown fox", "it's"]) is None
    assert normalization_warning(["我们有两个苹果"]) is None
    raw = normalization_warning(["The quick brown fox jumps over the lazy dog.", "fine text", "I have 2 dogs"])
    assert raw.startswith("2 of 3 transcripts are not normalized: '.2IT'")
    assert "'I have 2 dogs' -> 'i have two dogs'" in raw and "ds2-prepare normalize MANIFEST --language en" in raw
    zh = normalization_warning(["我们有2个苹果。"])
    assert "'2。'" in zh and "-> '我们有两个苹果'" in zh and "--language zh" in zh
    # The manifest's language decides: Latin letters in a Mandarin line are not normalized Mandarin.
    assert normalization_warning(["abc"], ["zh"]) is not None and normalization_warning(["abc"], ["en"]) is None


def _build_vocab(tmp_path, texts, *flags):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"audio_filepath": f"/x/{i}.wav", "duration": 1.0, "text": t}) + "\n"
                                for i, t in enumerate(texts)))
    return subprocess.run([sys.executable, "bin/ds2_build_vocab.py", "--manifest_paths", str(manifest),
                           "--out", str(tmp_path / "v.txt"), *flags], capture_output=True, text=True)


def test_build_vocab_cli_warns_on_raw_text_and_refuses_nothing(tmp_path):
    out = _build_vocab(tmp_path, ["The quick brown fox jumps over the lazy dog."])
    assert out.returncode == 0, out.stderr
    assert {".", "T"} <= set(Vocabulary.load(tmp_path / "v.txt").chars)  # built as asked, but it warns
    warning = out.stderr.strip().splitlines()[-1]
    assert warning.startswith("ds2-build-vocab: warning: 1 of 1 transcripts are not normalized: '.T'")
    assert "ds2-prepare normalize" in warning
    clean = _build_vocab(tmp_path, ["the quick brown fox jumps over the lazy dog"])
    assert clean.returncode == 0 and "warning" not in clean.stderr
    (tmp_path / "v.txt").unlink()
    empty = _build_vocab(tmp_path, [])
    assert empty.returncode == 1 and not (tmp_path / "v.txt").exists()
    assert empty.stderr.strip().splitlines()[-1].startswith("ds2-build-vocab: error: ")
    assert "no utterances" in empty.stderr


# ---------------------------------------------------------------------------------------- Mandarin, <unk>

def test_mandarin_vocabulary_has_unk_first_and_maps_unseen_characters_to_it(tmp_path):
    v = Vocabulary.from_texts(["我们好", "你好"])
    assert v.chars[0] == UNK_CHAR and v.unk_id == 1 and not v.spaced  # PaddleSpeech: <blank> 0, <unk> 1
    assert v.chars[1:] == tuple(sorted("我们好你"))  # then by code point
    assert v.encode("你们好吗") == [v.encode("你")[0], v.encode("们")[0], v.encode("好")[0], 1]
    assert v.decode(v.encode("你们好吗")) == "你们好" + UNK_CHAR  # one character: one error in the CER
    assert v.oov("吗") == set() and v.unknown("吗吗呢好") == {"吗": 2, "呢": 1}
    v.save(tmp_path / "vocab.txt")
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").split("\n")[:3] == ["<blank>", "<unk>", "们"]
    assert Vocabulary.load(tmp_path / "vocab.txt") == v
    # English stays the closed 29-symbol alphabet: a stray character is an error, not <unk>.
    assert Vocabulary.english().unk_id is None and Vocabulary.from_texts(["it's a cat"]).unk_id is None
    with pytest.raises(ValueError, match="outside the vocabulary"):
        Vocabulary.english().encode("ça")


def test_count_threshold_sends_rare_characters_to_unk():
    texts = ["你好你好", "你们", "谢谢"]  # 你 3, 好 2, 们 1, 谢 2
    v = Vocabulary.from_texts(texts, count_threshold=1)
    assert v.chars == (UNK_CHAR, "你", "好", "谢")
    assert v.decode(v.encode("你们好")) == "你" + UNK_CHAR + "好"
    assert Vocabulary.from_texts(texts, count_threshold=2).chars == (UNK_CHAR, "你")
    assert Vocabulary.from_texts(texts, unk=False).unk_id is None  # forced off: unseen text can't be encoded
    assert Vocabulary.from_texts(["a b"], unk=True).chars[:2] == (UNK_CHAR, " ")
    with pytest.raises(ValueError, match="`count_threshold` must be an int >= 0, got -1"):
        Vocabulary.from_texts(texts, count_threshold=-1)
    with pytest.raises(ValueError, match="reserved"):
        Vocabulary.from_texts(["你" + UNK_CHAR])


def test_six_thousand_characters_round_trip(tmp_path):
    chars = [chr(0x4E00 + i) for i in range(6000)]  # CJK unified ideographs: 一 ...
    v = Vocabulary.from_texts(["".join(chars)])
    assert v.size == 6002 and v.tokens()[2] == "一"  # blank, <unk>, 6000 characters
    v.save(tmp_path / "vocab.txt")
    assert Vocabulary.load(tmp_path / "vocab.txt") == v
    text = "".join(chars[::997])
    assert v.decode(v.encode(text)) == text


def test_build_vocab_cli_on_mandarin_counts_what_goes_to_unk(tmp_path):
    out = _build_vocab(tmp_path, ["你好你好", "你们", "谢谢"], "--count_threshold", "1")
    assert out.returncode == 0, out.stderr
    assert Vocabulary.load(tmp_path / "v.txt").chars == (UNK_CHAR, "你", "好", "谢")
    assert "1 training characters (1 distinct, each seen at most --count_threshold=1 times) are encoded as <unk>" \
        in out.stdout
    english = _build_vocab(tmp_path, ["it's a cat"], "--unk")
    assert english.returncode == 0 and Vocabulary.load(tmp_path / "v.txt").unk_id == 1
