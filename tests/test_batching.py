"""Batch Dispatch (serving/batching.py) with a fake model: merging and splitting, eager batches, the batch size
limit, the timeout (only while busy, or always as TF Serving), the queue bound, a failing request isolated,
shutdown; TF Serving's parameters file."""

import threading
from pathlib import Path

import numpy as np
import pytest

from deepspeech2_serving.batching import Batcher, BatchingConfig, QueueFull, join, pieces

REPO = Path(__file__).resolve().parents[1]
WAIT = 30  # seconds any future may take in these tests (they finish in milliseconds)


class FakeModel:
    """Per row: the sum of its valid samples and `length // 10` output steps of its first sample; it can
    hold a batch until released, and fails on a row of length 13."""

    def __init__(self, block: bool = False):
        self.calls = []  # (key, rows, padded samples) per forward pass
        self.release = threading.Event()
        self.started = threading.Event()
        if not block:
            self.release.set()

    def __call__(self, key, waveforms, lengths):
        self.calls.append((key, len(lengths), waveforms.shape[1]))
        self.started.set()
        assert self.release.wait(WAIT)
        if 13 in lengths:
            raise ValueError("row of length 13")
        steps = lengths // 10
        out = np.zeros((len(lengths), max(int(steps.max()), 1)), np.float32)
        for i, (w, n) in enumerate(zip(waveforms, lengths)):
            out[i, :steps[i]] = w[0]
        sums = np.array([w[:n].sum() for w, n in zip(waveforms, lengths)])
        return {"sums": sums, "steps": steps, "frames": out}


def request(rows, length, value=1.0, pad=0):
    """`rows` rows of `length` samples of `value`, padded with `pad` zeros."""
    w = np.zeros((rows, length + pad), np.float32)
    w[:, :length] = value
    return w, np.full(rows, length, np.int32)


def make(config, model):
    return Batcher(config, model, length_key="steps", time_keys=("frames",))


def test_merged_batches_give_each_request_what_it_gets_alone():
    model = FakeModel(block=True)
    b = make(BatchingConfig(max_batch_size=8, num_batch_threads=1), model)
    first = b.submit("m", *request(1, 50, 9.0))  # runs alone (eager), and holds the worker
    assert model.started.wait(WAIT)
    futures = [b.submit("m", *request(rows, n, v, pad)) for rows, n, v, pad in [(2, 40, 2.0, 100), (1, 120, 3.0, 0),
                                                                               (3, 30, 4.0, 5)]]
    model.release.set()
    assert first.result(WAIT).batch_size == 1
    results = [f.result(WAIT) for f in futures]
    assert [r.batch_size for r in results] == [6, 6, 6]  # everything that queued meanwhile, in one pass
    assert model.calls[1] == ("m", 6, 120)  # padded to the longest valid row, not the requests' own padding
    for r, (rows, n, v) in zip(results, [(2, 40, 2.0), (1, 120, 3.0), (3, 30, 4.0)]):
        np.testing.assert_array_equal(r.outputs["sums"], np.full(rows, n * v))
        assert r.outputs["frames"].shape == (rows, n // 10)  # time axis cut back to the request's own steps
        np.testing.assert_array_equal(r.outputs["frames"], v)
    b.close(WAIT)


def test_max_batch_size_and_oversized_requests():
    model = FakeModel(block=True)
    b = make(BatchingConfig(max_batch_size=4, max_enqueued_batches=4, num_batch_threads=1), model)
    first = b.submit("m", *request(1, 20))
    assert model.started.wait(WAIT)
    futures = [b.submit("m", *request(rows, 20)) for rows in (3, 2, 6, 1)]
    model.release.set()
    sizes = [f.result(WAIT).batch_size for f in [first] + futures]
    # The oldest request always goes first, and later ones that still fit join it: [3, 1], then [2], then the
    # 6-row request on its own (never split).
    assert sizes == [1, 4, 2, 6, 4]
    assert [rows for _, rows, _ in model.calls] == [1, 4, 2, 6]
    b.close(WAIT)


def busy(max_batch_size: int, **kwargs):
    """One batch thread, held by a running batch of key "utterances" until `model.release`: (model, batcher,
    the running request's future)."""
    model = FakeModel(block=True)
    b = Batcher(BatchingConfig(max_batch_size=max_batch_size, num_batch_threads=1), model, length_key="steps",
                time_keys=("frames",), **kwargs)
    running = b.submit("utterances", *request(1, 20))
    assert model.started.wait(WAIT)
    return model, b, running


def test_stream_steps_go_before_utterances_queued_earlier():
    """Head-of-line: a live stream's next chunk doesn't wait behind utterances that queued while a batch ran."""
    model, b, running = busy(4)
    queued = [b.submit("utterances", *request(4, 1000)) for _ in range(3)]
    step = b.submit("stream", *request(1, 160), priority=1)
    model.release.set()
    for future in [running, step] + queued:
        future.result(WAIT)
    assert [key for key, _, _ in model.calls] == ["utterances", "stream", "utterances", "utterances", "utterances"]
    b.close(WAIT)


def test_short_requests_do_not_ride_in_a_batch_padded_to_a_long_one():
    """Head-of-line: 15 rows of 100 samples padded to one of 60000 would cost 16 long rows and wait as long."""
    model, b, running = busy(16)
    long, short, similar = b.submit("m", *request(1, 60000)), b.submit("m", *request(15, 100)), \
        b.submit("m", *request(1, 50000))
    model.release.set()
    assert running.result(WAIT).batch_size == 1
    assert long.result(WAIT).batch_size == similar.result(WAIT).batch_size == 2  # padding within MAX_PADDING
    assert short.result(WAIT).batch_size == 15
    assert [(rows, padded) for _, rows, padded in model.calls[1:]] == [(2, 60000), (15, 100)]
    b.close(WAIT)


def test_a_batch_stays_within_its_padded_samples():
    """A forward pass's memory grows with rows x the longest: requests join a batch only within `max_samples`."""
    model, b, running = busy(16, max_samples=1000)
    queued = [b.submit("m", *request(rows, 300)) for rows in (2, 1, 2)]
    model.release.set()
    assert [f.result(WAIT).batch_size for f in queued] == [3, 3, 2]  # 3 x 300 fit in 1000, a 4th row would not
    running.result(WAIT)
    b.close(WAIT)


def test_a_requests_pieces_join_back_in_its_row_order():
    lengths = np.array([100, 900, 300, 800, 50])
    groups = pieces(lengths, 1000)
    assert [g.tolist() for g in groups] == [[1], [3], [2, 0, 4]]  # longest first; 3 x 300 <= 1000
    parts = [{"steps": lengths[g] // 10, "frames": np.ones((len(g), int(lengths[g].max()) // 10)) * g[:, None]}
             for g in groups]
    joined = join(parts, groups, ("frames",))
    np.testing.assert_array_equal(joined["steps"], lengths // 10)
    assert joined["frames"].shape == (5, 90)
    for row, n in enumerate(lengths // 10):
        np.testing.assert_array_equal(joined["frames"][row, :n], row)


def test_a_second_batch_thread_takes_what_arrives_while_the_first_is_busy():
    model = FakeModel(block=True)
    b = make(BatchingConfig(max_batch_size=8, num_batch_threads=2), model)
    first = b.submit("m", *request(1, 20))
    assert model.started.wait(WAIT)
    model.started.clear()
    second = b.submit("m", *request(1, 30))
    assert model.started.wait(WAIT)  # started while the first is still running
    assert not first.done()
    model.release.set()
    assert first.result(WAIT).batch_size == second.result(WAIT).batch_size == 1
    assert BatchingConfig().threads >= 1
    b.close(WAIT)


def test_an_idle_server_runs_at_once_and_a_busy_one_lets_batches_fill():
    model = FakeModel(block=True)
    b = make(BatchingConfig(max_batch_size=3, batch_timeout_micros=60_000_000, num_batch_threads=2), model)
    first = b.submit("m", *request(1, 20))  # idle: runs at once despite the 60 s timeout
    assert model.started.wait(WAIT)
    model.started.clear()
    waiting = b.submit("m", *request(1, 20))  # busy: the free thread waits for the batch to fill...
    assert not model.started.wait(0.2)
    more = b.submit("m", *request(2, 20))  # ...which it now is: it runs, next to the first batch
    assert model.started.wait(WAIT)
    model.release.set()
    assert first.result(WAIT).batch_size == 1
    assert waiting.result(WAIT).batch_size == more.result(WAIT).batch_size == 3
    b.close(WAIT)


def test_tf_serving_rule_waits_for_the_timeout_even_when_idle():
    model = FakeModel()
    b = make(BatchingConfig(max_batch_size=2, batch_timeout_micros=60_000_000, wait_when_idle=True), model)
    one = b.submit("m", *request(1, 20))
    assert not model.started.wait(0.2)  # waiting for company (up to 60 s)
    two = b.submit("m", *request(1, 30))  # the batch is full: it runs now
    assert one.result(WAIT).batch_size == two.result(WAIT).batch_size == 2
    b.close(WAIT)


def test_full_queue_is_refused_at_once():
    model = FakeModel()
    b = make(BatchingConfig(max_batch_size=4, batch_timeout_micros=60_000_000, max_enqueued_batches=1,
                            wait_when_idle=True), model)
    waiting = b.submit("m", *request(3, 20))  # 3 of the 4 queued rows allowed, waiting for a 4th
    with pytest.raises(QueueFull, match="queue is full"):
        b.submit("m", *request(2, 20))
    assert not waiting.done()  # refused while the first was still queued: no waiting for room
    b.flush()  # shutdown: queued requests run now, without waiting for the timeout
    assert waiting.result(WAIT).batch_size == 3
    b.close(WAIT)
    with pytest.raises(RuntimeError, match="shutting down"):
        b.submit("m", *request(1, 20))


def test_a_failing_request_does_not_fail_its_batch():
    model = FakeModel(block=True)
    b = make(BatchingConfig(max_batch_size=8, num_batch_threads=1), model)
    first = b.submit("m", *request(1, 20))
    assert model.started.wait(WAIT)
    good, bad, good2 = (b.submit("m", *request(1, n)) for n in (20, 13, 40))
    model.release.set()
    first.result(WAIT)
    assert good.result(WAIT).outputs["sums"].tolist() == [20.0]
    assert good2.result(WAIT).outputs["sums"].tolist() == [40.0]
    with pytest.raises(ValueError, match="length 13"):
        bad.result(WAIT)
    b.close(WAIT)


def test_servables_never_share_a_batch():
    model = FakeModel(block=True)
    b = make(BatchingConfig(max_batch_size=8, num_batch_threads=1), model)
    first = b.submit("v1", *request(1, 20))
    assert model.started.wait(WAIT)
    futures = [b.submit(key, *request(1, 20)) for key in ("v1", "v2", "v1", "v2")]
    model.release.set()
    first.result(WAIT)
    assert [f.result(WAIT).batch_size for f in futures] == [2, 2, 2, 2]
    assert sorted(key for key, _, _ in model.calls[1:]) == ["v1", "v2"]
    b.close(WAIT)


def test_close_runs_what_is_queued():
    model = FakeModel()
    b = make(BatchingConfig(max_batch_size=8, batch_timeout_micros=60_000_000, wait_when_idle=True), model)
    futures = [b.submit("m", *request(1, 20)) for _ in range(3)]
    b.close(WAIT)
    assert [f.result(0).batch_size for f in futures] == [3, 3, 3]


def test_tf_serving_batching_parameters_file():
    config = BatchingConfig.from_text((REPO / "serving" / "batching_parameters.txt").read_text())
    assert config == BatchingConfig(batch_timeout_micros=0)  # TF Serving's CPU advice: eager, one thread per core
    assert BatchingConfig.from_text("max_batch_size { value: 4 }\nbatch_timeout_micros {value:1000}\n"
                                    "pad_variable_length_inputs: true", wait_when_idle=True) == \
        BatchingConfig(max_batch_size=4, batch_timeout_micros=1000, wait_when_idle=True)
    with pytest.raises(ValueError, match="unknown field `max_batch`"):
        BatchingConfig.from_text("max_batch { value: 4 }")
    with pytest.raises(ValueError, match="unknown field `wait_when_idle`"):  # ours, not TF Serving's
        BatchingConfig.from_text("wait_when_idle: true")
    with pytest.raises(ValueError, match="`max_batch_size` must be an int >= 1"):
        BatchingConfig.from_text("max_batch_size { value: 0 }")
