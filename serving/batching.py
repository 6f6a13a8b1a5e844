"""Batch Dispatch (DS2 §7.1): concurrent requests merged into one forward pass, padded to the longest.

DS2 serves many users at once by running their audio through the model together: a batch of b utterances
costs far less than b single passes, because the RNN's recurrent matmuls become matrix-matrix products.
Its scheduler is eager: a batch runs as soon as a worker is free, with whatever has arrived by then, so
a lone request is never held back waiting for company, and under load the batches grow by themselves.

`Batcher` does that with TF Serving's knobs (the names of its `batching_parameters.txt`):
    max_batch_size        rows (utterances) per forward pass at most
    batch_timeout_micros  how long a batch that isn't full may wait for more rows while another batch is
                          running; 0: never (pure eager dispatch)
    num_batch_threads     batches that may run at the same time (default: one per core, as TF Serving): a
                          request that arrives while a batch runs can start on a free core
    max_enqueued_batches  the queue's bound, in batches of max_batch_size rows: a request that doesn't fit
                          is refused at once (`QueueFull`, gRPC RESOURCE_EXHAUSTED), never left to hang

One rule differs from TF Serving, whose batches always wait out the timeout: when no batch is running, a
request runs at once (DS2's eager dispatch: an idle server never holds a lone request back). The timeout
only applies while the server is busy, where it lets a batch fill instead of a second thread starting on
a few rows: with two threads and no timeout, saturation splits into a full batch and a small one, and
bench/serve.py measured ds2-small at ~120-145 audio-s/s that way against ~160 with 20 ms (the one-thread
figure), with the lone-request latency of two threads. `wait_when_idle` restores TF Serving's rule.

Streaming steps (stream_step) are batched the same way, across streams: each row is one stream's chunk, with
its state and `final` flag as extra per-row inputs (`submit(..., extras=...)`).

A request's rows stay together (it is never split here); one larger than max_batch_size runs as a batch of its
own (ds2-serve refuses such requests, and splits one over `max_samples` padded samples into several, before they
get here). Rows are padded with zeros to the batch's longest and the outputs cut back per request, so a request
gets exactly what it would get alone. A request joins a batch only while the batch stays within `max_samples`
padded samples (a forward pass's memory grows with them), and two rules keep one request from holding up the
others (head-of-line blocking):
    - a request joins a batch only while the batch, padded to its longest row, stays within `MAX_PADDING` times
      its audio: short requests don't ride (and wait) in a batch padded to one long utterance, they take the next
      free thread;
    - the queue is served by priority, then in order: ds2-serve submits stream steps (a live stream waits for each
      of its chunks) before whole utterances, so a burst of long utterances doesn't hold the streams back.
Requests for different servables (model versions) never share a batch. If a merged batch fails, each of its
requests is run alone, so one bad request can't fail the others. A request whose future was cancelled, or whose
deadline has passed, is dropped from the queue unrun (its future fails with `Expired`): a client that gave up costs
no forward pass.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)


TF_SERVING_FIELDS = ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")
MAX_PADDING = 4.0  # a request joins a batch only while the padded batch stays within this many times its audio
# Padded samples (rows x the longest) one forward pass carries at most: its activations, not the request's bytes, are
# what a large request costs (the demo's tiny model peaks near 120 MB per minute of audio in a pass). ds2-serve
# splits a request over it into several passes, run one after the other. 1,920,000: 2 minutes at 16 kHz.
MAX_BATCH_SAMPLES = 1_920_000


@dataclass(frozen=True)
class BatchingConfig:
    """TF Serving's batching parameters (the names of serving/batching_parameters.txt), and one rule of ours."""

    max_batch_size: int = 16  # rows (utterances) per forward pass at most
    batch_timeout_micros: int = 20_000  # while another batch runs, a batch that isn't full waits this long
    num_batch_threads: int = 0  # batches run at the same time; 0: one per CPU core (TF Serving's default)
    max_enqueued_batches: int = 8  # queue bound, in batches: more waiting rows are refused (RESOURCE_EXHAUSTED)
    wait_when_idle: bool = False  # TF Serving's rule: wait for the timeout even when no batch is running

    def __post_init__(self):
        for name, least in (("max_batch_size", 1), ("batch_timeout_micros", 0), ("num_batch_threads", 0),
                            ("max_enqueued_batches", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"`{name}` must be an int >= {least}, got {value!r}")

    @property
    def threads(self) -> int:
        """Batch threads: `num_batch_threads`, or one per CPU core for 0."""
        if self.num_batch_threads:
            return self.num_batch_threads
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            return os.cpu_count() or 1

    @property
    def max_queued_rows(self) -> int:
        return self.max_enqueued_batches * self.max_batch_size

    @classmethod
    def from_text(cls, text: str, **others) -> "BatchingConfig":
        """Read TF Serving's batching parameters file (text proto: `max_batch_size { value: 16 }` lines).

        The four fields above are read; `pad_variable_length_inputs` and the other fields TF Serving knows
        are accepted and ignored (ds2-serve always pads); any other is an error. A field the file leaves out
        keeps its default here; `others` sets fields that aren't TF Serving's (`wait_when_idle`).

        Raises:
            ValueError: an unknown field or a malformed line.
        """
        fields = set(TF_SERVING_FIELDS)
        ignored = {"pad_variable_length_inputs", "allowed_batch_sizes", "enable_large_batch_splitting",
                   "max_execution_batch_size", "thread_pool_name"}
        values = {}
        for n, line in enumerate(text.splitlines(), start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"(\w+)\s*(?:\{\s*value\s*:\s*(\S+?)\s*\}|:\s*(\S+))", line)
            if not m:
                raise ValueError(f"batching parameters line {n}: can't read {line!r}; expected `name {{ value: N }}`")
            name, value = m.group(1), m.group(2) or m.group(3)
            if name in fields:
                try:
                    values[name] = int(value)
                except ValueError:
                    raise ValueError(f"batching parameters line {n}: `{name}` must be an integer, got {value!r}") \
                        from None
            elif name not in ignored:
                raise ValueError(f"batching parameters line {n}: unknown field `{name}`; known: {sorted(fields)}")
        return cls(**values, **others)


class QueueFull(Exception):
    """The batch queue is full: the request is refused (RESOURCE_EXHAUSTED)."""


class Expired(Exception):
    """The request's deadline passed while it waited in the queue: it was dropped unrun (DEADLINE_EXCEEDED)."""


@dataclass
class _Item:
    key: object  # what runs it (a servable); only items with the same key share a batch
    waveforms: np.ndarray  # float32 (rows, samples)
    lengths: np.ndarray  # int32 (rows,)
    future: Future
    enqueued: float  # time.monotonic()
    extras: dict = None  # more per-row inputs (name -> array with rows on axis 0), passed to `run` by name
    deadline: float | None = None  # time.monotonic() after which nobody waits for it; None: no deadline
    priority: int = 0  # items of a higher priority are batched first

    @property
    def rows(self) -> int:
        return len(self.lengths)

    @property
    def longest(self) -> int:
        return int(self.lengths.max())


@dataclass(frozen=True)
class BatchResult:
    """One request's outputs and how it was served."""

    outputs: dict  # name -> np.ndarray, the request's rows only
    batch_size: int  # rows in the forward pass it rode in
    queue_seconds: float  # waiting for a batch thread
    run_seconds: float  # the forward pass


RunFn = Callable[..., dict]  # run(key, waveforms, lengths, **extras) -> {name: array}


def merge(items: list[_Item]) -> tuple[np.ndarray, np.ndarray]:
    """The items' rows as one zero-padded batch: `(waveforms (rows, longest), lengths (rows,))`."""
    longest = max(int(item.lengths.max()) for item in items)
    rows = sum(item.rows for item in items)
    waveforms = np.zeros((rows, longest), np.float32)
    lengths = np.concatenate([item.lengths for item in items]).astype(np.int32)
    r = 0
    for item in items:
        n = min(item.waveforms.shape[1], longest)
        waveforms[r:r + item.rows, :n] = item.waveforms[:, :n]
        r += item.rows
    return waveforms, lengths


def merge_extras(items: list[_Item]) -> dict:
    """The items' extra per-row inputs, concatenated along the rows (every item of a batch has the same names)."""
    if not items[0].extras:
        return {}
    return {name: np.concatenate([item.extras[name] for item in items]) for name in items[0].extras}


def split(outputs: dict, items: list[_Item], length_key: str, time_keys: tuple[str, ...]) -> list[dict]:
    """A batch's outputs back into one dict per item: its rows, and the time axis of `time_keys` outputs cut
    to the item's longest `length_key`, so each item gets what it would get alone."""
    out, r = [], 0
    for item in items:
        mine = {k: v[r:r + item.rows] for k, v in outputs.items()}
        steps = int(mine[length_key].max()) if item.rows else 0
        for k in time_keys:
            mine[k] = mine[k][:, :steps]
        out.append(mine)
        r += item.rows
    return out


def pieces(lengths: np.ndarray, max_samples: int) -> list[np.ndarray]:
    """A request's rows (their indices), in groups whose padded size (rows x the group's longest) is at most
    `max_samples`: similar lengths together, longest first. A row longer than `max_samples` is a group of its own."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    groups, start = [], 0
    while start < len(order):
        longest = max(int(lengths[order[start]]), 1)
        end = start + max(1, min(len(order) - start, max_samples // longest))
        groups.append(order[start:end])
        start = end
    return groups


def join(parts: list[dict], groups: list[np.ndarray], time_keys: tuple[str, ...]) -> dict:
    """The outputs of a request's `pieces`, run apart, as one request's: rows back in their order, the `time_keys`
    outputs zero-padded to the longest piece's steps (past each row's own steps, as a merged batch pads them)."""
    order = np.argsort(np.concatenate(groups), kind="stable")
    joined = {}
    for key in parts[0]:
        arrays = [part[key] for part in parts]
        if key in time_keys:
            steps = max(a.shape[1] for a in arrays)
            arrays = [np.pad(a, [(0, 0), (0, steps - a.shape[1])] + [(0, 0)] * (a.ndim - 2)) for a in arrays]
        joined[key] = np.concatenate(arrays)[order]
    return joined


class Batcher:
    """Merges concurrent requests into batches and runs them on `num_batch_threads` threads.

    `run(key, waveforms, lengths) -> {name: array}` does the forward pass of a merged batch; its outputs
    have the batch on axis 0, `length_key` holds each row's valid steps, and the `time_keys` outputs have
    time on axis 1.
    """

    def __init__(self, config: BatchingConfig, run: RunFn, length_key: str, time_keys: tuple[str, ...],
                 max_samples: int = MAX_BATCH_SAMPLES):
        self.config = config
        self.max_samples = max_samples  # padded samples per forward pass: requests join a batch only within it
        self._run = run
        self._length_key = length_key
        self._time_keys = time_keys
        self._queue: collections.deque[_Item] = collections.deque()
        self._queued_rows = 0
        self._cond = threading.Condition()
        self._closed = False
        self._flushing = False  # run batches without waiting for them to fill (shutting down)
        self._running = 0  # batches being run now
        self.batch_sizes: collections.Counter[int] = collections.Counter()  # rows per forward pass -> count
        self._threads = [threading.Thread(target=self._loop, name=f"batch-{i}", daemon=True)
                         for i in range(config.threads)]
        for t in self._threads:
            t.start()

    def submit(self, key, waveforms: np.ndarray, lengths: np.ndarray, extras: dict | None = None,
               deadline: float | None = None, priority: int = 0) -> Future:
        """Queue one request's rows; the future gives its `BatchResult` (or the run's exception). `extras` are
        more per-row inputs (name -> array, rows on axis 0), concatenated and passed to `run` by name; requests
        under one `key` must all give the same names. A request still queued at `deadline` (time.monotonic()),
        or whose future is cancelled, is dropped unrun; the future then fails with `Expired` (or is cancelled).
        Requests of a higher `priority` are batched before those queued earlier with a lower one.

        Raises:
            QueueFull: the queue holds `max_enqueued_batches` batches' worth of rows already.
            RuntimeError: the batcher is closed.
        """
        item = _Item(key, np.asarray(waveforms, np.float32), np.asarray(lengths, np.int32), Future(),
                     time.monotonic(), extras, deadline, priority)
        with self._cond:
            if self._closed:
                raise RuntimeError("the batcher is shutting down")
            limit = self.config.max_queued_rows
            if self._queued_rows and self._queued_rows + item.rows > limit:
                raise QueueFull(f"the batch queue is full ({self._queued_rows} utterances waiting, at most "
                                f"{limit}); retry later")
            self._queue.append(item)
            self._queued_rows += item.rows
            self._cond.notify_all()
        return item.future

    def flush(self) -> None:
        """From now on run queued requests at once, without waiting `batch_timeout_micros` for batches to fill
        (the server is shutting down: finish what is in flight). New requests are still taken."""
        with self._cond:
            self._flushing = True
            self._cond.notify_all()

    def close(self, timeout: float | None = None) -> None:
        """Stop taking requests, run what is queued (at once, without waiting for batches to fill), and
        wait up to `timeout` seconds for the threads to finish."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout)

    def _take(self) -> list[_Item] | None:
        """Under the lock: wait for a batch to be ready and take its items (None: closed and drained)."""
        max_rows = self.config.max_batch_size
        timeout = self.config.batch_timeout_micros / 1e6
        while True:
            self._drop_dead()
            if not self._queue:
                if self._closed:
                    return None
                self._cond.wait()
                continue
            first = max(self._queue, key=lambda i: i.priority)  # the oldest of the highest priority
            ready_rows = sum(i.rows for i in self._queue if i.key is first.key)
            wait = first.enqueued + timeout - time.monotonic()
            idle = not self._running and not self.config.wait_when_idle
            if ready_rows >= max_rows or wait <= 0 or idle or self._closed or self._flushing:
                batch, rows, audio, longest, rest = [], 0, 0, 0, collections.deque()
                for item in [first] + [i for i in self._queue if i is not first]:
                    padded = (rows + item.rows) * max(longest, item.longest)
                    fits = (rows + item.rows <= max_rows and padded <= self.max_samples
                            and padded <= MAX_PADDING * (audio + int(item.lengths.sum())))
                    if item.key is first.key and (not batch or fits):
                        self._queued_rows -= item.rows
                        if item.future.set_running_or_notify_cancel():  # False: cancelled since _drop_dead
                            batch.append(item)
                            rows, longest = rows + item.rows, max(longest, item.longest)
                            audio += int(item.lengths.sum())
                    else:
                        rest.append(item)
                self._queue = rest
                if batch:
                    self._running += 1
                    return batch
                continue
            expiring = self._next_deadline()
            self._cond.wait(wait if expiring is None else min(wait, expiring))

    def _drop_dead(self) -> None:
        """Under the lock: take out of the queue the requests nobody waits for (cancelled, or past their deadline)."""
        now = time.monotonic()
        if not any(i.future.cancelled() or (i.deadline is not None and now >= i.deadline) for i in self._queue):
            return
        keep = collections.deque()
        for item in self._queue:
            if item.future.cancelled() or (item.deadline is not None and now >= item.deadline):
                self._queued_rows -= item.rows
                if item.future.set_running_or_notify_cancel():
                    item.future.set_exception(Expired(f"the deadline passed after {now - item.enqueued:.3f} s in "
                                                      "the batch queue; the request was not run"))
            else:
                keep.append(item)
        self._queue = keep

    def _next_deadline(self) -> float | None:
        """Seconds until the first queued deadline (None: none), so a waiting thread wakes to drop it."""
        deadlines = [i.deadline for i in self._queue if i.deadline is not None]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _loop(self) -> None:
        while True:
            with self._cond:
                batch = self._take()
            if batch is None:
                return
            try:
                self._execute(batch)
            finally:
                with self._cond:
                    self._running -= 1
                    self._cond.notify_all()

    def _execute(self, batch: list[_Item]) -> None:
        start = time.monotonic()
        try:
            waveforms, lengths = merge(batch)
            outputs = self._run(batch[0].key, waveforms, lengths, **merge_extras(batch))
            parts = split(outputs, batch, self._length_key, self._time_keys)
        except Exception as e:
            if len(batch) > 1:  # find the culprit: run each request alone
                logger.warning("a batch of %d requests failed (%s); running them one by one", len(batch), e)
                for item in batch:
                    self._execute([item])
                return
            batch[0].future.set_exception(e)
            return
        run_seconds = time.monotonic() - start
        rows = len(lengths)
        with self._cond:
            self.batch_sizes[rows] += 1
        for item, outputs in zip(batch, parts):
            item.future.set_result(BatchResult(outputs, rows, start - item.enqueued, run_seconds))
