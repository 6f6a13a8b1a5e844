r"""Benchmark: Mandarin beam search cost with and without DS2's pruning (DS2 §7.3), at beam 100.

    .venv/bin/python bench/decode_zh.py --model_dir runs/zh/tiny/model --manifest data/zh/tiny/test.clean.jsonl \
        --lm data/zh/tiny/lm/char3.bin --tune_json results/zh/full/tune.json [--num_utterances 20]

DS2 §7.3: Mandarin's output layer (6,000 characters) makes the beam search costly, since every character of
every frame extends every beam; keeping per frame only the fewest characters whose probability adds up to
0.99, and at most 40 of them, sped it up 150x "with a small loss in accuracy". Here the tiny Mandarin model's
log-probabilities on --manifest (computed once, not timed) are decoded at --beam_size with the character LM,
in this process pinned to one core, by:
    none        no pruning: every character above e^-30 is a candidate at every frame
    floor-5     pyctcdecode's own rule: characters under log-probability -5 dropped (the frame's best kept)
    ds2-prune   DS2's 0.99 / 40
    default     DecoderConfig's defaults: DS2's 0.99 / 40 and pyctcdecode's -5 floor
RTF = decoding CPU seconds / audio seconds; CER against the references (`deepspeech2.metrics`, spaces ignored,
as ds2-eval scores).
Greedy decoding is the first line. Prints a table, then one JSON line.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepspeech2_cli._quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()  # before TensorFlow loads: hides its start-up lines, as in ds2-*

import numpy as np  # noqa: E402

from deepspeech2.data.manifest import read_manifest  # noqa: E402
from deepspeech2.decode import Decoder, DecoderConfig  # noqa: E402
from deepspeech2.decode.prune import MIN_TOKEN_LOGP, candidate_log_probs  # noqa: E402
from deepspeech2.metrics import cer  # noqa: E402

VARIANTS = {  # name -> DecoderConfig pruning fields
    "none": dict(cutoff_prob=1.0, token_min_logp=MIN_TOKEN_LOGP),
    "floor-5": dict(cutoff_prob=1.0, token_min_logp=-5.0),
    "ds2-prune": dict(cutoff_prob=0.99, cutoff_top_n=40, token_min_logp=MIN_TOKEN_LOGP),
    "default": {},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model_dir", required=True, help="the tiny Mandarin model bundle (make demo LANG=zh)")
    ap.add_argument("--manifest", required=True, help="Mandarin manifest to decode (e.g. the test split)")
    ap.add_argument("--lm", required=True, help="character LM (ds2-build-lm --token char)")
    ap.add_argument("--tune_json", help="ds2-tune's result: alpha and beta from it (else --alpha, --beta)")
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--beta", type=float, default=0.0)
    ap.add_argument("--beam_size", type=int, default=100)
    ap.add_argument("--num_utterances", type=int, default=20, help="the first N of --manifest (0: all); "
                    "unpruned decoding of a 2,000-character vocabulary is slow")
    args = ap.parse_args()
    if args.tune_json:
        tuned = json.loads(Path(args.tune_json).read_text(encoding="utf-8"))
        args.alpha, args.beta = tuned["best_alpha"], tuned["best_beta"]
    if hasattr(os, "sched_setaffinity"):  # one core: RTF per core; pyctcdecode is single-threaded anyway
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    from deepspeech2.bundle import load_bundle  # TensorFlow loads here
    from deepspeech2.inference import compute_log_probs

    utterances = read_manifest(args.manifest)
    if args.num_utterances:
        utterances = utterances[:args.num_utterances]
    bundle = load_bundle(args.model_dir)
    vocab = bundle.vocab
    if vocab.spaced:
        sys.exit(f"decode_zh: error: `{args.model_dir}` has a vocabulary with a space; this bench is for a "
                 "Mandarin (character) model")
    acoustic = compute_log_probs(bundle, utterances, progress=False)
    keep = [i for i, lp in enumerate(acoustic.log_probs) if lp is not None]
    log_probs = [acoustic.log_probs[i] for i in keep]
    refs = [utterances[i].text for i in keep]
    seconds = sum(utterances[i].duration for i in keep)
    print(f"{len(log_probs)} utterances, {seconds:.0f} s of audio, {sum(map(len, log_probs))} steps, "
          f"{vocab.size} output ids; LM {args.lm}; alpha {args.alpha:g}, beta {args.beta:g}, beam {args.beam_size}")

    results = []

    def report(name, texts, cpu, candidates=None):
        row = {"decoder": name, "rtf": cpu / seconds, "cer": 100 * cer(refs, texts, spaced=vocab.spaced),
               "candidates_per_frame": candidates}
        results.append(row)
        per_frame = f"  {candidates:7.1f} candidates/frame" if candidates is not None else ""
        print(f"{name:10s}  RTF {row['rtf']:8.4f}  CER {row['cer']:5.1f}%{per_frame}", flush=True)

    greedy = Decoder(DecoderConfig(kind="greedy"), vocab)
    t0 = time.process_time()
    report("greedy", greedy.decode_utterances(log_probs), time.process_time() - t0)
    for name, pruning in VARIANTS.items():
        config = DecoderConfig(beam_size=args.beam_size, alpha=args.alpha, beta=args.beta, lm_path=args.lm,
                               num_workers=1, **pruning)
        # Candidates per (uncollapsed) frame: what each frame offers the search.
        cands = float(np.mean([np.isfinite(candidate_log_probs(lp, config, collapse=False)).sum(-1).mean()
                               for lp in log_probs]))
        with Decoder(config, vocab) as decoder:
            t0 = time.process_time()
            texts = [decoder.decode_utterances([lp])[0] for lp in log_probs]
            report(name, texts, time.process_time() - t0, cands)
    by = {r["decoder"]: r for r in results}
    speedup = by["none"]["rtf"] / by["ds2-prune"]["rtf"]
    print(f"DS2 pruning (0.99 / 40): {speedup:.0f}x faster than none, CER {by['ds2-prune']['cer']:.1f}% vs "
          f"{by['none']['cer']:.1f}% (paper, DS2 §7.3: 150x on 6,000 characters)")
    print(json.dumps({"bench": "decode_zh", "model_dir": args.model_dir, "utterances": len(log_probs),
                      "audio_seconds": round(seconds, 1), "vocab_size": vocab.size, "beam": args.beam_size,
                      "alpha": args.alpha, "beta": args.beta, "speedup_ds2_prune": round(speedup, 1),
                      "results": [{**r, "rtf": round(r["rtf"], 5), "cer": round(r["cer"], 2),
                                   "candidates_per_frame": None if r["candidates_per_frame"] is None
                                   else round(r["candidates_per_frame"], 1)} for r in results]},
                     ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
