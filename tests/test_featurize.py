import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.audio import speech_like_clip
from deepspeech2.features import FeatureConfig, Normalizer, compute_features, featurize


@pytest.mark.parametrize("kind", ["linear", "logmel", "mfcc"])
def test_featurize_is_compute_features_then_normalize(kind):
    fc = FeatureConfig(kind=kind)
    rng = np.random.default_rng(0)
    norm = Normalizer(rng.normal(size=fc.dim).astype(np.float32), rng.uniform(0.5, 2, fc.dim).astype(np.float32), fc)
    clips = [speech_like_clip(s, seed=i) for i, s in enumerate([0.5, 1.3, 0.9])]
    lengths = np.array([len(c) for c in clips], np.int32)
    batch = np.zeros((3, lengths.max()), np.float32)
    for i, c in enumerate(clips):
        batch[i, : len(c)] = c

    feats, n = featurize(batch, lengths, fc, norm)
    ref, ref_n = compute_features(batch, lengths, fc)
    np.testing.assert_array_equal(n.numpy(), ref_n.numpy())
    np.testing.assert_allclose(feats.numpy(), norm.apply(ref, ref_n).numpy(), rtol=1e-6, atol=1e-6)
    # Padding frames stay zero after normalization, as the model's masks expect.
    for i in range(3):
        assert not np.any(feats[i, int(n[i]):].numpy())

    # One utterance: (frames, dim) and a scalar length, the rows of the batch.
    one, m = featurize(clips[1], len(clips[1]), fc, norm)
    assert one.shape == (int(n[1]), fc.dim) and m.shape == ()
    np.testing.assert_allclose(one.numpy(), feats[1, : int(n[1])].numpy(), rtol=1e-5, atol=1e-4)

    # Without a normalizer it is compute_features itself.
    np.testing.assert_array_equal(featurize(batch, lengths, fc)[0].numpy(), ref.numpy())


def test_featurize_in_a_tf_function():
    fc = FeatureConfig()
    norm = Normalizer(np.ones(fc.dim, np.float32), np.full(fc.dim, 2.0, np.float32), fc)
    fn = tf.function(lambda w, n: featurize(w, n, fc, norm),
                     input_signature=[tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.int32)])
    wav = speech_like_clip(1.0)[None]
    feats, n = fn(wav, np.array([wav.shape[1]], np.int32))
    ref, _ = compute_features(wav, [wav.shape[1]], fc)
    np.testing.assert_allclose(feats.numpy(), (ref.numpy() - 1.0) / 2.0, rtol=1e-5, atol=1e-5)


def test_featurize_refuses_a_normalizer_for_other_features():
    norm = Normalizer(np.zeros(80, np.float32), np.ones(80, np.float32), FeatureConfig(kind="logmel"))
    with pytest.raises(ValueError, match="ds2-compute-stats"):
        featurize(speech_like_clip(0.5), 8000, FeatureConfig(), norm)
