"""The character vocabulary: id <-> char, with the CTC blank at a fixed index.

Layout (documented contract, relied on by the model, the decoders and export):
    id 0           CTC blank (written as "<blank>" in vocab files)
    id 1           `<unk>` when the vocabulary has one (Mandarin), as in PaddleSpeech's vocabularies
    then           space " " (word separator; present for English, absent for Mandarin)
    then           the other characters, apostrophe first for English, then sorted by code point
English therefore gives 29 ids: blank, space, apostrophe, a..z (DS2 §3.9 output alphabet).
The file format is one token per line, in id order; a space is written as "<space>".

Out-of-vocabulary characters. English is a closed alphabet (normalized text is `[a-z' ]`), so a character
outside it is an error. A Mandarin vocabulary comes from the training transcripts, and dev/test text always
holds characters training never had (about 6% of the tiny corpus' test characters with an hour of audio):
as in PaddleSpeech, such a vocabulary has an `<unk>` id, and every character it lacks is encoded as
`<unk>` instead of making the whole utterance unusable. `<unk>` decodes to "⁇" (`UNK_CHAR`, as
SentencePiece writes its unknown piece): one character, which no normalized transcript holds, so it
counts as one error in the CER. `ds2-build-vocab --count_threshold N` also sends the characters seen N
times or fewer to `<unk>`.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from deepspeech2.fileio import atomic_write
from deepspeech2.text import is_cjk, normalize

BLANK = "<blank>"
BLANK_ID = 0
UNK = "<unk>"  # the out-of-vocabulary token's name in vocab files (PaddleSpeech's)
UNK_CHAR = "\u2047"  # "⁇": what `<unk>` decodes to; reserved, never a transcript character
_SPACE_TOKEN = "<space>"
ENGLISH_CHARS = " '" + "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Vocabulary:
    """Character vocabulary. `chars[i]` is the symbol for id i + 1 (id 0 is the blank); `UNK_CHAR` among
    them is the `<unk>` id."""

    chars: tuple[str, ...]

    def __post_init__(self):
        if len(set(self.chars)) != len(self.chars):
            dup = [c for c, n in collections.Counter(self.chars).items() if n > 1]
            raise ValueError(f"`chars` has duplicates: {dup!r}")
        bad = [c for c in self.chars if len(c) != 1]
        if bad:
            raise ValueError(f"`chars` must be single characters, got {bad!r}")
        object.__setattr__(self, "_ids", {c: i + 1 for i, c in enumerate(self.chars)})

    @classmethod
    def english(cls) -> "Vocabulary":
        """blank, space, apostrophe, a-z: the 29-symbol DS2 English alphabet."""
        return cls(tuple(ENGLISH_CHARS))

    @classmethod
    def from_texts(cls, texts: Iterable[str], count_threshold: int = 0, unk: bool | None = None) -> "Vocabulary":
        """Build from transcripts, keeping chars seen more than `count_threshold` times.

        `<unk>` (when added) comes first, then space and apostrophe when present, the rest sorted by code
        point.

        Args:
            texts: the (normalized) transcripts.
            count_threshold: characters seen this many times or fewer are left out (to `<unk>`, if any).
            unk: add the `<unk>` id; None: add it when the transcripts have no space (a character language
                such as Mandarin, whose test text always holds unseen characters), not for English.

        Raises:
            ValueError: no character is kept (no transcripts, all empty, or all below the threshold): a
                vocabulary of the blank alone can't label anything; `count_threshold` is negative; a
                transcript holds `UNK_CHAR`.
        """
        if isinstance(count_threshold, bool) or not isinstance(count_threshold, int) or count_threshold < 0:
            raise ValueError(f"`count_threshold` must be an int >= 0, got {count_threshold!r}")
        counts = collections.Counter()
        n_texts = 0
        for t in texts:
            counts.update(t)
            n_texts += 1
        if UNK_CHAR in counts:
            raise ValueError(f"the transcripts hold {UNK_CHAR!r} (U+2047), which is reserved for `{UNK}`")
        kept = {c for c, n in counts.items() if n > count_threshold}
        if not kept:
            raise ValueError(f"no characters to build a vocabulary from: {n_texts} transcripts with "
                             f"{sum(counts.values())} characters, none seen more than `count_threshold` "
                             f"({count_threshold}) times")
        if unk is None:
            unk = " " not in counts
        head = ([UNK_CHAR] if unk else []) + [c for c in (" ", "'") if c in kept]
        return cls(tuple(head + sorted(kept - set(head))))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocabulary":
        """Read a vocab file (one token per line, id order, first line `<blank>`).

        Raises:
            FileNotFoundError: no such file.
            ValueError: not a vocabulary file (binary, not UTF-8, e.g. a `mean_std.npz` passed by mistake),
                or a malformed one; the message names the file.
        """
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"vocabulary file `{path}` does not exist; build it with ds2-build-vocab")
        what = (f"a vocabulary file is UTF-8 text, one token per line in id order, `{BLANK}` first "
                "(ds2-build-vocab writes one)")
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"`{path}` is not a vocabulary file: byte {e.start} is not UTF-8 text; {what}") from None
        if "\x00" in text:  # UTF-16 text or binary data that happens to decode
            raise ValueError(f"`{path}` is not a vocabulary file: it holds NUL bytes (binary data); {what}")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines or lines[0] != BLANK:
            raise ValueError(f"`{path}` line 1 must be {BLANK!r} (the CTC blank, id 0); got {lines[:1]!r}; {what}")
        chars = []
        for n, tok in enumerate(lines[1:], start=2):
            tok = {_SPACE_TOKEN: " ", UNK: UNK_CHAR}.get(tok, tok)
            if len(tok) != 1:
                raise ValueError(f"`{path}` line {n}: expected one character, {_SPACE_TOKEN} or {UNK}, got {tok!r}")
            chars.append(tok)
        return cls(tuple(chars))

    def save(self, path: str | os.PathLike) -> None:
        with atomic_write(path) as f:
            f.write(BLANK + "\n")
            for c in self.chars:
                f.write({" ": _SPACE_TOKEN, UNK_CHAR: UNK}.get(c, c) + "\n")

    @property
    def size(self) -> int:
        """Number of model outputs, blank included."""
        return len(self.chars) + 1

    def __len__(self) -> int:
        return self.size

    @property
    def blank_id(self) -> int:
        return BLANK_ID

    @property
    def unk_id(self) -> int | None:
        """The `<unk>` id, None when the vocabulary has none."""
        return self._ids.get(UNK_CHAR)

    @property
    def spaced(self) -> bool:
        """Whether words are separated by spaces (English); False for a character language (Mandarin), which
        decodes with a character LM and is scored by CER.

        The one rule of "is this language spaced?": training, ds2-tune, ds2-eval and bench/ all score with
        `deepspeech2.metrics` given `spaced=vocab.spaced`, which makes a character a word when False.
        """
        return " " in self._ids

    @property
    def metric(self) -> str:
        """The error rate that ranks models, tunes the decoder and heads reports: "wer" with a space
        (English), else "cer" (Mandarin: DS2 §6.2 reports it by CER; without word boundaries its WER counts
        characters as words and so equals the CER)."""
        return "wer" if self.spaced else "cer"

    def tokens(self) -> list[str]:
        """What each id decodes to, in id order: the blank as "" (the convention pyctcdecode expects for
        labels), `<unk>` as `UNK_CHAR`."""
        return [""] + list(self.chars)

    def unknown(self, text: str) -> collections.Counter:
        """The characters of `text` the vocabulary lacks, with their counts (encoded as `<unk>` when it has one)."""
        return collections.Counter(c for c in text if c not in self._ids or c == UNK_CHAR)

    def oov(self, text: str) -> set[str]:
        """Characters of `text` the vocabulary can't encode: those it lacks, or none when it has `<unk>`."""
        return set() if self.unk_id is not None else set(self.unknown(text))

    def encode(self, text: str) -> list[int]:
        """Text -> ids; characters the vocabulary lacks become `<unk>` (when it has one).

        Raises:
            ValueError: a character outside a vocabulary without `<unk>` (named in the message).
        """
        unk = self.unk_id
        if unk is not None:
            return [self._ids.get(c, unk) for c in text]
        try:
            return [self._ids[c] for c in text]
        except KeyError:
            raise ValueError(f"text {text!r} has characters outside the vocabulary: "
                             f"{sorted(self.oov(text))!r}") from None

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text; the blank (0) is skipped."""
        return "".join(self.chars[i - 1] for i in ids if i != BLANK_ID)


def normalization_warning(texts: Sequence[str], languages: Sequence[str | None] | None = None,
                          examples: int = 3) -> str | None:
    """Say so when transcripts hold characters that text normalization never produces, else None.

    `deepspeech2.text.normalize_english` gives `[a-z' ]` only and `normalize_mandarin` CJK characters only;
    a vocabulary built from other text learns '.', capitals or digits as symbols of their own (32 symbols
    from 'The quick brown fox jumps over the lazy dog.'), which the model then has to learn to emit.

    Args:
        texts: the transcripts.
        languages: each text's language ("en", "zh" or None), e.g. the manifest's `language`; None (for
            all or one) is guessed: Mandarin when the text holds a CJK character, else English.
        examples: how many offending transcripts to quote.

    Returns:
        a one-line warning with the count, the characters, a few examples with their normalized form, and
        the command that normalizes a manifest; None when every text looks normalized.
    """
    bad, chars, langs = [], set(), collections.Counter()
    for i, text in enumerate(texts):
        lang = languages[i] if languages is not None else None
        if lang not in ("en", "zh"):  # unknown or unset: guess
            lang = "zh" if any(map(is_cjk, text)) else "en"
        langs[lang] += 1
        stray = {c for c in text if not (c in ENGLISH_CHARS if lang == "en" else is_cjk(c))}
        if stray:
            bad.append((text, lang))
            chars |= stray
    if not bad:
        return None
    quoted = "; ".join(f"{t!r} -> {normalize(t, lang)!r}" for t, lang in bad[:examples])
    lang = langs.most_common(1)[0][0]
    return (f"{len(bad)} of {len(texts)} transcripts are not normalized: {''.join(sorted(chars))!r} would become "
            f"symbols of the vocabulary (e.g. {quoted}); normalize the manifests first: ds2-prepare normalize "
            f"MANIFEST --language {lang} --out NORMALIZED.jsonl, then build the vocabulary from those")
