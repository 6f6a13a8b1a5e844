"""TFRecord shards: int16 PCM + transcript + label ids per record, with a JSON index.

Layout of `ds2-make-shards --out DIR --num_shards N`:
    DIR/shard-00000-of-0000N.tfrecord ...   one tf.train.Example per utterance, sorted by duration
    DIR/index.json                          counts; per shard its size, per record its duration, samples and
                                            CTC label steps; the vocabulary; characters encoded as <unk>;
                                            skipped lines and utterances with the reason
Each shard is written to a temp file and renamed, and the index is written last, so a crash never
leaves a half shard that looks finished. A re-run that rewrites removes the old index first: killed
half-way, it leaves new shards and old ones side by side and no index, which training refuses
(`load_index`), rather than the old index describing the mix. Re-running with the same manifest,
vocabulary and settings is a no-op (the index records a fingerprint of all three, and of the format
version). A run holds an exclusive lock on DIR (DIR/.lock): a second run on the same DIR stops at once with an
error naming the first one's PID.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import errno
import hashlib
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from deepspeech2.audio import MAX_DURATION, PCM_SCALE, SAMPLE_RATE, to_pcm16
from deepspeech2.data.manifest import TooLongError, Utterance, load_utterance, open_manifest, parse_line
from deepspeech2.features import FeatureConfig
from deepspeech2.fileio import atomic_path, exclusive_lock, write_json
from deepspeech2.geometry import ctc_label_steps, output_steps
from deepspeech2.model_config import ModelConfig, model_name
from deepspeech2.progress import progress_bar
from deepspeech2.vocab import Vocabulary

INDEX = "index.json"
# Version of the index and record layout, part of the fingerprint so that a re-run rewrites older shards.
# 2: per-record `num_samples` and `label_steps` (label ids), skipped entries carry their manifest line.
FORMAT = 2

# The record schema, shared by the writer, the reader and the input pipeline.
FEATURE_SPEC = {
    "audio": tf.io.FixedLenFeature([], tf.string),  # little-endian int16 PCM, mono
    "sample_rate": tf.io.FixedLenFeature([], tf.int64),
    "num_samples": tf.io.FixedLenFeature([], tf.int64),
    "duration": tf.io.FixedLenFeature([], tf.float32),
    "text": tf.io.FixedLenFeature([], tf.string),
    "labels": tf.io.VarLenFeature(tf.int64),
    "id": tf.io.FixedLenFeature([], tf.string),
    "speaker": tf.io.FixedLenFeature([], tf.string, default_value=b""),
}


@dataclass(frozen=True)
class ShardConfig:
    """How `make_shards` writes a manifest to TFRecords."""

    out_dir: str  # output folder (shards + index.json)
    num_shards: int = 8  # files to spread utterances over (>= the number of training workers)
    sample_rate: int = SAMPLE_RATE  # audio is resampled to this if it differs
    seed: int = 0  # utterances are dealt to shards in a seeded shuffled order, balancing durations
    num_workers: int = 4  # decoding threads (soundfile releases the GIL)
    model: ModelConfig | None = None  # given: utterances CTC can't fit through this model are skipped
    feature_config: FeatureConfig = FeatureConfig()  # the model's features (frames per sample); with `model`
    max_duration: float | None = MAX_DURATION  # seconds; longer utterances are skipped unread (training drops
    # them: keep this >= ds2-train's --max_duration); None keeps all

    def __post_init__(self):
        if self.num_shards < 1:
            raise ValueError(f"`num_shards` must be >= 1, got {self.num_shards}")
        if self.max_duration is not None and not self.max_duration > 0:
            raise ValueError(f"`max_duration` must be > 0 (or None: no limit), got {self.max_duration!r}")
        if self.model is not None and self.feature_config.sample_rate != self.sample_rate:
            raise ValueError(f"`feature_config.sample_rate` ({self.feature_config.sample_rate}) must equal the "
                             f"shards' `sample_rate` ({self.sample_rate})")


def shard_name(i: int, n: int) -> str:
    return f"shard-{i:05d}-of-{n:05d}.tfrecord"


def _bytes(v: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))


def _int64(v) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(v)))


def encode_example(pcm: np.ndarray, sample_rate: int, text: str, labels: list[int], uid: str,
                   speaker: str | None = None) -> bytes:
    """Serialize one utterance. `pcm` is int16 (samples,)."""
    assert pcm.dtype == np.int16 and pcm.ndim == 1
    feats = {
        "audio": _bytes(pcm.astype("<i2").tobytes()),
        "sample_rate": _int64([sample_rate]),
        "num_samples": _int64([len(pcm)]),
        "duration": tf.train.Feature(float_list=tf.train.FloatList(value=[len(pcm) / sample_rate])),
        "text": _bytes(text.encode("utf-8")),
        "labels": _int64(labels),
        "id": _bytes(uid.encode("utf-8")),
        "speaker": _bytes((speaker or "").encode("utf-8")),
    }
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def parse_example(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    """Graph-mode parser: returns audio as float32 in [-1, 1] (`audio`) and int16 (`pcm`), labels int32."""
    ex = tf.io.parse_single_example(serialized, FEATURE_SPEC)
    pcm = tf.io.decode_raw(ex["audio"], tf.int16, little_endian=True)
    return {
        "pcm": pcm,
        "audio": tf.cast(pcm, tf.float32) / PCM_SCALE,
        "num_samples": tf.cast(ex["num_samples"], tf.int32),
        "sample_rate": tf.cast(ex["sample_rate"], tf.int32),
        "duration": ex["duration"],
        "text": ex["text"],
        "labels": tf.cast(tf.sparse.to_dense(ex["labels"]), tf.int32),
        "id": ex["id"],
        "speaker": ex["speaker"],
    }


def _utt_id(u: Utterance) -> str:
    stem = Path(u.audio_filepath).stem
    return f"{stem}@{u.offset:.2f}" if u.is_segment else stem


class _Infeasible(ValueError):
    """CTC can't fit the utterance through `ShardConfig.model`."""


def _load(u: Utterance, vocab: Vocabulary, config: ShardConfig):
    """Decode and encode one utterance.

    Returns:
        (serialized record, seconds, samples, CTC label steps).

    Raises:
        ValueError: empty or out-of-vocabulary text, unreadable audio, offset/duration that disagree with the
            audio (`deepspeech2.data.manifest.duration_mismatch`); `_Infeasible` if CTC can't fit it through
            `config.model`; `TooLongError` if it is longer than `config.max_duration`.
        FileNotFoundError: the audio file doesn't exist.
    """
    labels = vocab.encode(u.text)
    if not labels:
        raise ValueError("empty transcript")
    # The segment, or the whole file (manifest.audio_span); too long, it is refused by the header, unread.
    wav = load_utterance(u, config.sample_rate, max_seconds=config.max_duration)
    if not len(wav):
        raise ValueError("no audio samples")
    need = ctc_label_steps(labels)
    if config.model is not None:
        steps = output_steps(config.model, config.feature_config, len(wav))
        if steps < need:  # `ctc_feasible`, spelled out for the message
            raise _Infeasible(f"CTC-infeasible: model {model_name(config.model)} has {steps} output steps for "
                             f"{len(wav) / config.sample_rate:.3f}s of audio but the labels need {need}")
    pcm = to_pcm16(wav)
    return (encode_example(pcm, config.sample_rate, u.text, labels, _utt_id(u), u.speaker),
            len(pcm) / config.sample_rate, len(pcm), need)


def read_manifest_lines(manifest: str | os.PathLike) -> tuple[list[tuple[int, Utterance]], list[dict]]:
    """The manifest's good lines as `(line number, utterance)`, and its malformed ones as
    `{"line", "kind": "malformed", "reason"}` (blank lines are neither)."""
    path = Path(manifest)
    if not path.exists():
        raise FileNotFoundError(f"manifest `{path}` does not exist")
    base = path.parent.resolve()
    good, bad = [], []
    with open_manifest(path) as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                good.append((n, parse_line(line, base, where=f"line {n}")))
            except ValueError as e:
                bad.append({"line": n, "kind": "malformed", "reason": str(e).removeprefix(f"line {n}: ")})
    return good, bad


def _fingerprint(manifest, vocab: Vocabulary, config: ShardConfig) -> str:
    h = hashlib.sha256(Path(manifest).read_bytes())
    model = None if config.model is None else [config.model.to_dict(), config.feature_config.to_dict()]
    h.update(json.dumps([FORMAT, vocab.tokens(), config.num_shards, config.sample_rate, config.seed, model,
                         config.max_duration]).encode())
    return h.hexdigest()


# strerror text -> errno, to read TensorFlow's "PATH; File too large" back as the OSError it was.
_ERRNOS = {os.strerror(code): code for code in errno.errorcode}


@contextlib.contextmanager
def _shard_writer(path: Path):
    """A TFRecordWriter into `atomic_path(path)`. Its write errors (TensorFlow's, e.g. "PATH; No space left on
    device") come out as the OSError they stand for, naming `path`, so the CLIs show them as one line."""
    try:
        with atomic_path(path) as tmp, tf.io.TFRecordWriter(str(tmp)) as writer:
            yield writer
    except tf.errors.OpError as e:
        code = _ERRNOS.get((e.message or "").rsplit("; ", 1)[-1],
                           errno.ENOSPC if isinstance(e, tf.errors.ResourceExhaustedError) else errno.EIO)
        raise OSError(code, os.strerror(code), str(path)) from e


def make_shards(manifest: str | os.PathLike, vocab: Vocabulary, config: ShardConfig,
                progress: bool = True) -> dict:
    """Write `manifest` as `config.num_shards` TFRecord shards plus `index.json`; returns the index.

    Malformed manifest lines, bad utterances (unreadable audio, out-of-vocabulary text, a duration that
    disagrees with the audio), utterances longer than `config.max_duration` (judged by the header, never
    decoded) and, with `config.model`, utterances CTC can't fit are skipped and listed in the index's "skipped"
    with their line number, kind ("malformed", "unusable", "too_long" or "infeasible") and reason.

    Raises:
        FileNotFoundError: the manifest doesn't exist.
        ValueError: no utterance could be written (the index is written all the same, listing why each
            line was skipped): empty shards would only fail later, in training, further from the reason.
        OSError: a shard or the index can't be written (a full disk); it names the file.
    """
    if not Path(manifest).exists():
        raise FileNotFoundError(f"manifest `{manifest}` does not exist")
    # Two runs on one folder would each write shards and an index, the last index describing a mix of both.
    with exclusive_lock(config.out_dir, "a ds2-make-shards"):
        return _make_shards(manifest, vocab, config, progress)


def _make_shards(manifest: str | os.PathLike, vocab: Vocabulary, config: ShardConfig, progress: bool) -> dict:
    out = Path(config.out_dir)
    fingerprint = _fingerprint(manifest, vocab, config)
    if (out / INDEX).exists():
        previous = _read_index(out / INDEX)
        if previous.get("fingerprint") == fingerprint and shard_problem(out, previous) is None:
            _remove_other_shards(out, previous)
            return _nonempty(previous, manifest, out)
    lines, skipped = read_manifest_lines(manifest)
    # Until the new index is written, the folder holds new shards next to old ones: no index (training refuses
    # the folder) rather than the old one describing them.
    (out / INDEX).unlink(missing_ok=True)
    order = list(range(len(lines)))
    random.Random(config.seed).shuffle(order)
    # Deal utterances round-robin (after a seeded shuffle) so shards have similar counts and durations.
    assignment = [order[i::config.num_shards] for i in range(config.num_shards)]
    shards, durations = [], []
    unknown = collections.Counter()  # characters written as <unk> (a vocabulary with one: Mandarin)

    def load(k):
        try:
            return k, _load(lines[k][1], vocab, config), None, None
        except _Infeasible as e:
            return k, None, "infeasible", str(e)
        except TooLongError as e:
            return k, None, "too_long", f"{e} (`max_duration`: training drops longer utterances)"
        except (ValueError, FileNotFoundError) as e:
            return k, None, "unusable", str(e)

    # The bar closes on an error too, so that its last refresh comes before the error's message, not after.
    with concurrent.futures.ThreadPoolExecutor(config.num_workers) as pool, \
            progress_bar(total=len(lines), desc=f"shards {out.name}", unit="utt", show=progress) as bar:
        for i, members in enumerate(assignment):
            # Records are sorted by duration inside each shard: interleaving the shards round-robin then
            # gives an (almost) globally sorted stream, which is SortaGrad's first epoch (DS2 §3.1).
            members = sorted(members, key=lambda k: (lines[k][1].duration, k))
            shards.append(_write_shard(out / shard_name(i, config.num_shards), pool.map(load, members), lines, vocab,
                                       bar, skipped, unknown, durations))
    index = _index(manifest, fingerprint, vocab, config, shards, durations, unknown, skipped)
    write_json(out / INDEX, index)
    _remove_other_shards(out, index)
    return _nonempty(index, manifest, out)


def _write_shard(path: Path, loaded, lines: list, vocab: Vocabulary, bar, skipped: list,
                 unknown: collections.Counter, durations: list) -> dict:
    """Write one shard's records, `loaded` as `_make_shards`' `load` gives them, in order; the utterances that
    fail go to `skipped`, the characters written as <unk> to `unknown`, each record's seconds to `durations`.
    Returns the shard's entry in the index."""
    count, seconds = 0, 0.0
    shard_durations, shard_samples, label_steps = [], [], []
    with _shard_writer(path) as writer:
        for k, result, kind, err in loaded:
            bar.update(1)
            if err is not None:
                n, u = lines[k]
                skipped.append({"line": n, "kind": kind, "audio_filepath": u.audio_filepath,
                                "offset": u.offset, "reason": err})
                continue
            writer.write(result[0])
            unknown += vocab.unknown(lines[k][1].text)
            count += 1
            seconds += result[1]
            durations.append(result[1])
            shard_durations.append(round(result[1], 3))
            shard_samples.append(result[2])
            label_steps.append(result[3])
    # Per-record durations (in file order, i.e. sorted) let the pipeline merge shards into an exactly
    # sorted SortaGrad epoch, and plan shuffled epochs, without reading any audio; the samples and the
    # CTC steps each transcript needs let training count the utterances a model can't fit
    # (`deepspeech2.geometry.ctc_feasible`), also without reading.
    return {"path": path.name, "bytes": path.stat().st_size, "count": count, "duration": round(seconds, 3),
            "durations": shard_durations, "num_samples": shard_samples, "label_steps": label_steps}


def _index(manifest, fingerprint: str, vocab: Vocabulary, config: ShardConfig, shards: list, durations: list,
           unknown: collections.Counter, skipped: list) -> dict:
    """The folder's index: the shards, what they were made from and with, and what was skipped."""
    return {
        "format": FORMAT,
        "manifest": str(Path(manifest).resolve()),
        "fingerprint": fingerprint,
        "num_shards": config.num_shards,
        "sample_rate": config.sample_rate,
        "total_count": sum(s["count"] for s in shards),
        "total_duration": round(sum(s["duration"] for s in shards), 3),
        # Duration percentiles 0, 5, ..., 100: the input pipeline derives its length buckets from them.
        "duration_percentiles": [round(float(q), 3) for q in np.percentile(durations or [0.0], range(0, 101, 5))],
        "vocabulary": vocab.tokens(),
        # Transcript characters outside the vocabulary, encoded as its <unk> id (utterances whose text the
        # vocabulary can't encode at all are skipped instead).
        "unknown_characters": {"count": sum(unknown.values()), "distinct": len(unknown),
                               "most_common": [[c, n] for c, n in unknown.most_common(20)]},
        # The model infeasible utterances were judged for (None: none were).
        "model": None if config.model is None else config.model.to_dict(),
        "feature_config": None if config.model is None else config.feature_config.to_dict(),
        "max_duration": config.max_duration,  # longer utterances were skipped (None: none were)
        "shards": shards,
        "skipped": sorted(skipped, key=lambda e: e["line"]),
    }


def _remove_other_shards(out: Path, index: dict) -> None:
    """Delete the shard files of an earlier run with another `num_shards`, which the index doesn't list."""
    listed = {s["path"] for s in index["shards"]}
    for path in out.glob("shard-*-of-*.tfrecord"):
        if path.name not in listed:
            path.unlink(missing_ok=True)


def _nonempty(index: dict, manifest, out: Path) -> dict:
    """`index`, or ValueError saying why none of the manifest's lines became a record."""
    if index["total_count"]:
        return index
    skipped = index["skipped"]
    if not skipped:
        raise ValueError(f"manifest `{manifest}` has no lines; nothing to shard")
    kinds = collections.Counter(s["kind"] for s in skipped)
    first = skipped[0]
    raise ValueError(f"none of the {len(skipped)} lines of `{manifest}` could be written "
                     f"({', '.join(f'{n} {k}' for k, n in kinds.most_common())}; line {first['line']}: "
                     f"{first['reason']}); every line's reason is in `{out / INDEX}`")


def load_index(shard_dir: str | os.PathLike) -> dict:
    """Read `index.json` of a shard folder.

    Raises:
        FileNotFoundError: the folder doesn't exist.
        ValueError: it has no index.json: ds2-make-shards never finished there (killed, or still running).
    """
    path = Path(shard_dir) / INDEX
    if not path.exists():
        if not Path(shard_dir).is_dir():
            raise FileNotFoundError(f"`{path}` not found; write shards with `ds2-make-shards --out {shard_dir}`")
        raise ValueError(f"`{shard_dir}` has no {INDEX}: ds2-make-shards did not finish writing it (it was "
                         f"interrupted, or is still running); re-run `ds2-make-shards --out {shard_dir}` with the "
                         "same arguments")
    return _read_index(path)


def _read_index(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def shard_problem(shard_dir: str | os.PathLike, index: dict) -> str | None:
    """Why the shard files of `shard_dir` disagree with its `index` (one is missing, or has another size than
    when the index was written), with the fix; None when they agree. An index without per-shard sizes (`bytes`) is
    checked for missing files only."""
    for s in index["shards"]:
        path = Path(shard_dir) / s["path"]
        size = path.stat().st_size if path.exists() else None
        if size is None or size != s.get("bytes", size):
            what = "is missing" if size is None else f"has {size} bytes where {INDEX} says {s['bytes']}"
            return (f"`{path}` {what}: the folder changed after ds2-make-shards wrote it; re-run "
                    f"`ds2-make-shards --out {shard_dir}`")
    return None


def shard_paths(shard_dir: str | os.PathLike) -> list[str]:
    """The shard files listed in a folder's index, in order."""
    index = load_index(shard_dir)
    return [str(Path(shard_dir) / s["path"]) for s in index["shards"]]


def read_shards(paths: list[str]) -> tf.data.Dataset:
    """A dataset of parsed records (see `parse_example`) from shard files, in file order (each shard is
    sorted by duration)."""
    return tf.data.TFRecordDataset(paths).map(parse_example, num_parallel_calls=tf.data.AUTOTUNE)
