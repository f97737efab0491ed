"""Progress a person can follow: k/N and an ETA (privgraph.evaluate.progress), as Prefect log lines of the
tasks and, through the process-wide listeners, a rich progress bar in the CLI."""

from __future__ import annotations

import io
import itertools

import pytest

from privgraph.evaluate.progress import (
    EtaEstimator,
    ProgressEvent,
    ProgressTracker,
    broadcast,
    format_duration,
    listening,
)
from privgraph.cli.progress_display import rich_progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_eta_is_the_mean_time_per_worked_item_times_the_items_left():
    clock = FakeClock()
    est = EtaEstimator(10, clock)
    assert est.eta() is None  # nothing timed yet
    clock.now += 4.0
    assert est.update() == pytest.approx(9 * 4.0)
    clock.now += 2.0
    assert est.update() == pytest.approx(8 * 3.0)
    # 4 items copied at no cost: fewer left, the time per item unchanged
    assert est.update(4, timed=False) == pytest.approx(4 * 3.0)
    clock.now += 30.0
    assert est.update(4) == 0.0 and est.done == 10 and est.elapsed == pytest.approx(36.0)
    assert est.update() == 0.0 and est.done == 10  # never past the total


def test_event_lines_and_durations():
    assert format_duration(None) == "?" and format_duration(float("nan")) == "?"
    assert format_duration(0.42) == "0.4 s" and format_duration(42.4) == "42 s"
    assert format_duration(185) == "3 min 5 s" and format_duration(7440) == "2 h 4 min"
    ev = ProgressEvent(task="training", done=3, total=10, elapsed=18.0, eta=42.0, detail="private graph, run 2/5")
    assert ev.line() == "training 3/10, ETA 42 s (private graph, run 2/5)" and not ev.finished
    assert ProgressEvent("training", 0, 10, 0.0, None).line() == "training 0/10: started"
    assert ProgressEvent("training", 10, 10, 65.0, 0.0).line() == "training 10/10, done in 1 min 5 s"


def test_tracker_reports_start_and_steps_and_nothing_without_a_callback():
    clock = FakeClock()
    events: list[ProgressEvent] = []
    t = ProgressTracker("comparison cells", 3, events.append, clock)
    clock.now += 5.0
    t.advance(detail="a")
    t.advance(2, detail="b", timed=False)
    assert [(e.done, e.total, e.detail) for e in events] == [(0, 3, ""), (1, 3, "a"), (3, 3, "b")]
    assert events[1].eta == pytest.approx(10.0) and events[1].elapsed == pytest.approx(5.0)
    assert len({e.key for e in events}) == 1
    assert ProgressTracker("comparison cells", 3, events.append).key != t.key  # one key per loop
    ProgressTracker("x", 2, None).advance()  # no callback: nothing to call, no error


def test_listeners_get_broadcasts_only_while_registered_and_a_failing_one_is_dropped():
    got: list[ProgressEvent] = []
    calls = itertools.count()

    def broken(_ev: ProgressEvent) -> None:
        next(calls)
        raise RuntimeError("a display crashed")

    ev = ProgressEvent("training", 1, 2, 1.0, 1.0)
    with listening(got.append), listening(broken):
        broadcast(ev)  # the broken listener does not stop the run or the other listener
        broadcast(ev)
    broadcast(ev)
    assert got == [ev, ev] and next(calls) == 1  # broken was called once, then dropped


def test_rich_progress_draws_one_bar_per_loop_with_k_of_n_and_eta():
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with rich_progress(console, status="running pipeline demo") as progress:
        first = ProgressTracker("training", 4, broadcast)
        first.advance(detail="clean graph, run 1/2")
        first.advance(detail="private graph, run 1/2")
        second = ProgressTracker("training", 2, broadcast)  # a second loop of the same name: its own bar
        second.advance()
        bars = {t.id: t for t in progress.tasks}
        status, a, b = progress.tasks
        assert status.description == "running pipeline demo" and status.total is None
        assert (a.description, a.completed, a.total) == ("training", 2, 4)
        assert a.fields["count"] == "2/4" and a.fields["eta"].startswith("ETA ")
        assert (b.completed, b.total, b.fields["count"]) == (1, 2, "1/2")
        assert len(bars) == 3
    broadcast(ProgressEvent("training", 2, 2, 1.0, 0.0))  # the bar's listener is gone
    assert len(progress.tasks) == 3
    assert "2/4" in out.getvalue() and "training" in out.getvalue()


def test_a_finished_inner_loop_leaves_no_bar_behind():
    """A loop inside a running one (a KProp search inside a training, a comparison cell's steps)
    removes its bar when it ends; the outer loop's bar stays to the end (issue 27)."""
    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    with rich_progress(console) as progress:
        outer = ProgressTracker("training", 2, broadcast)
        for _ in range(2):
            inner = ProgressTracker("kprop search", 3, broadcast)
            assert [t.description for t in progress.tasks] == ["training", "kprop search"]
            for _ in range(3):
                inner.advance(detail="K_x=0, K_y=0")
            assert [t.description for t in progress.tasks] == ["training"]
            outer.advance()
        assert [(t.description, t.completed) for t in progress.tasks] == [("training", 2)]


def test_log_lines_print_above_the_bars_not_through_them():
    """While the bars are live on a terminal, handlers that wrote to stderr (a plain StreamHandler,
    one printing with its own rich Console, as Prefect's) go through the display; restored after."""
    import logging
    import sys

    from rich.console import Console

    out = io.StringIO()
    plain = logging.StreamHandler(sys.stderr)

    class ConsoleHandler(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.console = Console(file=sys.stderr)

        def emit(self, record: logging.LogRecord) -> None:
            self.console.print(record.getMessage())

    rich_handler = ConsoleHandler()
    logger = logging.getLogger("privgraph.test.progress")
    logger.addHandler(plain)
    logger.addHandler(rich_handler)
    logger.propagate = False
    original = sys.stderr
    try:
        with rich_progress(Console(file=out, force_terminal=True, width=100)):
            logger.warning("line one")
            ProgressTracker("training", 1, broadcast).advance()
        assert plain.stream is original and rich_handler.console.file is original
    finally:
        logger.removeHandler(plain)
        logger.removeHandler(rich_handler)
    assert out.getvalue().count("line one") == 2  # both handlers' lines, on the display's console


@pytest.mark.flow
def test_tasks_log_progress_lines_and_broadcast_them(tmp_path):
    """tasks.observe.prefect_progress inside a real task: one Prefect log line per event (read back
    from the API) and the same events to this process's listeners (the CLI's bar)."""
    import asyncio

    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.logging.handlers import APILogHandler
    from tests.prefect_server import owned_prefect_test_harness

    from tasks.observe import prefect_progress

    @task
    def loop() -> None:
        t = ProgressTracker("training", 2, prefect_progress())
        t.advance(detail="clean graph, run 1/1")
        t.advance(detail="private graph, run 1/1")

    @flow(name="progress-demo")
    def demo() -> None:
        loop()

    got: list[ProgressEvent] = []
    with owned_prefect_test_harness(), listening(got.append):
        state = demo(return_state=True)
        APILogHandler().flush()  # the run's logs are sent in batches

        async def lines() -> list[str]:
            async with get_client() as client:
                r = await client._client.post("/logs/filter", json={
                    "logs": {"flow_run_id": {"any_": [str(state.state_details.flow_run_id)]}},
                    "sort": "TIMESTAMP_ASC", "limit": 50})
                return [log["message"] for log in r.json()]

        messages = asyncio.run(lines())
    assert [(e.done, e.total) for e in got] == [(0, 2), (1, 2), (2, 2)]
    progress_lines = [m for m in messages if m.startswith("training ")]
    assert progress_lines[0] == "training 0/2: started"
    assert progress_lines[1].startswith("training 1/2, ETA ") and progress_lines[1].endswith("(clean graph, run 1/1)")
    assert progress_lines[2].startswith("training 2/2, done in ")
