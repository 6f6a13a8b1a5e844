"""Which of the people's words the model gets right, by where the word occurs: in the training transcripts, only in
the LM's text, or in neither (examples/tiny/RESULTS.md, "Where the people's errors are"). Reads ds2-eval reports (their
per-utterance reference and hypothesis); a reference word is right when the word alignment (jiwer's) keeps it.

    .venv/bin/python examples/tiny/people_words.py data/x49/tiny results/e51x/people_lm.json [more reports...]

Prints a line per report and ends with one JSON line. The people's text is only counted here, never added to any text.
"""
import collections
import json
import sys
from pathlib import Path

import jiwer


def word_counts(lines):
    counts = collections.Counter()
    for line in lines:
        counts.update(line.split())
    return counts


def main(tiny: Path, reports: list[str]) -> dict:
    train = word_counts(json.loads(line)["text"] for line in open(tiny / "train.clean.jsonl", encoding="utf-8"))
    lm = word_counts(open(tiny / "lm_text.txt", encoding="utf-8"))
    out = {}
    for report in reports:
        tally = {kind: [0, 0] for kind in ("train", "lm_only", "neither")}
        for utt in json.load(open(report, encoding="utf-8"))["utterances"]:
            ref = utt["reference"].split()
            right = [False] * len(ref)
            for chunk in jiwer.process_words(utt["reference"], utt["hypothesis"]).alignments[0]:
                if chunk.type == "equal":
                    right[chunk.ref_start_idx:chunk.ref_end_idx] = [True] * (chunk.ref_end_idx - chunk.ref_start_idx)
            for word, ok in zip(ref, right):
                kind = "train" if train[word] else "lm_only" if lm[word] else "neither"
                tally[kind][0] += 1
                tally[kind][1] += ok
        out[report] = {kind: {"words": n, "right": round(k / max(n, 1), 4)} for kind, (n, k) in tally.items()}
        print(report + ": " + ", ".join(f"{kind} {v['words']} words, {100 * v['right']:.1f}% right"
                                        for kind, v in out[report].items()))
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2:])))
