r"""Benchmark: hotwords (pyctcdecode's hotword boosting in our beam search): the recall of rare words with and
without the boost, and what it costs the other words.

    .venv/bin/python bench/hotwords.py --model_dir runs/e23/model --manifest data/x23/tiny/dev.clean.jsonl \
        --lm data/x23/tiny/lm/tiny3.bin --alpha 0.75 --beta 3 --beam_size 100 --weights 0,2,4,6,8,10,15,20,30 --raw

Targets (the rule, fixed before looking at any result): the word types of the manifest's references whose LM
unigram log10 probability is below --rare_logp (-5: rarer than 1 in 100,000 words of the LM's text; KenLM's score
of the word alone, so the words the LM lacks are in, at its <unk> probability). One hotword list, all the targets,
is given for every utterance: each utterance's own targets, and the others as distractors.

Per setting, from a minimum-edit alignment of each reference with its hypothesis:
    recall        target occurrences in the references that the hypothesis has at the aligned position, all of
                  them and split into the words the LM knows and the ones it lacks (OOV)
    false alarms  targets in hypotheses where the reference has another word (substituted or inserted)
    other WER     the errors on the other words over their count: substitutions and deletions of non-target
                  reference words plus inserted non-target words (Le et al. 2021's U-WER)
    WER           all words
    letters       one-letter hypothesis words other than "a" and "i" (how Mozilla DeepSpeech's boosting failed:
                  the words after a hotword split into letters at high weights)
    s/utt         decoding CPU seconds per utterance (this process and its workers)
The settings: "none" (no hotwords), then for each weight our `Hotwords` (the LM's unknown-word offset given back
to hotwords it lacks; weight 0 does only that) and, with --raw, pyctcdecode's HotwordScorer as it is.
Log-probabilities are the model's (computed once; --cache keeps them in a file). Prints a table, then one JSON line.
"""

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

import numpy as np

from deepspeech2.decode.beam import BeamSearch, DecoderConfig
from deepspeech2.decode.hotwords import Hotwords
from deepspeech2.decode.prune import candidate_frames
from deepspeech2.metrics import wer
from deepspeech2.vocab import Vocabulary

_search = None  # the BeamSearch, inherited by the pool's workers (fork)
_scorers = {}  # setting name -> hotword scorer (None: no hotwords), inherited too


def _decode(item):
    i, log_probs, setting = item
    start = time.process_time()
    candidates, frame_ids, _ = candidate_frames(log_probs, _search.config)
    if len(candidates) == 0:
        return i, "", time.process_time() - start
    search = _search.start(hotwords=_scorers[setting])
    search.advance(candidates, frame_ids)
    return i, _search.text(search.finish()[0][0]), time.process_time() - start


def align(ref: list[str], hyp: list[str]) -> list[tuple[str | None, str | None]]:
    """A minimum-edit alignment (fewest edits, then fewest substitutions, as `deepspeech2.metrics.align`) as pairs
    (reference word or None for an insertion, hypothesis word or None for a deletion)."""
    n, m = len(ref), len(hyp)
    k = n + m + 1
    cost = np.zeros((n + 1, m + 1), np.int64)
    cost[:, 0] = np.arange(n + 1) * k
    cost[0, :] = np.arange(m + 1) * k
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost[i, j] = min(cost[i - 1, j] + k, cost[i, j - 1] + k,
                             cost[i - 1, j - 1] + (0 if ref[i - 1] == hyp[j - 1] else k + 1))
    pairs, i, j = [], n, m
    while i or j:
        if i and j and cost[i, j] == cost[i - 1, j - 1] + (0 if ref[i - 1] == hyp[j - 1] else k + 1):
            pairs.append((ref[i - 1], hyp[j - 1]))
            i, j = i - 1, j - 1
        elif i and cost[i, j] == cost[i - 1, j] + k:
            pairs.append((ref[i - 1], None))
            i -= 1
        else:
            pairs.append((None, hyp[j - 1]))
            j -= 1
    return pairs[::-1]


def score(refs: list[str], hyps: list[str], targets: set[str], oov: set[str]) -> dict:
    hits = {"in": 0, "oov": 0}
    total = {"in": 0, "oov": 0}
    false_alarms = other_errors = other_words = letters = 0
    for ref, hyp in zip(refs, hyps):
        for r, h in align(ref.split(), hyp.split()):
            if r in targets:
                kind = "oov" if r in oov else "in"
                total[kind] += 1
                hits[kind] += r == h
            elif r is not None:
                other_words += 1
                other_errors += r != h
            elif h not in targets:
                other_errors += 1  # an inserted non-target
            if h in targets and r != h:
                false_alarms += 1
        letters += sum(len(w) == 1 and w not in "ai" for w in hyp.split())
    n_targets = total["in"] + total["oov"]
    return {"recall": 100 * (hits["in"] + hits["oov"]) / max(n_targets, 1),
            "recall_in_lm": 100 * hits["in"] / max(total["in"], 1),
            "recall_oov": 100 * hits["oov"] / max(total["oov"], 1),
            "false_alarms": false_alarms, "other_wer": 100 * other_errors / max(other_words, 1),
            "wer": 100 * wer(refs, hyps, spaced=True), "letters": letters,
            "targets": n_targets, "targets_oov": total["oov"], "other_words": other_words}


def load_log_probs(model_dir: str, manifest: str, cache: str | None):
    if cache and Path(cache).is_file():
        data = np.load(cache, allow_pickle=False)
        refs = json.loads(str(data["references"]))
        return [data[f"u{i}"] for i in range(len(refs))], refs
    from deepspeech2.inference import manifest_log_probs  # TensorFlow, only when there is no cache

    out = manifest_log_probs(model_dir, manifest, progress=False)
    if cache:
        np.savez(cache, references=json.dumps(out.references), **{f"u{i}": lp for i, lp in enumerate(out.log_probs)})
    return out.log_probs, out.references


def main():
    global _search
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model_dir", required=True, help="a trained model bundle")
    ap.add_argument("--manifest", required=True, help="JSON-lines manifest (e.g. the tiny corpus' dev.clean.jsonl)")
    ap.add_argument("--lm", required=True, help="KenLM model from ds2-build-lm (its .unigrams.txt next to it)")
    ap.add_argument("--alpha", type=float, default=DecoderConfig.alpha)
    ap.add_argument("--beta", type=float, default=DecoderConfig.beta)
    ap.add_argument("--beam_size", type=int, default=DecoderConfig.beam_size)
    ap.add_argument("--beam_prune_logp", type=float, default=DecoderConfig.beam_prune_logp)
    ap.add_argument("--weights", default="0,2,4,6,8,10,15,20,30", help="hotword weights (nats) to try")
    ap.add_argument("--rare_logp", type=float, default=-5.0, help="targets: words whose LM unigram log10 "
                    "probability is below this")
    ap.add_argument("--raw", action="store_true", help="also pyctcdecode's HotwordScorer as it is")
    ap.add_argument("--workers", type=int, default=0, help="decoding processes; 0: one per CPU core")
    ap.add_argument("--cache", help="keep the log-probabilities in this .npz (computed when it doesn't exist)")
    ap.add_argument("--show", type=int, default=0, help="print this many hypotheses that change at each weight")
    args = ap.parse_args()

    import kenlm
    from pyctcdecode.language_model import HotwordScorer

    log_probs, refs = load_log_probs(args.model_dir, args.manifest, args.cache)
    lm = kenlm.Model(args.lm)
    words = sorted({w for r in refs for w in r.split()})
    targets = [w for w in words if lm.score(w, bos=False, eos=False) < args.rare_logp]
    oov = {w for w in targets if w not in lm}
    config = DecoderConfig(beam_size=args.beam_size, alpha=args.alpha, beta=args.beta, lm_path=args.lm, num_workers=1,
                           beam_prune_logp=args.beam_prune_logp)
    _search = BeamSearch(config, Vocabulary.load(Path(args.model_dir) / "vocab.txt"))
    weights = [float(w) for w in args.weights.split(",")]
    _scorers["none"] = None
    for w in weights:
        _scorers[f"ours {w:g}"] = Hotwords(targets, w, _search.ctc._language_model)
        if args.raw:
            _scorers[f"raw {w:g}"] = HotwordScorer.build_scorer(targets, weight=w)
    print(f"{args.manifest}: {len(refs)} utterances; {len(targets)} targets (LM unigram log10 p < "
          f"{args.rare_logp:g}), {len(oov)} of them not in the LM; alpha {args.alpha:g}, beta {args.beta:g}, beam "
          f"{args.beam_size}, beam_prune_logp {args.beam_prune_logp:g}", flush=True)
    print(f"targets: {' '.join(targets)}")
    print(f"{'setting':12s} {'recall':>7s} {'in LM':>6s} {'OOV':>6s} {'false':>6s} {'other WER':>9s} {'WER':>6s} "
          f"{'letters':>7s} {'s/utt':>6s}")
    rows = {}
    texts = {}
    workers = args.workers or len(os.sched_getaffinity(0))
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for setting in _scorers:
            order = sorted(range(len(log_probs)), key=lambda i: -len(log_probs[i]))
            out = pool.map(_decode, [(i, log_probs[i], setting) for i in order], chunksize=1)
            hyps = [""] * len(refs)
            cpu = 0.0
            for i, text, t in out:
                hyps[i] = text
                cpu += t
            texts[setting] = hyps
            row = score(refs, hyps, set(targets), oov)
            row["cpu_per_utt"] = cpu / len(refs)
            rows[setting] = row
            print(f"{setting:12s} {row['recall']:6.1f}% {row['recall_in_lm']:5.1f}% {row['recall_oov']:5.1f}% "
                  f"{row['false_alarms']:6d} {row['other_wer']:8.1f}% {row['wer']:5.1f}% {row['letters']:7d} "
                  f"{row['cpu_per_utt']:6.3f}", flush=True)
            if args.show and setting != "none":
                changed = [i for i in range(len(refs)) if hyps[i] != texts["none"][i]][:args.show]
                for i in changed:
                    print(f"    ref  {refs[i]}\n    none {texts['none'][i]}\n    this {hyps[i]}")
    print(json.dumps({"bench": "hotwords", "manifest": args.manifest, "utterances": len(refs), "targets": targets,
                      "oov": sorted(oov), "alpha": args.alpha, "beta": args.beta, "beam_size": args.beam_size,
                      "beam_prune_logp": args.beam_prune_logp, "rows": rows}))


if __name__ == "__main__":
    sys.exit(main())
