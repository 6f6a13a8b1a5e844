"""A model bundle as a SavedModel for TF Serving: features, normalization, model and greedy decoding in one graph.

Layout (TF Serving's versioned model base path; both `tensorflow_model_server` and `ds2-serve` serve the
newest version and pick up new ones as they appear):

    EXPORT_DIR/<model_name>/<version>/
        saved_model.pb, variables/      the graph and the weights
        assets.extra/                   vocab.txt, model_config.json, feature_config.json, mean_std.npz,
                                        train_config.json, export.json (with the model's clock, for word
                                        times), tf_serving_warmup_requests and, when exported with an LM,
                                        decoder_config.json and unigrams.txt; with a word config, words.json

A version is written to a hidden temporary folder next to the versions and renamed into place, so a server
polling the folder never sees half a version. Versions are integers that only increase; an existing one is
never overwritten.

The graph holds only stock TensorFlow ops (the STFT, the model's matmuls and while loops, `DecodeWav`,
string joins), so a stock `tensorflow_model_server` loads it; serving needs neither Keras nor this package.
Features and normalization are `deepspeech2.features.featurize`, the function training used
(`deepspeech2.inference.acoustic_model`: featurize + model + log-softmax). Bad inputs fail in the graph
with `InvalidArgumentError` (gRPC INVALID_ARGUMENT) and a message saying what is wrong: NaN/Inf samples,
empty or too short audio, audio over `max_audio_seconds`, lengths that don't fit the waveforms, a WAV at
another sample rate or bytes that aren't a WAV.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf

from deepspeech2.bundle import FILES as BUNDLE_FILES
from deepspeech2.bundle import Bundle, load_bundle
from deepspeech2.decode import DecoderConfig
from deepspeech2.decode.beam import check_lm_files, load_unigrams, unigrams_path_for
from deepspeech2.decode.words import FrameClock, WordConfig
from deepspeech2.fileio import write_json
from deepspeech2.geometry import output_steps
from deepspeech2.inference import acoustic_model
from deepspeech2.streaming import StreamingModel, is_streamable
from deepspeech2.vocab import BLANK_ID
from deepspeech2_export import (ASSETS_EXTRA, DECODE_WAV, DECODER_CONFIG, EXPORT_INFO, FINAL, FRAME_CLOCK, LENGTHS,
                                LOG_PROBS, OUTPUT_LENGTHS, SERVING_DEFAULT, STATE, STREAM_STEP, TRANSCRIBE_WAV,
                                TRANSCRIPTS, UNIGRAMS, WARMUP_REQUESTS, WAV, WAVEFORMS, WORDS_CONFIG)
from deepspeech2_export.requests import predict_request, wav_bytes

MAX_AUDIO_SECONDS = 60.0  # default limit per utterance: DS2 serves utterances, not hour-long recordings
# TF Serving's model names: letters, digits, '_', '-', '.'; the name is also a folder name.
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
WARMUP_SECONDS = 1.0  # audio per warm-up request


@dataclass(frozen=True)
class ExportConfig:
    """What to export, and where."""

    model_dir: str  # the model bundle (a ds2-train workdir's model/)
    export_dir: str  # the model root: versions go to export_dir/model_name/<version>/
    model_name: str = "ds2"  # the name clients ask for (ModelSpec.name)
    version: int = 0  # 0: one more than the newest version there (1 for the first); else it must be newer
    max_audio_seconds: float = MAX_AUDIO_SECONDS  # longer utterances are refused (in the graph and by ds2-serve)
    decoder: DecoderConfig | None = None  # beam decoder recorded for ds2-serve's n-best requests; its LM's
    # word list is copied into assets.extra/ (the LM itself stays where it is: LMs are large)
    words: WordConfig | None = None  # word time shifts and confidence calibration for ds2-serve's word requests
    # (bench/words.py's, fitted for this model and the decoder's LM), saved as assets.extra/words.json; None: none

    def __post_init__(self):
        if not MODEL_NAME.fullmatch(self.model_name or ""):
            raise ValueError(f"`model_name` must be letters, digits, '_', '-' or '.' (a folder name TF Serving "
                             f"accepts), got {self.model_name!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise ValueError(f"`version` must be an int >= 0 (0: the next free one), got {self.version!r}")
        if not self.max_audio_seconds > 0:
            raise ValueError(f"`max_audio_seconds` must be > 0, got {self.max_audio_seconds!r}")
        if self.decoder is not None and self.decoder.kind != "beam":
            raise ValueError(f"`decoder` is the beam decoder for n-best requests; got kind={self.decoder.kind!r}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["decoder"] = None if self.decoder is None else self.decoder.to_dict()
        d["words"] = None if self.words is None else self.words.to_dict()
        return d


def versions(base_path: str | os.PathLike) -> list[int]:
    """The versions under a model base path: its sub-folders named by ASCII digits, ascending ("²".isdigit() is
    true, but int("²") fails and TF Serving doesn't take it either)."""
    base_path = Path(base_path)
    if not base_path.is_dir():
        return []
    return sorted(int(p.name) for p in base_path.iterdir() if re.fullmatch(r"[0-9]+", p.name) and p.is_dir())


def min_samples(bundle: Bundle) -> int:
    """The shortest audio (samples) the model gives at least one output step for."""
    fc = bundle.feature_config
    n = fc.window_length
    while output_steps(bundle.model_config, fc, n) < 1:
        n += fc.hop_length
    return n


def greedy_transcripts(log_probs: tf.Tensor, lengths: tf.Tensor, tokens: list[str], previous: tf.Tensor | None = None,
                       join: bool = True) -> tf.Tensor:
    """Best-path decoding in the graph: the twin of `deepspeech2.decode.greedy` (`greedy_decode` + `ids_to_text`;
    with `previous`, `GreedyStream`), the same text as `Decoder(DecoderConfig(kind="greedy"))`.

    Args:
        log_probs: float32 (batch, steps, vocab).
        lengths: int32 (batch,) valid steps.
        tokens: the vocabulary's symbols in id order, the blank as "" (`Vocabulary.tokens()`).
        previous: int32 (batch,) the label of the step before these (streaming: the previous chunk's last
            label), so a repeat across the boundary is merged; None: nothing came before.
        join: collapse runs of spaces and strip the ends (whole transcripts); False for the pieces of a stream,
            whose spaces at the ends separate them from their neighbours.

    Returns:
        string (batch,): argmax per step, repeats merged, blanks dropped; with `join`, for a vocabulary with a
        space, runs of spaces made one and the ends stripped, as the library's greedy decoder does.
    """
    ids = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # (B, T)
    valid = tf.sequence_mask(lengths, tf.shape(ids)[1])  # (B, T)
    first = tf.fill([tf.shape(ids)[0], 1], -1) if previous is None else tf.cast(previous, tf.int32)[:, None]
    before = tf.concat([first, ids[:, :-1]], axis=1)
    keep = valid & tf.not_equal(ids, before) & tf.not_equal(ids, BLANK_ID)
    chars = tf.where(keep, tf.gather(tf.constant(tokens), ids), "")  # (B, T) strings
    text = tf.strings.reduce_join(chars, axis=1)
    if join and " " in tokens:
        text = tf.strings.strip(tf.strings.regex_replace(text, " +", " "))
    return text


def _check(condition, *message) -> tf.Operation:
    """An in-graph check: InvalidArgumentError "assertion failed: [text] [value] ..." when `condition` is false."""
    return tf.debugging.Assert(condition, list(message), summarize=8)


def streaming_model(bundle: Bundle) -> StreamingModel | None:
    """The bundle's model in streaming form, or None when it can't stream (bidirectional, MFCC context)."""
    if not is_streamable(bundle.model_config, bundle.feature_config):
        return None
    return StreamingModel(bundle.model, bundle.model_config, bundle.feature_config, bundle.normalizer)


def build_module(bundle: Bundle, max_audio_seconds: float = MAX_AUDIO_SECONDS) -> tuple[tf.Module, dict]:
    """The exportable module and its signatures.

    Returns:
        `(module, signatures)`: a tf.Module holding the model's variables and the tf.functions
        `serving_default(waveforms, lengths)`, `transcribe_wav(wav)` and `decode_wav(wav)` (and
        `stream_step(waveforms, lengths, state, final)` for a streaming model); and the signature map for
        `tf.saved_model.save` (`serving_default`, `transcribe_wav`, and `stream_step`).
    """
    serving_default = _serving_default(bundle, max_audio_seconds)
    decode_wav = _decode_wav(bundle.feature_config.sample_rate)
    transcribe_wav = _transcribe_wav(decode_wav, serving_default)
    streaming = streaming_model(bundle)
    stream_step = None if streaming is None else _stream_step(streaming, bundle, max_audio_seconds)

    module = tf.Module()
    # Track the tf.Variables under the Keras variables, not the Keras model: saved through the model, the
    # weights are written twice (Keras' objects and the tf.Variables) and a TF1-style loader (stock
    # tensorflow_model_server, saved_model_cli run) restores the copies the graph doesn't read.
    module.model_variables = [v.value for v in bundle.model.variables]
    assert all(isinstance(v, tf.Variable) for v in module.model_variables)
    module.serving_default = serving_default
    module.transcribe_wav = transcribe_wav
    setattr(module, DECODE_WAV, decode_wav)
    signatures = {SERVING_DEFAULT: serving_default.get_concrete_function(),
                  TRANSCRIBE_WAV: transcribe_wav.get_concrete_function()}
    if stream_step is not None:
        module.stream_step = stream_step
        signatures[STREAM_STEP] = stream_step.get_concrete_function()
    return module, signatures


def _serving_default(bundle: Bundle, max_audio_seconds: float):
    """`serving_default(waveforms, lengths)`: the checks, then featurize + model + log-softmax and greedy decoding."""
    forward = acoustic_model(bundle)  # featurize + model + log-softmax, one graph
    rate = bundle.feature_config.sample_rate
    shortest = min_samples(bundle)
    longest = int(round(max_audio_seconds * rate))
    tokens = bundle.vocab.tokens()

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32, name=WAVEFORMS),
                                  tf.TensorSpec([None], tf.int32, name=LENGTHS)])
    def serving_default(waveforms, lengths):
        batch, samples = tf.shape(waveforms)[0], tf.shape(waveforms)[1]
        # Messages without quotes or apostrophes: TF's Assert prints its strings escaped.
        checks = [
            _check(batch > 0, "the request holds no audio (a batch of 0)"),
            _check(tf.equal(tf.shape(lengths)[0], batch), f"`{LENGTHS}` needs one entry per row of `{WAVEFORMS}`, "
                   "got", tf.shape(lengths)[0], "for", batch, "rows"),
            _check(tf.reduce_all(lengths >= shortest), f"audio is empty or shorter than {1000 * shortest / rate:g} "
                   f"ms ({shortest} samples), the shortest this model transcribes; `{LENGTHS}`:", lengths),
            _check(tf.reduce_all(lengths <= samples), f"a length exceeds the samples in its row of `{WAVEFORMS}` "
                   f"; `{LENGTHS}`:", lengths, "samples:", samples),
            _check(samples <= longest, f"audio is longer than the {max_audio_seconds:g} s ({longest} samples) this "
                   "export accepts, got", samples, "samples"),
            tf.debugging.assert_all_finite(waveforms, f"`{WAVEFORMS}` hold NaN or Inf samples"),
        ]
        with tf.control_dependencies(checks):
            waveforms = tf.identity(waveforms)
        log_probs, output_lengths = forward(waveforms, lengths)
        return {LOG_PROBS: log_probs, OUTPUT_LENGTHS: output_lengths,
                TRANSCRIPTS: greedy_transcripts(log_probs, output_lengths, tokens)}

    return serving_default


def _decode_wav(rate: int):
    """`decode_wav(wav) -> (waveforms, lengths)`: whole 16-bit PCM WAV files at `rate`, downmixed, zero-padded."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=WAV)])
    def decode_wav(wav):
        def one(contents):
            audio, file_rate = tf.audio.decode_wav(contents)  # (samples, channels) in [-1, 1]
            check = _check(tf.equal(file_rate, rate), f"the sample rate of the WAV must be {rate} Hz (the model "
                           "rate), got", file_rate, "Hz; resample it")
            with tf.control_dependencies([check]):
                return tf.reduce_mean(audio, axis=1)  # downmix, as deepspeech2.audio does

        waves = tf.map_fn(one, wav, fn_output_signature=tf.RaggedTensorSpec([None], tf.float32, ragged_rank=0))
        return waves.to_tensor(), tf.cast(waves.row_lengths(), tf.int32)

    return decode_wav


def _transcribe_wav(decode_wav, serving_default):
    """`transcribe_wav(wav)`: `decode_wav`, then `serving_default`."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=WAV)])
    def transcribe_wav(wav):
        waveforms, lengths = decode_wav(wav)
        return serving_default(waveforms, lengths)

    return transcribe_wav


def _stream_step(streaming: StreamingModel, bundle: Bundle, max_audio_seconds: float):
    """`stream_step(waveforms, lengths, state, final)`: the checks, one chunk of each stream through `streaming`,
    and the chunk's greedy text, a repeat across the chunk boundary merged (the state keeps the last label)."""
    longest = int(round(max_audio_seconds * bundle.feature_config.sample_rate))
    tokens = bundle.vocab.tokens()
    label_offset = next(seg.offset for seg in streaming.layout if seg.name == "last_label")

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32, name=WAVEFORMS),
                                  tf.TensorSpec([None], tf.int32, name=LENGTHS),
                                  tf.TensorSpec([None, streaming.state_size], tf.float32, name=STATE),
                                  tf.TensorSpec([None], tf.bool, name=FINAL)])
    def stream_step(waveforms, lengths, state, final):
        batch, samples = tf.shape(waveforms)[0], tf.shape(waveforms)[1]
        checks = [
            _check(batch > 0, "the request holds no stream (a batch of 0)"),
            _check(tf.reduce_all(tf.equal(tf.stack([tf.shape(lengths)[0], tf.shape(state)[0],
                                                    tf.shape(final)[0]]), batch)),
                   f"`{LENGTHS}`, `{STATE}` and `{FINAL}` need one entry per row of `{WAVEFORMS}`, got",
                   tf.shape(lengths)[0], tf.shape(state)[0], tf.shape(final)[0], "for", batch, "rows"),
            _check(tf.reduce_all((lengths >= 0) & (lengths <= samples)), f"`{LENGTHS}` must lie in [0, the "
                   f"samples of each row of `{WAVEFORMS}`]; `{LENGTHS}`:", lengths, "samples:", samples),
            _check(samples <= longest, f"a chunk is longer than the {max_audio_seconds:g} s ({longest} samples) "
                   "this export accepts, got", samples, "samples"),
            tf.debugging.assert_all_finite(waveforms, f"`{WAVEFORMS}` hold NaN or Inf samples"),
            tf.debugging.assert_all_finite(state, f"`{STATE}` holds NaN or Inf"),
        ]
        with tf.control_dependencies(checks):
            waveforms = tf.identity(waveforms)
        log_probs, output_lengths, new_state = streaming.step(waveforms, lengths, state, final)
        previous = tf.cast(tf.round(state[:, label_offset]), tf.int32)
        return {LOG_PROBS: log_probs, OUTPUT_LENGTHS: output_lengths, STATE: new_state,
                TRANSCRIPTS: greedy_transcripts(log_probs, output_lengths, tokens, previous, join=False)}

    return stream_step


def export_model(config: ExportConfig) -> Path:
    """Export a model bundle as a new version of a TF Serving model.

    Args:
        config: the bundle, the export folder, the model name and version.

    Returns:
        The version folder, `export_dir/model_name/<version>`.

    Raises:
        FileNotFoundError: the bundle, or the decoder's LM or its word list, is missing.
        ValueError: a bad bundle, or `version` is not newer than the versions already there.
    """
    bundle = load_bundle(config.model_dir)
    lm_path = check_lm_files(config.decoder) if config.decoder is not None else None
    base = Path(config.export_dir) / config.model_name
    base.mkdir(parents=True, exist_ok=True)
    existing = versions(base)
    version = config.version or (existing[-1] + 1 if existing else 1)
    if existing and version <= existing[-1]:
        raise ValueError(f"`version` {version} is not newer than {base}/{existing[-1]}: versions only increase "
                         "and are never overwritten (0 picks the next one)")
    # A hidden name that isn't an integer: servers polling `base` ignore it until the rename.
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}.", suffix=".tmp", dir=base))
    try:
        module, signatures = build_module(bundle, config.max_audio_seconds)
        tf.saved_model.save(module, str(tmp / "model"), signatures=signatures)
        write_assets(tmp / "model" / ASSETS_EXTRA, bundle, config, version, lm_path)
        final = base / str(version)
        try:
            os.rename(tmp / "model", final)
        except OSError:
            raise ValueError(f"version {final} appeared while exporting (another export?); run again") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def write_assets(folder: Path, bundle: Bundle, config: ExportConfig, version: int, lm_path: Path | None) -> None:
    """assets.extra/: the bundle's files but the weights, export.json, the warm-up requests, the decoder, the word
    config."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in BUNDLE_FILES:
        if name != "model.keras":
            shutil.copy2(bundle.path / name, folder / name)
    rate = bundle.feature_config.sample_rate
    signatures = {SERVING_DEFAULT: {"inputs": [WAVEFORMS, LENGTHS], "outputs": [LOG_PROBS, OUTPUT_LENGTHS,
                                                                               TRANSCRIPTS]},
                  TRANSCRIBE_WAV: {"inputs": [WAV], "outputs": [LOG_PROBS, OUTPUT_LENGTHS, TRANSCRIPTS]}}
    streaming = streaming_model(bundle)
    if streaming is not None:
        signatures[STREAM_STEP] = {"inputs": [WAVEFORMS, LENGTHS, STATE, FINAL],
                                   "outputs": [LOG_PROBS, OUTPUT_LENGTHS, TRANSCRIPTS, STATE]}
    write_json(folder / EXPORT_INFO, {
        "model_name": config.model_name, "version": version, "sample_rate": rate,
        "min_samples": min_samples(bundle), "max_audio_seconds": config.max_audio_seconds,
        "max_samples": int(round(config.max_audio_seconds * rate)), "vocab_size": bundle.vocab.size,
        "signatures": signatures,
        # The stream_step state: its size, dtype and segments (`deepspeech2.streaming.StreamingModel.layout`).
        "streaming": None if streaming is None else streaming.layout_dict(),
        # Output steps -> seconds, for word times (ds2-serve has no model code to work it out from).
        FRAME_CLOCK: dataclasses.asdict(FrameClock.of(bundle.model_config, bundle.feature_config)),
        "model_dir": str(bundle.path.resolve()), "exported_at": datetime.datetime.now().astimezone().isoformat(
            timespec="seconds"), "tensorflow": tf.__version__})
    if config.decoder is not None:
        decoder = config.decoder
        if lm_path is not None:
            words_path = Path(decoder.unigrams_path) if decoder.unigrams_path else unigrams_path_for(lm_path)
            if words_path.is_file():
                words = load_unigrams(words_path)
            else:  # an ARPA file lists its words itself; read them as ds2-build-lm does
                from deepspeech2.decode.lm import arpa_unigrams

                words = arpa_unigrams(lm_path)
            (folder / UNIGRAMS).write_text("\n".join(words) + "\n", encoding="utf-8")
            decoder = dataclasses.replace(decoder, lm_path=str(lm_path.resolve()), unigrams_path=None)
        write_json(folder / DECODER_CONFIG, decoder.to_dict())
    if config.words is not None:
        config.words.save(folder / WORDS_CONFIG)
    write_warmup_requests(folder / WARMUP_REQUESTS, config.model_name, rate,
                          streaming.state_size if streaming is not None else 0)


def warmup_audio(sample_rate: int, seconds: float = WARMUP_SECONDS) -> np.ndarray:
    """Quiet noise, float32 (samples,): what the warm-up requests carry."""
    return (0.01 * np.random.default_rng(0).standard_normal(int(seconds * sample_rate))).astype(np.float32)


def write_warmup_requests(path: Path, model_name: str, sample_rate: int, state_size: int = 0) -> None:
    """TF Serving's warm-up file: one PredictionLog per signature, replayed when a version loads (both
    `tensorflow_model_server` and `ds2-serve` run them before the version takes traffic). `state_size` > 0 adds
    a stream_step request (a new stream's first and last chunk)."""
    from tensorflow_serving.apis import prediction_log_pb2

    audio = warmup_audio(sample_rate)
    requests = [predict_request(model_name, SERVING_DEFAULT, {WAVEFORMS: audio[None],
                                                              LENGTHS: np.array([len(audio)], np.int32)}),
                predict_request(model_name, TRANSCRIBE_WAV, {WAV: np.array([wav_bytes(audio, sample_rate)], object)})]
    if state_size:
        requests.append(predict_request(model_name, STREAM_STEP, {
            WAVEFORMS: audio[None], LENGTHS: np.array([len(audio)], np.int32),
            STATE: np.zeros((1, state_size), np.float32), FINAL: np.array([True])}))
    with tf.io.TFRecordWriter(str(path)) as writer:
        for request in requests:
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
