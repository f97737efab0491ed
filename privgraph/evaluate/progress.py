"""Progress of long loops (trainings, comparison cells): k/N done, time elapsed and an ETA.

The library's loops take an optional :data:`ProgressCallback` and report a
:class:`ProgressEvent` when they start (``done = 0``) and after each item. The callback decides
where an event goes: the flows' tasks pass one that writes a Prefect log line (``training 3/10,
ETA 42 s``) and then calls :func:`broadcast`, which hands the event to every process-wide
listener; the CLI registers one with
:func:`~privgraph.cli.progress_display.rich_progress` that drives a rich progress bar.

Nothing here imports Prefect or Dask. An event holds counts, times and a short label of the item
(``clean graph, run 2/5``; ``duchi eps=1 run 0``): never a figure computed from the data.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Iterator

__all__ = [
    "EtaEstimator",
    "ProgressCallback",
    "ProgressEvent",
    "ProgressTracker",
    "add_listener",
    "broadcast",
    "format_duration",
    "listening",
    "remove_listener",
]


def format_duration(seconds: float | None) -> str:
    """``0.4 s``, ``42 s``, ``3 min 5 s``, ``2 h 4 min``; ``?`` for an unknown duration."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    if seconds < 9.95:
        return f"{max(0.0, seconds):.1f} s"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


@dataclasses.dataclass(frozen=True)
class ProgressEvent:
    """One step of a loop: ``done`` of ``total`` items of ``task`` after ``elapsed`` seconds.

    ``eta``: the estimated seconds left (``None`` before the first timed item). ``detail``: a short
    label of the item just finished (empty on the start event). ``key`` tells two runs of a loop
    with the same ``task`` apart (one tracker, one key).
    """

    task: str
    done: int
    total: int
    elapsed: float
    eta: float | None
    detail: str = ""
    key: int = 0

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def line(self) -> str:
        """The log line: ``training 3/10, ETA 42 s (private graph, run 2/5)``."""
        if self.done == 0:
            return f"{self.task} 0/{self.total}: started"
        if self.finished:
            head = f"{self.task} {self.done}/{self.total}, done in {format_duration(self.elapsed)}"
        else:
            head = f"{self.task} {self.done}/{self.total}, ETA {format_duration(self.eta)}"
        return f"{head} ({self.detail})" if self.detail else head


#: what a loop calls with each :class:`ProgressEvent`
ProgressCallback = Callable[[ProgressEvent], None]


class EtaEstimator:
    """Seconds left from the mean time of the timed items so far.

    Items that cost nothing (a comparison cell copied from another) count as done with
    ``timed=False``: they shorten the remaining work without lowering the time per item.
    """

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        if total < 0:
            raise ValueError(f"total must be >= 0, got {total}")
        self.total = int(total)
        self.done = 0
        self._timed = 0
        self._clock = clock
        self._start = clock()
        self._busy = 0.0  # seconds spent on timed items
        self._last = self._start

    @property
    def elapsed(self) -> float:
        return self._clock() - self._start

    def update(self, n: int = 1, *, timed: bool = True) -> float | None:
        """Mark ``n`` more items done; returns the ETA in seconds (``None`` while unknown)."""
        now = self._clock()
        if timed:
            self._busy += now - self._last
            self._timed += n
        self._last = now
        self.done = min(self.total, self.done + n)
        return self.eta()

    def eta(self) -> float | None:
        left = self.total - self.done
        if left <= 0:
            return 0.0
        if self._timed == 0:
            return None
        return self._busy / self._timed * left


_KEYS = iter(range(1, 2**62))
_KEY_LOCK = threading.Lock()


class ProgressTracker:
    """Counts a loop's items and reports each step to ``callback`` (nothing when it is ``None``).

    The start event (``done = 0``) is sent on construction, so a progress bar shows ``0/N`` before
    the first item ends.
    """

    def __init__(
        self,
        task: str,
        total: int,
        callback: ProgressCallback | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.task = task
        self.callback = callback
        self.estimator = EtaEstimator(total, clock)
        with _KEY_LOCK:
            self.key = next(_KEYS)
        self._emit("")

    def advance(self, n: int = 1, *, detail: str = "", timed: bool = True) -> None:
        """``n`` more items done (``timed=False``: they took no real work, e.g. copies)."""
        self.estimator.update(n, timed=timed)
        self._emit(detail)

    def _emit(self, detail: str) -> None:
        if self.callback is None:
            return
        est = self.estimator
        self.callback(ProgressEvent(
            task=self.task, done=est.done, total=est.total, elapsed=est.elapsed, eta=est.eta(),
            detail=detail, key=self.key,
        ))


# -- process-wide listeners (the CLI's progress bar) ------------------------------------------------
_LISTENERS: list[ProgressCallback] = []
_LOCK = threading.Lock()


def add_listener(fn: ProgressCallback) -> ProgressCallback:
    """Register ``fn`` to receive every :func:`broadcast` event of this process; returns ``fn``."""
    with _LOCK:
        _LISTENERS.append(fn)
    return fn


def remove_listener(fn: ProgressCallback) -> None:
    """Unregister ``fn`` (no error when it is not registered)."""
    with _LOCK:
        if fn in _LISTENERS:
            _LISTENERS.remove(fn)


@contextlib.contextmanager
def listening(fn: ProgressCallback) -> Iterator[ProgressCallback]:
    """``fn`` is a listener inside the ``with`` block."""
    add_listener(fn)
    try:
        yield fn
    finally:
        remove_listener(fn)


def broadcast(event: ProgressEvent) -> None:
    """Hand ``event`` to every listener. A failing listener is dropped, never the run: progress is
    cosmetic."""
    with _LOCK:
        listeners = list(_LISTENERS)
    for fn in listeners:
        try:
            fn(event)
        except Exception:  # noqa: BLE001 - a display must not fail a privatization
            remove_listener(fn)
