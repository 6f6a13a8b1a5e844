r"""What limits the CER on the tiny Mandarin corpus, measured without training a model.

    .venv/bin/python examples/tiny_zh/ceiling.py --data data/zh/tiny --lm data/zh/tiny/lm/char3.bin

espeak-ng reads a Chinese character by its pinyin syllable and tone, so all an acoustic model can hear is
the syllable: characters that share one (homophones) sound the same, and only the LM can tell them apart.
Three limits follow, each printed here for the --split transcripts against the training transcripts:

1. Coverage: test characters that training never had (only `<unk>` can answer them) or had only a few
   times (too few to learn).
2. Homophones: how many vocabulary characters share each test character's syllable, with and without
   the tone.
3. The ceiling: the CER of a *perfect syllable recogniser*. Each character becomes a CTC spike shared evenly
   by every vocabulary character with its syllable (the true one included when the vocabulary has it,
   else `<unk>`), and the beam search with the character LM (--lm, best of a small alpha x beta grid on
   these posteriors) picks among them; greedy picks the most frequent training character of the set.
   A trained model can't do better than this with the same vocabulary and LM.

Syllables come from espeak-ng itself (`-x`, the voice the corpus uses): each test sentence is read as a
whole, so a polyphonic character gets its reading in context; the vocabulary's characters are read one by
one. Prints a summary and one JSON line.
"""

import argparse
import collections
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from deepspeech2.data.manifest import read_manifest  # noqa: E402
from deepspeech2.decode import Decoder, DecoderConfig  # noqa: E402
from deepspeech2.metrics import cer  # noqa: E402
from deepspeech2.vocab import Vocabulary  # noqa: E402

VOICE = "cmn-latn-pinyin"  # the voice `ds2-prepare tiny --language zh` reads with (deepspeech2_synthetic.voices)
SPIKE = 0.999  # probability mass of a character's CTC spike (the rest is the blank)


def syllables(lines: list[str]) -> list[list[str]]:
    """espeak-ng's syllables (phonemes with the tone digits) per line, one per character it read."""
    out = subprocess.run(["espeak-ng", "-v", VOICE, "-q", "-x"], input="\n".join(lines) + "\n", text=True,
                         capture_output=True, check=True).stdout.strip("\n").split("\n")
    if len(out) != len(lines):
        raise RuntimeError(f"espeak-ng gave {len(out)} lines for {len(lines)}")
    return [[s.strip().replace("'", "") for s in line.split("_|") if s.strip()] for line in out]


def toneless(syllable: str) -> str:
    return re.sub(r"\d", "", syllable)


def spike_sets(text: str, readings: list[str], sets: dict[str, list[int]], vocab: Vocabulary) -> list[list[int]]:
    """Per character, the vocabulary ids a perfect syllable recogniser can't tell apart: those reading as its
    syllable, and the true character's id (`<unk>` when the vocabulary lacks it)."""
    return [sorted(set(sets.get(syl, ())) | {vocab.encode(ch)[0]}) for ch, syl in zip(text, readings)]


def oracle_log_probs(spikes: list[list[int]], vocab_size: int) -> np.ndarray:
    """`(2 * len(spikes) + 1, vocab_size)` log-probabilities: blank, spike, blank, ..., each spike shared evenly
    by its ids."""
    blank = np.eye(vocab_size)[0]
    frames = [blank]
    for ids in spikes:
        frame = np.full(vocab_size, (1 - SPIKE) / vocab_size)
        frame[ids] += SPIKE / len(ids)
        frames += [frame, blank]
    probs = np.maximum(np.array(frames), 1e-12)
    return np.log(probs / probs.sum(-1, keepdims=True)).astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="the corpus folder (train.jsonl, SPLIT.jsonl)")
    ap.add_argument("--vocab", type=Path, help="the model's vocabulary (default: DATA/vocab.txt)")
    ap.add_argument("--lm", required=True, help="the character LM (ds2-build-lm --token char)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--alphas", default="0.5,1,1.5,2")
    ap.add_argument("--betas", default="0,1,2,3")
    args = ap.parse_args()
    vocab = Vocabulary.load(args.vocab or args.data / "vocab.txt")
    train = collections.Counter("".join(u.text for u in read_manifest(args.data / "train.jsonl")))
    refs = [u.text for u in read_manifest(args.data / f"{args.split}.jsonl")]
    chars = "".join(refs)
    report = {"split": args.split, "utterances": len(refs), "chars": len(chars), "vocab_size": vocab.size}

    report["coverage"] = {f"seen_{k}_or_fewer": round(sum(train[c] <= k for c in chars) / len(chars), 4)
                          for k in (0, 1, 2, 4, 9)}
    report["coverage"]["outside_vocab"] = round(sum(vocab.unk_id is not None and vocab.encode(c)[0] == vocab.unk_id
                                                    for c in chars) / len(chars), 4)

    vocab_chars = [c for c in vocab.chars if c in train]
    readings = dict(zip(vocab_chars, (s[0] if len(s) == 1 else "?" for s in syllables(vocab_chars))))
    results = {}
    for tones in (True, False):
        key = (lambda s: s) if tones else toneless
        sets = collections.defaultdict(list)
        for c, syl in readings.items():
            sets[key(syl)].append(vocab.encode(c)[0])
        texts, spikes = [], []
        for text, syls in zip(refs, syllables(refs)):
            if len(syls) != len(text):  # espeak-ng read a number or a word differently: leave it out
                continue
            texts.append(text)
            spikes.append(spike_sets(text, [key(s) for s in syls], sets, vocab))
        sizes = [len(ids) for utt in spikes for ids in utt]
        log_probs = [oracle_log_probs(utt, vocab.size) for utt in spikes]
        # Greedy: the most frequent training character of each spike's set.
        tokens = vocab.tokens()
        greedy_hyps = ["".join(tokens[max(ids, key=lambda i: train.get(tokens[i], 0))] for ids in utt)
                       for utt in spikes]
        best = (None, None, 2.0)
        for alpha in map(float, args.alphas.split(",")):
            for beta in map(float, args.betas.split(",")):
                config = DecoderConfig(lm_path=args.lm, alpha=alpha, beta=beta, cutoff_prob=1.0,
                                       token_min_logp=-12.0, num_workers=0)
                with Decoder(config, vocab) as decoder:
                    error = cer(texts, decoder.decode_utterances(log_probs), spaced=vocab.spaced)
                if error < best[2]:
                    best = (alpha, beta, error)
        name = "with_tones" if tones else "without_tones"
        results[name] = {"utterances": len(texts), "mean_homophones": round(float(np.mean(sizes)), 2),
                         "share_unique": round(float(np.mean(np.array(sizes) == 1)), 4),
                         "cer_greedy_unigram": round(cer(texts, greedy_hyps, spaced=vocab.spaced), 4),
                         "cer_lm": round(best[2], 4), "alpha": best[0], "beta": best[1]}
    report["oracle"] = results

    c = report["coverage"]
    print(f"{args.split}: {len(refs)} utterances, {len(chars)} characters; vocabulary {vocab.size} ids")
    print(f"coverage: {c['seen_0_or_fewer']:.1%} of the characters never in training, {c['seen_1_or_fewer']:.1%} "
          f"seen at most once, {c['seen_2_or_fewer']:.1%} at most twice, {c['seen_4_or_fewer']:.1%} at most 4 times")
    for name, r in results.items():
        print(f"perfect syllables {name.replace('_', ' ')}: {r['mean_homophones']:.1f} vocabulary characters per "
              f"syllable on average ({r['share_unique']:.0%} unique); CER greedy (most frequent) "
              f"{r['cer_greedy_unigram']:.1%}, with the LM {r['cer_lm']:.1%} "
              f"(alpha {r['alpha']:g}, beta {r['beta']:g})")
    print(json.dumps(report, ensure_ascii=False))


if __name__ == "__main__":
    main()
