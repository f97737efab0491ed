"""Every feature mechanism on a 100,000 x 128 float32 matrix, as JSON lines.

For each registered feature mechanism and each epsilon, the time of ``privatize_rows`` (plus the
server-side ``estimate`` where the release is an encoding) on a uniform [0, 1] matrix and the
ratio to drawing one uniform number per entry (``rng.random(n * d)``, the same bit generator),
the two run alternately (mechanism, baseline, mechanism, baseline, ...: ``--pairs`` of each, 3 by
default): ``seconds`` and ``baseline_uniform_seconds`` are the medians of each side,
``ratio_to_uniform`` the median of the per-pair ratios, so machine load slows both sides alike.
Issue 3's target: every ratio within 5.

The bit generator is numpy's PCG64 by default (each line says which: ``bit_generator``), as in
the earlier runs, so ratios compare across versions; ``--generator noise`` times privgraph's
privacy-noise generator instead (``privgraph.seeding.noise_generator``, a CSPRNG), against a
baseline drawn from the same generator.

Run: ``python benchmarks/feature_mechanisms.py [--rows 100000] [--dims 128] [--generator pcg64|noise] [--pairs 3]``
"""

from __future__ import annotations

import argparse
import json

import numpy as np

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import paired_times  # type: ignore[import-not-found]

from privgraph.mechanisms import MECHANISMS, Scope, build_mechanism
from privgraph.seeding import noise_generator

SEED = 12345
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
GENERATORS = {"pcg64": np.random.default_rng, "noise": noise_generator}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--generator", choices=sorted(GENERATORS), default="pcg64")
    ap.add_argument("--pairs", type=int, default=3, help="timed runs of each side, interleaved")
    args = ap.parse_args()
    n, d = args.rows, args.dims
    make_rng = GENERATORS[args.generator]
    bit_generator = type(make_rng(1).bit_generator).__name__
    x = np.random.default_rng(7).random((n, d), dtype=np.float32)
    base_rng = make_rng(SEED)
    names = [k for k, c in MECHANISMS.items() if c.scope is Scope.FEATURES]
    for name in names:
        for eps in EPSILONS:
            mech = build_mechanism(name, {"epsilon": eps})
            estimate = getattr(mech, "estimate", None)

            def run(mech=mech, estimate=estimate):
                out = mech.privatize_rows(x, make_rng(1))
                return out if estimate is None else estimate(out)

            # no warm-up: a first run's compile is one pair of several, and the medians drop it
            t = paired_times(run, lambda: base_rng.random(n * d), pairs=args.pairs, warmup=False)
            seconds = t["a_seconds"]
            print(json.dumps({
                "bench": f"features/{name}", "epsilon": eps, "rows": n, "dims": d,
                "bit_generator": bit_generator,
                "seconds": round(seconds, 4), "entries_per_s": int(n * d / seconds),
                "baseline_uniform_seconds": round(t["b_seconds"], 4),
                "ratio_to_uniform": round(t["ratio"], 2), "pairs": t["pairs"],
            }), flush=True)


if __name__ == "__main__":
    main()
