"""Shuffled epochs at LibriSpeech-like scale: 50,000 records in 64 duration-sorted shards.

The records hold 0.03-0.12 s of audio so that a whole epoch runs in seconds; what is tested is the order.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
from scipy.stats import spearmanr

from deepspeech2.data.pipeline import PipelineConfig, ShardSet, make_dataset, shuffle_plan
from deepspeech2.data.shards import INDEX, encode_example, shard_name
from deepspeech2.features import FeatureConfig

NUM_RECORDS = 50_000
NUM_SHARDS = 64
BATCH = 32


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """Shards laid out as make_shards writes them (sorted by duration inside each shard, with an index);
    the transcript of record k is "k", so the epoch order can be read back from the text."""
    d = tmp_path_factory.mktemp("big")
    samples = np.random.default_rng(0).integers(480, 1920, NUM_RECORDS)  # 0.03 to 0.12 s at 16 kHz
    shards = []
    for i in range(NUM_SHARDS):
        members = sorted(range(i, NUM_RECORDS, NUM_SHARDS), key=lambda k: (samples[k], k))
        with tf.io.TFRecordWriter(str(d / shard_name(i, NUM_SHARDS))) as writer:
            for k in members:
                writer.write(encode_example(np.zeros(samples[k], np.int16), 16000, str(k), [1], str(k)))
        shards.append({"path": shard_name(i, NUM_SHARDS), "count": len(members),
                       "durations": [round(samples[k] / 16000, 4) for k in members],
                       "num_samples": [int(samples[k]) for k in members], "label_steps": [1] * len(members)})
    (d / INDEX).write_text(json.dumps({"sample_rate": 16000, "shards": shards}))
    return str(d), samples


def _order(ds):
    """Record ids in epoch order, and the batches as lists of ids."""
    batches = [[int(t) for t in text.numpy()] for *_, text in ds]
    return [k for b in batches for k in b], batches


def test_shuffle_plan_reads_every_record_once(big):
    d, _ = big
    counts = ShardSet.load([d]).counts
    assert sum(counts) == NUM_RECORDS and len(counts) == NUM_SHARDS
    plan = shuffle_plan(counts, 16, seed=1)
    records = sorted((f, r) for f, start, n in plan for r in range(start, start + n))
    assert records == [(f, r) for f, n in enumerate(counts) for r in range(n)]
    assert plan[:, 2].min() >= 1 and plan[:, 2].max() <= 16
    np.testing.assert_array_equal(plan, shuffle_plan(counts, 16, seed=1))  # resume: same seed, same plan
    other = shuffle_plan(counts, 16, seed=2)
    assert not np.array_equal(plan[:, :2], other[:, :2])
    # Block boundaries move between epochs, so the same records don't always travel together.
    assert {tuple(b) for b in plan[:, :2]} != {tuple(b) for b in other[:, :2]}
    # Blocks come from all over the shards in any part of the epoch: the first block's starts are spread
    # over the whole shard (positions 0 .. ~780), not concentrated at the short end.
    first = plan[: len(plan) // 10]
    assert abs(spearmanr(np.arange(len(plan)), plan[:, 1]).statistic) < 0.05
    assert first[:, 1].mean() == pytest.approx(np.mean(counts) / 2, rel=0.15)


@pytest.mark.slow  # two passes over 50,000 records: a minute on 2 cores
def test_shuffled_epoch_is_random_at_scale(big):
    d, samples = big
    cfg = PipelineConfig(batch_size=BATCH)
    e1, batches = _order(make_dataset([d], FeatureConfig(), config=cfg, epoch=1, keep_text=True))
    assert sorted(e1) == list(range(NUM_RECORDS))  # every utterance exactly once
    # No trend of duration over the epoch (reading whole sorted shards gives ~0.25 here: a few sweeps).
    rho = spearmanr(np.arange(NUM_RECORDS), samples[e1]).statistic
    assert abs(rho) < 0.05, rho
    # Nor from one batch to the next (sweeps make neighbouring batches similar: ~0.6), while buckets keep
    # each batch's durations close together.
    means = np.array([samples[b].mean() for b in batches])
    lag1 = np.corrcoef(means[:-1], means[1:])[0, 1]
    assert abs(lag1) < 0.1, lag1
    spread = np.mean([np.ptp(samples[b]) for b in batches if len(b) == BATCH])
    assert spread < 0.5 * np.ptp(samples)

    # Another epoch is another order; the same epoch again is the same order (resuming mid-epoch skips
    # the batches already trained on). The first 100 batches show it without a third full pass.
    def head(epoch):
        return _order(make_dataset([d], FeatureConfig(), config=cfg, epoch=epoch, keep_text=True).take(100))[1]

    assert head(1) == batches[:100]
    assert head(2) != batches[:100]
