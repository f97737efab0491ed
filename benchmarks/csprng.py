"""The cost of drawing privacy noise from a CSPRNG (privgraph's default: AES-128-CTR) instead of PCG64, as JSON lines.

1. Raw generators: one uniform double per entry (``Generator.random``) from the default
   (randomgen's ``AESCounter``: :func:`privgraph.seeding.noise_generator`), the same without AES-NI
   (software AES, the same stream), ChaCha20 and ChaCha8, each as a ratio to PCG64; also
   ``integers`` and ``geometric`` draws (the discrete Laplace sampler's primitive).
2. Mechanisms: FeatureRR (100k x 128, 2 bins) and DPRR (a 100k-node SBM) privatized with PCG64,
   the default and ChaCha20 (after an untimed run of each); the ratio to PCG64 is what the CSPRNG
   default costs.

The generators of one draw (or one mechanism) run in turn, PCG64 first (pcg64, aescounter, ...,
pcg64, aescounter, ...: ``--rounds`` of each, 3 by default): ``seconds`` is the median of each
generator's runs and ``ratio_to_pcg64`` the median of its per-round ratios to PCG64's run of the
same round, so machine load slows both sides alike.

Run: ``python benchmarks/csprng.py [--entries 10000000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import numpy as np
from randomgen import AESCounter, ChaCha

from privgraph.ingest.datasets.split import split_public_private
from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.mechanisms import build_mechanism
from privgraph.seeding import noise_generator

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import interleaved_times, median_ratio  # type: ignore[import-not-found]


def _software_aes(seed: int) -> np.random.Generator:
    bg = AESCounter(seed=seed)
    bg.use_aesni = False
    return np.random.Generator(bg)


BIT_GENERATORS: dict[str, Callable[[int], np.random.Generator]] = {
    "pcg64": lambda s: np.random.Generator(np.random.PCG64(s)),
    "aescounter (default)": lambda s: noise_generator(s),
    "aescounter, software AES": _software_aes,
    "chacha20": lambda s: np.random.Generator(ChaCha(seed=s, rounds=20)),
    "chacha8": lambda s: np.random.Generator(ChaCha(seed=s, rounds=8)),
}


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def _ratios(fns: dict[str, Callable[[], object]], rounds: int, warmup: bool) -> dict[str, tuple[float, float]]:
    """Each generator's median seconds and median per-round ratio to PCG64 (``fns`` starts with it)."""
    t = interleaved_times(fns, rounds=rounds, warmup=warmup)
    base = t["samples"]["pcg64"]
    return {name: (t["seconds"][name], median_ratio(samples, base)) for name, samples in t["samples"].items()}


def raw(entries: int, rounds: int) -> None:
    draws = {
        "random": lambda g: g.random(entries),
        "integers": lambda g: g.integers(0, 1 << 40, size=entries),
        "geometric": lambda g: g.geometric(0.05, size=entries),
    }
    for what, draw in draws.items():
        # no warm-up: nothing compiles, and the medians drop a slow first round
        times = _ratios({name: lambda make=make: draw(make(1)) for name, make in BIT_GENERATORS.items()},
                        rounds, warmup=False)
        for name, (t, ratio) in times.items():
            _emit({"bench": f"csprng/{what}", "generator": name, "entries": entries, "seconds": round(t, 4),
                   "ratio_to_pcg64": round(ratio, 2), "rounds": rounds})


def mechanisms(rounds: int) -> None:
    x = np.random.default_rng(7).random((100_000, 128), dtype=np.float32)
    feature_rr = build_mechanism("feature_rr", {"epsilon": 1.0, "bins": 2})
    g = split_public_private(sbm_graph(100_000, num_classes=4, avg_degree=10.0, num_features=1, seed=3), 0.2, seed=1)
    dprr = build_mechanism("dprr", {"epsilon": 1.0})
    from privgraph.mechanisms.edges.dprr import private_csr

    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    vpri = g.private_nodes()
    jobs = {
        "feature_rr 100k x 128": lambda rng: feature_rr.privatize_rows(x, rng),
        "dprr sbm 100k": lambda rng: dprr.privatize_nodes(vpri, indptr, indices, vpri, rng),
    }
    for job, run in jobs.items():
        times = _ratios({name: lambda make=make: run(make(1)) for name, make in BIT_GENERATORS.items()
                         if name in ("pcg64", "aescounter (default)", "chacha20")}, rounds, warmup=True)
        for name, (t, ratio) in times.items():
            _emit({"bench": f"csprng/mechanism/{job}", "generator": name, "seconds": round(t, 4),
                   "ratio_to_pcg64": round(ratio, 3), "rounds": rounds})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3, help="timed runs of each generator, interleaved")
    args = ap.parse_args()
    raw(args.entries, args.rounds)
    mechanisms(args.rounds)


if __name__ == "__main__":
    main()
