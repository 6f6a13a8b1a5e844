"""Word and character error rates (Levenshtein distance over words or characters)."""

from __future__ import annotations

from collections.abc import Sequence


def edit_distance(ref: Sequence, hyp: Sequence) -> int:
    """Minimum substitutions + insertions + deletions turning `ref` into `hyp` (one-row DP)."""
    if len(ref) < len(hyp):
        ref, hyp = hyp, ref
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        cur = [i]
        for j, h in enumerate(hyp, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


def word_errors(ref: str, hyp: str) -> tuple[int, int]:
    """(word edits, reference words)."""
    r = ref.split()
    return edit_distance(r, hyp.split()), len(r)


def char_errors(ref: str, hyp: str, ignore_spaces: bool = False) -> tuple[int, int]:
    """(character edits, reference characters). Spaces count unless `ignore_spaces` (Mandarin CER)."""
    if ignore_spaces:
        ref, hyp = ref.replace(" ", ""), hyp.replace(" ", "")
    else:
        ref, hyp = " ".join(ref.split()), " ".join(hyp.split())
    return edit_distance(ref, hyp), len(ref)


def wer(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """Corpus WER: total word edits / total reference words."""
    edits, words = map(sum, zip(*(word_errors(r, h) for r, h in zip(refs, hyps, strict=True)))) if refs else (0, 0)
    return edits / max(words, 1)


def cer(refs: Sequence[str], hyps: Sequence[str], ignore_spaces: bool = False) -> float:
    """Corpus CER: total character edits / total reference characters."""
    pairs = [char_errors(r, h, ignore_spaces) for r, h in zip(refs, hyps, strict=True)]
    edits, chars = map(sum, zip(*pairs)) if pairs else (0, 0)
    return edits / max(chars, 1)
