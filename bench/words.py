r"""Benchmark: word times and word confidence (deepspeech2/decode/words.py; README "Word times and confidence").
Fits the word config (time shifts, confidence calibration) on dev and reports on test once.

    nice -n 10 .venv/bin/python bench/words.py --model_dir runs/e23/model --data data/x23/tiny \
        --lm data/x23/tiny/lm/tiny3.bin --tune results/e23/tune.json \
        --out results/e23/words.json --report results/e23/words_bench.json --png docs/confidence.png

Timing ground truth: the tiny corpus' own dev and test audio. Its espeak-ng utterances are re-synthesized through
libespeak-ng (the library the espeak-ng command runs) with the corpus' settings for each line (`synthesis.make_job`:
voice, variant, rate, pitch, amplitude, word gap, level, padding), one fresh process per utterance as the corpus
runs them (in one process the library carries state from one utterance into the next), with phoneme events on.
A line is kept only when the result, trimmed, levelled and padded as the corpus does (`synthesis.trim_level_pad`),
is the stored file to within 16-bit rounding, so the events are the stored audio's. A word starts at its first
phoneme's sample and ends where the next phoneme event (a pause, or the next word) begins; samples map to the
file's seconds through the trim, the resampling and the lead. Words espeak-ng reads as one ("of the", "for the":
all their phonemes carry the first word's text position) have no boundary between them and are left out. The
check that the events are where the sound is: every pause of 50 ms or more that the events mark between words,
measured in the stored audio (printed as "check"). flite's test voice has no events and is left out of the timing
figures.

Per word of the transcript that is right (`metrics.hypothesis_hits`) the predicted start and end, unshifted, are
compared with the truth; the shifts are the dev medians of truth - prediction. Confidence: the n-best posterior
and the frames' mean best-token posterior of every transcript word, labelled right or wrong by the alignment
against the reference; Platt scaling is fitted on dev, one score and both. Prints the tables and writes the word
config (`--out`), the full figures (`--report`) and the reliability plot (`--png`).
"""

import argparse
import ctypes
import json
import math
import multiprocessing
import re
import time
from pathlib import Path

import numpy as np

from deepspeech2.audio import SAMPLE_RATE, load_audio
from deepspeech2.data.manifest import read_manifest
from deepspeech2.decode.beam import BeamSearch, DecoderConfig
from deepspeech2.decode.words import (ECE_BINS, FrameClock, WordConfig, auroc, calibration_table,
                                      expected_calibration_error, fit_platt, frame_confidence, logit,
                                      nbest_posterior)
from deepspeech2.fileio import write_json
from deepspeech2.metrics import hypothesis_hits, wer
from deepspeech2.vocab import Vocabulary
from deepspeech2_synthetic import synthesis, voices

TARGET_START_ERROR = 0.040  # s: the median start error asked for (issue 39)
MATCH_TOLERANCE = 1e-3  # the re-synthesized audio must equal the stored file to within this (16-bit: 3e-5)
PAUSE_CHECK = 0.050  # s: pauses at least this long are checked against the audio's energy
ENERGY_FRAME = 0.005  # s: frames of the energy check
# libespeak-ng (speak_lib.h): AUDIO_OUTPUT_SYNCHRONOUS, espeakINITIALIZE_PHONEME_EVENTS, POS_CHARACTER, the
# parameters' ids, the event types.
SYNCHRONOUS, PHONEME_EVENTS, POS_CHARACTER = 2, 1, 1
RATE, VOLUME, PITCH, WORDGAP = 1, 2, 3, 7
EVENT_END, EVENT_PHONEME = 5, 7


class _Event(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint), ("text_position", ctypes.c_int),
                ("length", ctypes.c_int), ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", ctypes.c_char * 8)]


def espeak_events(job) -> tuple[np.ndarray, int, list[tuple]]:
    """A tiny-corpus espeak-ng job through libespeak-ng: (samples float32, rate, events (type, text position,
    length, sample, name)). Run it in a fresh process."""
    lib = ctypes.CDLL("libespeak-ng.so.1")
    rate = lib.espeak_Initialize(SYNCHRONOUS, 0, None, PHONEME_EVENTS)
    chunks, events = [], []

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))
    def callback(wav, n, event):
        if wav and n > 0:
            chunks.append(np.ctypeslib.as_array(wav, (n,)).copy())
        i = 0
        while event[i].type != 0:
            e = event[i]
            events.append((e.type, e.text_position, e.length, e.sample, bytes(e.id).split(b"\0")[0].decode()))
            i += 1
        return 0

    lib.espeak_SetSynthCallback(callback)
    sp = job.speaker
    lib.espeak_SetVoiceByName(f"{sp.voice}+{sp.variant}".encode())
    # The espeak-ng command's -s, -p, -a and -g as synthesis.synthesize sets them (the match with the file checks it).
    lib.espeak_SetParameter(RATE, round(synthesis.ESPEAK_DEFAULT_WPM * job.rate), 0)
    lib.espeak_SetParameter(PITCH, int(np.clip(round(50 + 100 * math.log2(job.pitch)), 0, 99)), 0)
    lib.espeak_SetParameter(VOLUME, job.amplitude, 0)
    lib.espeak_SetParameter(WORDGAP, sp.word_gap, 0)
    text = job.text.encode("utf-8")
    lib.espeak_Synth(text, len(text) + 1, 0, POS_CHARACTER, 0, 0, None, None)
    lib.espeak_Synchronize()
    return np.concatenate(chunks).astype(np.float32) / 32768, rate, events


def word_samples(text: str, events: list[tuple]) -> list[tuple[int, int] | None] | None:
    """Each whitespace word of `text`: (its first phoneme's sample, the next phoneme event's sample), or None for
    the words of a group espeak-ng read as one ("of the", "for the": the phonemes all carry the first word's
    position, so the boundary inside is unknown); None when no word has phonemes."""
    offsets = [m.start() + 1 for m in re.finditer(r"\S+", text)]  # espeak-ng's text positions are 1-based
    phonemes = [(pos, sample, name) for kind, pos, _, sample, name in events if kind == EVENT_PHONEME]
    end_sample = max((sample for kind, _, _, sample, _ in events if kind == EVENT_END), default=None)
    spans: list[tuple[int, int] | None] = []
    for w, start in enumerate(offsets):
        stop = offsets[w + 1] if w + 1 < len(offsets) else math.inf
        own = [k for k, (pos, _, name) in enumerate(phonemes) if start <= pos < stop and name[:1] not in "_;"]
        if not own:  # read with the word before it: neither has a boundary of its own
            if spans:
                spans[-1] = None
            spans.append(None)
            continue
        after = own[-1] + 1
        end = phonemes[after][1] if after < len(phonemes) else end_sample
        spans.append(None if end is None else (phonemes[own[0]][1], end))
    return spans if any(spans) else None


def _truth(item):
    """(line index, [(start s, end s) per word] or None, why not, [(pause start, pause end, audio onset)])."""
    i, job, stored_path = item
    raw, rate, events = espeak_events(job)
    samples = word_samples(job.text, events)
    if samples is None:
        return i, None, "events", []
    voiced = np.flatnonzero(np.abs(raw) > synthesis.TRIM_THRESHOLD)
    ours = synthesis.trim_level_pad(raw, rate, job.peak_dbfs, job.lead, job.trail)
    stored = load_audio(stored_path, sample_rate=SAMPLE_RATE)
    if len(ours) != len(stored) or np.abs(ours - stored).max() > MATCH_TOLERANCE:
        return i, None, "audio", []
    lead = round(job.lead * SAMPLE_RATE) / SAMPLE_RATE
    seconds = [None if span is None else (lead + (span[0] - voiced[0]) / rate, lead + (span[1] - voiced[0]) / rate)
               for span in samples]
    # Pauses between words, and where the stored audio's energy comes back after each.
    frame = int(ENERGY_FRAME * SAMPLE_RATE)
    energy = np.sqrt(np.mean(stored[:len(stored) // frame * frame].reshape(-1, frame) ** 2, axis=1))
    quiet = 10 ** (-50 / 20) * np.abs(stored).max()  # 50 dB under the peak
    pauses = []
    for this, after in zip(seconds, seconds[1:]):
        if this is None or after is None:
            continue
        end, start = this[1], after[0]
        if start - end >= PAUSE_CHECK:
            inside = energy[int(end / ENERGY_FRAME) + 1:int(start / ENERGY_FRAME) - 1]
            loud = np.flatnonzero(energy[int(start / ENERGY_FRAME) - 4:] > quiet)
            onset = (int(start / ENERGY_FRAME) - 4 + loud[0]) * ENERGY_FRAME if len(loud) else math.nan
            pauses.append((end, start, onset, float(inside.max()) if len(inside) else 0.0, quiet))
    return i, seconds, "", pauses


def corpus_word_times(data: Path, split: str, utterances, workers: int) -> tuple[dict, dict, list]:
    """Word times of a split's espeak-ng lines: ({line index: [(start, end)]}, {why: count} of lines left out,
    pauses for the check)."""
    info = json.loads((data / "speakers.json").read_text())
    seed = info["config"]["seed"]
    speakers = {s["id"]: voices.Speaker(**s) for s in info["splits"][split]}
    items, skipped = [], {"not espeak-ng": 0}
    for i, u in enumerate(utterances):
        sp = speakers.get(u.speaker)
        name = re.search(r"(\d{6})-([0-9a-f]{10})\.wav$", u.audio_filepath)
        if sp is None or sp.engine != "espeak-ng" or name is None:
            skipped["not espeak-ng"] += 1
            continue
        job = synthesis.make_job(split, int(name.group(1)), u.text, sp, seed)
        if job.key() != name.group(2):
            raise ValueError(f"{u.audio_filepath}: its corpus settings don't give its name (a corpus made by "
                             f"another version); got key {job.key()}")
        items.append((i, job, u.audio_filepath))
    times, pauses = {}, []
    # One fresh process per utterance: libespeak-ng keeps state between utterances.
    with multiprocessing.get_context("fork").Pool(workers, maxtasksperchild=1) as pool:
        for i, seconds, why, p in pool.imap_unordered(_truth, items):
            if seconds is None:
                skipped[why] = skipped.get(why, 0) + 1
            else:
                times[i] = seconds
                pauses += p
    return times, skipped, pauses


_search: BeamSearch | None = None  # inherited by the decoding workers (fork)


def _decode(log_probs):
    best = _search.hypotheses(log_probs)
    if not best:
        return "", (), np.zeros(0), np.zeros(0)
    hyps = _search.hypotheses(log_probs, prune_history=False)
    spans = best[0].spans
    return best[0].text, spans, nbest_posterior(best[0], hyps), frame_confidence(log_probs, spans)


def decode_split(log_probs, references, workers: int) -> dict:
    """Every transcript word of a split: its span, raw scores, whether it is right and which reference word."""
    t0 = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        decoded = pool.map(_decode, log_probs, chunksize=1)
    seconds = time.perf_counter() - t0
    out = {"utt": [], "ref_index": [], "start_step": [], "end_step": [], "posterior": [], "frame": [], "word": []}
    texts = []
    for u, ((text, spans, posterior, frame), ref) in enumerate(zip(decoded, references)):
        texts.append(text)
        hits = hypothesis_hits(ref.split(), [w for w, _, _ in spans])
        for (word, s, e), p, f, h in zip(spans, posterior, frame, hits):
            for key, value in (("utt", u), ("ref_index", -1 if h is None else h), ("start_step", s),
                               ("end_step", e), ("posterior", p), ("frame", f), ("word", word)):
                out[key].append(value)
    out = {k: np.array(v) for k, v in out.items()}
    out["correct"] = out["ref_index"] >= 0
    out["wer"] = wer(references, texts, spaced=True)
    out["decode_seconds"] = seconds
    return out


def time_errors(words: dict, truth: dict, clock: FrameClock, shift=(0.0, 0.0)) -> dict:
    """Predicted - true start and end (s) of the right words of utterances with known times."""
    starts, ends = [], []
    for u, r, s, e, ok in zip(words["utt"], words["ref_index"], words["start_step"], words["end_step"],
                              words["correct"]):
        if ok and int(u) in truth and truth[int(u)][int(r)] is not None:
            true_start, true_end = truth[int(u)][int(r)]
            starts.append(float(clock.start(s)) + shift[0] - true_start)
            ends.append(float(clock.start(e)) + shift[1] - true_end)
    return {"start": np.array(starts), "end": np.array(ends)}


def error_summary(errors: np.ndarray) -> dict:
    return {"words": len(errors), "median_abs_ms": 1000 * float(np.median(np.abs(errors))),
            "p90_abs_ms": 1000 * float(np.percentile(np.abs(errors), 90)),
            "median_ms": 1000 * float(np.median(errors)),
            "within_40ms": float(np.mean(np.abs(errors) <= TARGET_START_ERROR))}


def plot(path: str, tables: dict, errors: dict, scores: dict, n_words: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5.2), gridspec_kw={"width_ratios": [1.1, 1]})
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfectly calibrated")
    styles = {"posterior": ("tab:orange", "o", "n-best posterior, raw"),
              "frame": ("tab:gray", "s", "frames' mean best-token posterior, raw"),
              "calibrated": ("tab:blue", "D", "both, Platt-scaled on dev (the confidence)")}
    for name, (color, marker, label) in styles.items():
        rows = [r for r in tables[name] if r["words"]]
        s = scores[name]
        ax.plot([r["confidence"] for r in rows], [r["accuracy"] for r in rows], marker=marker, color=color,
                label=f"{label}: ECE {s['ece']:.3f}, AUROC {s['auroc']:.3f}",
                lw=2 if name == "calibrated" else 1.2)
        for r in rows if name == "calibrated" else []:
            ax.annotate(str(r["words"]), (r["confidence"], r["accuracy"]), textcoords="offset points",
                        xytext=(-6, 5) if r["confidence"] > 0.9 else (4, -11), ha="right" if r["confidence"] > 0.9
                        else "left", fontsize=7, color=color)
    ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="confidence (mean in each of 10 bins)",
           ylabel="share of the bin's words that are right",
           title=f"Word confidence on test ({n_words} words; numbers: words per bin)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    bins = np.arange(-200, 205, 10)
    for key, color in (("start", "tab:blue"), ("end", "tab:red")):
        e = 1000 * errors[key]
        bx.hist(np.clip(e, bins[0], bins[-1]), bins=bins, alpha=0.55, color=color, label=f"{key}: median |error| "
                f"{np.median(np.abs(e)):.0f} ms, {np.mean(np.abs(e) <= 40):.0%} within 40 ms")
    bx.axvspan(-40, 40, color="0.9", zorder=0)
    bx.set(xlabel="predicted - true time, ms (shifts fitted on dev; clipped at ±200)", ylabel="words",
           title=f"Word times on test ({len(errors['start'])} right words)")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    global _search
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model_dir", required=True, help="a trained model bundle")
    ap.add_argument("--data", required=True, help="the tiny corpus' folder (dev/test.clean.jsonl, speakers.json)")
    ap.add_argument("--lm", required=True, help="KenLM model from ds2-build-lm (its .unigrams.txt next to it)")
    ap.add_argument("--tune", required=True, help="ds2-tune's JSON: its best_alpha and best_beta are used")
    ap.add_argument("--beam_size", type=int, default=DecoderConfig.beam_size)
    ap.add_argument("--workers", type=int, default=2, help="processes for synthesis and decoding")
    ap.add_argument("--cache", help="keep the log-probabilities in this .npz (computed when it doesn't exist)")
    ap.add_argument("--out", required=True, help="write the fitted WordConfig here (JSON)")
    ap.add_argument("--report", help="write every figure here (JSON)")
    ap.add_argument("--png", help="draw the reliability plot and the time errors here")
    args = ap.parse_args()

    data = Path(args.data)
    tune = json.loads(Path(args.tune).read_text())
    splits = {s: read_manifest(data / f"{s}.clean.jsonl") for s in ("dev", "test")}
    t0 = time.perf_counter()
    truth, pauses = {}, []
    for split, utterances in splits.items():
        times, skipped, p = corpus_word_times(data, split, utterances, args.workers)
        truth[split] = times
        pauses += p
        known = sum(t is not None for ts in times.values() for t in ts)
        total = sum(len(utterances[i].text.split()) for i in times)
        print(f"{split}: word times in {len(times)} of {len(utterances)} utterances (left out: {skipped}), for {known} "
              f"of their {total} words (the others read as one with a neighbour)")
    print(f"ground truth in {time.perf_counter() - t0:.0f} s")
    gaps = np.array([onset - start for _, start, onset, _, _ in pauses if math.isfinite(onset)])
    silent = np.mean([inside <= quiet for _, _, _, inside, quiet in pauses])
    check = {"pauses": len(pauses), "silent_share": float(silent),
             "onset_minus_event_median_ms": 1000 * float(np.median(gaps)),
             "onset_minus_event_abs_p90_ms": 1000 * float(np.percentile(np.abs(gaps), 90))}
    print(f"check: {len(pauses)} pauses >= {PAUSE_CHECK * 1000:.0f} ms between words: {silent:.1%} silent (50 dB "
          f"under the peak) inside; the sound comes back {check['onset_minus_event_median_ms']:+.1f} ms (median) "
          f"from the next word's first phoneme event, 90% within {check['onset_minus_event_abs_p90_ms']:.1f} ms")

    cache = Path(args.cache) if args.cache else None
    if cache is not None and cache.is_file():
        stored = np.load(cache)
        log_probs = {s: [stored[f"{s}{i}"] for i in range(len(u))] for s, u in splits.items()}
    else:
        from deepspeech2.bundle import load_bundle  # TensorFlow, only without a cache
        from deepspeech2.inference import compute_log_probs

        bundle = load_bundle(args.model_dir)
        log_probs = {s: compute_log_probs(bundle, u, progress=False).log_probs for s, u in splits.items()}
        if any(lp is None for lps in log_probs.values() for lp in lps):
            raise SystemExit("some audio could not be read")
        if cache is not None:
            np.savez(cache, **{f"{s}{i}": lp for s, lps in log_probs.items() for i, lp in enumerate(lps)})
    from deepspeech2.feature_config import FeatureConfig
    from deepspeech2.model_config import load_model_config

    model_dir = Path(args.model_dir)
    clock = FrameClock.of(load_model_config(str(model_dir / "model_config.json")),
                          FeatureConfig.from_dict(json.loads((model_dir / "feature_config.json").read_text())))
    decoder = DecoderConfig(beam_size=args.beam_size, alpha=tune["best_alpha"], beta=tune["best_beta"],
                            lm_path=args.lm, num_workers=1)
    _search = BeamSearch(decoder, Vocabulary.load(model_dir / "vocab.txt"))
    words = {}
    for split, utterances in splits.items():
        words[split] = decode_split(log_probs[split], [u.text for u in utterances], args.workers)
        w = words[split]
        print(f"{split}: WER {w['wer']:.2%}, {len(w['correct'])} transcript words, {w['correct'].mean():.1%} right; "
              f"both searches {w['decode_seconds']:.0f} s")

    # Times: the shifts are the dev medians of truth - prediction.
    raw_dev = time_errors(words["dev"], truth["dev"], clock)
    shift = (-float(np.median(raw_dev["start"])), -float(np.median(raw_dev["end"])))
    shift = tuple(round(s, 3) for s in shift)
    timing = {}
    for split in ("dev", "test"):
        for name, s in (("unshifted", (0.0, 0.0)), ("shifted", shift)):
            e = time_errors(words[split], truth[split], clock, s)
            timing[f"{split}.{name}"] = {k: error_summary(v) for k, v in e.items()}
    test_errors = time_errors(words["test"], truth["test"], clock, shift)
    print(f"\nclock: {clock.step * 1000:.0f} ms a step, step 0 centred at {clock.origin * 1000:.0f} ms; shifts fitted "
          f"on dev: start {shift[0] * 1000:+.0f} ms, end {shift[1] * 1000:+.0f} ms")
    print(f"{'word times (right words)':<26} {'words':>6} {'start |err| median':>19} {'p90':>6} {'<=40ms':>7}"
          f" {'end |err| median':>17} {'p90':>6}")
    for key, t in timing.items():
        start, end = t["start"], t["end"]
        print(f"{key:<26} {start['words']:>6} {start['median_abs_ms']:>16.0f} ms {start['p90_abs_ms']:>6.0f}"
              f" {start['within_40ms']:>7.0%} {end['median_abs_ms']:>14.0f} ms {end['p90_abs_ms']:>6.0f}")

    # Confidence: Platt scaling fitted on dev, reported on test.
    def features(w, which):
        return {"posterior": logit(w["posterior"]), "frame": logit(w["frame"]),
                "both": np.stack([logit(w["posterior"]), logit(w["frame"])], axis=1)}[which]

    fits = {which: fit_platt(features(words["dev"], which), words["dev"]["correct"])
            for which in ("posterior", "frame", "both")}
    (w_post, w_frame), intercept = fits["both"]
    config = WordConfig(start_shift=shift[0], end_shift=shift[1], posterior_weight=round(float(w_post), 4),
                        frame_weight=round(float(w_frame), 4), intercept=round(intercept, 4))
    config.save(args.out)
    print(f"\nwrote {args.out}: {config}")
    confidence, tables = {}, {}
    for split in ("dev", "test"):
        w = words[split]
        y = w["correct"]
        scored = {"frame": w["frame"], "posterior": w["posterior"],
                  "calibrated": config.calibrate(w["posterior"], w["frame"])}
        for which in ("posterior", "frame"):
            (a,), b = fits[which]
            scored[f"{which}.platt"] = 1 / (1 + np.exp(-(a * features(w, which) + b)))
        confidence[split] = {name: {"auroc": auroc(s, y), "ece": expected_calibration_error(s, y),
                                    "mean": float(np.mean(s))} for name, s in scored.items()}
        confidence[split]["accuracy"] = float(np.mean(y))
        tables[split] = {name: calibration_table(s, y) for name, s in scored.items()}
    print(f"\n{'confidence':<22} {'dev AUROC':>9} {'dev ECE':>8} {'test AUROC':>11} {'test ECE':>9} {'test mean':>10}"
          f"   (test: {confidence['test']['accuracy']:.1%} of words right)")
    for name in confidence["dev"]:
        if name == "accuracy":
            continue
        d, t = confidence["dev"][name], confidence["test"][name]
        print(f"{name:<22} {d['auroc']:>9.3f} {d['ece']:>8.3f} {t['auroc']:>11.3f} {t['ece']:>9.3f} {t['mean']:>10.3f}")
    print(f"\ntest reliability ({ECE_BINS} bins): words / mean confidence / share right")
    print(f"{'bin':<10}" + "".join(f"{name:>26}" for name in ("posterior", "frame", "calibrated")))
    for b in range(ECE_BINS):
        cells = []
        for name in ("posterior", "frame", "calibrated"):
            r = tables["test"][name][b]
            cells.append(f"{r['words']:>6} {r['confidence']:>9.3f} {r['accuracy']:>9.3f}" if r["words"]
                         else f"{r['words']:>6} {'-':>9} {'-':>9}")
        print(f"{b / ECE_BINS:.1f}-{(b + 1) / ECE_BINS:.1f}   " + "".join(f"{c:>26}" for c in cells))

    if args.png:
        plot(args.png, tables["test"], test_errors, confidence["test"], len(words["test"]["correct"]))
        print(f"wrote {args.png}")
    result = {"decoder": {"alpha": decoder.alpha, "beta": decoder.beta, "beam_size": decoder.beam_size,
                          "lm": args.lm},
              "clock": {"step": clock.step, "origin": clock.origin}, "word_config": config.to_dict(),
              "ground_truth": {s: len(t) for s, t in truth.items()}, "check": check, "timing": timing,
              "confidence": confidence, "tables": tables,
              "wer": {s: w["wer"] for s, w in words.items()}}
    if args.report:
        write_json(args.report, result)
        print(f"wrote {args.report}")
    print(json.dumps({"timing_test_shifted": timing["test.shifted"], "confidence_test": confidence["test"]}))


if __name__ == "__main__":
    main()
