"""One version of an exported model, loaded for serving: its graph functions, signatures, limits and decoder.

Loading takes the SavedModel alone (`tf.saved_model.load`) and the files of its `assets.extra/`; no model
code is imported, so a server runs any export without this project's Keras layers. What a request may ask of
a version, and the refusals, are `checks.py`'s; here is what a checked request gets: the forward pass over a
merged batch (`Servable.run`, `StreamRunner.run`), and the beam decoder's n-best and words.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import grpc
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

from deepspeech2.decode import Decoder, DecoderConfig
from deepspeech2.decode.words import FrameClock, Word, WordConfig, decode_words
from deepspeech2.vocab import Vocabulary
from deepspeech2_export import (ASSETS_EXTRA, DECODE_WAV, DECODER_CONFIG, EXPORT_INFO, FINAL, FRAME_CLOCK, LENGTHS,
                                LOG_PROBS, SERVING_DEFAULT, STATE, STREAM_STEP, TRANSCRIBE_WAV, UNIGRAMS,
                                WARMUP_REQUESTS, WAVEFORMS, WORDS_CONFIG)
from deepspeech2_export.requests import WORDS
from deepspeech2_serving.checks import MAX_REQUEST_BYTES, MAX_ROWS, RequestError

logger = logging.getLogger(__name__)

# The outputs `checks.NBEST` adds: the beam decoder's n best hypotheses per utterance.
NBEST_TRANSCRIPTS = "nbest_transcripts"  # string (batch, nbest), best first; "" where fewer were found
NBEST_SCORES = "nbest_scores"  # float32 (batch, nbest): DS2 eq. 12's Q(y) = log p_ctc + alpha log p_lm + beta words
# With the int input `words` = 1 (export/requests.py), the words of each utterance's transcript (the server's beam
# search, with its LM and hotwords and the request's `hotwords`), word by word: what ds2-infer --words prints
# (`decode.words.decode_words`, with the export's clock and words.json). Rows are padded to the utterance with the
# most words: "" and WORD_PAD. A session gets them on its final step (batch 1), if its opening step asked too.
WORD_TEXTS = "word_texts"  # string (batch, words): each word, UTF-8
WORD_STARTS = "word_starts"  # float32 (batch, words): seconds from the start of the audio (words.json's shift added)
WORD_ENDS = "word_ends"  # float32 (batch, words): seconds, >= the start
WORD_CONFIDENCES = "word_confidences"  # float32 (batch, words): in [0, 1], calibrated by words.json (else raw)
WORD_OUTPUTS = (WORD_TEXTS, WORD_STARTS, WORD_ENDS, WORD_CONFIDENCES)
WORD_PAD = -1.0  # the times and confidences past a row's last word: never a real value (those are >= 0)
INIT_OP_SIGNATURE = "__saved_model_init_op"  # not a serving signature
# A streaming session's output (`checks.SESSION_ID`): `session_transcripts` (string [1]), the stream's transcript so
# far (with an LM: the best beam of the server's LM beam search, advanced with every step; else greedy), and with
# `final` the finished one. A final step ends the session; an id unused for `stream_idle_seconds` is forgotten.
SESSION_TRANSCRIPTS = "session_transcripts"


def signature_defs(version_dir: Path) -> dict[str, meta_graph_pb2.SignatureDef]:
    """The serving signatures of a SavedModel, as TF Serving reports them (GetModelMetadata)."""
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((version_dir / "saved_model.pb").read_bytes())
    graph = next((g for g in saved.meta_graphs if "serve" in g.meta_info_def.tags), saved.meta_graphs[0])
    return {k: v for k, v in graph.signature_def.items() if k != INIT_OP_SIGNATURE}


def word_outputs(timed: list[list[Word]]) -> dict[str, np.ndarray]:
    """Each utterance's words as the `WORD_OUTPUTS` arrays, `(utterances, most words)`, padded with "" and
    `WORD_PAD`."""
    shape = (len(timed), max((len(ws) for ws in timed), default=0))
    out = {WORD_TEXTS: np.full(shape, b"", dtype=object)}
    out.update({key: np.full(shape, WORD_PAD, np.float32) for key in (WORD_STARTS, WORD_ENDS, WORD_CONFIDENCES)})
    for b, ws in enumerate(timed):
        for k, w in enumerate(ws):
            out[WORD_TEXTS][b, k] = w.word.encode("utf-8")
            out[WORD_STARTS][b, k], out[WORD_ENDS][b, k], out[WORD_CONFIDENCES][b, k] = w.start, w.end, w.confidence
    return out


class Servable:
    """A loaded version: `run` for merged batches, `nbest` and `words` for the beam search (`checks.check_request`
    checks single requests against it)."""

    def __init__(self, version_dir: str | Path, model_name: str, decoder: DecoderConfig | None = None,
                 max_request_bytes: int = MAX_REQUEST_BYTES, max_rows: int = MAX_ROWS):
        """
        Args:
            version_dir: `<model base path>/<version>`, written by ds2-export.
            model_name: the name clients use.
            decoder: the beam decoder for n-best and word requests; None: the export's own (assets.extra/
                decoder_config.json), else a beam search without LM; kind "greedy": neither.
            max_request_bytes: the most a request's inputs may take once read, all together (a TensorProto can ask
                for a large shape filled from one value).
            max_rows: the most utterances (rows) one request may carry.

        Raises:
            FileNotFoundError: not an export (no saved_model.pb or assets.extra/export.json), or the
                decoder's LM is missing.
            ValueError: the export lacks the signatures ds2-serve serves, or its words.json is not a word config.
        """
        self.path = Path(version_dir)
        self.name = model_name
        self.max_request_bytes = max_request_bytes
        self.max_rows = max_rows
        self.version = int(self.path.name)
        extra = self.path / ASSETS_EXTRA
        for needed in (self.path / "saved_model.pb", extra / EXPORT_INFO):
            if not needed.is_file():
                raise FileNotFoundError(f"`{self.path}` is not a ds2-export version: {needed.name} is missing")
        self.info = json.loads((extra / EXPORT_INFO).read_text(encoding="utf-8"))
        self.sample_rate = int(self.info["sample_rate"])
        self.min_samples = int(self.info["min_samples"])
        self.max_samples = int(self.info["max_samples"])
        self.signature_defs = signature_defs(self.path)
        missing = {SERVING_DEFAULT, TRANSCRIBE_WAV} - set(self.signature_defs)
        if missing:
            raise ValueError(f"`{self.path}` lacks the signature(s) {sorted(missing)}; re-export it with ds2-export")
        self.vocab = Vocabulary.load(extra / "vocab.txt")
        # The searches share the decoder without a lock: each keeps its own beams and LM caches, and pyctcdecode's LM
        # and the hotword scorers are only read, so one request's search never waits for another's.
        self.decoder = self._make_decoder(decoder, extra)
        try:
            self._load(extra)
        except BaseException:
            if self.decoder is not None:
                self.decoder.search.release()  # its LM, now, not whenever the collector finds this half-built object
            raise

    def _load(self, extra: Path) -> None:
        # Word times: the model's clock (None in an export that doesn't record it: no words) and the shifts and
        # calibration.
        self.clock = FrameClock(**self.info[FRAME_CLOCK]) if self.info.get(FRAME_CLOCK) else None
        self.word_config = WordConfig.load(extra / WORDS_CONFIG) if (extra / WORDS_CONFIG).is_file() else WordConfig()
        try:
            loaded = tf.saved_model.load(str(self.path))
        except Exception as e:  # a damaged or foreign SavedModel
            raise ValueError(f"`{self.path}` could not be loaded as a SavedModel: {e}") from None
        self._loaded = loaded  # keeps the variables alive
        self._forward = loaded.signatures[SERVING_DEFAULT]
        self.decode_wav = getattr(loaded, DECODE_WAV)  # `checks` decodes each request's WAVs with it
        # Streaming models: stream_step, its state layout, and the key its steps are batched under (steps of
        # different streams share a forward pass; they never share one with whole utterances).
        self.streaming = self.info.get("streaming") if STREAM_STEP in self.signature_defs else None
        self.state_size = int(self.streaming["state_size"]) if self.streaming else 0
        self.stream_runner = StreamRunner(loaded.signatures[STREAM_STEP]) if self.streaming else None

    def _make_decoder(self, config: DecoderConfig | None, extra: Path) -> Decoder | None:
        if config is None:
            if (extra / DECODER_CONFIG).is_file():
                config = DecoderConfig.from_dict(json.loads((extra / DECODER_CONFIG).read_text(encoding="utf-8")))
                if config.lm_path and (extra / UNIGRAMS).is_file():
                    config = dataclasses.replace(config, unigrams_path=str(extra / UNIGRAMS))
            else:
                config = DecoderConfig(kind="beam")
        if config.kind != "beam":
            return None
        # In the request's own thread: forking decoder workers inside a gRPC server is not safe.
        return Decoder(dataclasses.replace(config, num_workers=1), self.vocab)

    @property
    def seconds_limit(self) -> float:
        return self.max_samples / self.sample_rate

    @property
    def lm_decoder(self) -> Decoder | None:
        """The beam decoder when it has an LM (what a stream's final transcript uses); None otherwise."""
        return self.decoder if self.decoder is not None and self.decoder.config.lm_path else None

    def final_transcript(self, log_probs: np.ndarray, greedy: str) -> str:
        """A finished stream's transcript: the LM beam search over its `(steps, vocab)` log-probs when this
        server has an LM, else its greedy transcript `greedy`."""
        decoder = self.lm_decoder
        if decoder is None or len(log_probs) == 0:
            return greedy
        return decoder.decode_utterances([log_probs])[0]  # one utterance: in this thread, no worker pool

    def final_words(self, log_probs: np.ndarray, samples: int) -> tuple[str, list[Word]]:
        """A finished utterance's transcript (`final_transcript`'s, with the LM) and its words (`decode_words` with
        this export's clock and word config): push to talk's words, for `(steps, vocab)` log-probs of `samples` of
        audio.

        Raises:
            RequestError: FAILED_PRECONDITION when this server has no LM (its final transcripts are greedy: no
                search to time words with) or the export records no clock.
        """
        decoder = self.lm_decoder
        if decoder is None or self.clock is None:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"`{WORDS}` of a final transcript need the "
                               "server's LM beam search and the export's clock: " + (
                                   "this server has no LM" if decoder is None else "export the model again"))
        return decode_words(decoder.search, log_probs, self.clock, self.word_config,
                            duration=samples / self.sample_rate)

    # ------------------------------------------------------------------------------------------- running

    def run(self, waveforms: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
        """serving_default on a (merged) batch: `{log_probs, output_lengths, transcripts}` as numpy arrays."""
        outputs = self._forward(**{WAVEFORMS: tf.constant(waveforms), LENGTHS: tf.constant(lengths)})
        return {k: v.numpy() for k, v in outputs.items()}

    def nbest(self, log_probs: np.ndarray, lengths: np.ndarray, n: int, hotwords=None, stop=None
              ) -> tuple[np.ndarray, np.ndarray]:
        """The beam decoder's n best hypotheses per utterance: `(texts (batch, n) object, scores (batch, n))`, with
        `hotwords` (`Work.hotwords`; None: the server's). `stop` is called before each frame of the searches; what it
        raises ends them (a request nobody waits for)."""
        texts = np.full((len(lengths), n), b"", dtype=object)
        scores = np.full((len(lengths), n), -np.inf, np.float32)
        for b, steps in enumerate(lengths):
            beams = self.decoder.search.nbest(log_probs[b, :steps], n, hotwords, stop)
            for k, (text, score) in enumerate(beams):
                texts[b, k], scores[b, k] = text.encode("utf-8"), score
        return texts, scores

    def words(self, log_probs: np.ndarray, output_lengths: np.ndarray, lengths: np.ndarray, hotwords=None,
              stop=None) -> dict[str, np.ndarray]:
        """Each utterance's words with their times and confidences (`decode_words`, with this export's clock and word
        config), as the `WORD_OUTPUTS` arrays (`word_outputs`).

        Args:
            log_probs: float32 (batch, steps, vocab); output_lengths: int (batch,) their valid steps.
            lengths: int (batch,) the audio's samples (times are clipped to its end).
            hotwords: `Work.hotwords` (None: the server's).
            stop: as `nbest`'s.
        """
        timed = []
        for b, steps in enumerate(output_lengths):
            timed.append(decode_words(self.decoder.search, log_probs[b, :steps], self.clock, self.word_config,
                                      hotwords, duration=int(lengths[b]) / self.sample_rate, stop=stop)[1])
        return word_outputs(timed)

    def warm_up(self, predict) -> int:
        """Replay assets.extra/tf_serving_warmup_requests through `predict(request, servable)`; returns the count."""
        from tensorflow_serving.apis import prediction_log_pb2

        path = self.path / ASSETS_EXTRA / WARMUP_REQUESTS
        if not path.is_file():
            return 0
        count = 0
        for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
            log = prediction_log_pb2.PredictionLog.FromString(record)
            if log.HasField("predict_log"):
                predict(log.predict_log.request, self)
                count += 1
        return count


class StreamRunner:
    """stream_step of one version, as a batch key: steps of different streams share a forward pass, but never
    one with whole utterances (`Servable.run`)."""

    def __init__(self, signature):
        self._signature = signature

    def run(self, waveforms: np.ndarray, lengths: np.ndarray, state: np.ndarray, final: np.ndarray
            ) -> dict[str, np.ndarray]:
        """stream_step on a (merged) batch of streams: `{log_probs, output_lengths, transcripts, state}`."""
        outputs = self._signature(**{WAVEFORMS: tf.constant(waveforms), LENGTHS: tf.constant(lengths),
                                     STATE: tf.constant(state), FINAL: tf.constant(final)})
        return {k: v.numpy() for k, v in outputs.items()}


OUTPUT_TIME_KEYS = (LOG_PROBS,)  # outputs with time on axis 1 (cut per request after batching)


__all__ = ["NBEST_SCORES", "NBEST_TRANSCRIPTS", "OUTPUT_TIME_KEYS", "SESSION_TRANSCRIPTS", "Servable", "StreamRunner",
           "WORD_CONFIDENCES", "WORD_ENDS", "WORD_OUTPUTS", "WORD_PAD", "WORD_STARTS", "WORD_TEXTS", "signature_defs",
           "word_outputs"]
