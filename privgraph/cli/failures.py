"""How a failed command ends: one line on stderr and its documented exit code (``exit_on_failure``; an
interrupt: ``interrupted``, exit 130 for Ctrl-C, 143 for SIGTERM where :func:`sigterm_interrupts`
makes SIGTERM one), and the filters that keep Prefect's log handlers free of known-failure tracebacks and of other
libraries' INFO chatter (``quiet_prefect``)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator
from typing import Any

import typer
from rich.markup import escape

from privgraph.cli.console import err
from privgraph.errors import exit_code_for, one_line

EXIT_INTERNAL = 1  # an unexpected exception: a bug in privgraph
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2
EXIT_TERMINATED = 143  # SIGTERM, where the command turns it into an interrupt: 128 + 15
LAST_ERROR: dict[str, str] = {}  # the last failure's one line, for `run --ci`


def _failure(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one-line message of a failed command."""
    code = exit_code_for(exc)
    if code is None:
        return EXIT_INTERNAL, (
            f"internal error: {type(exc).__name__}: {one_line(exc)} "
            "(a bug in privgraph; PRIVGRAPH_DEBUG=1 shows the traceback)"
        )
    return code, one_line(exc)


@contextlib.contextmanager
def exit_on_failure() -> Iterator[None]:
    """Turn any failure into one line on stderr and its documented exit code."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt as exc:
        err.print("interrupted", highlight=False)
        raise typer.Exit(EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED) from None
    except Exception as exc:
        if os.environ.get("PRIVGRAPH_DEBUG"):
            raise
        code, msg = _failure(exc)
        LAST_ERROR["message"] = msg
        err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
        raise typer.Exit(code) from None


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, as Ctrl-C raises ``KeyboardInterrupt``: every
    cleanup an interrupt runs (``except BaseException``, ``finally``) runs for it too."""


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Inside the block, SIGTERM raises :class:`Terminated` (once: a second one is ignored, so the
    cleanup the first started is not cut short); the previous handler is restored after."""

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _NoTracebackForKnownErrors(logging.Filter):
    """Prefect logs a failed run's exception with its traceback; a known failure gets one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and exit_code_for(record.exc_info[1]) is not None:
            record.exc_info = None
            record.exc_text = None
        return True


class _OtherLibrariesBelowWarning(logging.Filter):
    """Drops other libraries' records below WARNING (Dask's scheduler and nanny chatter,
    great_expectations' notes) and the two Dask warnings that only say the machine is loaded
    (:attr:`LOAD_NOISE`: its event loop was slow, or a worker of the run's own LocalCluster took
    seconds to stop as it closed); Prefect's and privgraph's own run logs pass, and so does every
    other warning (a worker's memory, a lost worker)."""

    OWN = ("prefect", "privgraph", "flows", "tasks")
    LOAD_NOISE = ("Event loop was unresponsive", "Worker process still alive after")

    def filter(self, record: logging.LogRecord) -> bool:
        library = record.name.split(".", 1)[0]
        if library in self.OWN:
            return True
        if library == "distributed" and record.levelno < logging.ERROR and str(record.msg).startswith(self.LOAD_NOISE):
            return False
        return record.levelno >= logging.WARNING


def quiet_prefect(verbose: bool = False) -> None:
    """Call after importing Prefect: strip known-failure tracebacks from every Prefect log handler
    and, unless ``verbose``, other libraries' INFO and DEBUG records."""
    filters: list[logging.Filter] = [_NoTracebackForKnownErrors()]
    if not verbose:
        filters.append(_OtherLibrariesBelowWarning())
    for name in ("", "prefect", "prefect.flow_runs", "prefect.task_runs"):
        for h in logging.getLogger(name).handlers:
            for flt in filters:
                if not any(type(f) is type(flt) for f in h.filters):
                    h.addFilter(flt)
            if verbose:
                for f in [f for f in h.filters if isinstance(f, _OtherLibrariesBelowWarning)]:
                    h.removeFilter(f)
