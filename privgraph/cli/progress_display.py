"""The CLI's live display of the library's progress events: one rich progress bar per loop
(:mod:`privgraph.evaluate.progress` emits the events; this module only draws them), with the log
lines of the run printed above the bars."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

from privgraph.evaluate.progress import ProgressEvent, format_duration, listening

__all__ = ["rich_progress"]


@contextlib.contextmanager
def rich_progress(console: Any, status: str | None = None, transient: bool = False) -> Iterator[Any]:
    """A rich progress display on ``console`` fed by :func:`broadcast` while the block runs.

    One bar per loop (``training``, ``comparison cells``, ...) with ``k/N``, the ETA and the time
    elapsed; ``status`` adds a spinner line above them (the CLI's "running pipeline cora"). rich
    allows one live display per console: use this instead of ``console.status(...)``, not inside
    it. Yields the :class:`rich.progress.Progress`.
    """
    from rich.progress import (  # lazy: rich (~40 ms), only for the CLI's live display
        BarColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TextColumn("{task.fields[eta]}"),
        TimeElapsedColumn(),
        console=console,
        transient=transient,
    )
    bars: dict[int, Any] = {}
    lock = threading.Lock()
    if status is not None:
        progress.add_task(status, total=None, count="", eta="")

    running: set[int] = set()

    def on_event(ev: ProgressEvent) -> None:
        count = f"{ev.done}/{ev.total}"
        eta = "" if ev.finished else f"ETA {format_duration(ev.eta)}"
        with lock:
            bar = bars.get(ev.key)
            if bar is None:
                bar = bars[ev.key] = progress.add_task(ev.task, total=max(ev.total, 1), count=count, eta=eta)
            progress.update(bar, completed=ev.done, total=max(ev.total, 1), count=count, eta=eta)
            if not ev.finished:
                running.add(ev.key)
                return
            running.discard(ev.key)
            if running:  # a loop inside one still running (a KProp search, a comparison cell): its bar goes
                progress.remove_task(bar)

    before = sys.stderr
    with progress, listening(on_event), _logs_above(before, sys.stderr):
        yield progress


class _Through:
    """A text stream that writes to ``proxy`` (a live display's stderr redirect). A rich
    ``Console`` given the redirect itself would unwrap it (``rich_proxied_file``) and write under
    the bars; this wrapper is not unwrapped."""

    def __init__(self, proxy: Any, original: Any) -> None:
        self._proxy = proxy
        self._original = original

    def write(self, text: str) -> int:
        return self._proxy.write(text)

    def flush(self) -> None:
        self._proxy.flush()

    def isatty(self) -> bool:
        return bool(self._original.isatty())

    @property
    def encoding(self) -> str:
        return getattr(self._original, "encoding", "utf-8")


@contextlib.contextmanager
def _logs_above(original: Any, proxy: Any) -> Iterator[None]:
    """While a live display redirects ``sys.stderr`` (a terminal), send the log handlers that
    write to the ORIGINAL stderr through the redirect, so their lines print above the bars
    instead of through them. Covers ``logging.StreamHandler`` and handlers that print with their
    own rich ``Console`` (its ``file``); everything is put back on exit."""
    if proxy is original:
        yield
        return
    loggers = [logging.getLogger()] + [
        lg for lg in list(logging.Logger.manager.loggerDict.values()) if isinstance(lg, logging.Logger)
    ]
    swapped: list[tuple[Any, str, Any]] = []
    for handler in {id(h): h for lg in loggers for h in lg.handlers}.values():
        if isinstance(handler, logging.StreamHandler) and handler.stream is original:
            swapped.append((handler, "stream", original))
            handler.stream = proxy
        console = getattr(handler, "console", None)
        if console is not None and getattr(console, "file", None) is original:
            swapped.append((console, "file", original))
            console.file = _Through(proxy, original)
    try:
        yield
    finally:
        for obj, attr, value in reversed(swapped):
            setattr(obj, attr, value)
