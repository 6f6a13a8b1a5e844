"""SavedModel export for TF Serving, installed as the package `deepspeech2_export`.

    saved_model.py  `ExportConfig`, `export_model`: a model bundle -> EXPORT_DIR/<model_name>/<version>/
    requests.py     `predict_request`, `wav_bytes`: requests for these signatures (clients, the warm-up file)
    tflite.py       `TFLiteConfig`, `export_tflite`: a model bundle -> one .tflite file (float32, dynamic-range or
                    int8), and `tflite_acoustic_model`, which runs one behind the bundle's features (ds2-infer)

The names below are the contract between an export and its servers (stock `tensorflow_model_server` and
`ds2-serve`). This module holds only these constants, so `deepspeech2_serving` can import them without
loading the exporter (which imports Keras and the model code the server must never load). The contract runs
one way: `deepspeech2_serving` imports this package, never the other way round.

Signatures (both give the same outputs):
    serving_default   waveforms float32 (batch, samples) in [-1, 1], zero-padded + lengths int32 (batch,)
    transcribe_wav    wav string (batch,): whole WAV files (16-bit PCM at the model's sample rate)
    outputs           log_probs float32 (batch, steps, vocab), output_lengths int32 (batch,),
                      transcripts string (batch,): greedy (best-path) transcripts, UTF-8

Streaming models (unidirectional, `deepspeech2.streaming`) also get
    stream_step       waveforms float32 (streams, samples): each stream's next chunk, zero-padded,
                      lengths int32 (streams,) (0 allowed), state float32 (streams, state_size) (zeros for a
                      new stream), final bool (streams,) (true on a stream's last chunk)
                      -> log_probs, output_lengths: the steps that became final with this chunk;
                         transcripts: their greedy text, repeats merged across chunks, not stripped (append it
                         to the stream's text); state: the state to send with the stream's next chunk
"""

SERVING_DEFAULT = "serving_default"  # TF Serving's default signature key
TRANSCRIBE_WAV = "transcribe_wav"
STREAM_STEP = "stream_step"  # streaming models only
SIGNATURES = (SERVING_DEFAULT, TRANSCRIBE_WAV)

WAVEFORMS = "waveforms"  # serving_default inputs
LENGTHS = "lengths"
WAV = "wav"  # transcribe_wav input
STATE = "state"  # stream_step input and output
FINAL = "final"  # stream_step input
LOG_PROBS = "log_probs"  # outputs
OUTPUT_LENGTHS = "output_lengths"
TRANSCRIPTS = "transcripts"
OUTPUTS = (LOG_PROBS, OUTPUT_LENGTHS, TRANSCRIPTS)

# The exported module also carries `decode_wav(wav) -> (waveforms, lengths)`, a plain tf.function (not a
# signature): the decoding half of transcribe_wav, which ds2-serve runs per request before batching.
DECODE_WAV = "decode_wav"

ASSETS_EXTRA = "assets.extra"  # TF Serving's folder for files that travel with a version
EXPORT_INFO = "export.json"  # in assets.extra/: sample rate, limits, signatures, where the model came from
DECODER_CONFIG = "decoder_config.json"  # in assets.extra/: the beam decoder ds2-serve runs for n-best requests
UNIGRAMS = "unigrams.txt"  # in assets.extra/: the LM's word list (when exported with an LM)
# In assets.extra/, with ds2-export --words_config: the word times' shifts and the confidences' calibration that
# ds2-serve applies to the words a request asks for (`deepspeech2.decode.words.WordConfig`; absent: none).
WORDS_CONFIG = "words.json"
# export.json's key for the model's clock, {"step": seconds per output step, "origin": seconds from the audio's start
# to the centre of step 0's receptive field} (`deepspeech2.decode.words.FrameClock`): a server times words with it
# without the model's code.
FRAME_CLOCK = "frame_clock"
WARMUP_REQUESTS = "tf_serving_warmup_requests"  # in assets.extra/: TF Serving's warm-up PredictionLog records

# The TFLite model's `serving_default` (tflite.py; one utterance per call, features computed outside):
#   features float32 (1, frames, feature_dim) from `deepspeech2.features.featurize`, feature_lengths int32 (1,)
#   -> log_probs float32 (1, steps, vocab), output_lengths int32 (1,)
FEATURES = "features"
FEATURE_LENGTHS = "feature_lengths"
TFLITE_METADATA = "deepspeech2"  # the .tflite's metadata entry: how it was made (JSON)

__all__ = ["ASSETS_EXTRA", "DECODER_CONFIG", "DECODE_WAV", "EXPORT_INFO", "FEATURES", "FEATURE_LENGTHS", "FINAL",
           "FRAME_CLOCK", "LENGTHS", "LOG_PROBS", "OUTPUTS", "OUTPUT_LENGTHS", "SERVING_DEFAULT", "SIGNATURES", "STATE",
           "STREAM_STEP", "TFLITE_METADATA", "TRANSCRIBE_WAV", "TRANSCRIPTS", "UNIGRAMS", "WARMUP_REQUESTS", "WAV",
           "WAVEFORMS", "WORDS_CONFIG"]
