"""The character vocabulary: id <-> char, with the CTC blank at a fixed index.

Layout (documented contract, relied on by the model, the decoders and export):
    id 0           CTC blank (written as "<blank>" in vocab files)
    id 1           space " " (word separator; present for English, absent for Mandarin)
    ids 2..        the other characters, apostrophe first for English, then sorted
English therefore gives 29 ids: blank, space, apostrophe, a..z (DS2 §3.9 output alphabet).
The file format is one token per line, in id order; a space is written as "<space>".
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from deepspeech2.fileio import atomic_write

BLANK = "<blank>"
BLANK_ID = 0
_SPACE_TOKEN = "<space>"
ENGLISH_CHARS = " '" + "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Vocabulary:
    """Character vocabulary. `chars[i]` is the symbol for id i + 1 (id 0 is the blank)."""

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
    def from_texts(cls, texts: Iterable[str], count_threshold: int = 0) -> "Vocabulary":
        """Build from transcripts, keeping chars seen more than `count_threshold` times.

        Space and apostrophe come first when present, the rest sorted by code point.
        """
        counts = collections.Counter()
        for t in texts:
            counts.update(t)
        kept = {c for c, n in counts.items() if n > count_threshold}
        head = [c for c in (" ", "'") if c in kept]
        return cls(tuple(head + sorted(kept - set(head))))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocabulary":
        """Read a vocab file (one token per line, id order, first line `<blank>`)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"vocabulary file `{path}` does not exist; build it with ds2-build-vocab")
        lines = path.read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines or lines[0] != BLANK:
            raise ValueError(f"`{path}` line 1 must be {BLANK!r} (the CTC blank, id 0); got {lines[:1]!r}")
        chars = []
        for n, tok in enumerate(lines[1:], start=2):
            tok = " " if tok == _SPACE_TOKEN else tok
            if len(tok) != 1:
                raise ValueError(f"`{path}` line {n}: expected one character or {_SPACE_TOKEN}, got {tok!r}")
            chars.append(tok)
        return cls(tuple(chars))

    def save(self, path: str | os.PathLike) -> None:
        with atomic_write(path) as f:
            f.write(BLANK + "\n")
            for c in self.chars:
                f.write((_SPACE_TOKEN if c == " " else c) + "\n")

    @property
    def size(self) -> int:
        """Number of model outputs, blank included."""
        return len(self.chars) + 1

    def __len__(self) -> int:
        return self.size

    @property
    def blank_id(self) -> int:
        return BLANK_ID

    def tokens(self) -> list[str]:
        """Symbols in id order; the blank as "" (the convention pyctcdecode expects for labels)."""
        return [""] + list(self.chars)

    def oov(self, text: str) -> set[str]:
        """Characters of `text` that the vocabulary lacks."""
        return {c for c in text if c not in self._ids}

    def encode(self, text: str) -> list[int]:
        """Text -> ids. Raises ValueError naming the unknown characters."""
        try:
            return [self._ids[c] for c in text]
        except KeyError:
            raise ValueError(f"text {text!r} has characters outside the vocabulary: "
                             f"{sorted(self.oov(text))!r}") from None

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text; the blank (0) is skipped."""
        return "".join(self.chars[i - 1] for i in ids if i != BLANK_ID)
