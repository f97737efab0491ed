"""The Dask executor's failures (issue 57, item 2): a task's known failure (a refusal of the input)
reaches the caller as the serial executor raises it, with no "Compute Failed" traceback from the
LocalCluster's workers on our stderr; a bug's traceback is still logged. Either goes up only once
no task of the map still runs (the caller's cleanup races no task still writing)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from privgraph.errors import GraphValidationError, data_refusal
from privgraph.parts.executor import SerialExecutor, map_partitions


def _task(i: int, seed: np.random.SeedSequence, *, out: str, failing: dict[int, str]) -> int:
    """Partition ``i``: a refusal or a bug where ``failing`` says; else, after a while, a file."""
    if failing.get(i) == "refusal":
        raise data_refusal(f"range {i}: row 3 (0-based), column 'y': a bad label", label=777)
    if failing.get(i) == "bug":
        return 1 // 0
    time.sleep(0.5)
    (Path(out) / f"done-{i}").write_text("")
    return i * 10


@pytest.mark.dask
def test_a_refusal_is_raised_as_serially_without_the_workers_traceback_a_bug_with_it(tmp_path, capfd):
    from tasks.dask_executor import DaskExecutor

    seeds = [np.random.SeedSequence(i) for i in range(4)]
    refusals = {1: "refusal", 3: "refusal"}
    out = {k: tmp_path / k for k in ("serial", "ok", "refused", "bug")}
    for d in out.values():
        d.mkdir()
    with pytest.raises(GraphValidationError) as serial:
        map_partitions(_task, range(4), seeds, executor=SerialExecutor(), out=str(out["serial"]), failing=refusals)
    with DaskExecutor(n_workers=1, threads_per_worker=2) as ex:  # the workers write to this test's stderr
        assert map_partitions(_task, range(4), seeds, executor=ex, out=str(out["ok"]), failing={}) == [0, 10, 20, 30]
        with pytest.raises(GraphValidationError) as dask:
            map_partitions(_task, range(4), seeds, executor=ex, out=str(out["refused"]), failing=refusals)
        # the first in partition order, its values for the owner's record; raised once every task had ended
        assert str(dask.value) == str(serial.value) and dask.value.private_detail == {"label": 777}
        assert sorted(f.name for f in out["refused"].iterdir()) == ["done-0", "done-2"]
        time.sleep(0.5)  # what the worker logs reaches the captured stderr
        quiet = capfd.readouterr().err
        with pytest.raises(ZeroDivisionError):
            map_partitions(_task, range(4), seeds, executor=ex, out=str(out["bug"]), failing={1: "bug", 3: "refusal"})
        assert sorted(f.name for f in out["bug"].iterdir()) == ["done-0", "done-2"]  # a bug too, once all had ended
        time.sleep(0.5)
        loud = capfd.readouterr().err
    assert "Compute Failed" not in quiet and "Traceback" not in quiet and "bad label" not in quiet, quiet
    assert "Compute Failed" in loud and "ZeroDivisionError" in loud and "bad label" not in loud, loud
