"""Exact discrete Laplace noise: seconds per draw against one uniform per entry, as JSON lines.

For each parameter a, ``noise.discrete_laplace`` draws 10^7 values, interleaved with its two
baselines: ``rng.random(n)`` (one vectorised PCG64 uniform per entry, the unit of issue 28's goal
of at most 5) and the inexact float sampler ``rng.geometric(1 - e^-a) - rng.geometric(1 - e^-a)``
(what the library used before its exact samplers: two inverted 53-bit uniforms per draw). The
three run in turn (exact, uniform, float, exact, uniform, float, ...: ``--rounds`` of each, 3 by
default); each ``*_seconds`` is the median of its side and each ratio the median of the
per-round ratios, so machine load slows both sides of a ratio alike. Also printed: the 64-bit
words of the stream read per draw.

Run: ``python benchmarks/noise.py [--entries 10000000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
import math
import platform

import numpy as np

# the benchmarks' one way to time a ratio: the thing and its baselines interleaved
from interleaved import interleaved_times, median_ratio  # type: ignore[import-not-found]

from privgraph.mechanisms.noise import WordStream, digit_groups, discrete_laplace, dyadic_parameter

PARAMETERS = (8.0, 4.0, 1.0, 0.5, 0.1, 0.05, 0.01, 0.001, 1e-5, 2.0**-27)  # 2^-27: the laplace feature mechanism at eps 1, d 128


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3, help="timed runs of each, interleaved")
    args = ap.parse_args()
    n = args.entries
    rng = np.random.default_rng(0)
    discrete_laplace(rng, 1.0, 1000)  # compile
    for a in PARAMETERS:
        discrete_laplace(rng, a, 1000)  # the parameter's digit table
        p = -math.expm1(-a)
        t = interleaved_times({
            "exact": lambda: discrete_laplace(rng, a, n),
            "uniform": lambda: rng.random(n),
            "naive": lambda: rng.geometric(p, n) - rng.geometric(p, n),
        }, rounds=args.rounds, warmup=False)
        exact, uniform, naive = (t["seconds"][k] for k in ("exact", "uniform", "naive"))
        samples = t["samples"]
        stream = WordStream(np.random.default_rng(1))
        stream.discrete_laplace(*dyadic_parameter(a), 100_000)
        print(json.dumps({
            "benchmark": "discrete_laplace", "a": a, "entries": n, "digit_groups_G": digit_groups(*dyadic_parameter(a)),
            "seconds": round(exact, 4), "ns_per_draw": round(exact / n * 1e9, 2),
            "baseline_uniform_seconds": round(uniform, 4),
            "ratio_to_uniform": round(median_ratio(samples["exact"], samples["uniform"]), 2),
            "float_geometric_seconds": round(naive, 4),
            "ratio_to_float_geometric": round(median_ratio(samples["exact"], samples["naive"]), 2),
            "rounds": t["rounds"], "words_per_draw": round(stream.words_read / 100_000, 3), "machine": platform.machine(),
        }), flush=True)


if __name__ == "__main__":
    main()
