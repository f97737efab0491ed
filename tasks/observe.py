"""What a person watching a run sees: progress lines, the executor and its Dask dashboard.

Helpers for the tasks (not tasks themselves): :func:`prefect_progress` turns the library's
progress events into Prefect log lines and hands them to the process's listeners (the CLI's
progress bar); :func:`logged_executor` opens the pipeline's executor, logs what it is (serial or
Dask, how many workers and threads) and publishes the Dask dashboard as a link artifact.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from prefect import get_run_logger

from privgraph.config.pipeline import DaskConfig, cleartext_remote
from privgraph.parts.executor import Executor
from tasks.dask_executor import open_executor
from privgraph.evaluate.progress import ProgressCallback, ProgressEvent, broadcast
from tasks.artifacts import publish_dask_dashboard


def prefect_progress() -> ProgressCallback:
    """A progress callback for a task: one log line per event (``training 3/10, ETA 42 s``) on
    the run's logger, then :func:`privgraph.evaluate.progress.broadcast` to the process's listeners."""
    logger = get_run_logger()

    def on_event(event: ProgressEvent) -> None:
        logger.info(event.line())
        broadcast(event)

    return on_event


@contextlib.contextmanager
def logged_executor(kind: str, dask: DaskConfig, name: str | None = None) -> Iterator[Executor]:
    """:func:`tasks.dask_executor.open_executor` for a pipeline, logged.

    A ``tcp://`` (or scheme-less) address of another machine is warned about first, one line
    (:func:`~privgraph.config.pipeline.cleartext_remote`). With a Dask client, the dashboard link
    is logged and, when ``name`` (the pipeline's or comparison's) is given, published as the link
    artifact ``<name>-dask-dashboard`` (a link to the cluster's dashboard on this machine: nothing
    of the data).
    """
    logger = get_run_logger()
    if kind == "dask" and cleartext_remote(dask.address):
        logger.warning("dask.address %s is a cleartext tcp:// link to another machine: the tasks' seeds and the "
                       "owner's staging paths cross it unencrypted; a remote cluster requires tls:// "
                       "(docs/production.md, Running on a Dask cluster)", dask.address)
    with open_executor(kind, address=dask.address, n_workers=dask.n_workers,
                       threads_per_worker=dask.threads_per_worker) as ex:
        info = ex.describe()
        if info["executor"] == "dask":
            logger.info(
                "executor: dask (%s), %d workers, %d threads", info["address"], info["workers"], info["threads"]
            )
            link = info.get("dashboard")
            if link:
                ready = bool(getattr(ex, "dashboard_ready", True))
                logger.info("Dask dashboard: %s%s", link, "" if ready else " (its pages need bokeh installed)")
                if name is not None:
                    publish_dask_dashboard(name, link, ready)
            else:
                logger.info("Dask dashboard: none (the scheduler serves no dashboard)")
        else:
            logger.info("executor: serial (this process, one partition after another)")
        yield ex
