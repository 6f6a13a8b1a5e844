r"""What the tiny Mandarin model's substitutions are: a wrong tone, a homophone, or another syllable.

    .venv/bin/python examples/tiny_zh/errors.py results/zh/full/test_greedy.json results/zh/full/test_lm.json

Takes `ds2-eval --report` files. Each hypothesis is aligned with its reference by character (jiwer), and both
are read by espeak-ng (`-x`, the corpus's voice, each sentence as a whole so polyphones get their reading in
context, as ceiling.py does). Each substituted character is then the same toned syllable (a homophone only
the LM can resolve), the same syllable with another tone (the acoustic model missed the tone), or another
syllable. Prints one line per report and one JSON line with all of them.
"""

import argparse
import collections
import json
import sys
from pathlib import Path

import jiwer

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ceiling import syllables, toneless  # noqa: E402


def classify(report: dict) -> dict:
    """Counts of substitutions by kind, deletions, insertions and unreadable utterances in a ds2-eval report."""
    utts = report["utterances"]
    refs = [u["reference"] for u in utts]
    hyps = [u["hypothesis"] for u in utts]
    ref_syl = syllables(refs)
    read = iter(syllables([h for h in hyps if h]) if any(hyps) else [])  # espeak-ng reads no empty line
    hyp_syl = [next(read) if h else [] for h in hyps]
    counts = collections.Counter(substitutions=0, same_toned_syllable=0, other_tone=0, other_syllable=0,
                                 deletions=0, insertions=0, unreadable=0)
    for ref, hyp, rs, hs in zip(refs, hyps, ref_syl, hyp_syl):
        if not hyp:
            counts["deletions"] += len(ref)
            continue
        if len(rs) != len(ref) or len(hs) != len(hyp):  # espeak-ng read a character as two syllables, or none
            counts["unreadable"] += 1
            continue
        for chunk in jiwer.process_characters(ref, hyp).alignments[0]:
            if chunk.type == "substitute":
                for i, j in zip(range(chunk.ref_start_idx, chunk.ref_end_idx),
                                range(chunk.hyp_start_idx, chunk.hyp_end_idx)):
                    kind = ("same_toned_syllable" if rs[i] == hs[j] else
                            "other_tone" if toneless(rs[i]) == toneless(hs[j]) else "other_syllable")
                    counts["substitutions"] += 1
                    counts[kind] += 1
            elif chunk.type == "delete":
                counts["deletions"] += chunk.ref_end_idx - chunk.ref_start_idx
            elif chunk.type == "insert":
                counts["insertions"] += chunk.hyp_end_idx - chunk.hyp_start_idx
    return dict(counts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path, help="ds2-eval --report JSON files")
    args = ap.parse_args()
    results = {}
    for path in args.reports:
        c = results[str(path)] = classify(json.loads(path.read_text(encoding="utf-8")))
        n = max(c["substitutions"], 1)
        print(f"{path}: {c['substitutions']} substitutions: {c['other_tone']} wrong tone "
              f"({c['other_tone'] / n:.0%}), {c['same_toned_syllable']} homophones "
              f"({c['same_toned_syllable'] / n:.0%}), {c['other_syllable']} other syllables "
              f"({c['other_syllable'] / n:.0%}); {c['deletions']} deletions, {c['insertions']} insertions, "
              f"{c['unreadable']} utterances unreadable")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
