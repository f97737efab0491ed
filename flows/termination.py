"""A termination signal that lands inside a garbage-collection callback, in a flow run's process.

Prefect's engine turns SIGTERM into a ``TerminationSignal`` exception raised wherever the main
thread is. When that is inside a weakref or ``__del__`` callback (an import's module-lock callback,
say), Python cannot raise it: it prints "Exception ignored in ..." with a traceback and drops the
signal, so the run goes on. :func:`redeliver_termination_lost_in_callbacks` makes such a signal
one line on stderr and sends it again to this process (from a timer thread, 50 ms later), where
Prefect's handler raises it at the next ordinary statement (the run then ends as Prefect
documents, Crashed or Cancelled).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from prefect.exceptions import TerminationSignal

_INSTALLED = "_privgraph_redelivers_termination"


def redeliver_termination_lost_in_callbacks() -> None:
    """Install, once per process, a ``sys.unraisablehook`` that re-sends a termination signal
    swallowed by a callback and hands every other unraisable exception to the previous hook."""
    previous = sys.unraisablehook
    if getattr(previous, _INSTALLED, False):
        return

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, TerminationSignal):
            previous(unraisable)
            return
        sig = unraisable.exc_value.signal
        print(f"termination signal {signal.Signals(sig).name} arrived inside a callback; delivered again",
              file=sys.stderr, flush=True)
        # from another thread, a moment later: sent from here, the handler would raise inside this hook
        threading.Timer(0.05, os.kill, args=(os.getpid(), sig)).start()

    setattr(hook, _INSTALLED, True)
    sys.unraisablehook = hook


def import_what_a_subflow_imports() -> None:
    """Import, at the run's start, what Prefect first imports when a subflow starts: fastapi's
    JSON encoder (``Flow.serialize_parameters``), whose import builds fastapi's pydantic models. A
    termination signal landing inside pydantic-core's schema build comes out as a ``SchemaError``,
    a crash with a traceback instead of a cancellation; at the run's start (about 0.1 s here) it
    lands before anything ran."""
    import fastapi.encoders  # noqa: F401  (lazy: only a run that starts a subflow)
