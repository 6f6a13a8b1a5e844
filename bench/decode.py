r"""Benchmark: CTC decoder speed (RTF on one core) against WER, for beam sizes 1-500, with and without DS2's pruning.

    .venv/bin/python bench/decode.py --manifest data/tiny/test.jsonl --lm data/tiny/lm/tiny3.bin \
        [--model_dir runs/tiny/model] [--alpha 0.8 --beta 1.5]

Target: beam 100 with the LM at RTF <= 0.02 on one core, WER within 0.5 (absolute, in %) of the unpruned beam.

Log-probabilities: with --model_dir, the model's outputs on --manifest (deepspeech2.inference, computed once,
not timed). Without it, synthetic posteriors of the manifest's reference texts (`synthetic_log_probs`: peaky
CTC spikes on a mostly-blank background, with substitutions among acoustically close letters, deletions and
insertions, at the tiny model's 50 output steps per second).

For each beam size in --beam_sizes it decodes every utterance in this process, pinned to one core, and
reports RTF = decoding CPU seconds / audio seconds and the WER, for:
    pyctcdecode  pyctcdecode alone, with its defaults (token_min_logp -5, beam_prune_logp -10)
    collapse     the same search through deepspeech2.decode.Decoder: + exact frame collapsing (same WER)
    default      + DS2's 0.99 / 40 pruning: DecoderConfig's defaults
    floor-3.5    + a token floor of -3.5 instead of -5 (the speed knob)
and, when flashlight-text is installed (`pip install flashlight-text`, not a dependency), as speed
references on the same log-probabilities: its C++ LexiconDecoder with the same word LM (it can only emit
words of the LM's vocabulary), and its LexiconFreeDecoder, which needs a character LM (built here from the
same text, order --char_order) and so keeps out-of-vocabulary words; both with the same alpha and beta.
Greedy decoding is the first line. Prints a table, then one JSON line.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from deepspeech2.data.manifest import read_manifest
from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.decode.beam import load_unigrams, unigrams_path_for
from deepspeech2.decode.lm import LMConfig, build_lm, corpus_line
from deepspeech2.metrics import wer
from deepspeech2.text import normalize_english
from deepspeech2.vocab import Vocabulary

STEPS_PER_SECOND = 50  # the tiny model: 10 ms feature hop x time stride 2
# Letters an acoustic model confuses (similar sounds or spellings of one sound); the other letters confuse
# at random.
CONFUSIONS = {"a": "eou", "e": "aiy", "i": "ey", "o": "au", "u": "o", "y": "ie", "b": "pd", "p": "b", "d": "tb",
              "t": "d", "g": "kj", "k": "cg", "c": "ks", "s": "zc", "z": "s", "f": "v", "v": "fw", "m": "n",
              "n": "m", "l": "r", "r": "l", "w": "v", "j": "g", "q": "k", "x": "s", "h": "'", "'": "s"}


def synthetic_log_probs(text: str, seconds: float, vocab: Vocabulary, rng: np.random.Generator,
                        sub: float = 0.08, dele: float = 0.03, ins: float = 0.02, leak: tuple = (-4, -1),
                        noise: float = 0.3, temperature: float = 1.5) -> np.ndarray:
    """Peaky CTC posteriors for `text` spoken in `seconds`: `(steps, vocab.size)` log-probabilities.

    What a CTC model's output looks like, at the tiny model's 50 steps per second: the steps are shared
    evenly among the characters (with jitter); each character is a spike of 1-2 steps on a blank background.
    - A spike gives its letter max(0.3, 1 - 10^U(-2.5, -0.1)) (median 0.94); of the rest, `noise` is spread
      over all tokens, 30-70% of what is left goes to a runner-up (a confusable letter such as m/n, b/p, e/i,
      or the blank) and the remainder to the blank.
    - With probability `sub` a confusable letter wins the spike (0.4-0.8, the true letter second); with
      `dele` the blank wins it (0.5-0.9, the true letter second); with `ins` per character a confusable
      letter spikes (0.4-0.8) in the gap before it. A space is never replaced by a letter, only deleted.
    - Blank steps give 10^U(`leak`) (0.01-10%) to the other tokens; the steps on either side of a spike
      leak 0.5-30% to its letter (the spike's shoulders).
    - Finally all log-probabilities are divided by `temperature` and renormalized: 1 is a confident, well
      trained model; the default 1.5 a less trained one, like the tiny model (softer outputs, more
      candidates per step).
    """
    ids = vocab.encode(text)
    steps = max(int(seconds * STEPS_PER_SECOND), 2 * len(ids) + 1)
    leaked = 10 ** rng.uniform(*leak, size=steps)
    probs = rng.dirichlet(np.full(vocab.size, 0.3), size=steps) * leaked[:, None]
    probs[:, 0] = 1 - leaked
    bounds = np.linspace(0, steps, len(ids) + 1)
    bounds[1:-1] += rng.uniform(-0.3, 0.3, size=len(ids) - 1) * (steps / max(len(ids), 1))
    bounds = np.clip(np.round(bounds).astype(int), 0, steps)
    for k, label in enumerate(ids):
        lo, hi = bounds[k], max(bounds[k + 1], bounds[k] + 1)
        width = 1 + int(rng.random() < 0.4 and hi - lo > 2)
        at = int(rng.integers(lo, max(hi - width, lo) + 1))
        if rng.random() < ins and at - lo >= 2:  # a spurious spike in the gap before this character
            probs[lo] = _spike(_confuse(label, vocab, rng), rng.uniform(0.4, 0.8), 0, vocab, rng, noise)
        r = rng.random()
        space = vocab.chars[label - 1] == " "
        if r < dele:
            frame = _spike(0, rng.uniform(0.5, 0.9), label, vocab, rng, noise)
        elif r < dele + sub and not space:
            frame = _spike(_confuse(label, vocab, rng), rng.uniform(0.4, 0.8), label, vocab, rng, noise)
        else:
            runner_up = 0 if space or rng.random() < 0.4 else _confuse(label, vocab, rng)
            frame = _spike(label, max(0.3, 1 - 10 ** rng.uniform(-2.5, -0.1)), runner_up, vocab, rng, noise)
        probs[at:at + width] = frame
        for side in (at - 1, at + width):  # shoulders
            if 0 <= side < steps and probs[side, 0] > 0.9:
                share = 10 ** rng.uniform(-2.3, -0.5)
                probs[side] *= 1 - share
                probs[side, frame.argmax()] += share
    log_probs = np.log(np.maximum(probs / probs.sum(axis=1, keepdims=True), 1e-12)) / temperature
    return (log_probs - np.log(np.exp(log_probs).sum(axis=1, keepdims=True))).astype(np.float32)


def _confuse(label: int, vocab: Vocabulary, rng: np.random.Generator) -> int:
    char = vocab.chars[label - 1]
    options = ([c for c in CONFUSIONS.get(char, "") if c in vocab.chars]
               or [c for c in vocab.chars if c not in (char, " ")])
    return vocab.chars.index(options[int(rng.integers(len(options)))]) + 1


def _spike(label: int, p: float, runner_up: int, vocab: Vocabulary, rng: np.random.Generator,
           noise: float) -> np.ndarray:
    """A spike step: `label` gets p; of the rest, `noise` is spread over all tokens, 30-70% of what is left
    goes to `runner_up`, the remainder to the blank."""
    frame = rng.dirichlet(np.full(vocab.size, 0.2)) * (1 - p) * noise
    frame[label] += p
    rest = 1 - frame.sum()
    second = rest * rng.uniform(0.3, 0.7)
    frame[runner_up] += second
    frame[0] += rest - second
    return frame


def _decode_timed(decode, log_probs: list[np.ndarray]) -> tuple[list[str], float]:
    t0 = time.process_time()
    texts = [decode(lp) for lp in log_probs]
    return texts, time.process_time() - t0


def flashlight_decoders(lm_path: str, unigrams: list[str], char_lm: str | None, vocab: Vocabulary, beam: int,
                        alpha: float, beta: float):
    """{name: decode(log_probs) -> text} for flashlight-text's lexicon and lexicon-free decoders (or {})."""
    try:
        from flashlight.lib.text.decoder import (CriterionType, LexiconDecoder, LexiconDecoderOptions,
                                                 LexiconFreeDecoder, LexiconFreeDecoderOptions, Trie,
                                                 SmearingMode)
        from flashlight.lib.text.decoder import KenLM
        from flashlight.lib.text.dictionary import Dictionary, create_word_dict
    except ImportError:
        return {}
    tokens = ["<blank>" if i == 0 else ("|" if c == " " else c) for i, c in enumerate([""] + list(vocab.chars))]
    token_dict = Dictionary(tokens)
    sil, blank = token_dict.get_index("|"), token_dict.get_index("<blank>")
    out = {}
    word_dict = create_word_dict({"<unk>": [["<unk>"]], **{w: [[*w, "|"]] for w in unigrams}})
    lm = KenLM(lm_path, word_dict)
    trie = Trie(len(tokens), sil)
    start = lm.start(False)
    for w in unigrams:
        _, score = lm.score(start, word_dict.get_index(w))
        trie.insert([token_dict.get_index(c) for c in w] + [sil], word_dict.get_index(w), score)
    trie.smear(SmearingMode.MAX)
    # flashlight's KenLM wrapper scores in log10 and multiplies by lm_weight; pyctcdecode's alpha is in nats.
    opts = LexiconDecoderOptions(beam_size=beam, beam_size_token=len(tokens), beam_threshold=25.0,
                                 lm_weight=alpha * np.log(10), word_score=beta, unk_score=-np.inf, sil_score=0.0,
                                 log_add=False, criterion_type=CriterionType.CTC)
    lexicon = LexiconDecoder(opts, trie, lm, sil, blank, word_dict.get_index("<unk>"), [], False)

    def run(decoder, lp, to_text):
        lp = np.ascontiguousarray(lp, dtype=np.float32)
        result = decoder.decode(lp.ctypes.data, lp.shape[0], lp.shape[1])[0]
        return to_text(result)

    def lexicon_text(result):
        return " ".join(word_dict.get_entry(w) for w in result.words if w >= 0)

    out["flashlight-lexicon"] = lambda lp: run(lexicon, lp, lexicon_text)
    if char_lm:
        char_dict = Dictionary(tokens)
        char_kenlm = KenLM(char_lm, char_dict)
        free_opts = LexiconFreeDecoderOptions(beam_size=beam, beam_size_token=len(tokens), beam_threshold=25.0,
                                              lm_weight=alpha * np.log(10), sil_score=beta, log_add=False,
                                              criterion_type=CriterionType.CTC)
        free = LexiconFreeDecoder(free_opts, char_kenlm, sil, blank, [])

        def free_text(result):
            ids = [t for k, t in enumerate(result.tokens) if t >= 0 and t != blank
                   and (k == 0 or t != result.tokens[k - 1])]
            return " ".join("".join(" " if token_dict.get_entry(t) == "|" else token_dict.get_entry(t)
                                    for t in ids).split())

        out["flashlight-lexfree"] = lambda lp: run(free, lp, free_text)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", required=True, help="JSON-lines manifest (e.g. the tiny corpus' test.jsonl)")
    ap.add_argument("--lm", required=True, help="KenLM model from ds2-build-lm (its .unigrams.txt next to it)")
    ap.add_argument("--lm_text", help="the LM's text, for flashlight's character LM (default: next to the "
                                      "manifest, lm_text.txt)")
    ap.add_argument("--model_dir", help="a trained model bundle; without it, synthetic posteriors")
    ap.add_argument("--beam_sizes", default="1,10,50,100,500")
    ap.add_argument("--alpha", type=float, default=DecoderConfig.alpha)
    ap.add_argument("--beta", type=float, default=DecoderConfig.beta)
    ap.add_argument("--char_order", type=int, default=6, help="order of flashlight's character LM")
    ap.add_argument("--temperature", type=float, default=1.5, help="of the synthetic posteriors: 1 is a confident "
                    "model, higher a less trained one")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no_flashlight", action="store_true")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):  # one core: RTF per core, and pyctcdecode runs single-threaded anyway
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    utterances = read_manifest(args.manifest)
    refs = [normalize_english(u.text) for u in utterances]
    if args.model_dir:
        from deepspeech2.bundle import load_bundle
        from deepspeech2.inference import compute_log_probs

        bundle = load_bundle(args.model_dir)
        vocab = bundle.vocab
        acoustic = compute_log_probs(bundle, utterances)
        keep = [i for i, lp in enumerate(acoustic.log_probs) if lp is not None]
        log_probs = [acoustic.log_probs[i] for i in keep]
        refs = [refs[i] for i in keep]
        seconds = sum(utterances[i].duration for i in keep)
        source = f"model {args.model_dir}"
    else:
        vocab = Vocabulary.english()
        rng = np.random.default_rng(args.seed)
        log_probs = [synthetic_log_probs(r, u.duration, vocab, rng, temperature=args.temperature)
                     for r, u in zip(refs, utterances)]
        seconds = sum(u.duration for u in utterances)
        source = f"synthetic posteriors (temperature {args.temperature}, seed {args.seed})"
    print(f"{len(log_probs)} utterances, {seconds:.0f} s of audio, {sum(map(len, log_probs))} steps; {source}; "
          f"LM {args.lm}; alpha {args.alpha}, beta {args.beta}")
    results = []

    def report(name, beam, texts, cpu):
        row = {"decoder": name, "beam": beam, "rtf": cpu / seconds,
               "wer": 100 * wer(refs, texts, spaced=vocab.spaced)}
        results.append(row)
        print(f"{name:20s} {beam if beam else '-':>4}  RTF {row['rtf']:.4f}  WER {row['wer']:5.1f}%", flush=True)

    greedy = Decoder(DecoderConfig(kind="greedy"), vocab)
    report("greedy", 0, *_decode_timed(lambda lp: greedy.decode_utterances([lp])[0], log_probs))
    unigrams = load_unigrams(unigrams_path_for(args.lm))
    char_lm = None
    if not args.no_flashlight:
        lm_text = args.lm_text or str(Path(args.manifest).with_name("lm_text.txt"))
        if os.path.exists(lm_text):
            tmp = tempfile.mkdtemp()
            chars = Path(tmp, "chars.txt")
            with open(lm_text) as src, open(chars, "w") as dst:  # "the cat" -> "t h e | c a t"
                for line in src:
                    words = corpus_line(line, "en").split()
                    if words:
                        dst.write(" | ".join(" ".join(w) for w in words) + "\n")
            char_lm = str(build_lm(LMConfig([str(chars)], os.path.join(tmp, "chars"), order=args.char_order,
                                            normalize=False)).model_path)
    for beam in [int(b) for b in args.beam_sizes.split(",")]:
        base = DecoderConfig(beam_size=beam, alpha=args.alpha, beta=args.beta, lm_path=args.lm, num_workers=1)
        raw = Decoder(base, vocab).search.ctc
        report("pyctcdecode", beam, *_decode_timed(lambda lp: raw.decode(lp, beam_width=beam), log_probs))
        for name, config in (("collapse", dict(cutoff_prob=1.0)),  # pyctcdecode's search
                             ("default", {}),  # + DS2 0.99/40: DecoderConfig's defaults
                             ("floor-3.5", dict(token_min_logp=-3.5))):  # + a higher token floor
            decoder = Decoder(DecoderConfig(**{**base.to_dict(), **config}), vocab)
            report(name, beam, *_decode_timed(lambda lp: decoder.decode_utterances([lp])[0], log_probs))
        if not args.no_flashlight:
            for name, decode in flashlight_decoders(args.lm, unigrams, char_lm, vocab, beam, args.alpha,
                                                    args.beta).items():
                report(name, beam, *_decode_timed(decode, log_probs))
    target = next((r for r in results if r["decoder"] == "default" and r["beam"] == 100), None)
    unpruned = next((r for r in results if r["decoder"] == "pyctcdecode" and r["beam"] == 100), None)
    if target and unpruned:
        met = target["rtf"] <= 0.02 and target["wer"] <= unpruned["wer"] + 0.5
        print(f"target (beam 100 + LM: RTF <= 0.02, WER within 0.5 of unpruned {unpruned['wer']:.1f}%): "
              f"RTF {target['rtf']:.4f}, WER {target['wer']:.1f}% -> {'met' if met else 'NOT met'}")
    print(json.dumps({"bench": "decode", "source": source, "audio_seconds": round(seconds, 1),
                      "alpha": args.alpha, "beta": args.beta,
                      "results": [{**r, "rtf": round(r["rtf"], 5), "wer": round(r["wer"], 2)} for r in results]}))


if __name__ == "__main__":
    sys.exit(main())
