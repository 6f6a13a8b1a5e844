import pytest

from deepspeech2.vocab import BLANK_ID, Vocabulary


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
    assert v.size == 5 and " " not in v.chars
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
