"""A SIGTERM raised inside a garbage-collection callback of a flow run's process is not lost."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from prefect.exceptions import TerminationSignal
    if sys.argv[1] == "hook":
        from flows.termination import redeliver_termination_lost_in_callbacks
        redeliver_termination_lost_in_callbacks()
        redeliver_termination_lost_in_callbacks()  # once per process: no double delivery

    def handler(signum, frame):  # what Prefect's engine installs in a run's process
        raise TerminationSignal(signal=signum)

    signal.signal(signal.SIGTERM, handler)

    class Collected:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs here, inside the callback
                time.sleep(0.001)

    try:
        Collected()
        for _ in range(200):
            time.sleep(0.01)
        print("the run went on")
    except TerminationSignal:
        print("the run ended")
""")


@pytest.mark.parametrize("mode", ["hook", "plain"])
def test_a_termination_signal_inside_a_callback_is_delivered_again(mode: str) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    if mode == "plain":  # Python's own behaviour, which the hook exists for: a traceback, the signal dropped
        assert proc.stdout.strip() == "the run went on" and "Traceback" in proc.stderr
    else:
        assert proc.stdout.strip() == "the run ended", proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines() == ["termination signal SIGTERM arrived inside a callback; delivered again"]
