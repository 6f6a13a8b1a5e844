"""Streaming recognition: the chunked step gives the offline model's log-probs for any chunking, partial transcripts
grow as the offline greedy transcript of the audio so far, and models that can't stream are refused."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.audio import speech_like_clip
from deepspeech2.decode import GreedyStream, greedy_decode
from deepspeech2.features import FeatureConfig, Normalizer, featurize, num_frames
from deepspeech2.geometry import output_length
from deepspeech2.model import build_model
from deepspeech2.model_config import DS2_STREAMING, TINY
from deepspeech2.streaming import StreamingModel, check_streamable, streaming_step
from deepspeech2.vocab import Vocabulary

RATE = 16000
# The ds2-streaming preset's structure (two 3x3 stride-2 "valid" convs, unidirectional GRUs, row conv τ = 3),
# with few units so the tests are fast.
SMALL_STREAMING = dataclasses.replace(DS2_STREAMING, conv_filters=(4, 4), rnn_layers=2, rnn_units=16)
# Everything else a streaming model can have: "same" padding with a time kernel of 5 and strides 2 then 1, an
# FC layer on each side of the RNNs, LSTM cells, dropout after them, row conv τ = 2, log-mel features with a
# pitch-gram.
SAME_LSTM_FEATURES = FeatureConfig(kind="logmel", pitch_bins=16)
SAME_LSTM = dataclasses.replace(
    DS2_STREAMING, feature_kind="logmel", feature_dim=SAME_LSTM_FEATURES.dim, conv_filters=(3, 4),
    conv_kernel_sizes=((5, 3), (3, 3)),
    conv_strides=((2, 2), (1, 2)), conv_padding="same", fc_before_units=(12,), rnn_type="lstm", rnn_layers=2,
    rnn_units=8, rnn_dropout=0.2, row_conv_context=2, fc_after_units=(10,))
CHUNK_SAMPLES = (160, 480, 1000, 1600, 4801, 16000)  # 10 ms, 30 ms, odd sizes, 100 ms, 0.3 s, 1 s


def random_streaming(config, seed=0, features=None):
    """`config` built with seeded random weights, and BN moving statistics and a normalizer far from the identity,
    so every per-frame affine map matters."""
    keras.utils.set_random_seed(seed)
    model = build_model(config)
    rng = np.random.default_rng(seed)
    for w in model.weights:
        if w.path.endswith("moving_mean"):
            w.assign(rng.normal(0, 0.3, w.shape).astype(np.float32))
        elif w.path.endswith("moving_variance"):
            w.assign(rng.uniform(0.3, 3.0, w.shape).astype(np.float32))
        elif w.path.endswith("beta"):
            w.assign(rng.normal(0, 0.2, w.shape).astype(np.float32))
    features = features or FeatureConfig(kind=config.feature_kind)
    normalizer = Normalizer(rng.normal(-8, 1, features.dim).astype(np.float32),
                            rng.uniform(1, 3, features.dim).astype(np.float32), features)
    return StreamingModel(model, config, features, normalizer)


def offline_log_probs(streaming, wave):
    """The whole utterance through featurize and the Keras model: `(output_steps, vocab)`."""
    features, frames = featurize(wave[None], np.array([len(wave)]), streaming.feature_config, streaming.normalizer)
    outputs = streaming.model({"features": features, "feature_lengths": frames}, training=False)
    steps = int(outputs["output_lengths"][0])
    return tf.nn.log_softmax(outputs["logits"])[0, :steps].numpy()


def stream(step, streaming, wave, chunks):
    """`wave` through `step` in chunks of the given sizes (cycled); the log-probs concatenated."""
    state = streaming.initial_state(1)
    out, start, k = [], 0, 0
    while True:
        size = chunks[k % len(chunks)]
        piece = wave[start:start + size]
        start, k = start + size, k + 1
        final = start >= len(wave)
        log_probs, lengths, state = step(piece[None], np.array([len(piece)], np.int32), state, np.array([final]))
        out.append(log_probs[0, :int(lengths[0])].numpy())
        if final:
            return np.concatenate(out)


@pytest.fixture(scope="module")
def valid_model():
    streaming = random_streaming(SMALL_STREAMING)
    return streaming, streaming_step(streaming)


@pytest.fixture(scope="module")
def same_model():
    streaming = random_streaming(SAME_LSTM, seed=1, features=SAME_LSTM_FEATURES)
    return streaming, streaming_step(streaming)


@pytest.fixture(scope="module")
def wave():
    return speech_like_clip(1.37, seed=3)  # not a whole number of hops, windows or strides


@pytest.mark.parametrize("chunk", CHUNK_SAMPLES)
def test_any_chunk_size_gives_the_offline_log_probs(valid_model, wave, chunk):
    streaming, step = valid_model
    reference = offline_log_probs(streaming, wave)
    assert reference.shape[0] == output_length(SMALL_STREAMING, num_frames(len(wave), streaming.feature_config))
    np.testing.assert_allclose(stream(step, streaming, wave, [chunk]), reference, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk", (160, 1600, 16000))
def test_same_padding_lstm_fc_and_logmel_pitch_stream_exactly(same_model, wave, chunk):
    streaming, step = same_model
    np.testing.assert_allclose(stream(step, streaming, wave, [chunk]), offline_log_probs(streaming, wave),
                               atol=2e-5, rtol=1e-5)


def test_chunks_of_changing_sizes_and_empty_chunks(valid_model, same_model, wave):
    for streaming, step in (valid_model, same_model):
        chunks = [0, 1, 319, 160, 3333, 0, 7, 2000]  # nothing, single samples, less than a window, ...
        np.testing.assert_allclose(stream(step, streaming, wave, chunks), offline_log_probs(streaming, wave),
                                   atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("seconds", (0.3, 0.05, 0.0))
def test_an_utterance_shorter_than_one_chunk(valid_model, same_model, seconds):
    clip = speech_like_clip(seconds, seed=5) if seconds else np.zeros(0, np.float32)
    for streaming, step in (valid_model, same_model):
        got = stream(step, streaming, clip, [RATE])  # one 1 s chunk, the final one
        steps = output_length(streaming.model_config, num_frames(len(clip), streaming.feature_config))
        if steps == 0:  # shorter than the receptive field: no output step (the Keras model can't even run)
            assert got.shape[0] == 0
        else:
            np.testing.assert_allclose(got, offline_log_probs(streaming, clip), atol=2e-5, rtol=1e-5)


def test_streams_in_one_batch_are_independent(valid_model):
    """Rows of one step are different streams with their own chunk lengths and states (Batch Dispatch)."""
    streaming, step = valid_model
    waves = [speech_like_clip(s, seed=i) for i, s in enumerate((0.9, 1.4, 0.45))]
    sizes = [1600, 2500, 700]
    states = streaming.initial_state(3)
    got = [[], [], []]
    pos = [0, 0, 0]
    while not all(p >= len(w) for p, w in zip(pos, waves)):
        rows = [w[p:p + s] for w, p, s in zip(waves, pos, sizes)]
        lengths = np.array([len(r) for r in rows], np.int32)
        batch = np.zeros((3, max(lengths.max(), 1)), np.float32)
        for i, r in enumerate(rows):
            batch[i, :len(r)] = r
        pos = [p + s for p, s in zip(pos, sizes)]
        # A stream that has ended keeps sending empty final chunks; its state is spent, outputs empty.
        final = np.array([p >= len(w) for p, w in zip(pos, waves)])
        done_before = [p - s >= len(w) for p, s, w in zip(pos, sizes, waves)]
        states = np.where(np.array(done_before)[:, None], 0.0, states).astype(np.float32)
        log_probs, n, states = step(batch, lengths, states, final)
        for i in range(3):
            if not done_before[i]:
                got[i].append(log_probs[i, :int(n[i])].numpy())
    for i, w in enumerate(waves):
        np.testing.assert_allclose(np.concatenate(got[i]), offline_log_probs(streaming, w), atol=2e-5, rtol=1e-5)


def test_state_layout_is_one_float_vector_with_zeros_as_a_new_stream(valid_model):
    streaming, _ = valid_model
    names = [s.name for s in streaming.layout]
    assert names == ["audio", "audio_count", "conv0", "conv0_count", "conv1", "conv1_count", "rnn0", "rnn1",
                     "row_conv", "row_conv_count", "last_label"]
    assert streaming.layout[0].shape == (319,)  # window - 1 samples of STFT overlap
    assert streaming.layout[2].shape == (2, 161, 1) and streaming.layout[4].shape == (2, 80, 4)  # kt - 1 frames
    assert streaming.layout[8].shape == (3, 16)  # τ RNN outputs
    offsets = [s.offset for s in streaming.layout]
    assert offsets == sorted(offsets) and streaming.state_size == sum(s.size for s in streaming.layout)
    assert streaming.initial_state(2).shape == (2, streaming.state_size) and not streaming.initial_state(2).any()
    assert streaming.layout_dict()["segments"][0] == {"name": "audio", "shape": [319], "offset": 0, "size": 319}


def test_greedy_partials_grow_as_the_offline_greedy_transcript(valid_model, wave):
    streaming, step = valid_model
    vocab = Vocabulary.english()
    greedy, state, seen = GreedyStream(vocab), streaming.initial_state(1), []
    for start in range(0, len(wave), 1600):
        piece = wave[start:start + 1600]
        final = start + 1600 >= len(wave)
        lp, n, state = step(piece[None], np.array([len(piece)], np.int32), state, np.array([final]))
        seen.append(lp[0, :int(n[0])].numpy())
        text = greedy.update(seen[-1])
        so_far = np.concatenate(seen)
        expected = " ".join(vocab.decode(greedy_decode(so_far[None], [len(so_far)])[0]).split())
        assert text == expected
    assert greedy.steps == len(offline_log_probs(streaming, wave))


def test_models_that_cannot_stream_are_refused():
    with pytest.raises(ValueError, match="bidirectional"):
        check_streamable(TINY, FeatureConfig())
    with pytest.raises(ValueError, match="utterance_cmn"):
        check_streamable(dataclasses.replace(SMALL_STREAMING, utterance_cmn=True), FeatureConfig())
    with pytest.raises(ValueError, match="mfcc_context"):
        check_streamable(dataclasses.replace(SMALL_STREAMING, feature_kind="mfcc", feature_dim=494),
                         FeatureConfig(kind="mfcc"))
    with pytest.raises(ValueError, match="stride"):
        check_streamable(dataclasses.replace(SMALL_STREAMING, conv_kernel_sizes=((3, 3), (1, 3))),
                         FeatureConfig())
    with pytest.raises(ValueError, match="logmel"):
        StreamingModel(build_model(SMALL_STREAMING), SMALL_STREAMING, FeatureConfig(kind="logmel"))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])  # float32: tests/test_stream_serving.py
def test_a_model_trained_under_each_precision_policy_exports_and_streams(policy, tmp_path):
    """ds2-train's mixed policies (`--mixed_precision auto` picks bf16 on CPUs with AVX512-BF16): train, export with
    the stream_step signature, and stream a clip through the SavedModel; the streamed log-probs equal its
    offline ones within the policy's precision. (bf16 models failed here: float32 state met bf16 layers.)"""
    from deepspeech2.data.pipeline import PipelineConfig
    from deepspeech2.data.shards import ShardConfig, make_shards
    from deepspeech2.prepare.stats import compute_mean_std
    from factories import make_manifest
    from deepspeech2.train.config import OptimizationConfig, TrainConfig
    from deepspeech2.train.trainer import train
    from deepspeech2_export import SERVING_DEFAULT, STREAM_STEP
    from deepspeech2_export.saved_model import ExportConfig, export_model

    manifest, _ = make_manifest(tmp_path, n=4, min_seconds=0.8, max_seconds=1.2)
    Vocabulary.english().save(tmp_path / "vocab.txt")
    make_shards(manifest, Vocabulary.english(), ShardConfig(str(tmp_path / "shards")), progress=False)
    compute_mean_std([manifest], FeatureConfig()).save(tmp_path / "mean_std.npz")
    train(TrainConfig(workdir=str(tmp_path / "run"), train_shards=(str(tmp_path / "shards"),),
                      vocab_path=str(tmp_path / "vocab.txt"), normalizer_path=str(tmp_path / "mean_std.npz"),
                      model=SMALL_STREAMING, pipeline=PipelineConfig(batch_size=4, num_buckets=0), epochs=1,
                      optimization=OptimizationConfig(warmup_steps=1), mixed_precision=policy, verbose=0))
    assert keras.mixed_precision.global_policy().name == "float32"  # the trainer put the global policy back
    version = export_model(ExportConfig(str(tmp_path / "run" / "model"), str(tmp_path / "export"),
                                        max_audio_seconds=4.0))
    loaded = tf.saved_model.load(str(version))
    assert STREAM_STEP in loaded.signatures
    pcm = (np.round(speech_like_clip(1.37, seed=3) * 32767) / 32768).astype(np.float32)
    offline = loaded.signatures[SERVING_DEFAULT](waveforms=tf.constant(pcm[None]), lengths=tf.constant([len(pcm)]))
    expected = offline["log_probs"][0, :int(offline["output_lengths"][0])].numpy()
    step = loaded.signatures[STREAM_STEP]
    state = tf.zeros([1, step.structured_input_signature[1]["state"].shape[1]])
    out = []
    for start in range(0, len(pcm), 1600):
        piece = pcm[start:start + 1600]
        result = step(waveforms=tf.constant(piece[None]), lengths=tf.constant([len(piece)], tf.int32),
                      state=state, final=tf.constant([start + 1600 >= len(pcm)]))
        state = result["state"]
        out.append(result["log_probs"][0, :int(result["output_lengths"][0])].numpy())
    streamed = np.concatenate(out)
    assert streamed.shape == expected.shape and np.isfinite(streamed).all()
    tolerance = {"mixed_float16": 0.02, "mixed_bfloat16": 0.1}[policy]
    np.testing.assert_allclose(streamed, expected, atol=tolerance)
