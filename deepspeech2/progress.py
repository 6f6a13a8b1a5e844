"""Progress bars: the one way the package draws one, and the one switch for all of them.

Every bar is a tqdm bar made by `progress_bar` (on stderr, unless the caller names a `file`); the training loop's
`step_bar` is one too on a terminal. The environment variable DS2_PROGRESS is the switch:

    DS2_PROGRESS=0    no bars at all (also false, no, off), whatever a function's own `progress` argument says
    DS2_PROGRESS=log  a refresh every LOG_SECONDS, for a log file that keeps every refresh
    unset, or 1       a bar redrawn in place ten times a second

The ds2-* commands set `log` themselves when stderr is not a terminal (bin/_app.py, which also puts each
refresh on its own line there), unless DS2_PROGRESS says 0.
"""

import os
import sys
import time

from tqdm import tqdm

PROGRESS_ENV = "DS2_PROGRESS"
LOG_SECONDS = 30.0  # in a log, a refresh this often: a log file keeps every one, a terminal draws over them
_OFF = ("0", "false", "no", "off")


def progress_mode() -> str:
    """`off`, `log` or `on`: what DS2_PROGRESS asks for (`on` when it is unset)."""
    value = os.environ.get(PROGRESS_ENV, "").strip().lower()
    return "off" if value in _OFF else "log" if value == "log" else "on"


def progress_enabled() -> bool:
    """False when DS2_PROGRESS turns the bars off."""
    return progress_mode() != "off"


def progress_bar(iterable=None, *, show: bool = True, **kwargs) -> tqdm:
    """A tqdm bar over `iterable` (or one to `update` by hand), hidden when not `show` or when DS2_PROGRESS=0.

    Args:
        iterable: what to iterate over, counting each item; None for a bar to `update` by hand.
        show: the caller's own switch (a function's `progress` argument).
        **kwargs: tqdm's (total, desc, unit, leave, file...).
    """
    mode = progress_mode()
    if mode == "log":
        kwargs.setdefault("mininterval", LOG_SECONDS)
    return tqdm(iterable, disable=not show or mode == "off", **kwargs)


class _LineProgress:
    """Progress for logs (no terminal): one line every LOG_SECONDS and one at the end, instead of a bar
    redrawn in place, which a log file keeps as one very long line."""

    def __init__(self, target, name):
        self.target, self.name = target, name
        self.start = self.last = time.perf_counter()
        self.values = {}
        self.printed = None  # the step of the last line

    def update(self, current, values=None, finalize=False):
        self.values.update(values or [])
        now = time.perf_counter()
        if (not finalize and now - self.last < LOG_SECONDS) or current == self.printed:
            return
        self.last, self.printed = now, current
        # The target is an estimate (the last epoch's count): past it, the count alone.
        done = f"{current}/{self.target}" if self.target and current <= self.target else f"{current}"
        stats = " ".join(f"{k} {v:.4g}" for k, v in self.values.items())
        print(f"{self.name}: step {done} {now - self.start:.0f}s {stats}".rstrip(), flush=True)


class _BarProgress:
    """`progress_bar` on stdout, moved to a step count and showing the latest values."""

    def __init__(self, target, name):
        self.bar = progress_bar(total=target, desc=name, unit="step", file=sys.stdout)

    def update(self, current, values=None, finalize=False):
        if values:
            self.bar.set_postfix({k: f"{v:.4g}" for k, v in values}, refresh=False)
        self.bar.update(current - self.bar.n)
        if finalize:
            self.bar.close()


class _NoProgress:
    def update(self, *args, **kwargs):
        pass


def step_bar(target: int | None, name: str, show: bool):
    """The training loop's progress, on stdout with its other lines: a bar on a terminal, a line every
    LOG_SECONDS in a log (or with DS2_PROGRESS=log), nothing when not `show` or with DS2_PROGRESS=0.

    Args:
        target: the steps expected (an estimate: the last epoch's count), None when unknown.
        name: what the progress is of ("epoch 3").
        show: the caller's own switch.

    Returns:
        an object with `update(current, values=None, finalize=False)`: `current` the step count so far,
        `values` (name, number) pairs to show, `finalize` at the end.
    """
    mode = progress_mode()
    if not show or mode == "off":
        return _NoProgress()
    if mode == "on" and sys.stdout.isatty():
        return _BarProgress(target, name)
    return _LineProgress(target, name)
