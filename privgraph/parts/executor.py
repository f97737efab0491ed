"""The one place that maps work over partitions: serially, or on a Dask ``Client``.

``map_partitions(fn, payloads, seeds, executor=..., **shared)`` calls
``fn(payload_i, seed_i, **shared)`` for every partition ``i`` and returns the results in partition
order. ``fn`` builds its own ``numpy.random.Generator`` from the ``SeedSequence`` it is given, so
the result depends only on the seeds and the partitioning: never on the number of workers, the
scheduler, or the order in which partitions finish.

The library imports no Dask: the Dask executor (:class:`tasks.dask_executor.DaskExecutor`, the
same protocol over a ``dask.distributed.Client``) and the choice between the two
(:func:`tasks.dask_executor.open_executor`) live with the orchestration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

__all__ = ["Executor", "SerialExecutor", "map_partitions"]

T = TypeVar("T")


class Executor(Protocol):
    """Something that can run ``fn(payload, seed, **shared)`` for each partition."""

    name: str

    def map(
        self,
        fn: Callable[..., T],
        payloads: Sequence[Any],
        seeds: Sequence[np.random.SeedSequence],
        shared: dict[str, Any],
    ) -> list[T]: ...

    def describe(self) -> dict[str, Any]:
        """``executor`` (its name), ``workers``, ``threads`` and ``dashboard`` (a URL or None)."""
        ...


class SerialExecutor:
    """Runs partitions one after another in this process (small graphs, tests)."""

    name = "serial"

    def map(self, fn, payloads, seeds, shared):  # type: ignore[no-untyped-def]
        return [fn(p, s, **shared) for p, s in zip(payloads, seeds, strict=True)]

    def describe(self) -> dict[str, Any]:
        """What runs the partitions: ``executor``, ``workers``, ``dashboard`` (None: none here)."""
        return {"executor": "serial", "workers": 1, "threads": 1, "dashboard": None}


def map_partitions(
    fn: Callable[..., T],
    payloads: Sequence[Any],
    seeds: Sequence[np.random.SeedSequence],
    *,
    executor: Executor | None = None,
    **shared: Any,
) -> list[T]:
    """Call ``fn(payloads[i], seeds[i], **shared)`` for each partition; results in partition order.

    >>> seeds = [np.random.SeedSequence(0, spawn_key=(i,)) for i in range(3)]
    >>> map_partitions(lambda part, seed, *, scale: part * scale, [1, 2, 3], seeds, scale=10)
    [10, 20, 30]
    """
    if len(payloads) != len(seeds):
        raise ValueError(f"{len(payloads)} payloads but {len(seeds)} seeds")
    return (executor or SerialExecutor()).map(fn, payloads, seeds, shared)
