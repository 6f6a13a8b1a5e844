"""Numbers read as words: English (`number_to_words`, years, ordinals, plurals) and Chinese (`number_to_chinese`).

The spellings only: when a written number is a year, a time or an amount is `deepspeech2.text`'s question, and these
answer how each of those readings is spelled once it is decided.
"""

from __future__ import annotations

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ["", "thousand", "million", "billion", "trillion", "quadrillion"]
_ORDINAL_EXCEPTIONS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                       "nine": "ninth", "twelve": "twelfth"}


def digits_to_words(s: str) -> str:
    """A digit string read digit by digit: "007" -> "zero zero seven" (codes, phone numbers, decimals)."""
    return " ".join(_ONES[int(d)] for d in s)


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
    """Spell an integer: 1234 -> "one thousand two hundred thirty four", -5 -> "minus five".

    Raises:
        ValueError: `n` is 10**18 or more (past "quadrillion").
    """
    if n < 0:
        return "minus " + number_to_words(-n)
    if n == 0:
        return "zero"
    if n >= 1000 ** len(_SCALES):
        raise ValueError(f"`n` is too large to spell out: {n}")
    groups = []
    scale = 0
    while n:
        n, rest = divmod(n, 1000)
        if rest:
            groups.append(_below_thousand(rest) + ([_SCALES[scale]] if scale else []))
        scale += 1
    return " ".join(w for g in reversed(groups) for w in g)


def year_to_words(n: int) -> str:
    """1984 -> "nineteen eighty four", 1905 -> "nineteen oh five", 1900 -> "nineteen hundred"."""
    if n % 1000 == 0 or 2000 <= n <= 2009:
        return number_to_words(n)  # "two thousand five": nobody says "twenty oh five"
    hi, lo = divmod(n, 100)
    if lo == 0:
        return f"{number_to_words(hi)} hundred"
    lo_words = number_to_words(lo) if lo >= 10 else f"oh {number_to_words(lo)}"
    return f"{number_to_words(hi)} {lo_words}"


def ordinal(words: str) -> str:
    """The ordinal of a number's reading: "twenty one" -> "twenty first", "twelve" -> "twelfth"."""
    *head, last = words.split()
    if last in _ORDINAL_EXCEPTIONS:
        last = _ORDINAL_EXCEPTIONS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return " ".join(head + [last])


def plural(words: str) -> str:
    """The plural of a number's reading: "eighty" -> "eighties", "six" -> "sixes", "twelve" -> "twelves"."""
    *head, last = words.split()
    if last.endswith("y"):
        last = last[:-1] + "ies"
    elif last.endswith("x"):
        last += "es"
    elif last == "half":
        last = "halves"
    else:
        last += "s"
    return " ".join(head + [last])


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
            out += ("两" if d == 2 and i == 3 else _ZH_DIGITS[d]) + _ZH_UNITS[i]  # 两千, as it is said
            zero = False
        else:
            zero = True
    return out


def number_to_chinese(n: int) -> str:
    """Read a non-negative integer in Chinese: 2016 -> "两千零一十六", 10 -> "十", 20000 -> "两万"."""
    if n == 0:
        return "零"
    if n >= 10**16:  # beyond 万亿 nobody says the number: read it digit by digit
        return chinese_digits(str(n))
    parts, i = [], 0
    while n:
        n, rest = divmod(n, 10000)
        if rest:
            parts.append(("两" if rest == 2 and i else _zh_below_10000(rest)) + _ZH_BIG[i])
            if rest < 1000 and n:
                parts.append("零")
        i += 1
    text = "".join(reversed(parts)).replace("零零", "零")
    return text[1:] if text.startswith("一十") else text


def chinese_digits(s: str) -> str:
    """A digit string read digit by digit in Chinese: "2008" -> "二零零八" (years, codes, decimals)."""
    return "".join(_ZH_DIGITS[int(d)] for d in s)
