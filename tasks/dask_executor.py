"""The Dask executor: :mod:`privgraph.parts.executor`'s partition protocol on a ``dask.distributed.Client``.

Orchestration, not library: the library maps partitions through any
:class:`~privgraph.parts.executor.Executor` and imports no Dask; the tasks open this one when a pipeline
says ``executor: dask`` (:func:`open_executor`, through :func:`tasks.observe.logged_executor`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import pickle
from collections.abc import Iterator
from typing import Any

from privgraph.errors import exit_code_for
from privgraph.parts.executor import Executor, SerialExecutor

__all__ = ["WORKER_MALLOC_ENVIRON", "DaskExecutor", "open_executor"]

#: glibc's malloc settings for the LocalCluster's workers. Dask sets MALLOC_TRIM_THRESHOLD_=65536
#: for its workers, and setting any threshold stops glibc adapting its mmap threshold: every
#: array over 128 KiB is then a fresh mmap, whose pages are faulted in and zeroed at each use.
#: Partition tasks allocate many such temporaries: ``benchmarks/dask_scaling.py``'s partitioned
#: run took 11.1 s in one process with Dask's setting and 8.0-8.4 s with glibc's own. These are
#: the values glibc's adaptation settles at (mmap 32 MiB, trim twice that), set explicitly so
#: that memory freed above 64 MiB still goes back to the system. A remote cluster's workers take
#: their environment from whoever starts them (docs/production.md, "Running on a Dask cluster", says which variables to set).
WORKER_MALLOC_ENVIRON = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": 64 * 2**20,
    "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": 32 * 2**20,
}


class DaskExecutor:
    """Runs partitions on a ``dask.distributed.Client``.

    Args:
        address: an existing scheduler (``tcp://host:8786``); ``None`` starts a ``LocalCluster``
            (its dashboard on 127.0.0.1, a free port: :attr:`dashboard_link`).
        n_workers: workers of the LocalCluster (default: 2).
        threads_per_worker: threads per LocalCluster worker (default: 1).
        client: an already-open Client to use as is (its lifetime stays with the caller).
    """

    name = "dask"

    def __init__(
        self,
        address: str | None = None,
        *,
        n_workers: int = 2,
        threads_per_worker: int = 1,
        client: Any = None,
    ) -> None:
        self.address = address
        self.n_workers = n_workers
        self.threads_per_worker = threads_per_worker
        self._client = client
        self._owned: list[Any] = []

    def __enter__(self) -> DaskExecutor:
        if self._client is None:
            import dask  # lazy: dask, only when a cluster runs the partitions
            from dask.distributed import Client, LocalCluster  # lazy: dask, as above

            if self.address:
                self._client = Client(self.address)
            else:
                # the nannies read this when created and keep it for every restart of their worker
                with dask.config.set(WORKER_MALLOC_ENVIRON):
                    cluster = LocalCluster(
                        n_workers=self.n_workers,
                        threads_per_worker=self.threads_per_worker,
                        processes=True,
                        dashboard_address="127.0.0.1:0",  # this machine only, a free port
                    )
                self._owned.append(cluster)
                self._client = Client(cluster)
            self._owned.insert(0, self._client)
        return self

    def __exit__(self, *exc: Any) -> None:
        if len(self._owned) > 1:  # our LocalCluster: its workers write to our stderr
            with contextlib.suppress(Exception):
                # the work is done: what the workers log while they close is shutdown noise. On a
                # loaded machine a worker's heartbeat can meet the scheduler's closed stream and
                # print a traceback ("Failed to communicate with scheduler during heartbeat")
                self._client.run(_silence_distributed_logs)
        for obj in self._owned:
            obj.close()
        self._owned.clear()
        self._client = None

    @property
    def client(self) -> Any:
        if self._client is None:
            raise RuntimeError("DaskExecutor is not open: use it as a context manager")
        return self._client

    def map(self, fn, payloads, seeds, shared):  # type: ignore[no-untyped-def]
        client = self.client
        # Large shared arrays travel to each worker once, not once per partition (replicated on
        # every worker, so losing one worker loses no copy). Small shared values (paths,
        # mechanisms) go inline with each task, like each partition's payload: a scattered object
        # exists only where it was sent, and a worker killed while it held the only copy (one that
        # joined after the scatter holds none) takes it along; its dependents are then cancelled
        # as "already forgotten". A task whose inputs are all in its own spec is rerun elsewhere,
        # with the same seed, so the output is the same.
        # hash=False: a key of its own per map. With content keys, a map that shares the same
        # value as the one before reused its key while the previous map's futures were being
        # released, and the scheduler cancelled the new tasks ("lost dependencies").
        from dask.base import tokenize  # lazy: dask, as in __enter__
        from dask.utils import funcname  # lazy: dask, as above
        from distributed import wait  # lazy: dask, as above

        shared_f = {k: client.scatter(v, broadcast=True, hash=False) if _large(v) else v for k, v in shared.items()}
        # each task's key as ``client.submit(fn, p, s, pure=True, **shared_f)`` names it (the
        # dashboard shows fn's name), run through _known_failures_returned
        futures = [
            client.submit(_known_failures_returned, fn, p, s, key=f"{funcname(fn)}-{tokenize(fn, shared_f, p, s)}",
                          **shared_f)
            for p, s in zip(payloads, seeds, strict=True)
        ]
        try:
            results = client.gather(futures)  # a task's known failure is one of the results
        except Exception as exc:
            if exit_code_for(exc) is None:  # a task's bug (its traceback in the worker's log), not the cluster failing:
                with contextlib.suppress(Exception):  # it goes up once no task of the map runs (the caller's
                    wait(futures)  # cleanup then races none still writing), as a known failure does
            raise
        failed = next((r for r in results if isinstance(r, _KnownFailure)), None)
        if failed is not None:  # the first in partition order, as the serial executor raises it
            raise failed.exc
        return results

    @property
    def dashboard_link(self) -> str | None:
        """The scheduler's dashboard URL (None when it serves none). Without bokeh installed the
        page only says that the dashboard needs bokeh (see :attr:`dashboard_ready`)."""
        try:
            link = self.client.dashboard_link
        except (KeyError, AttributeError):  # a scheduler without an HTTP service
            return None
        return link or None

    @property
    def dashboard_ready(self) -> bool:
        """Whether this process has bokeh, which the dashboard's pages need (a LocalCluster's
        scheduler runs here; a remote scheduler has its own and this is a guess)."""
        return importlib.util.find_spec("bokeh") is not None

    def describe(self) -> dict[str, Any]:
        """``executor``, ``address``, ``workers``, ``threads`` (over all workers), ``dashboard``."""
        info = self.client.scheduler_info()
        workers = info.get("workers", {})
        return {
            "executor": "dask",
            "address": self.address or "LocalCluster",
            "workers": len(workers),
            "threads": sum(int(w.get("nthreads", 0)) for w in workers.values()),
            "dashboard": self.dashboard_link,
        }


class _KnownFailure:
    """What a task returns in place of raising a known failure (``exit_code_for(exc)`` is not
    None: a refusal of the input, the store or the cluster failing): the exception, raised again
    by the client. Dask logs every exception a task raises on the worker, "Compute Failed" with
    its traceback, on the CLI's stderr for a LocalCluster: for a known failure the command's one
    line says it all."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _known_failures_returned(fn: Any, payload: Any, seed: Any, /, **shared: Any) -> Any:
    """On a worker: ``fn(payload, seed, **shared)``, a known failure returned as a
    :class:`_KnownFailure`; any other exception (a bug) is raised, and Dask logs its traceback."""
    try:
        return fn(payload, seed, **shared)
    except Exception as exc:
        if exit_code_for(exc) is None:
            raise
        return _KnownFailure(exc)


def _silence_distributed_logs() -> None:
    """In a worker process: Dask's own loggers say nothing below CRITICAL from now on."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def _large(value: Any) -> bool:
    """Whether a shared value is worth scattering once rather than sending with every task: its
    pickled size (arrays and other buffers measured out of band, not copied) above
    :data:`SCATTER_BYTES`; a value plain pickle cannot take is scattered (Dask serialises it)."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        head = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception:
        return True
    return len(head) + sum(b.raw().nbytes for b in buffers) > SCATTER_BYTES


#: shared values whose pickle is larger than this are scattered to the workers once
SCATTER_BYTES = 1 << 20


@contextlib.contextmanager
def open_executor(
    kind: str = "serial",
    *,
    address: str | None = None,
    n_workers: int = 2,
    threads_per_worker: int = 1,
) -> Iterator[Executor]:
    """Open the executor a pipeline asks for (``"serial"`` or ``"dask"``) and close it after."""
    if kind == "serial":
        yield SerialExecutor()
    elif kind == "dask":
        with DaskExecutor(address, n_workers=n_workers, threads_per_worker=threads_per_worker) as ex:
            yield ex
    else:
        raise ValueError(f"executor must be 'serial' or 'dask', got {kind!r}")
