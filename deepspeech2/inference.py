"""Manifest -> acoustic log-probabilities, with a trained model bundle. Shared by ds2-tune, ds2-eval and ds2-infer.

Audio is read outside the graph (`deepspeech2.audio.load_audio`, any format soundfile reads, offsets
honoured), batched by similar duration so padding stays small, and run through the same features
(`deepspeech2.features.featurize`) and model the trainer used. The decoders take it from there
(`deepspeech2.decode`), without importing any of this.

A whole utterance goes through the model at once, so a recording longer than `MAX_SECONDS` is refused by its
header, before any of it is read, with the command that cuts it into pieces.
"""

from __future__ import annotations

import logging
import os
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from deepspeech2.bundle import Bundle, load_bundle
from deepspeech2.data.manifest import TooLongError, Utterance, load_utterance, read_manifest, sample_utterances
from deepspeech2.decode.words import FrameClock, WordConfig, decode_words
from deepspeech2.features import featurize
from deepspeech2.progress import progress_bar
from deepspeech2.vocab import Vocabulary

logger = logging.getLogger(__name__)

# Longest utterance transcribed, seconds. The model takes an utterance whole: its features and activations grow
# with its length (10 minutes are 60,000 feature frames) and a batch pads to its longest. Training keeps
# utterances under `deepspeech2.audio.MAX_DURATION`, so the model never learned from longer context either.
MAX_SECONDS = 600.0
PIECE_SECONDS = 30  # the pieces `_cut_hint` suggests


def _cut_hint(e: TooLongError) -> str:
    """`e` with how to cut the recording into pieces the model takes."""
    return (f"{e} (`max_seconds`); cut it into {PIECE_SECONDS} s pieces first: `sox {shlex.quote(e.path)} "
            f"piece.wav trim 0 {PIECE_SECONDS} : newfile : restart` writes piece001.wav, piece002.wav, ...")


@dataclass(frozen=True)
class AcousticOutputs:
    """The model's outputs for a list of utterances, in the list's order."""

    log_probs: list[np.ndarray | None]  # per utterance `(output_steps, vocab_size)` float32; None: unreadable
    skipped: list[tuple[int, str]]  # (index in the list, why) for each utterance whose audio couldn't be read
    audio_seconds: float = 0.0  # audio of the readable utterances
    load_seconds: float = 0.0  # wall time reading and resampling audio
    model_seconds: float = 0.0  # wall time in features, normalization and the acoustic model

    @property
    def num_ok(self) -> int:
        return sum(lp is not None for lp in self.log_probs)


def compute_log_probs(bundle: Bundle, utterances: Sequence[Utterance], batch_size: int = 16,
                      progress: bool = True, max_seconds: float | None = MAX_SECONDS,
                      forward=None) -> AcousticOutputs:
    """Run the model over `utterances` and return each one's log-probabilities over its valid steps.

    Utterances are batched in order of duration (less padding; the outputs come back in the input order).
    One whose audio is missing, can't be decoded or is longer than `max_seconds` is skipped, logged and listed
    in `skipped`.

    Args:
        bundle: a loaded model bundle (`deepspeech2.bundle.load_bundle`).
        utterances: manifest lines (`deepspeech2.data.manifest.read_manifest`).
        batch_size: utterances per model call.
        progress: show a progress bar (`deepspeech2.progress`).
        max_seconds: longer audio is refused by its header, unread, with how to cut it (None: no limit).
        forward: the acoustic model to run, with `acoustic_model`'s contract; None: `acoustic_model(bundle)`
            (another: `deepspeech2_export.tflite.tflite_acoustic_model`, a TFLite model behind the same features).

    Returns:
        The log-probabilities (None for skipped utterances) and the skipped ones with their reasons.

    Raises:
        ValueError: `batch_size` < 1.
    """
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1, got {batch_size!r}")
    out: list[np.ndarray | None] = [None] * len(utterances)
    skipped: list[tuple[int, str]] = []
    forward = acoustic_model(bundle) if forward is None else forward
    audio = load_time = model_time = 0.0
    order = sorted(range(len(utterances)), key=lambda i: utterances[i].duration)
    rate = bundle.feature_config.sample_rate
    bar = progress_bar(total=len(utterances), desc="acoustic model", unit="utt", show=progress)
    for start in range(0, len(order), batch_size):
        waves, indices = [], []
        t0 = time.perf_counter()
        for i in order[start:start + batch_size]:
            u = utterances[i]
            try:
                # A whole-file line reads the whole file, a segment (offset set, even 0) its own span, with
                # the tolerance every data tool uses.
                waves.append(load_utterance(u, sample_rate=rate, max_seconds=max_seconds))
                indices.append(i)
            except (ValueError, FileNotFoundError) as e:
                why = _cut_hint(e) if isinstance(e, TooLongError) else str(e)
                logger.warning("skipping utterance %d: %s", i, why)
                skipped.append((i, why))
        load_time += time.perf_counter() - t0
        bar.update(len(order[start:start + batch_size]))
        if not waves:
            continue
        lengths = np.array([len(w) for w in waves], np.int32)
        batch = np.zeros((len(waves), lengths.max()), np.float32)
        for k, w in enumerate(waves):
            batch[k, :len(w)] = w
        t0 = time.perf_counter()
        lp, steps = (np.asarray(x) for x in forward(batch, lengths))
        model_time += time.perf_counter() - t0
        audio += float(lengths.sum()) / rate
        for k, i in enumerate(indices):
            out[i] = lp[k, :steps[k]]
    bar.close()
    if skipped:
        logger.warning("%d of %d utterances skipped: their audio could not be read or is too long", len(skipped),
                       len(utterances))
    return AcousticOutputs(log_probs=out, skipped=skipped, audio_seconds=audio, load_seconds=load_time,
                           model_seconds=model_time)


def acoustic_model(bundle: Bundle):
    """`(waveforms (batch, samples) float32, lengths (batch,) int32) -> (log_probs, output_lengths)`: the
    bundle's features, normalization and model as one graph, traced once for every batch shape."""

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.int32)])
    def forward(waveforms, lengths):
        features, frames = featurize(waveforms, lengths, bundle.feature_config, bundle.normalizer)
        outputs = bundle.model({"features": features, "feature_lengths": frames}, training=False)
        return tf.nn.log_softmax(outputs["logits"]), outputs["output_lengths"]

    return forward


@dataclass(frozen=True)
class ManifestOutputs:
    """A manifest's log-probabilities with what decoding and scoring need next to them."""

    log_probs: list[np.ndarray]  # per readable utterance `(output_steps, vocab_size)` float32
    references: list[str]  # their transcripts, as in the manifest (already normalized by the importers)
    utterances: list[Utterance]  # their manifest lines
    vocab: Vocabulary  # the model's output vocabulary
    num_skipped: int  # utterances whose audio couldn't be read or was too long


def manifest_log_probs(model_dir: str | os.PathLike, manifest: str | os.PathLike, max_utterances: int = 0,
                       batch_size: int = 16, seed: int = 0, progress: bool = True,
                       max_seconds: float | None = MAX_SECONDS) -> ManifestOutputs:
    """Load a model bundle and compute the log-probabilities of a manifest's utterances.

    Args:
        model_dir: the bundle folder (`deepspeech2.bundle.load_bundle`).
        manifest: a JSON-lines manifest.
        max_utterances: use a random sample of this many utterances (seeded by `seed`; short and long
            alike, unlike the first lines or the first batches); 0 uses all.
        batch_size: utterances per model call.
        seed: the sample's seed.
        progress: show a progress bar.
        max_seconds: skip longer utterances (`compute_log_probs`).

    Returns:
        The readable utterances' log-probabilities, references and manifest lines, in manifest order.

    Raises:
        FileNotFoundError: the bundle or the manifest is missing.
        ValueError: a bad bundle or manifest, `max_utterances` < 0, or no readable utterance.
    """
    if max_utterances < 0:
        raise ValueError(f"`max_utterances` must be >= 0 (0: all), got {max_utterances!r}")
    bundle = load_bundle(model_dir)
    utterances = sample_utterances(read_manifest(manifest), max_utterances, seed)
    outputs = compute_log_probs(bundle, utterances, batch_size=batch_size, progress=progress, max_seconds=max_seconds)
    ok = [i for i, lp in enumerate(outputs.log_probs) if lp is not None]
    if not ok:
        raise ValueError(f"`{manifest}`: none of its {len(utterances)} utterances' audio could be read")
    return ManifestOutputs(log_probs=[outputs.log_probs[i] for i in ok],
                           references=[" ".join(utterances[i].text.split()) for i in ok],
                           utterances=[utterances[i] for i in ok], vocab=bundle.vocab,
                           num_skipped=len(outputs.skipped))


@dataclass(frozen=True)
class Transcript:
    """One input's transcript, or why it has none."""

    source: str  # the audio file (or manifest line's file)
    text: str | None  # None: the audio couldn't be read, or was too long
    error: str | None = None  # why not
    reference: str | None = None  # the manifest's transcript, when transcribing manifest lines
    words: list | None = None  # `deepspeech2.decode.words.Word`s (times, confidence) when asked for


def transcribe(bundle: Bundle, utterances: Sequence[Utterance], decoder, batch_size: int = 16,
               progress: bool = False, max_seconds: float | None = MAX_SECONDS,
               words: WordConfig | None = None, forward=None) -> list[Transcript]:
    """Transcribe utterances (audio files as `Utterance`s, or manifest lines) with a `deepspeech2.decode.Decoder`.

    An input whose audio can't be read, or is longer than `max_seconds`, gets its error instead of a transcript;
    the others are still transcribed. Results come in the input order. With `words` (the decoder must be a beam
    search), each transcript comes with its words' times and confidences (`decode_words`, in this process).
    `forward` replaces the bundle's Keras model (`compute_log_probs`).
    """
    if words is not None and decoder.search is None:
        raise ValueError("word times and confidences need the beam search (`kind`='beam'), not greedy decoding")
    acoustic = compute_log_probs(bundle, utterances, batch_size, progress=progress, max_seconds=max_seconds,
                                 forward=forward)
    ok = [i for i, lp in enumerate(acoustic.log_probs) if lp is not None]
    timed = {}
    if words is not None:
        clock = FrameClock.of(bundle.model_config, bundle.feature_config)
        timed = {i: decode_words(decoder.search, acoustic.log_probs[i], clock, words, duration=utterances[i].duration
                                 or None) for i in ok}
        texts = {i: text for i, (text, _) in timed.items()}
    else:
        texts = dict(zip(ok, decoder.decode_utterances([acoustic.log_probs[i] for i in ok]))) if ok else {}
    errors = dict(acoustic.skipped)
    return [Transcript(u.audio_filepath, texts.get(i), errors.get(i), u.text or None,
                       timed[i][1] if i in timed else None) for i, u in enumerate(utterances)]


def file_utterances(paths: Sequence[str | os.PathLike]) -> list[Utterance]:
    """Audio files as whole-file utterances (no transcript). Their duration orders the batches; a file
    whose header can't be read gets 0 and its error shows when it is decoded."""
    from deepspeech2.audio import audio_info

    out = []
    for p in paths:
        try:
            rate, _, frames = audio_info(p)
            seconds = frames / rate
        except (ValueError, FileNotFoundError):
            seconds = 0.0
        out.append(Utterance(str(p), seconds, ""))
    return out
