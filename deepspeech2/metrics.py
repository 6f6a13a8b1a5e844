"""Word and character error rates: the one scorer of training (dev WER/CER), ds2-tune, ds2-eval and bench/.

Every error rate is a Levenshtein alignment of reference and hypothesis tokens: (substitutions + deletions +
insertions) / reference tokens, summed over the corpus before dividing (jiwer's definition; tests/test_metrics.py
checks both rates against jiwer in English and Mandarin). What a token is depends on one rule,
`Vocabulary.spaced` (callers pass `spaced=vocab.spaced`):

    spaced (English):     word = whitespace-separated word   char = character, single spaces counted
    unspaced (Mandarin):  word = character                   char = character, spaces ignored

Mandarin writes no word boundaries, so a "word" is a character and WER == CER (the usual convention, and
DS2 §6.2 reports Mandarin by CER). Runs of whitespace count as one space, and leading or trailing
whitespace not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Errors:
    """The edits of one alignment (or a sum of them) and the reference's length, in tokens."""

    substitutions: int = 0
    deletions: int = 0
    insertions: int = 0
    reference: int = 0  # reference tokens (hits + substitutions + deletions)

    @property
    def edits(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def rate(self) -> float:
        """edits / reference tokens (0 for an empty reference matched exactly, and for an empty sum)."""
        return self.edits / max(self.reference, 1)

    def __add__(self, other: Errors) -> Errors:
        return Errors(self.substitutions + other.substitutions, self.deletions + other.deletions,
                      self.insertions + other.insertions, self.reference + other.reference)


def edit_distance(ref: Sequence, hyp: Sequence) -> int:
    """Minimum substitutions + insertions + deletions turning `ref` into `hyp`."""
    return align(ref, hyp).edits


def align(ref: Sequence, hyp: Sequence) -> Errors:
    """The edit counts of a minimum-edit alignment of `ref` to `hyp` (sequences of tokens).

    Among alignments with equally few edits, the one with the most hits (fewest substitutions) is counted:
    `ab` -> `bc` is a deletion and an insertion around the hit `b`, not two substitutions. The total, and so
    every error rate, doesn't depend on this choice; the split into kinds does (jiwer may split ties otherwise).
    """
    n, m = len(ref), len(hyp)
    # One-row DP over the cost edits * k + substitutions (k > any substitution count), so the minimum is the
    # fewest edits first, then the fewest substitutions.
    k = n + m + 1
    prev = [j * k for j in range(m + 1)]
    for i, r in enumerate(ref, start=1):
        cur = [i * k]
        for j, h in enumerate(hyp, start=1):
            cur.append(min(prev[j] + k, cur[j - 1] + k, prev[j - 1] + (0 if r == h else k + 1)))
        prev = cur
    edits, subs = divmod(prev[-1], k)
    # deletions - insertions = n - m, and subs + deletions + insertions = edits.
    deletions = (edits - subs + n - m) // 2
    return Errors(subs, deletions, edits - subs - deletions, n)


def hypothesis_hits(ref: Sequence, hyp: Sequence) -> list[int | None]:
    """For each token of `hyp`, the position in `ref` of the equal token `align`'s alignment (fewest edits, then
    fewest substitutions) matches it to, or None for a substituted or inserted token: which hypothesis words
    are right, and which reference word each right one is (word confidence and word times are scored on them).

    The hits number `len(ref) - substitutions - deletions` of `align(ref, hyp)`. Where alignments with as few
    edits and substitutions place a hit on different tokens (`a b a` -> `a`), the latest ones are taken.

    >>> hypothesis_hits("the cat sat".split(), "a cat sat down".split())
    [None, 1, 2, None]
    """
    n, m = len(ref), len(hyp)
    k = n + m + 1  # the cost of `align`: edits * k + substitutions
    cost = [[(i + j) * k if i == 0 or j == 0 else 0 for j in range(m + 1)] for i in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost[i][j] = min(cost[i - 1][j] + k, cost[i][j - 1] + k,
                             cost[i - 1][j - 1] + (0 if ref[i - 1] == hyp[j - 1] else k + 1))
    hits: list[int | None] = [None] * m
    i, j = n, m
    while i and j:
        if ref[i - 1] == hyp[j - 1] and cost[i][j] == cost[i - 1][j - 1]:
            hits[j - 1] = i - 1
            i, j = i - 1, j - 1
        elif cost[i][j] == cost[i - 1][j - 1] + k + 1:  # a substitution
            i, j = i - 1, j - 1
        elif cost[i][j] == cost[i][j - 1] + k:  # an insertion
            j -= 1
        else:  # a deletion
            i -= 1
    return hits


def word_tokens(text: str, *, spaced: bool) -> list[str]:
    """The words WER counts: whitespace-separated words when `spaced`, else the characters (spaces dropped)."""
    return text.split() if spaced else list("".join(text.split()))


def char_tokens(text: str, *, spaced: bool) -> str:
    """The characters CER counts: with single spaces between words when `spaced`, else without spaces."""
    return (" " if spaced else "").join(text.split())


def word_errors(ref: str, hyp: str, *, spaced: bool) -> Errors:
    """The word edits of one utterance (characters as words when not `spaced`)."""
    return align(word_tokens(ref, spaced=spaced), word_tokens(hyp, spaced=spaced))


def char_errors(ref: str, hyp: str, *, spaced: bool) -> Errors:
    """The character edits of one utterance (spaces count when `spaced`)."""
    return align(char_tokens(ref, spaced=spaced), char_tokens(hyp, spaced=spaced))


def wer(refs: Sequence[str], hyps: Sequence[str], *, spaced: bool) -> float:
    """Corpus WER: total word edits / total reference words.

    Args:
        refs, hyps: transcripts, pairwise.
        spaced: `Vocabulary.spaced` of the model. False (Mandarin): characters are words, so WER == CER.
    """
    return sum((word_errors(r, h, spaced=spaced) for r, h in zip(refs, hyps, strict=True)), Errors()).rate


def cer(refs: Sequence[str], hyps: Sequence[str], *, spaced: bool) -> float:
    """Corpus CER: total character edits / total reference characters (spaces ignored when not `spaced`)."""
    return sum((char_errors(r, h, spaced=spaced) for r, h in zip(refs, hyps, strict=True)), Errors()).rate


def score(refs: Sequence[str], hyps: Sequence[str], *, spaced: bool) -> dict:
    """Corpus WER and CER with their edit counts: `summarize` of every utterance's `word_errors`/`char_errors`."""
    pairs = list(zip(refs, hyps, strict=True))
    return summarize([word_errors(r, h, spaced=spaced) for r, h in pairs],
                     [char_errors(r, h, spaced=spaced) for r, h in pairs])


def summarize(words: Sequence[Errors], chars: Sequence[Errors]) -> dict:
    """The corpus figures of per-utterance errors, as ds2-eval reports them.

    Returns:
        `utterances`, `wer`, `cer` (None without utterances), `words`/`chars` (reference tokens) with
        `word_substitutions`, `word_deletions`, `word_insertions` and the `char_*` counterparts.
    """
    if not words:
        return {"utterances": 0, "wer": None, "cer": None}
    out = {"utterances": len(words)}
    for name, total in (("word", sum(words, Errors())), ("char", sum(chars, Errors()))):
        out.update({f"{name}s": total.reference, f"{name}_substitutions": total.substitutions,
                    f"{name}_deletions": total.deletions, f"{name}_insertions": total.insertions})
        out["wer" if name == "word" else "cer"] = total.rate
    return out
