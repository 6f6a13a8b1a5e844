import json
from collections import Counter
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from deepspeech2.audio import load_audio
from deepspeech2.data.augment.config import parse_augmentation
from deepspeech2.data.pipeline import (PipelineConfig, ShardSet, count_infeasible, epoch_steps, make_dataset,
                                       padding_efficiency)
from deepspeech2.data.shards import ShardConfig, make_shards
from deepspeech2.features import FeatureConfig, Normalizer, compute_features, featurize
from deepspeech2.model_config import ModelConfig
from deepspeech2.vocab import Vocabulary

from factories import make_manifest

FC = FeatureConfig()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    manifest, utts = make_manifest(d, n=24, min_seconds=0.4, max_seconds=3.0)
    make_shards(manifest, Vocabulary.english(), ShardConfig(str(d / "shards"), num_shards=3), progress=False)
    return d, utts


def _texts(ds):
    return [t.decode() for *_, text in ds for t in text.numpy()]


def test_batches_match_features_and_labels(corpus):
    d, utts = corpus
    rng = np.random.default_rng(0)
    norm = Normalizer(rng.normal(size=161).astype(np.float32), rng.uniform(1, 2, 161).astype(np.float32), FC)
    ds = make_dataset([str(d / "shards")], FC, norm, config=PipelineConfig(batch_size=5), keep_text=True)
    by_text = {}
    for u in utts:
        by_text.setdefault(u.text, []).append(u)
    vocab = Vocabulary.english()
    seen = 0
    for feats, n, labels, nl, text in ds:
        assert feats.shape[0] == n.shape[0] == labels.shape[0] == nl.shape[0] == text.shape[0]
        assert feats.shape[1] == int(tf.reduce_max(n)) and feats.shape[2] == 161
        for i in range(feats.shape[0]):
            t = text[i].numpy().decode()
            assert labels[i, : nl[i]].numpy().tolist() == vocab.encode(t)
            assert not np.any(labels[i, nl[i]:].numpy()) and not np.any(feats[i, n[i]:].numpy())
            # Same features as computing them directly on the audio: one implementation everywhere.
            matches = []
            for u in by_text[t]:
                wav = load_audio(u.audio_filepath)
                ref, m = compute_features(wav, len(wav), FC)
                if int(m) == int(n[i]):
                    matches.append(np.abs(norm.apply(ref, m).numpy() - feats[i, : n[i]].numpy()).max())
            assert matches and min(matches) < 1e-4
            seen += 1
    assert seen == len(utts)


def test_sortagrad_first_epoch_sorted_then_shuffled(corpus):
    d, utts = corpus
    cfg = PipelineConfig(batch_size=4, num_buckets=3)
    lengths = [int(x) for _, n, *_ in make_dataset([str(d / "shards")], FC, config=cfg, epoch=0) for x in n]
    assert lengths == sorted(lengths) and len(lengths) == len(utts)  # exactly sorted across 3 shards
    e1 = _texts(make_dataset([str(d / "shards")], FC, config=cfg, epoch=1, keep_text=True))
    e2 = _texts(make_dataset([str(d / "shards")], FC, config=cfg, epoch=2, keep_text=True))
    assert sorted(e1) == sorted(e2) == sorted(u.text for u in utts)  # every utterance once per epoch
    assert e1 != e2
    # The same epoch is the same order (resume mid-epoch relies on it).
    assert e1 == _texts(make_dataset([str(d / "shards")], FC, config=cfg, epoch=1, keep_text=True))
    assert _texts(make_dataset([str(d / "shards")], FC, config=PipelineConfig(sortagrad=False, batch_size=4),
                               epoch=0, keep_text=True)) != _texts(
        make_dataset([str(d / "shards")], FC, config=cfg, epoch=0, keep_text=True))


def test_bucketing_improves_padding_efficiency(corpus):
    d, _ = corpus
    plain = padding_efficiency(make_dataset([str(d / "shards")], FC, config=PipelineConfig(
        batch_size=4, num_buckets=0, sortagrad=False), epoch=1))
    bucketed = padding_efficiency(make_dataset([str(d / "shards")], FC, config=PipelineConfig(
        batch_size=4, num_buckets=4, sortagrad=False), epoch=1))
    assert 0 < plain < bucketed <= 1


def test_batch_frames_bounds_padded_size(corpus):
    d, utts = corpus
    cfg = PipelineConfig(batch_frames=600, num_buckets=4, max_duration=3.0)
    total = 0
    for feats, n, *_ in make_dataset([str(d / "shards")], FC, config=cfg, epoch=1):
        total += feats.shape[0]
        assert feats.shape[0] == 1 or feats.shape[0] * feats.shape[1] <= 600 * 1.0 + feats.shape[1]
    assert total == len(utts)


def test_duration_filters(corpus):
    d, utts = corpus
    cfg = PipelineConfig(batch_size=8, min_duration=1.0, max_duration=2.0)
    texts = _texts(make_dataset([str(d / "shards")], FC, config=cfg, keep_text=True))
    assert len(texts) == sum(1.0 <= u.duration <= 2.0 for u in utts)


def test_augmentation_in_pipeline_only_when_training(corpus):
    d, _ = corpus
    aug = parse_augmentation([{"type": "volume", "params": {"min_gain_dBFS": 6, "max_gain_dBFS": 6}, "prob": 1.0},
                              {"type": "specaugment", "params": {"F": 10, "T": 5, "n_freq_masks": 1,
                                                                  "n_time_masks": 1, "p": 0.5, "W": 0},
                               "prob": 1.0}])
    cfg = PipelineConfig(batch_size=24)
    clean = next(iter(make_dataset([str(d / "shards")], FC, config=cfg)))[0].numpy()
    augmented = next(iter(make_dataset([str(d / "shards")], FC, augmentation=aug, config=cfg)))[0].numpy()
    evaluation = next(iter(make_dataset([str(d / "shards")], FC, augmentation=aug, config=cfg,
                                        training=False)))[0].numpy()
    np.testing.assert_allclose(evaluation, clean)
    assert not np.allclose(augmented, clean)


def test_input_context_shards_files_across_workers(corpus):
    d, utts = corpus
    cfg = PipelineConfig(batch_size=4)
    parts = []
    for i in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2)
        ds = make_dataset([str(d / "shards")], FC, config=cfg, keep_text=True, input_context=ctx)
        assert all(b[0].shape[0] <= 2 for b in ds)  # per-replica batch = 4 // 2
        parts.append(_texts(ds))
    assert sorted(parts[0] + parts[1]) == sorted(u.text for u in utts)
    ctx = tf.distribute.InputContext(num_input_pipelines=4, input_pipeline_id=0, num_replicas_in_sync=4)
    with pytest.raises(ValueError, match="--num_shards"):
        make_dataset([str(d / "shards")], FC, config=cfg, input_context=ctx)


def _steps(ds, replicas):
    """The pipeline's elements as steps: `replicas` consecutive batches each (tf.distribute's turns)."""
    batches = [tuple(t.numpy() for t in b) for b in ds]
    assert len(batches) % replicas == 0
    return [batches[i:i + replicas] for i in range(0, len(batches), replicas)]


@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("epoch, cfg", [
    (0, PipelineConfig(batch_size=6, num_buckets=0)),  # SortaGrad's sorted epoch, by count
    (1, PipelineConfig(batch_size=6, num_buckets=3)),  # shuffled, bucketed
    (1, PipelineConfig(batch_frames=1500, num_buckets=3, max_duration=3.0)),  # a global budget of frames
])
def test_a_steps_replicas_share_one_padded_batch(corpus, replicas, epoch, cfg):
    """With several replicas each step is one padded batch (the one a single device would train on) split in
    equal parts: every replica of every step has a batch of the same shape, the last ones filled up with rows
    of no frames, and the utterances are each seen once."""
    d, utts = corpus
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=replicas)
    steps = _steps(make_dataset([str(d / "shards")], FC, config=cfg, epoch=epoch, keep_text=True,
                                input_context=context), replicas)
    single = [tuple(t.numpy() for t in b) for b in make_dataset([str(d / "shards")], FC, config=cfg, epoch=epoch,
                                                                 keep_text=True)]
    assert len(steps) == len(single)
    seen = []
    for parts, whole in zip(steps, single):
        assert len({p[0].shape for p in parts}) == 1  # one shape: no replica waits for a longer batch
        features, lengths, labels, label_lengths, text = (np.concatenate(x) for x in zip(*parts))
        real = lengths > 0
        assert real[:real.sum()].all()  # filler rows only at the end
        assert real.sum() == len(whole[1]) and len(lengths) - real.sum() < replicas
        np.testing.assert_array_equal(lengths[real], whole[1])  # the single device's batch, in its order
        np.testing.assert_array_equal(features[real][:, :whole[0].shape[1]], whole[0])
        assert not features[~real].any() and not label_lengths[~real].any() and set(text[~real]) <= {b""}
        if cfg.batch_frames:
            assert real.sum() * features.shape[1] <= cfg.batch_frames or real.sum() <= replicas
        seen += [t.decode() for t in text[real]]
    assert sorted(seen) == sorted(u.text for u in utts)


@pytest.mark.parametrize("epoch, cfg, workers", [
    (0, PipelineConfig(batch_size=5, num_buckets=0), 1),
    (1, PipelineConfig(batch_size=4, num_buckets=3), 1),
    (0, PipelineConfig(batch_frames=900, num_buckets=4, max_duration=3.0), 1),
    (1, PipelineConfig(batch_frames=900, num_buckets=2, max_duration=2.5, min_duration=0.5), 1),
    (1, PipelineConfig(batch_size=4, num_buckets=2), 2),
])
def test_epoch_steps_planned_from_the_indexes_are_the_batches(corpus, epoch, cfg, workers):
    d, _ = corpus
    model = ModelConfig(rnn_layers=1, rnn_units=8)
    planned = epoch_steps([str(d / "shards")], FC, model, cfg, sorted_epoch=epoch == 0, pipelines=workers)
    counted = []
    for worker in range(workers):
        context = tf.distribute.InputContext(num_input_pipelines=workers, input_pipeline_id=worker,
                                             num_replicas_in_sync=workers)
        counted.append(sum(1 for _ in make_dataset([str(d / "shards")], FC, config=cfg, epoch=epoch,
                                                   model_config=model, input_context=context)))
    assert planned == max(counted) > 0


def test_mirrored_strategy_distributes(corpus):
    d, utts = corpus
    code = textwrap.dedent(f"""
        import json, tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from deepspeech2.data.pipeline import PipelineConfig, make_dataset
        from deepspeech2.features import FeatureConfig
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        ds = strategy.distribute_datasets_from_function(lambda ctx: make_dataset(
            [{str(d / "shards")!r}], FeatureConfig(), config=PipelineConfig(batch_size=6), input_context=ctx))
        sizes = [[int(tf.reduce_sum(tf.cast(n > 0, tf.int32))) for n in strategy.experimental_local_results(b[1])]
                 for b in ds]
        print(json.dumps(sizes))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    sizes = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(len(s) == 2 for s in sizes) and all(x <= 3 for s in sizes for x in s)
    assert sum(map(sum, sizes)) == len(utts)  # replicas take turns: the data set is seen once


def test_shardset_merge_order():
    s = ShardSet(("a", "b", "c"), ((1.0, 4.0), (2.0, 3.0, 9.0), (0.5,)))
    assert s.merge_order().tolist() == [2, 0, 1, 1, 0, 1]


def test_feature_augmentation_leaves_the_pitch_gram_alone(corpus):
    """VTLP warps the spectral bins only: the pitch-gram's lags are pitch, not formants."""
    d, _ = corpus
    fc = FeatureConfig(pitch_bins=12)
    aug = parse_augmentation([{"type": "vtlp", "params": {"min_warp": 0.8, "max_warp": 0.8}, "prob": 1.0}])
    cfg = PipelineConfig(batch_size=24)
    clean = next(iter(make_dataset([str(d / "shards")], fc, config=cfg)))[0].numpy()
    warped = next(iter(make_dataset([str(d / "shards")], fc, augmentation=aug, config=cfg)))[0].numpy()
    assert clean.shape[-1] == fc.dim == 161 + 12
    np.testing.assert_array_equal(warped[..., 161:], clean[..., 161:])
    assert not np.allclose(warped[..., :161], clean[..., :161])


def test_mismatched_normalizer(corpus):
    d, _ = corpus
    norm = Normalizer(np.zeros(80, np.float32), np.ones(80, np.float32), FeatureConfig(kind="logmel"))
    with pytest.raises(ValueError, match="ds2-compute-stats"):
        make_dataset([str(d / "shards")], FC, norm)


def _reference_steps(samples: int, time_kernel: int, time_stride: int) -> int:
    """Output steps of one "valid" conv over 20 ms / 10 ms frames at 16 kHz, written out independently."""
    frames = max(0, 1 + (samples - 320) // 160)
    return max(0, (frames - time_kernel) // time_stride + 1)


def _reference_label_steps(labels) -> int:
    """The shortest CTC path: the labels with a blank inserted between equal neighbours."""
    return len(labels) + sum(a == b for a, b in zip(labels, labels[1:]))


# One conv with a huge time stride, so that the shorter utterances can't fit their transcripts.
WIDE = ModelConfig(conv_filters=(4,), conv_kernel_sizes=((3, 3),), conv_strides=((12, 2),), rnn_layers=1,
                   rnn_units=8)


def _fits(u, samples, vocab=Vocabulary.english()) -> bool:
    return _reference_steps(samples, 3, 12) >= _reference_label_steps(vocab.encode(u.text))


def test_ctc_infeasible_utterances_filtered_and_counted(corpus):
    d, utts = corpus
    fit = [_fits(u, len(load_audio(u.audio_filepath))) for u in utts]
    bad, total = count_infeasible([str(d / "shards")], FC, WIDE)
    assert total == len(utts) and bad == fit.count(False) and 0 < bad < len(utts)
    kept = _texts(make_dataset([str(d / "shards")], FC, config=PipelineConfig(batch_size=8), keep_text=True,
                               model_config=WIDE))
    # Transcripts repeat over the corpus: compare how many of each are kept.
    assert Counter(kept) == Counter(u.text for u, ok in zip(utts, fit) if ok)
    # The duration limits count too: only utterances within them are in `total`.
    cfg = PipelineConfig(min_duration=1.0, max_duration=2.0)
    assert count_infeasible([str(d / "shards")], FC, WIDE, cfg)[1] == sum(
        1.0 <= len(load_audio(u.audio_filepath)) / 16000 <= 2.0 for u in utts)


def test_count_infeasible_needs_a_current_index(corpus, tmp_path):
    d, _ = corpus
    index = json.loads((d / "shards" / "index.json").read_text())
    for s in index["shards"]:
        del s["num_samples"]  # as ds2-make-shards wrote it before per-record samples
    (tmp_path / "index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="re-run ds2-make-shards"):
        count_infeasible([str(tmp_path)], FC, WIDE)


def test_ctc_filter_judges_the_augmented_length(corpus):
    # Speed perturbation at 2x halves every utterance: the filter must judge the audio after it, so
    # utterances that fit at their recorded length are dropped when they no longer fit.
    d, utts = corpus
    aug = parse_augmentation([{"type": "speed", "params": {"min_speed_rate": 2.0, "max_speed_rate": 2.0},
                               "prob": 1.0}])
    kept = Counter(_texts(make_dataset([str(d / "shards")], FC, augmentation=aug,
                                       config=PipelineConfig(batch_size=8), keep_text=True, model_config=WIDE)))
    lengths = [len(load_audio(u.audio_filepath)) for u in utts]
    # 2x speed leaves n / 2 samples, give or take the rate's quantization (0.25%): keep clear of the edge.
    surely_in = Counter(u.text for u, n in zip(utts, lengths) if _fits(u, n // 2 - 400))
    maybe_in = Counter(u.text for u, n in zip(utts, lengths) if _fits(u, n // 2 + 400))
    assert any(_fits(u, n) and not _fits(u, n // 2 + 400) for u, n in zip(utts, lengths))  # it matters here
    assert all(surely_in[t] <= kept[t] <= maybe_in[t] for t in set(kept) | set(maybe_in))
    assert sum(kept.values()) < sum(_fits(u, n) for u, n in zip(utts, lengths))


def test_specaugment_masks_hold_the_per_bin_mean_after_normalization(corpus):
    # SpecAugment runs on normalized features (PaddleSpeech's order): a masked cell must be the per-bin
    # mean in z-score units, i.e. exactly what the normalizer makes of the mean itself: 0. Masking raw log
    # power with 0 before normalizing gave (0 - mean) / std instead, a loud band.
    d, utts = corpus
    rng = np.random.default_rng(1)
    norm = Normalizer((rng.normal(size=161) + 5).astype(np.float32), rng.uniform(1, 2, 161).astype(np.float32), FC)
    mask_value = norm.apply(norm.mean[None], 1).numpy()[0]  # (161,)
    np.testing.assert_array_equal(mask_value, 0.0)
    aug = parse_augmentation([{"type": "specaugment", "params": {"F": 30, "T": 20, "n_freq_masks": 2,
                                                                  "n_time_masks": 2}, "prob": 1.0}])
    masked_cells = 0
    for feats, n, _, _, text in make_dataset([str(d / "shards")], FC, norm, aug, PipelineConfig(batch_size=8),
                                             keep_text=True):
        for i in range(feats.shape[0]):
            out = feats[i, : n[i]].numpy()
            refs = []
            for u in utts:
                if u.text == text[i].numpy().decode():
                    wav = load_audio(u.audio_filepath)
                    ref, m = featurize(wav, len(wav), FC, norm)
                    if int(m) == int(n[i]):
                        refs.append(ref.numpy())
            # Every cell is the normalized feature or, where masked, exactly the mask value.
            kept = max((np.isclose(out, ref, atol=1e-4) for ref in refs), key=np.sum)
            np.testing.assert_array_equal(out[~kept], np.broadcast_to(mask_value, out.shape)[~kept])
            masked_cells += int(np.sum(~kept))
            assert not np.any(feats[i, n[i]:].numpy())  # padding stays 0
    assert masked_cells > 0


def _drawn_gains(corpus_dir, epoch, context=None):
    """The volume gain (dB) drawn for each record, in stream order, for one epoch built as the trainer does.

    With a volume-only augmentation the log-power features move by 20 log10(gain) / (10 log10(e)) in every
    bin, so the gain is read back from the features against the same epoch without augmentation.
    """
    aug = parse_augmentation([{"type": "volume", "params": {"min_gain_dBFS": -10, "max_gain_dBFS": 10},
                               "prob": 1.0}])
    cfg = PipelineConfig(batch_size=4, seed=0)
    gains = []
    batches = zip(make_dataset([str(corpus_dir)], FC, None, aug, cfg, epoch=epoch, input_context=context),
                  make_dataset([str(corpus_dir)], FC, None, None, cfg, epoch=epoch, input_context=context))
    for (feats, n, *_), (clean, m, *_) in batches:
        np.testing.assert_array_equal(n, m)  # the same records in the same order
        for i in range(feats.shape[0]):
            diff = (feats[i, : n[i]] - clean[i, : n[i]]).numpy()
            gains.append(float(np.median(diff)) * 10 / np.log(10))
    return np.array(gains)


def _shared(a, b, tol=1e-3):
    """Fraction of the draws in `a` also found (within `tol` dB) among those of `b`."""
    return float(np.mean([np.any(np.abs(b - x) < tol) for x in a]))


def test_augmentation_draws_change_per_epoch_and_worker_and_repeat_on_rebuild(corpus):
    # The trainer seeds TF once (keras.utils.set_random_seed) and rebuilds the dataset every epoch; a
    # resumed run seeds again and rebuilds the epoch it stopped in.
    import keras

    d, utts = corpus
    shards = d / "shards"
    keras.utils.set_random_seed(0)
    e0, e1, e2 = (_drawn_gains(shards, e) for e in (0, 1, 2))
    keras.utils.set_random_seed(0)
    e1_again = _drawn_gains(shards, 1)
    assert len(e0) == len(e1) == len(e2) == len(utts)
    assert np.all(np.abs(e1) <= 10.01) and np.std(e1) > 3  # real draws in [-10, 10] dB
    np.testing.assert_allclose(e1_again, e1, atol=1e-4)  # resuming epoch 1 replays its draws
    # Each epoch draws anew: hardly any value recurs (replayed draws would all recur, in any order).
    assert _shared(e1, e0) < 0.2 and _shared(e2, e1) < 0.2
    # Each worker draws its own (replayed streams would give worker 1 a copy of worker 0's first draws).
    workers = [_drawn_gains(shards, 1, tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                                                  num_replicas_in_sync=2)) for i in range(2)]
    assert len(workers[0]) + len(workers[1]) == len(utts)
    assert _shared(workers[1], workers[0]) < 0.2
