"""Evaluation (`ds2-eval`): decode manifests with a trained model bundle and score them against their
transcripts.

    manifests -> audio -> features -> acoustic model (`deepspeech2.inference`, batched by length)
              -> decoder (`deepspeech2.decode`: greedy or beam search with a KenLM model)
              -> WER and CER with substitution, deletion and insertion counts (`deepspeech2.metrics`)

The report holds every utterance's reference, hypothesis and errors, the totals, the same figures per
group of any manifest key (`speaker`, `environment` for CHiME-4, an accent...: the per-group tables DS2
shows for VoxForge accents and CHiME noise), the decoder's settings, and the real-time factor split
into audio loading, features + acoustic model, and decoding. Utterances whose audio can't be read, or is
longer than `EvalConfig.max_seconds` (refused by the header, with how to cut it), are skipped, listed with
the reason and counted in the totals: one bad line never ends a long evaluation.

The headline metric follows the vocabulary: WER for a vocabulary with a space (English), CER for one
without (Mandarin, DS2 §6.2). Both are always in the report, scored as the trainer's dev set and ds2-tune
score them (`deepspeech2.metrics`): without word boundaries a "word" is a character, so Mandarin WER == CER.
Reference characters the model's vocabulary lacks (which it can only answer with `<unk>`, or not at all) are
counted: they are errors no decoder can avoid.

`EvalConfig.channel` "g711" scores the audio as heard over a phone (`deepspeech2.data.telephone`: 8 kHz,
300-3400 Hz, G.711 μ-law, back to the model's rate): each utterance is read, sent through the channel and
written to a temporary folder (at the model's rate, 16-bit: 115 MB an hour at 16 kHz) before the model reads it;
the report still names the original files.

`EvalConfig.words` (a `deepspeech2.decode.words.WordConfig`, beam search only) adds every transcript word's start,
end, confidence and whether it is right to the report, and how well the confidences rank and match the right words
(AUROC, expected calibration error) to its totals (`word_confidence`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deepspeech2.bundle import load_bundle
from deepspeech2.data.manifest import Utterance, read_manifest
from deepspeech2.data.telephone import telephone_copies
from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.decode.words import FrameClock, WordConfig, confidence_summary, decode_words
from deepspeech2.fileio import write_json
from deepspeech2.inference import MAX_SECONDS, compute_log_probs
from deepspeech2.metrics import Errors, char_errors, hypothesis_hits, summarize, word_errors, word_tokens
from deepspeech2.progress import progress_bar
from deepspeech2.vocab import UNK_CHAR, Vocabulary

logger = logging.getLogger(__name__)

DECODE_CHUNK = 64  # utterances per decoder call (the progress bar's step)
NO_GROUP = "(none)"  # the group of a line that lacks the `group_by` key
CHANNELS = ("none", "g711")  # what the audio goes through before the model: nothing, or a G.711 phone line


@dataclass(frozen=True)
class EvalConfig:
    """What `evaluate` scores, and how."""

    model_dir: str  # a model bundle (a ds2-train workdir's model/)
    manifests: tuple[str, ...]  # JSON-lines manifests to score (their utterances are pooled)
    decoder: DecoderConfig = field(default_factory=lambda: DecoderConfig(kind="greedy"))
    group_by: tuple[str, ...] = ()  # manifest keys to break the totals down by (speaker, environment, ...)
    batch_size: int = 16  # utterances per acoustic-model call
    max_utterances: int = 0  # > 0: score only the first N utterances of the pooled manifests
    max_seconds: float | None = MAX_SECONDS  # longer utterances are skipped unread (None: no limit)
    report_path: str = ""  # where to write the JSON report ("" = none)
    progress: bool = True  # progress bars
    channel: str = "none"  # "g711": score the audio as heard over a phone (`deepspeech2.data.telephone`)
    words: WordConfig | None = None  # set: each word's times and confidence in the report, scored (beam search only)

    def __post_init__(self):
        if self.words is not None and self.decoder.kind != "beam":
            raise ValueError("`words` (word times and confidences) need the beam search, not `decoder.kind`="
                             f"{self.decoder.kind!r}")
        if self.channel not in CHANNELS:
            raise ValueError(f"`channel` must be one of {', '.join(CHANNELS)}, got {self.channel!r}")
        if not self.manifests:
            raise ValueError("`manifests` is empty; give at least one manifest to evaluate")
        if self.batch_size < 1:
            raise ValueError(f"`batch_size` must be >= 1, got {self.batch_size!r}")
        if self.max_utterances < 0:
            raise ValueError(f"`max_utterances` must be >= 0 (0: all), got {self.max_utterances!r}")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"`max_seconds` must be > 0 (or None: no limit), got {self.max_seconds!r}")


def evaluate(config: EvalConfig) -> dict:
    """Decode and score `config.manifests`; returns the report (also written to `config.report_path`).

    Raises:
        FileNotFoundError: the bundle, a manifest or the LM is missing.
        ValueError: a bad manifest or bundle, or no utterance whose audio could be read.
    """
    bundle = load_bundle(config.model_dir)
    utterances = _read_utterances(config)
    acoustic, channel_seconds = _log_probs(config, bundle, utterances)
    ok = [i for i, lp in enumerate(acoustic.log_probs) if lp is not None]
    if not ok:
        raise ValueError(f"none of the {len(utterances)} utterances' audio could be read (first problem: "
                         f"{acoustic.skipped[0][1]})")
    hypotheses, timed, decode_seconds = _decode(config, bundle, acoustic, ok, utterances)

    spaced = bundle.vocab.spaced  # English separates words; Mandarin (a character vocabulary) doesn't
    scored = [utterances[i] for i in ok]
    references = [" ".join(u.text.split()) for u in scored]
    words = [word_errors(r, h, spaced=spaced) for r, h in zip(references, hypotheses)]
    chars = [char_errors(r, h, spaced=spaced) for r, h in zip(references, hypotheses)]
    per_utterance = [{"audio_filepath": u.audio_filepath, "offset": u.offset, "duration": u.duration,
                      "reference": ref, "hypothesis": hyp, "word_errors": w.edits, "words": w.reference,
                      "char_errors": c.edits, "chars": c.reference, **{key: _key(u, key) for key in config.group_by}}
                     for u, ref, hyp, w, c in zip(scored, references, hypotheses, words, chars)]
    right = []  # with `config.words`: whether each timed word is right (aligned to an equal reference word)
    for u, ref, timed_words in zip(per_utterance, references, timed):
        hits = hypothesis_hits(word_tokens(ref, spaced=spaced), [w.word for w in timed_words])
        u["word_times"] = [{**w.to_dict(), "right": h is not None} for w, h in zip(timed_words, hits)]
        right += [h is not None for h in hits]
    totals = summarize(words, chars)
    audio = acoustic.audio_seconds
    report = {
        "model_dir": str(config.model_dir),
        "manifests": [str(m) for m in config.manifests],
        "decoder": config.decoder.to_dict(),
        "channel": config.channel,
        "language_spaced": spaced,
        "headline_metric": bundle.vocab.metric,
        "totals": {**totals, "skipped": len(acoustic.skipped), "scored": len(ok)},
        "word_confidence": None if config.words is None else {
            "config": config.words.to_dict(),
            **confidence_summary([w.confidence for ws in timed for w in ws], right)},
        "out_of_vocabulary": out_of_vocabulary(references, hypotheses, bundle.vocab),
        "groups": {key: _groups(per_utterance, words, chars, key) for key in config.group_by},
        "timing": {
            "audio_seconds": round(audio, 3),
            "load_seconds": round(acoustic.load_seconds, 3),
            "channel_seconds": round(channel_seconds, 3),  # the phone line's simulation, outside the RTF
            "acoustic_seconds": round(acoustic.model_seconds, 3),
            "decode_seconds": round(decode_seconds, 3),
            "rtf_acoustic": acoustic.model_seconds / audio if audio else None,  # features + acoustic model
            "rtf_decode": decode_seconds / audio if audio else None,
            "rtf_total": (acoustic.load_seconds + acoustic.model_seconds + decode_seconds) / audio if audio else None,
        },
        "skipped": [{"audio_filepath": utterances[i].audio_filepath, "reason": why} for i, why in acoustic.skipped],
        "utterances": per_utterance,
    }
    if config.report_path:
        write_json(config.report_path, report)
    return report


def _read_utterances(config: EvalConfig) -> list[Utterance]:
    """The manifests' utterances, at most `max_utterances`, after checking that each `group_by` key occurs."""
    utterances: list[Utterance] = []
    for manifest in config.manifests:
        utterances += read_manifest(manifest)
    if config.max_utterances:
        utterances = utterances[:config.max_utterances]
    if not utterances:
        raise ValueError(f"the manifests {list(config.manifests)} hold no utterances")
    for key in config.group_by:
        if not any(_key(u, key) != NO_GROUP for u in utterances):
            raise ValueError(f"`group_by` key {key!r} appears in no manifest line; keys there: "
                             f"{sorted(_keys(utterances))}")
    return utterances


def _log_probs(config: EvalConfig, bundle, utterances: list[Utterance]) -> tuple:
    """The acoustic model's output for each utterance (`inference.compute_log_probs`), through the phone line first
    when `config.channel` says so; and the seconds the phone line's simulation took."""
    channel_seconds = 0.0
    with (tempfile.TemporaryDirectory(prefix="ds2-eval-g711-") if config.channel == "g711"
          else contextlib.nullcontext()) as folder:
        heard = utterances
        if folder is not None:
            t0 = time.perf_counter()
            heard = telephone_copies(utterances, folder, bundle.feature_config.sample_rate, config.max_seconds,
                                     progress=config.progress)
            channel_seconds = time.perf_counter() - t0
        acoustic = compute_log_probs(bundle, heard, config.batch_size, progress=config.progress,
                                     max_seconds=config.max_seconds)
    return acoustic, channel_seconds


def _decode(config: EvalConfig, bundle, acoustic, ok: list[int], utterances: list[Utterance]
            ) -> tuple[list[str], list[list], float]:
    """The transcripts of the utterances `ok` lists, with each one's `Word`s when `config.words` is set (else no
    list), and the seconds decoding took."""
    hypotheses: list[str] = []
    timed: list[list] = []  # with `config.words`: each utterance's `Word`s
    clock = FrameClock.of(bundle.model_config, bundle.feature_config)
    t0 = time.perf_counter()
    with Decoder(config.decoder, bundle.vocab) as decoder:
        bar = progress_bar(total=len(ok), desc="decode", unit="utt", show=config.progress)
        for start in range(0, len(ok), DECODE_CHUNK):
            chunk = [acoustic.log_probs[i] for i in ok[start:start + DECODE_CHUNK]]
            if config.words is None:
                hypotheses += decoder.decode_utterances(chunk)
            else:  # both searches of `decode_words`, in this process
                for i in ok[start:start + DECODE_CHUNK]:
                    text, timed_words = decode_words(decoder.search, acoustic.log_probs[i], clock, config.words,
                                                     duration=utterances[i].duration or None)
                    hypotheses.append(text)
                    timed.append(timed_words)
            bar.update(len(chunk))
        bar.close()
    decode_seconds = time.perf_counter() - t0
    return hypotheses, timed, decode_seconds


def out_of_vocabulary(references: Sequence[str], hypotheses: Sequence[str], vocab: Vocabulary) -> dict:
    """Reference characters `vocab` lacks, and the `<unk>`s the decoder wrote.

    Returns:
        `chars` (reference characters outside the vocabulary, spaces aside), `share` (of all reference
        characters), `distinct`, `most_common` (up to 20 `[char, count]`), `utterances` (references with
        at least one) and `unk_in_hypotheses` (`UNK_CHAR`s decoded).
    """
    counts = [vocab.unknown(r.replace(" ", "")) for r in references]
    total = sum(counts, start=collections.Counter())
    chars = sum(len(r.replace(" ", "")) for r in references)
    return {"chars": sum(total.values()), "share": sum(total.values()) / chars if chars else None,
            "distinct": len(total), "most_common": [[c, n] for c, n in total.most_common(20)],
            "utterances": sum(1 for c in counts if c), "unk_in_hypotheses": sum(h.count(UNK_CHAR) for h in hypotheses)}


def format_report(report: dict, examples: int = 0) -> str:
    """The report as the text ds2-eval prints: the headline metric first (CER for Mandarin), the other, the
    characters outside the vocabulary, per-group tables, timing."""
    t, tm = report["totals"], report["timing"]
    decoder = report["decoder"]
    how = "greedy" if decoder["kind"] == "greedy" else (
        f"beam {decoder['beam_size']}" + (f", LM {Path(decoder['lm_path']).name} alpha {decoder['alpha']:g} "
                                          f"beta {decoder['beta']:g}" if decoder.get("lm_path") else ", no LM"))
    wer_line = (f"WER {t['wer']:.2%}  ({t['word_substitutions']} sub, {t['word_deletions']} del, "
                f"{t['word_insertions']} ins / {t['words']} words"
                + ("; no word boundaries: characters as words)" if not report["language_spaced"] else ")"))
    cer_line = (f"CER {t['cer']:.2%}  ({t['char_substitutions']} sub, {t['char_deletions']} del, "
                f"{t['char_insertions']} ins / {t['chars']} chars)")
    headline = report.get("headline_metric", "wer")
    over = ", over a G.711 phone line" if report.get("channel", "none") == "g711" else ""
    lines = [f"{t['scored']} utterances ({tm['audio_seconds'] / 60:.1f} min of audio{over}), {how}"
             + (f"; {t['skipped']} skipped (unreadable or too long, listed in the report)" if t["skipped"] else ""),
             *([wer_line, cer_line] if headline == "wer" else [cer_line, wer_line])]
    oov = report.get("out_of_vocabulary")
    if oov and oov["chars"]:
        lines.append(f"{oov['chars']} reference characters ({oov['share']:.2%}, {oov['distinct']} distinct, in "
                     f"{oov['utterances']} utterances) are outside the vocabulary; {oov['unk_in_hypotheses']} "
                     f"<unk> ({UNK_CHAR}) decoded")
    wc = report.get("word_confidence")
    if wc and wc["words"]:
        lines.append(f"word confidence: {wc['words']} words, {wc['right']:.1%} right, mean confidence "
                     f"{wc['mean_confidence']:.3f}; AUROC " + ("-" if wc["auroc"] is None else f"{wc['auroc']:.3f}")
                     + f", ECE {wc['ece']:.3f} ({len(wc['table'])} bins)")
    for key, groups in report["groups"].items():
        width = max([len(key)] + [len(g) for g in groups])
        first, second = ("wer", "cer") if headline == "wer" else ("cer", "wer")
        lines += ["", f"{key:<{width}}  {'utts':>5}  {first.upper():>7}  {second.upper():>7}"]
        for name, g in groups.items():
            lines.append(f"{name:<{width}}  {g['utterances']:>5}  {g[first]:>7.2%}  {g[second]:>7.2%}")
    if tm["rtf_total"] is not None:
        lines += ["", f"real-time factor {tm['rtf_total']:.4f}: audio loading {tm['load_seconds']:.1f} s, "
                      f"features + acoustic model {tm['acoustic_seconds']:.1f} s (RTF {tm['rtf_acoustic']:.4f}), "
                      f"decoder {tm['decode_seconds']:.1f} s (RTF {tm['rtf_decode']:.4f})"]
    for u in report["utterances"][:examples]:
        lines += [f"  ref: {u['reference']}", f"  hyp: {u['hypothesis']}"]
    return "\n".join(lines)


def _groups(per_utterance: list[dict], words: list[Errors], chars: list[Errors], key: str) -> dict:
    members: dict[str, list[int]] = {}
    for i, u in enumerate(per_utterance):
        members.setdefault(u[key], []).append(i)
    return {name: summarize([words[i] for i in idx], [chars[i] for i in idx]) for name, idx in sorted(members.items())}


def _key(u: Utterance, key: str) -> str:
    if key in ("speaker", "language"):
        value = getattr(u, key)
    else:
        value = u.extra.get(key)
    return NO_GROUP if value is None or value == "" else str(value)


def _keys(utterances: Sequence[Utterance]) -> set[str]:
    keys = {k for u in utterances for k in u.extra}
    return keys | {k for k in ("speaker", "language") if any(getattr(u, k) for u in utterances)}


def load_report(path: str | os.PathLike) -> dict:
    """Read a report written by `evaluate`."""
    return json.loads(Path(path).read_text(encoding="utf-8"))

