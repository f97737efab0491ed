"""Timings for the benchmarks' ratios, measured interleaved so that machine load cancels out.

A ratio of two timings taken minutes apart swings with whatever else the machine is doing. Here
the measured thing and its baseline run alternately (A B A B ..., or A B C A B C ... for several),
each run timed with ``time.perf_counter``, and a ratio is the median over the rounds of the
per-round ratios ``a_i / b_i``: a slow stretch slows both sides of a round alike.

The scripts run as ``python benchmarks/X.py`` (``benchmarks/`` on ``sys.path``) and import this
module as ``from interleaved import paired_times``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["interleaved_times", "median_ratio", "paired_times"]


def median_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """The median of ``a[i] / b[i]`` over paired timings (a zero ``b[i]`` counts as 1 ns)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"need as many timings on each side, at least one (got {len(a)} and {len(b)})")
    return statistics.median(x / max(y, 1e-9) for x, y in zip(a, b))


def interleaved_times(fns: Mapping[str, Callable[[], Any]], rounds: int = 5, warmup: bool = True) -> dict[str, Any]:
    """Run every function of ``fns`` once per round, in their order, for ``rounds`` rounds.

    With ``warmup``, each runs once (untimed) first. Returns ``{"seconds": {name: median},
    "samples": {name: [seconds of each round]}, "rounds": rounds}``; the ratio of two of them is
    ``median_ratio(samples[x], samples[y])``, the median of the per-round ratios.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if warmup:
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {"seconds": {k: statistics.median(v) for k, v in samples.items()}, "samples": samples, "rounds": rounds}


def paired_times(a: Callable[[], Any], b: Callable[[], Any], pairs: int = 5, warmup: bool = True) -> dict[str, Any]:
    """Time ``a`` against its baseline ``b`` run alternately: a, b, a, b, ... (``pairs`` of each).

    With ``warmup``, each runs once (untimed) first. Returns ``{"a_seconds": median of a,
    "b_seconds": median of b, "ratio": median of the per-pair a_i / b_i, "pairs": pairs,
    "a": [seconds], "b": [seconds]}``.
    """
    out = interleaved_times({"a": a, "b": b}, rounds=pairs, warmup=warmup)
    sa, sb = out["samples"]["a"], out["samples"]["b"]
    return {"a_seconds": out["seconds"]["a"], "b_seconds": out["seconds"]["b"], "ratio": median_ratio(sa, sb),
            "pairs": pairs, "a": sa, "b": sb}
