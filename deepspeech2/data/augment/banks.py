"""The clips `noise` and `impulse` draw from: every clip a manifest lists, loaded once and held in memory.

Noise and impulse clips are loaded once, when the config is parsed, into one flat float32 CPU tensor (no
padding) that the tf.data functions capture (by reference: never copied per utterance). Noise manifests
are small: at most `MAX_BANK_SECONDS` of audio (230 MB at 16 kHz) per component, held in memory.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from deepspeech2.data.augment.draws import randint
from deepspeech2.data.manifest import load_utterance, read_manifest

logger = logging.getLogger(__name__)

MAX_BANK_SECONDS = 3600.0  # one hour of noise or IRs per component: 230 MB float32 in memory
IMPULSE_TAIL_DB = 60.0  # IRs are cut where the energy still to come is 60 dB down (the RT60 definition)


def trim_tail(h: np.ndarray, tail_db: float = IMPULSE_TAIL_DB) -> np.ndarray:
    """`h` up to where the energy still to come (Schroeder's backward integral) is `tail_db` below the
    total; never before its peak. An all-zero `h` is returned whole.

    Args:
        h: float (taps,).
    Returns:
        `h[:k]`, k <= taps.
    """
    energy = np.cumsum(np.square(h[::-1], dtype=np.float64))[::-1]  # energy[k] = sum(h[k:] ** 2)
    if h.size == 0 or energy[0] == 0:
        return h
    k = int(np.argmax(energy < energy[0] * 10.0 ** (-tail_db / 10.0))) or h.size  # first k below, if any
    return h[:max(k, int(np.argmax(np.abs(h))) + 1)]


class Bank:
    """Clips from a manifest, concatenated in one flat float32 tensor with offsets and lengths; `tail_db`
    trims each clip with `trim_tail`."""

    def __init__(self, manifest_path: str, sample_rate: int, what: str, tail_db: float | None = None):
        utterances = read_manifest(manifest_path)  # FileNotFoundError / ValueError name the file and line
        clips, skipped = [], 0
        for u in utterances:
            try:
                wav = load_utterance(u, sample_rate)  # the one offset/duration rule (manifest.audio_span)
            except (ValueError, FileNotFoundError) as e:
                skipped += 1
                logger.warning("skipping %s clip: %s", what, e)
                continue
            if tail_db is not None:
                wav = trim_tail(wav, tail_db)
            if wav.size:
                clips.append(wav)
        if skipped:
            logger.warning("%d of %d %s clips in `%s` could not be read and were skipped",
                           skipped, len(utterances), what, manifest_path)
        if not clips:
            raise ValueError(f"`{manifest_path}` has no readable, non-empty {what} clips "
                             f"({len(utterances)} lines, {skipped} unreadable)")
        total = sum(c.size for c in clips)
        if total > MAX_BANK_SECONDS * sample_rate:
            raise ValueError(f"`{manifest_path}` holds {total / sample_rate / 3600:.1f} h of {what}; "
                             f"at most {MAX_BANK_SECONDS / 3600:.1f} h is held in memory; use fewer clips")
        self.lengths = np.array([c.size for c in clips], np.int32)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int32)
        # An eager CPU tensor, which a tf.data function captures by reference. Built as a graph constant
        # inside the map function, the whole bank is copied on every call (1.4 ms for 2 min of noise).
        with tf.init_scope(), tf.device("/CPU:0"):
            self.samples = tf.constant(np.concatenate(clips).astype(np.float32))  # (total samples,)

    def pick(self, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The clip a uniform draw `u` in [0, 1) selects: `(flat samples, offset, length)` as tensors."""
        i = randint(u, len(self.lengths) - 1)
        return self.samples, tf.gather(self.offsets, i), tf.gather(self.lengths, i)
