import pytest

from deepspeech2.text import normalize, normalize_english, normalize_mandarin, number_to_chinese, number_to_words


@pytest.mark.parametrize("n,words", [
    (0, "zero"), (7, "seven"), (13, "thirteen"), (40, "forty"), (99, "ninety nine"), (100, "one hundred"),
    (101, "one hundred one"), (1000, "one thousand"), (1234, "one thousand two hundred thirty four"),
    (2_000_017, "two million seventeen"),
])
def test_number_to_words(n, words):
    assert number_to_words(n) == words


@pytest.mark.parametrize("raw,expected", [
    ("Hello, World!", "hello world"),
    ("It's 42 degrees.", "it's forty two degrees"),
    ("In 1984 we paid $5.", "in nineteen eighty four we paid five dollars"),
    ("the 21st of May, 2005", "the twenty first of may two thousand five"),
    ("50% & rising -- fast", "fifty percent and rising fast"),
    ("the 1960s", "the nineteen sixties"),
    ("'quoted' words", "quoted words"),
    ("Café déjà-vu", "cafe deja vu"),
    ("3.14", "three point one four"),
    ("1,000,000 people", "one million people"),
])
def test_normalize_english(raw, expected):
    assert normalize_english(raw) == expected
    assert set(normalize_english(raw)) <= set("abcdefghijklmnopqrstuvwxyz' ")


def test_normalize_mandarin():
    assert normalize_mandarin("我有 3 个苹果，你呢？") == "我有三个苹果你呢"
    assert normalize_mandarin("１０５元") == "一百零五元"
    assert number_to_chinese(10) == "十"
    assert number_to_chinese(12) == "十二"
    assert number_to_chinese(1005) == "一千零五"
    assert number_to_chinese(100000) == "十万"
    assert number_to_chinese(12345678901234567890) == "一二三四五六七八九零一二三四五六七八九零"


def test_normalize_language_error():
    with pytest.raises(ValueError, match="language"):
        normalize("x", "fr")
