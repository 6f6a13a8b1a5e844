"""Transcript normalization, the way the DS2 recipes prepare text.

English: lowercase, numbers spelled out, symbols read out ("%" -> "percent"), everything else outside
`[a-z' ]` dropped, whitespace collapsed. Mandarin: full-width folded to half-width, digits read as
Chinese numerals, punctuation and spaces removed (the model is char-based, DS2 §6.2).
"""

from __future__ import annotations

import re
import unicodedata

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ["", "thousand", "million", "billion", "trillion", "quadrillion"]
_ORDINAL_EXCEPTIONS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                       "nine": "ninth", "twelve": "twelfth"}


def _below_thousand(n: int) -> list[str]:
    words = []
    if n >= 100:
        words += [_ONES[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        words.append(_TENS[n // 10])
        n %= 10
        if n:
            words.append(_ONES[n])
    elif n or not words:
        words.append(_ONES[n])
    return words


def number_to_words(n: int) -> str:
    """Spell a non-negative integer: 1234 -> "one thousand two hundred thirty four"."""
    if n < 0:
        return "minus " + number_to_words(-n)
    if n == 0:
        return "zero"
    groups = []
    scale = 0
    while n:
        n, rest = divmod(n, 1000)
        if rest:
            if scale >= len(_SCALES):
                raise ValueError(f"`n` is too large to spell out: {n}")
            groups.append(_below_thousand(rest) + ([_SCALES[scale]] if scale else []))
        scale += 1
    return " ".join(w for g in reversed(groups) for w in g)


def _year_to_words(n: int) -> str:
    hi, lo = divmod(n, 100)
    if lo == 0:
        return f"{number_to_words(hi)} hundred"
    lo_words = number_to_words(lo) if lo >= 10 else f"oh {number_to_words(lo)}"
    return f"{number_to_words(hi)} {lo_words}"


def _ordinal(words: str) -> str:
    *head, last = words.split()
    if last in _ORDINAL_EXCEPTIONS:
        last = _ORDINAL_EXCEPTIONS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return " ".join(head + [last])


_NUMBER = re.compile(r"(?P<cur>[$£€])?(?P<num>\d[\d,]*(?:\.\d+)?)(?P<suf>st|nd|rd|th|s|%)?", re.IGNORECASE)
_CURRENCY = {"$": ("dollar", "dollars"), "£": ("pound", "pounds"), "€": ("euro", "euros")}


def _spell_number(m: re.Match) -> str:
    cur, num, suf = m.group("cur"), m.group("num"), (m.group("suf") or "").lower()
    num = num.rstrip(",")
    whole, _, frac = num.replace(",", "").partition(".")
    n = int(whole)
    if not cur and not frac and "," not in num and suf in ("", "s") and 1100 <= n <= 2099 and n % 1000 >= 10 \
            and not 2000 <= n < 2010:
        words = _year_to_words(n)  # "1984" is read as a year, as speakers do
    else:
        words = number_to_words(n)
    if frac:
        words += " point " + " ".join(_ONES[int(d)] for d in frac)
    if suf in ("st", "nd", "rd", "th"):
        words = _ordinal(words)
    elif suf == "s":  # "1960s" -> "nineteen sixties"
        words = (_ordinal(words)[:-2] + "s") if words.endswith("y") else words + "s"
        words = words.replace("iethth", "ieth")
    elif suf == "%":
        words += " percent"
    if cur:
        one, many = _CURRENCY[cur]
        words += " " + (one if n == 1 and not frac else many)
    return f" {words} "


_SYMBOLS = {"&": " and ", "%": " percent ", "+": " plus ", "@": " at ", "=": " equals "}
_EN_KEEP = re.compile(r"[^a-z' ]+")


def normalize_english(text: str) -> str:
    """Normalize an English transcript to `[a-z' ]` with numbers spelled out.

    >>> normalize_english("It's 3:30 -- we owe $5.50 & 20%!")
    "it's three thirty we owe five point five zero dollars and twenty percent"
    """
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))  # café -> cafe
    text = text.replace("\u2019", "'").replace("`", "'")
    text = _NUMBER.sub(_spell_number, text)
    for sym, word in _SYMBOLS.items():
        text = text.replace(sym, word)
    text = text.lower().replace("-", " ")
    text = _EN_KEEP.sub(" ", text)
    # Apostrophes only inside words ("don't", "james'"), not quote marks around them.
    text = re.sub(r"(?<![a-z])'+|'+(?![a-z])", lambda m: m.group(0) if m.start() > 0 and text[m.start() - 1] == "s"
                  and m.group(0) == "'" else " ", text)
    return " ".join(text.split())


_ZH_DIGITS = "零一二三四五六七八九"
_ZH_UNITS = ["", "十", "百", "千"]
_ZH_BIG = ["", "万", "亿", "万亿"]


def _zh_below_10000(n: int) -> str:
    out, zero = "", False
    for i in range(3, -1, -1):
        d = (n // 10**i) % 10
        if d:
            if zero and out:
                out += "零"
            out += _ZH_DIGITS[d] + _ZH_UNITS[i]
            zero = False
        else:
            zero = True
    return out


def number_to_chinese(n: int) -> str:
    """Read an integer in Chinese: 2016 -> "二千零一十六", 10 -> "十"."""
    if n == 0:
        return "零"
    if n >= 10**16:  # beyond 万亿 nobody says the number: read it digit by digit
        return "".join(_ZH_DIGITS[int(d)] for d in str(n))
    parts, i = [], 0
    while n:
        n, rest = divmod(n, 10000)
        if rest:
            parts.append(_zh_below_10000(rest) + _ZH_BIG[i])
            if rest < 1000 and n:
                parts.append("零")
        i += 1
    text = "".join(reversed(parts)).replace("零零", "零")
    return text[1:] if text.startswith("一十") else text


def _zh_number(m: re.Match) -> str:
    whole, _, frac = m.group(0).partition(".")
    text = number_to_chinese(int(whole))
    if frac:
        text += "点" + "".join(_ZH_DIGITS[int(d)] for d in frac)
    return text


def is_cjk(ch: str) -> bool:
    """True for CJK unified ideographs (the Mandarin character vocabulary)."""
    cp = ord(ch)
    return 0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0xF900 <= cp <= 0xFAFF


def normalize_mandarin(text: str) -> str:
    """Normalize a Mandarin transcript: CJK characters only, digits read out, no punctuation or spaces.

    Latin letters are kept uppercase-folded out: Aishell-style transcripts drop them, and so do we.
    """
    text = unicodedata.normalize("NFKC", text)  # full-width digits and letters -> ASCII
    text = re.sub(r"\d+(?:\.\d+)?", _zh_number, text)
    return "".join(c for c in text if is_cjk(c))


def normalize(text: str, language: str = "en") -> str:
    """Normalize `text` for `language` ("en" or "zh")."""
    if language == "en":
        return normalize_english(text)
    if language == "zh":
        return normalize_mandarin(text)
    raise ValueError(f"`language` must be 'en' or 'zh', got {language!r}")
