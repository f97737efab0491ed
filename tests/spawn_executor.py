"""An executor whose tasks run in spawned processes (fresh imports: nothing the client patched
reaches them), measuring what the client sends to a map and gets back, pickled: the tests that
check that a client passes metadata, paths and ints only (tests/test_partitioned_input.py,
tests/test_input_digests.py)."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from typing import Any


class SpawnExecutor:
    """``map`` over a spawn-context ``ProcessPoolExecutor``; ``largest_sent`` / ``largest_received``:
    the largest pickled payload (with the shared arguments) and result so far, in bytes; ``sent``:
    every map's function, payloads, seeds and shared arguments, pickled (what left the client)."""

    name = "spawn"

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.pool = pool
        self.largest_sent = self.largest_received = 0
        self.sent: list[bytes] = []

    def map(self, fn, payloads, seeds, shared):  # type: ignore[no-untyped-def]
        self.largest_sent = max(self.largest_sent, len(pickle.dumps((payloads, shared))))
        self.sent.append(pickle.dumps((fn, payloads, seeds, shared)))
        out = list(self.pool.map(_call, [(fn, p, s, shared) for p, s in zip(payloads, seeds, strict=True)]))
        self.largest_received = max([self.largest_received, *(len(pickle.dumps(r)) for r in out)])
        return out

    def describe(self) -> dict[str, Any]:
        return {"executor": "spawn", "workers": 1, "threads": 1, "dashboard": None}


def _call(args: tuple) -> Any:
    fn, payload, seed, shared = args
    return fn(payload, seed, **shared)
