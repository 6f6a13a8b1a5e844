"""Transcript normalization, the way the DS2 recipes prepare text.

Every transcript and the LM text go through here, so a mistake here is a wrong label. The rule is: read
the text the way a speaker would say it, and when the written form doesn't say how it was read (a score
"3-2", a date "1/2/99", a bare "10年", letters in a Mandarin sentence), don't guess. Such a transcript
can't be normalized *confidently*: `normalize_english` and `normalize_mandarin` return "" for it (the
importers already drop empty transcripts and count them), or raise `UnnormalizableError` with the reason
when called with `strict=True`, so an importer can report why.

English: the output alphabet is `[a-z' ]`. Numbers are read as words (years, times, money, ordinals,
fractions, decades, phone numbers each their own way), symbols that are spoken are read ("%" -> "percent"),
accents are stripped and æ/œ/ß/ø/þ/ð transliterated; other punctuation goes, whitespace is collapsed.

Mandarin: CJK characters only (the model is char-based, DS2 §6.2). Full-width folds to half-width, 〇 is
the digit zero, digits are read as Chinese numerals (years digit by digit, times with 点/分, percentages
with 百分之, "-5度" as 零下五度), punctuation and spaces are removed. Latin letters make a transcript
unnormalizable unless the caller keeps them as tokens (`keep_latin=True`). Traditional characters pass
through unchanged: see `normalize_mandarin`.

Here is which reading a written number gets; how each reading is spelled (a cardinal, a year, an ordinal, Chinese
numerals) is `deepspeech2.number_words`.
"""

from __future__ import annotations

import re
import unicodedata

from deepspeech2.number_words import (chinese_digits, digits_to_words, number_to_chinese, number_to_words, ordinal,
                                      plural, year_to_words)


class UnnormalizableError(ValueError):
    """A transcript can't be normalized confidently: its written form doesn't say how it was read.

    The message names the reason and the piece of text, in backticks, for an importer's skip report.
    """


def _cardinal(n: int, piece: str) -> str:
    try:
        return number_to_words(n)
    except ValueError:
        raise UnnormalizableError(f"number too large to read: `{piece}`") from None


# ------------------------------------------------------------------------------------------- English

# Letters NFKD doesn't decompose. Transliterated, not deleted: "straße" is "strasse", not "stra e".
_TRANSLITERATE = str.maketrans({"æ": "ae", "Æ": "Ae", "œ": "oe", "Œ": "Oe", "ß": "ss", "ẞ": "SS", "ø": "o",
                                "Ø": "O", "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th", "Þ": "Th",
                                "ł": "l", "Ł": "L", "ı": "i", "ŋ": "ng", "Ŋ": "Ng"})
_PUNCT_FOLD = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u201c": '"',
                             "\u201d": '"', "\u2212": "-", "\u2010": "-", "\u2011": "-", "\u2013": "-",
                             "\u2014": " -- ", "\u2044": "/", "\u2215": "/"})
_VULGAR = {"½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5), "⅖": (2, 5),
           "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅐": (1, 7), "⅛": (1, 8), "⅜": (3, 8),
           "⅝": (5, 8), "⅞": (7, 8), "⅑": (1, 9), "⅒": (1, 10)}
# Denominators read as a fraction without doubt; "9/11", "24/7", "50/50" are not fractions.
_FRACTION_DENOMINATORS = frozenset([2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 32, 64, 100])
_MONTHS = ("january february march april may june july august september october november december "
           "jan feb mar apr jun jul aug sep sept oct nov dec").split()
# Words before a 4-digit number that make it a year ("in 1984", "May 1984"); not "of" ("of 1500 men").
_YEAR_BEFORE = frozenset("in since until till circa ca before after during year early late mid summer winter "
                         "spring autumn fall".split()) | frozenset(_MONTHS)
# Words that make a number a quantity: after it ("1500 meters") or before it ("about 1500").
_COUNT_AFTER = frozenset(
    "miles mile feet foot yards inches meters metres kilometers kilometres km kilograms kg grams pounds lbs "
    "ounces tons tonnes acres gallons liters litres degrees calories volts watts bytes kilobytes megabytes "
    "dollars cents euros percent points people persons men women children kids students soldiers troops "
    "employees workers members voters votes copies pages words lines times things items units cars houses "
    "homes jobs species animals horses sheep cattle ships planes years months weeks days hours minutes "
    "seconds".split())
_COUNT_BEFORE = frozenset("about approximately nearly almost over under than some exactly roughly least most "
                          "total page pages number room".split())
_ERA_LETTERS = re.compile(r"(?<=\d)(\s?)(A\.?D|B\.?C\.?(?:E\b)?|C\.?E)\.?(?![A-Za-z])")  # upper case: "a 1984 ad"
_ERA = re.compile(r"\s*(?:a\.?\s?d|b\.?\s?c\.?(?:\s?e)?|c\.?\s?e)\.?(?![a-z])", re.IGNORECASE)
_MONTH_DAY_BEFORE = re.compile(r"\b(?:%s)\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+$" % "|".join(_MONTHS), re.IGNORECASE)

_NOT_AFTER = r"(?<![\w.,$£€¥/:-])"  # a number starts here, not inside "1.2.3", "a-5" or "$5"
_NOT_BEFORE = r"(?![\w/:-]|[.,]\d)"  # ... and ends here
_VULGAR_RE = re.compile(r"(?:(\d+)\s?)?([%s])" % "".join(_VULGAR))
_PHONE = re.compile(_NOT_AFTER + r"(?:(?:1[-.\s])?(?:\(\d{3}\)\s?|\d{3}[-.])\d{3}[-.]\d{4}|\d{3}-\d{4})" + _NOT_BEFORE)
_YEAR_RANGE = re.compile(_NOT_AFTER + r"(1\d{3}|20\d{2})\s?-\s?(\d{4}|\d{2})" + _NOT_BEFORE)
_TIME = re.compile(_NOT_AFTER + r"(\d{1,2}):(\d{2})(:\d{2})?(?:\s?([ap])\.?\s?m\b\.?)?(?![\w:]|[.,]\d)",
                   re.IGNORECASE)
_AM_PM = re.compile(_NOT_AFTER + r"(\d{1,2})\s?([ap])\.?\s?m(?![a-z])\.?", re.IGNORECASE)
_CURRENCY = re.compile(r"(?<![\w)\]])(-)?([$£€¥])\s?(\d[\d,]*(?:\.\d+)?|\.\d+)"
                       r"(\s?(?:thousand|million|billion|trillion)\b|(?:k|m|bn|b)\b)?", re.IGNORECASE)
_CURRENCY_NAMES = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence"),
                   "€": ("euro", "euros", "cent", "cents"), "¥": ("yen", "yen", None, None)}
_SCALE_ABBREVIATIONS = {"k": "thousand", "m": "million", "b": "billion", "bn": "billion"}
_FRACTION = re.compile(_NOT_AFTER + r"(?:(\d+)\s+)?(\d+)/(\d+)" + _NOT_BEFORE)
# What is left after the readable patterns: a number whose written form doesn't say how it was read.
_DOUBTFUL_EN = [
    (re.compile(r"\d+(?:\.\d+){2,}"), "a version, IP address or date"),
    (re.compile(r"[\d.,]*\d\s?/\s?\d[\d.,/]*"), "digits around a slash that are not a simple fraction (a date, "
                                                "'24/7', '9/11')"),
    (re.compile(r"[\d.,]*\d\s?:\s?\d[\d.,:]*"), "digits around a colon that are not a clock time (a score, a "
                                                "ratio, a duration)"),
    (re.compile(r"[\d.,]*\d\s?-+\s?-?\d[\d.,-]*"), "digits joined by a hyphen (a score, a range, a code)"),
]
_NUMBER = re.compile(r"(?P<sign>(?<![\w)\].,'-])-)?(?P<num>\d+(?:,\d+)*(?:\.\d+)?|\.\d+)"
                     r"(?P<suf>'?s(?![a-z'])|(?:st|nd|rd|th)(?![a-z])|\s?°\s?[cf]?(?![a-z]))?", re.IGNORECASE)
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
# "#" before a number was read as "number" already; elsewhere (hashtags, markup) it is not read.
_SYMBOLS = {"&": " and ", "%": " percent ", "+": " plus ", "@": " at ", "=": " equals ", "#": " "}
_SILENT_MATH = frozenset("<>|~^")  # markup and decoration, not read out
_EN_KEEP = re.compile(r"[^a-z' ]+")


def _fraction_words(num: int, den: int, mixed: bool) -> str:
    if num == 0 or num >= den:
        raise UnnormalizableError(f"not a proper fraction: `{num}/{den}`")
    unit = {2: "half", 4: "quarter"}.get(den) or ordinal(number_to_words(den))
    if num == 1:
        return f"{'a' if mixed else 'one'} {unit}"  # "three and a half", "one half"
    return f"{number_to_words(num)} {plural(unit)}"


def _vulgar(m: re.Match) -> str:
    num, den = _VULGAR[m.group(2)]
    if m.group(1):
        return f" {_cardinal(int(m.group(1)), m.group(0))} and {_fraction_words(num, den, True)} "
    return f" {_fraction_words(num, den, False)} "


def _slash_fraction(m: re.Match) -> str:
    whole, num, den = m.group(1), int(m.group(2)), int(m.group(3))
    if den not in _FRACTION_DENOMINATORS or num >= den or num == 0 or m.group(2)[0] == "0":
        return m.group(0)  # left for the doubt check: "9/11", "24/7", "3/2"
    if whole is not None:
        return f" {_cardinal(int(whole), m.group(0))} and {_fraction_words(num, den, True)} "
    return f" {_fraction_words(num, den, False)} "


def _phone(m: re.Match) -> str:
    return " " + digits_to_words(re.sub(r"\D", "", m.group(0))) + " "


def _year_range(m: re.Match) -> str:
    first, second = int(m.group(1)), m.group(2)
    last = int(second) if len(second) == 4 else first // 100 * 100 + int(second)  # "1990-95" -> 1995
    if not first < last <= 2099:
        return m.group(0)  # left for the doubt check
    return f" {year_to_words(first)} to {year_to_words(last)} "


def _clock(hour: int, minute: int, ampm: str | None, piece: str) -> str:
    if ampm and not 1 <= hour <= 12 or not 1 <= hour <= 23 or minute > 59:
        raise UnnormalizableError(f"not a clock time: `{piece}`")
    words = number_to_words(hour)
    if minute:
        words += " " + (number_to_words(minute) if minute >= 10 else f"oh {number_to_words(minute)}")
    elif not ampm:
        words += " o'clock" if hour <= 12 else " hundred"  # "fourteen hundred" (hours)
    return words + (f" {ampm.lower()} m" if ampm else "")


def _time(m: re.Match) -> str:
    if m.group(3):
        raise UnnormalizableError(f"a time or duration with seconds: `{m.group(0).strip()}`")
    return f" {_clock(int(m.group(1)), int(m.group(2)), m.group(4), m.group(0).strip())} "


def _am_pm(m: re.Match) -> str:
    return f" {_clock(int(m.group(1)), 0, m.group(2), m.group(0).strip())} "


def _plain_number(num: str, piece: str) -> tuple[str, int | None]:
    """Read "1,000.5", "0.25", ".5", "007": (words, integer value or None for decimals and digit strings)."""
    if "," in num:
        if not _THOUSANDS.fullmatch(num):
            raise UnnormalizableError(f"misplaced thousands separator: `{piece}`")
        num = num.replace(",", "")
    whole, dot, frac = num.partition(".")
    if whole.startswith("0") and len(whole) > 1 and not dot:
        return digits_to_words(whole), None  # "007", "0800": a code, read digit by digit
    words = _cardinal(int(whole), piece) if whole else ""
    if dot:
        return f"{words} point {digits_to_words(frac)}".strip(), None
    return words, int(whole)


def _currency(m: re.Match) -> str:
    sign, symbol, num, scale = m.group(1), m.group(2), m.group(3), (m.group(4) or "").strip().lower()
    one, many, sub_one, sub_many = _CURRENCY_NAMES[symbol]
    scale = _SCALE_ABBREVIATIONS.get(scale, scale)
    whole, _, frac = num.replace(",", "").partition(".")
    if scale or len(frac) != 2 or sub_one is None:  # "$2.5 million", "$1.5": a plain number of units
        words, n = _plain_number(num, m.group(0))
        words += f" {scale}" if scale else ""
        words += " " + (one if n == 1 and not scale else many)
    else:  # "$3.50": dollars and cents
        _, n = _plain_number(num.partition(".")[0] or "0", m.group(0))
        if n is None:
            raise UnnormalizableError(f"an amount with a leading zero: `{m.group(0)}`")
        cents = int(frac)
        parts = [f"{number_to_words(n)} {one if n == 1 else many}"] if n or not cents else []
        if cents:
            parts.append(f"{number_to_words(cents)} {sub_one if cents == 1 else sub_many}")
        words = " ".join(parts)
    return f" {'minus ' if sign else ''}{words} "


def _reads_as_year(text: str, start: int, end: int, piece: str) -> bool:
    """Whether a 4-digit number from 1000 to 2099 is a year, from the words around it.

    A year unless a word says it is a quantity ("1500 meters", "about 1500"); a year cue ("in", a month,
    "AD") plus a quantity cue ("in 1500 meters") is ambiguous.
    """
    before, after = text[max(0, start - 40):start], text[end:end + 40]  # the words around it, not the whole text
    prev = re.search(r"([A-Za-z]+)[.,]?\s+$", before)
    prev = prev.group(1).lower() if prev else ""
    nxt = re.match(r"\s*([A-Za-z]+)", after)
    nxt = nxt.group(1).lower() if nxt else ""
    year_cue = prev in _YEAR_BEFORE or bool(_MONTH_DAY_BEFORE.search(before) or _ERA.match(after))
    count_cue = nxt in _COUNT_AFTER or prev in _COUNT_BEFORE
    if year_cue and count_cue:
        raise UnnormalizableError(f"a year or a quantity: `{piece}`")
    return not count_cue


def _number(m: re.Match) -> str:
    sign, num, suf = m.group("sign"), m.group("num"), (m.group("suf") or "").lower().replace(" ", "")
    piece = m.group(0).strip()
    parts = num.split(",")
    if len(parts) > 1 and not _THOUSANDS.fullmatch(num):
        # "4,5,6" is a list, not "four hundred fifty six"; a well-formed "1,000" is a thousand.
        # Three digits after a comma ("12,345,67") or a decimal point ("1,5.5") mean a separator gone wrong.
        if sign or suf or "." in num or any(p.startswith("0") and len(p) > 1 or len(p) == 3 for p in parts[1:]):
            raise UnnormalizableError(f"a list of numbers or a misplaced separator: `{piece}`")
        return " " + " ".join(_plain_number(p, piece)[0] for p in parts) + " "
    words, n = _plain_number(num, piece)
    if suf in ("st", "nd", "rd", "th"):
        if n is None:
            raise UnnormalizableError(f"an ordinal of a decimal or code: `{piece}`")
        expected = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        if suf != expected:
            raise UnnormalizableError(f"an ordinal with the wrong suffix: `{piece}`")
        words = ordinal(words)
    elif suf in ("s", "'s"):  # "1980s", "80's", "the 12's": plurals of numbers
        if n is None:
            raise UnnormalizableError(f"a plural of a decimal or code: `{piece}`")
        words = plural(year_to_words(n) if 1000 <= n <= 2099 else words)
    elif suf.startswith("°"):
        unit = "degree" if n == 1 else "degrees"
        words += " " + unit + {"°c": " celsius", "°f": " fahrenheit"}.get(suf, "")
    elif n is not None and 1000 <= n <= 2099 and not sign and "," not in num \
            and _reads_as_year(m.string, m.start(), m.end(), piece):
        words = year_to_words(n)
    return f" {'minus ' if sign else ''}{words} "


def _english(text: str) -> str:
    text = _VULGAR_RE.sub(_vulgar, text)  # before NFKD, which turns "3½" into "31⁄2"
    text = unicodedata.normalize("NFKD", text.translate(_TRANSLITERATE))
    text = "".join(c for c in text if not unicodedata.combining(c))  # café -> cafe
    text = text.translate(_PUNCT_FOLD)
    text = re.sub(r"#(?=\d)", " number ", text)
    text = _ERA_LETTERS.sub(lambda m: " " + " ".join(c for c in m.group(2) if c.isalpha()) + " ", text)  # "A D"
    for pattern, reading in ((_PHONE, _phone), (_YEAR_RANGE, _year_range),
                             (_TIME, _time), (_AM_PM, _am_pm), (_CURRENCY, _currency),
                             (_FRACTION, _slash_fraction)):
        text = pattern.sub(reading, text)
    for pattern, reason in _DOUBTFUL_EN:
        if m := pattern.search(text):
            raise UnnormalizableError(f"{reason}: `{m.group(0)}`")
    text = _NUMBER.sub(_number, text)
    for sym, word in _SYMBOLS.items():
        text = text.replace(sym, word)
    for c in dict.fromkeys(text):  # in order: the message names the first one
        cat = unicodedata.category(c)
        if c.isascii() and (c.isalpha() or c.isspace()):
            continue
        if cat[0] in "LN" or cat == "Sc" or (cat == "Sm" and c not in _SILENT_MATH):
            raise UnnormalizableError(f"a character that can't be spelled in `[a-z' ]`: `{c}`")
    text = text.lower().replace("-", " ")
    text = _EN_KEEP.sub(" ", text)
    # Apostrophes only inside words ("don't") or closing a plural possessive ("the boys'"), not quote marks.
    text = re.sub(r"(?<![a-z])'+|'+(?![a-z])", lambda m: m.group(0) if m.start() > 0 and text[m.start() - 1] == "s"
                  and m.group(0) == "'" else " ", text)
    return " ".join(text.split())


def normalize_english(text: str, *, strict: bool = False) -> str:
    """Normalize an English transcript to `[a-z' ]`, reading numbers and symbols as a speaker would.

    Readings (examples):
        - cardinals, decimals, thousands: "42" -> "forty two", "3.14" -> "three point one four",
          "1,000,000" -> "one million"; a comma list is a list: "4,5,6" -> "four five six".
        - years, a 4-digit number from 1000 to 2099 unless a word makes it a quantity: "in 1984" -> "in
          nineteen eighty four", "1905" -> "nineteen oh five", "2005" -> "two thousand five", but "1500
          meters" / "about 1234" -> cardinals; "1990-1995" -> "nineteen ninety to nineteen ninety five".
        - decades and plurals: "the 1980s" -> "the nineteen eighties", "80's" -> "eighties", "the 12's" ->
          "the twelves".
        - ordinals: "21st" -> "twenty first"; times: "9:05" -> "nine oh five", "9:00" -> "nine o'clock",
          "9 a.m." -> "nine a m"; negatives: "-5" -> "minus five"; degrees: "-5°C" -> "minus five degrees
          celsius".
        - fractions: "½" / "1/2" -> "one half", "3/4" -> "three quarters", "3 1/2" -> "three and a half".
        - money: "$1.00" -> "one dollar", "$3.50" -> "three dollars fifty cents", "$0.99" -> "ninety nine
          cents", "$2.5 million" -> "two point five million dollars" (also £ pounds/pence, € euros, ¥ yen).
        - codes: "555-1234", "(555) 123-4567", "007" -> digit by digit ("five five five one two ...").
        - symbols: "&" and, "%" percent, "+" plus, "@" at, "=" equals; accents stripped ("café" -> "cafe"),
          æ -> ae, œ -> oe, ß -> ss, ø -> o, þ -> th, ð -> d.

    Not normalizable (a guess would be a wrong label): digits around a hyphen ("3-2", "10-20"), a slash that
    isn't a simple fraction ("9/11", "1/2/99"), a colon that isn't a clock time ("3:1", "1:23:45"),
    version numbers ("1.2.3"), misplaced separators ("1,000,00"), wrong ordinal suffixes ("2st"), a year cue
    with a quantity cue ("in 1500 meters"), letters outside English ("α", "я"), currency or math symbols
    that aren't read here ("±", "$" with no amount).

    Args:
        text: the raw transcript.
        strict: raise `UnnormalizableError` for a transcript that can't be normalized confidently, instead
            of returning "".

    Returns:
        The normalized text; "" for a transcript that can't be normalized confidently (and `strict` is off).

    Raises:
        UnnormalizableError: `strict` and the text can't be normalized confidently.

    >>> normalize_english("It's 3:30 -- we owe $5.50 & 20%!")
    "it's three thirty we owe five dollars fifty cents and twenty percent"
    """
    try:
        return _english(text)
    except UnnormalizableError:
        if strict:
            raise
        return ""


# ------------------------------------------------------------------------------------------- Mandarin

# After a lone "2" these take 两 ("两个", "两点"), not 二; "2月" (February), "2号", "2楼" keep 二.
_ZH_MEASURE_WORDS = ("公斤", "公里", "小时", "分钟", "千克", "星期", "个", "位", "只", "本", "次", "条", "张",
                     "件", "台", "辆", "种", "天", "岁", "斤", "吨", "元", "块", "毛", "倍", "点", "项", "名",
                     "家", "间", "所", "双", "对", "把", "根", "支", "头", "匹", "座", "门", "场", "句", "千",
                     "万", "亿", "百", "年")
_ZH_CURRENCY = {"$": "美元", "¥": "元", "€": "欧元", "£": "英镑"}
_ZH_NUM = r"\d+(?:\.\d+)?"
_ZH_NOT_AFTER = r"(?<![\d.,])"
# ASCII only: "气温-5度" has a sign, though 温 is a \w; and not the "5" of "3-5%", which is in doubt.
_ZH_NO_SIGN_AFTER = r"(?<![A-Za-z0-9.)-])"
_ZH_NOT_BEFORE = r"(?![\d]|[.,]\d)"


def _zh_plain(num: str, piece: str) -> str:
    """Read "1000", "3.5", "007" (digit by digit) in Chinese."""
    whole, dot, frac = num.partition(".")
    if len(whole) > 8:
        raise UnnormalizableError(f"a long digit string (a phone number, an ID or an amount): `{piece}`")
    if whole.startswith("0") and len(whole) > 1 and not dot:
        return chinese_digits(whole)
    return number_to_chinese(int(whole)) + (f"点{chinese_digits(frac)}" if dot else "")


def _zh_date(m: re.Match) -> str:
    year, month, day = m.group(1), int(m.group(2)), int(m.group(3))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        raise UnnormalizableError(f"not a date: `{m.group(0)}`")
    return f"{chinese_digits(year)}年{number_to_chinese(month)}月{number_to_chinese(day)}日"


def _zh_time(m: re.Match) -> str:
    hour, minute, second = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if hour > 24 or minute > 59 or second > 59:
        raise UnnormalizableError(f"not a clock time: `{m.group(0)}`")
    out = ("两" if hour == 2 else number_to_chinese(hour)) + "点"  # 两点, as it is said
    if minute or second:
        out += ("零" if 0 < minute < 10 else "") + number_to_chinese(minute) + "分"  # 十点零五分, 十点零分
    if second:
        out += ("零" if second < 10 else "") + number_to_chinese(second) + "秒"
    return out


def _zh_year(m: re.Match) -> str:
    digits = m.group(1)
    if len(digits) == 2 and not digits.startswith("0"):
        # "98年" is 1998 (九八年) or ninety-eight years (九十八年); "第10年" and "90年代" are not in doubt.
        before = m.string[:m.start()]
        if not before.endswith("第") and not m.string.startswith("代", m.end()):
            raise UnnormalizableError(f"a year or a number of years: `{m.group(0)}`")
        return number_to_chinese(int(digits)) + "年"
    return chinese_digits(digits) + "年"


def _zh_temperature(m: re.Match) -> str:
    sign, num, unit = m.group(1), m.group(2), m.group(3)
    value = _zh_plain(num, m.group(0))
    prefix = "华氏" if unit == "°F" else ""
    return f"{prefix}{'零下' if sign else ''}{value}度"


def _zh_two(m: re.Match) -> str:
    ordinal = m.string[:m.start()].endswith("第") or m.string.startswith("年级", m.end())  # 第二, 二年级
    return "二" if ordinal else "两"


def _zh_number(m: re.Match) -> str:
    return _zh_plain(m.group(0).replace(",", ""), m.group(0))


# Readings of the forms that say how they are read, in order (a date before a range, a range before a sign).
_ZH_READINGS = [
    # 2008-08-08, 2008/8/8, 2008.8.8
    (re.compile(_ZH_NOT_AFTER + r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})" + _ZH_NOT_BEFORE), _zh_date),
    # 10:30 -> 十点三十分 (the written minutes, not 十点半), 2:05 -> 两点零五分
    (re.compile(_ZH_NOT_AFTER + r"(\d{1,2}):(\d{2})(?::(\d{2}))?" + _ZH_NOT_BEFORE), _zh_time),
    # 3:1 -> 三比一 (scores, ratios)
    (re.compile(_ZH_NOT_AFTER + r"(\d+):(\d+)" + _ZH_NOT_BEFORE),
     lambda m: f"{_zh_plain(m.group(1), m.group(0))}比{_zh_plain(m.group(2), m.group(0))}"),
    # 2008年 -> 二零零八年, 08年 -> 零八年; 98年 is in doubt (_zh_year)
    (re.compile(_ZH_NOT_AFTER + r"(\d{4}|\d{2})\s*年"), _zh_year),
    # 3-5天, 3~5天 -> 三到五天 (before the signs below: the "-" of "3-5度" is not a minus); "3-5%" is in doubt
    (re.compile(_ZH_NOT_AFTER + r"([1-9]\d*|0)\s*[-~]\s*([1-9]\d*|0)" + _ZH_NOT_BEFORE + r"(?!\s*[%‰°])"),
     lambda m: f"{_zh_plain(m.group(1), m.group(0))}到{_zh_plain(m.group(2), m.group(0))}"),
    # -5度, -5°C -> 零下五度; 25°C -> 二十五度; 98°F -> 华氏九十八度
    (re.compile(_ZH_NO_SIGN_AFTER + r"(-)?(" + _ZH_NUM + r")\s*(°C|°F|°|度)"), _zh_temperature),
    # 50% -> 百分之五十, -3% -> 负百分之三, 5‰ -> 千分之五
    (re.compile(_ZH_NO_SIGN_AFTER + r"(-)?(" + _ZH_NUM + r")\s*([%‰])"),
     lambda m: f"{'负' if m.group(1) else ''}{'百' if m.group(3) == '%' else '千'}分之"
               f"{_zh_plain(m.group(2), m.group(0))}"),
    # $5 -> 五美元, ¥5 -> 五元
    (re.compile(r"([$¥€£])\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|" + _ZH_NUM + ")"),
     lambda m: f"{_zh_plain(m.group(2).replace(',', ''), m.group(0))}{_ZH_CURRENCY[m.group(1)]}"),
    # 1/2 -> 二分之一
    (re.compile(_ZH_NOT_AFTER + r"(\d+)/(\d+)" + r"(?![\d/])"),
     lambda m: f"{_zh_plain(m.group(2), m.group(0))}分之{_zh_plain(m.group(1), m.group(0))}"
     if int(m.group(2)) else m.group(0)),
    # -5 -> 负五
    (re.compile(_ZH_NO_SIGN_AFTER + r"-(" + _ZH_NUM + ")" + _ZH_NOT_BEFORE),
     lambda m: "负" + _zh_plain(m.group(1), m.group(0))),
    # a lone 2 before a measure word: 2个 -> 两个 (第2个 -> 第二个)
    (re.compile(_ZH_NOT_AFTER + r"2(?=\s*(?:%s))" % "|".join(_ZH_MEASURE_WORDS) + r"(?![.,]\d)"), _zh_two),
]
# Then every number left: 1,000 -> 一千 (a well-formed thousands separator), 3.5 -> 三点五, 105 -> 一百零五.
_ZH_NUMBERS = [
    (re.compile(_ZH_NOT_AFTER + r"\d{1,3}(?:,\d{3})+(?:\.\d+)?" + _ZH_NOT_BEFORE), _zh_number),
    (re.compile(_ZH_NUM), _zh_number),
]
_ZH_CODE = re.compile(r"\d+(?:[./-]\d+){2,}")  # checked first: "1.2.3" must not become "一点二" + "点三"
_ZH_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}")
# Checked after the readings: what they left around a hyphen or slash is a code, a phone number, "3-5%".
_ZH_LEFTOVER = re.compile(r"[\d.]*\d\s*[-/]\s*\d[\d.]*")


def is_cjk(ch: str) -> bool:
    """True for CJK unified ideographs (the Mandarin character vocabulary)."""
    cp = ord(ch)
    return 0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0xF900 <= cp <= 0xFAFF


def _mandarin(text: str, keep_latin: bool) -> str:
    # 〇 is the digit zero ("二〇〇八年", "一百〇五"); so is ○ (a white circle) between numerals.
    text = text.replace("〇", "零").replace("\u2212", "-")  # and U+2212, which NFKC keeps, is a minus
    text = re.sub(r"(?<=[零一二三四五六七八九])○+|○+(?=[零一二三四五六七八九])", lambda m: "零" * len(m.group(0)), text)
    text = unicodedata.normalize("NFKC", text)  # full-width digits, letters and signs -> ASCII; ℃ -> °C
    for m in _ZH_CODE.finditer(text):
        if not _ZH_DATE.fullmatch(m.group(0)):
            raise UnnormalizableError(f"a date, version or code: `{m.group(0)}`")
    for pattern, reading in _ZH_READINGS:
        text = pattern.sub(reading, text)
    if m := _ZH_LEFTOVER.search(text):
        raise UnnormalizableError(f"digits around a hyphen or slash (a code or a range): `{m.group(0)}`")
    for pattern, reading in _ZH_NUMBERS:
        text = pattern.sub(reading, text)
    out = []
    for c in text:
        if is_cjk(c):
            out.append(c)
        elif "A" <= c.upper() <= "Z" and c.isascii():
            if not keep_latin:
                raise UnnormalizableError(f"Latin letters in a Mandarin transcript: `{c}`")
            out.append(c.upper())
        else:
            cat = unicodedata.category(c)
            if cat[0] in "LN" or cat == "Sc" or (cat == "Sm" and c not in _SILENT_MATH):
                raise UnnormalizableError(f"a character that isn't a Mandarin character: `{c}`")
    return "".join(out)


def normalize_mandarin(text: str, *, strict: bool = False, keep_latin: bool = False) -> str:
    """Normalize a Mandarin transcript: CJK characters only, numbers read out, no punctuation or spaces.

    Readings (examples):
        - 〇 is zero: "二〇〇八年" -> "二零零八年", "一百〇五" -> "一百零五".
        - numbers: "105" -> "一百零五", "1,000" -> "一千", "3.5" -> "三点五", "20000" -> "两万",
          "2个" -> "两个" (but "第2个" -> "第二个", "2月" -> "二月"), "007" -> "零零七".
        - years digit by digit: "2008年" -> "二零零八年", "08年" -> "零八年"; dates: "2008-08-08" ->
          "二零零八年八月八日"; decades: "90年代" -> "九十年代".
        - times: "10:30" -> "十点三十分" (the minutes as written, not "十点半"), "10:00" -> "十点",
          "2:05" -> "两点零五分"; scores and ratios: "3:1" -> "三比一".
        - percentages: "50%" -> "百分之五十"; fractions: "3/4" -> "四分之三"; ranges: "3-5天" -> "三到五天".
        - negatives: "-5度" / "-5℃" -> "零下五度" (the weather-report reading), other negatives "-5" -> "负五".
        - money: "$5" -> "五美元", "¥5" -> "五元".

    Not normalizable: Latin letters (unless `keep_latin`), "98年" (1998 or 98 years), digit strings over
    8 digits (phone numbers, IDs), codes with several hyphens or slashes, letters of other scripts
    (kana, Hangul), symbols that aren't read here ("+", "=").

    Traditional characters pass through unchanged (they are not mapped to Simplified): every Mandarin
    corpus here (Aishell-1, the tiny corpus, which keeps GB2312 sentences only) is Simplified. Convert
    Traditional text before normalizing it, e.g. with OpenCC's `t2s` conversion.

    Args:
        text: the raw transcript.
        strict: raise `UnnormalizableError` for a transcript that can't be normalized confidently, instead
            of returning "".
        keep_latin: keep Latin letters as tokens, uppercased (full-width "ＯＫ" or "ok" -> "OK"), for
            corpora whose transcripts spell letters out (卡拉ＯＫ -> 卡拉OK).

    Returns:
        The normalized text; "" for a transcript that can't be normalized confidently (and `strict` is off).

    Raises:
        UnnormalizableError: `strict` and the text can't be normalized confidently.

    >>> normalize_mandarin("我有 3 个苹果，你呢？")
    '我有三个苹果你呢'
    """
    try:
        return _mandarin(text, keep_latin)
    except UnnormalizableError:
        if strict:
            raise
        return ""


def normalize(text: str, language: str = "en", *, strict: bool = False) -> str:
    """Normalize `text` for `language` ("en" or "zh"); see `normalize_english` and `normalize_mandarin`.

    Raises:
        ValueError: `language` is neither "en" nor "zh".
        UnnormalizableError: `strict` and the text can't be normalized confidently.
    """
    if language == "en":
        return normalize_english(text, strict=strict)
    if language == "zh":
        return normalize_mandarin(text, strict=strict)
    raise ValueError(f"`language` must be 'en' or 'zh', got {language!r}")
