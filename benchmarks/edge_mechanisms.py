"""Timings of the edge mechanisms (EdgeRR / privHRG machinery), as JSON lines.

- ``hrg_mcmc``: MCMC steps per second on Barabasi-Albert graphs (``networkx.barabasi_albert_graph(n,
  3)``, half of the edges private, EdgeRR's dendrogram over ``V_pri``) for the public, private and
  privHRG (all edges private) acceptance rules, after a burn-in of ``--burn-in`` steps per leaf.
  ``scratch_seconds`` is one from-scratch recomputation of every count and both likelihoods
  (each edge's LCA by climbing, then Eq. 10), interleaved with the timed steps: the ``--steps``
  run as ``--pairs`` chunks (3 by default), each after one recomputation, so that machine load
  slows both alike; ``scratch_seconds`` is the median recomputation and ``ratio_scratch_to_step``,
  how many incremental steps cost as much as one recomputation, the median of the per-pair ratios.
- ``hrg_sample``: sampling every private edge from a fitted EdgeRR release (seconds, best of 3)
  and its peak traced memory (``tracemalloc``, separate run) plus the process's peak RSS; the
  release is fitted with ``--sample-steps`` MCMC steps per leaf (sampling cost does not depend on
  the fit's quality), whose time is reported as ``fit_seconds``.

- ``local``: a per-node edge mechanism (DPRR, Warner RR) over every node of ``V_pri`` in one
  process (peak traced memory in a separate run), with the ratio to drawing one uniform per output
  report: after an untimed run, the mechanism and the baseline alternate (``--pairs`` of each);
  the seconds are the medians of each side, the ratio the median of the per-pair ratios.
- ``hrg_convergence``: the PUBLIC convergence check of EdgeRR / privHRG
  (:mod:`privgraph.mechanisms.hrg.convergence`) on Cora (``rho = 0.2``, ``split_seed = 0``) and/or
  BA graphs (``--convergence cora ba10000``): the budgets tried with their R-hat and Geweke z,
  the first passing budget, ``required_steps_per_leaf``, the check's seconds and proxy steps;
  with ``--real``, the same diagnostic on the REAL private target at the required budget
  (``developer_only: true``: computed from private edges, printed here, never stored), and the
  seconds of one whole edge fit (check + private chain + noisy probabilities) with ``"auto"``.
  ``--convergence facebook`` runs MUSAE Facebook (``rho = 0.2``, ``split_seed = 0``);
  ``--block-leaves N`` gives EdgeRR and privHRG a public block tree of at most ``N`` leaves per
  block (:mod:`privgraph.mechanisms.hrg.blocks`): the line then has ``blocks`` and the per-block
  passing budgets instead of ``budgets``, and ``--fit`` times one whole fit (``fit_seconds``,
  check kept) and its step counts.
  ``kept_check_seconds``: the same check again in the process (the kept record, as a
  comparison's later runs at one epsilon get it), with ``ratio_cold_to_kept``; with ``--real``,
  ``fit_seconds_check_kept``: a second whole fit, its check kept. Cold (the kept records cleared)
  and kept alternate, ``--check-pairs`` of each (1 by default: a cold check takes seconds to
  minutes); with more, the seconds are the medians and the ratios the medians of the per-pair
  ratios.
- ``dask_speedup``: the whole edge stage of ``privatize_graph`` (per node partition for DPRR and
  Warner RR, per chunk of internal nodes for EdgeRR's sampling) on Dask LocalClusters of 1 and
  2 workers (1 thread each), both up at once: after a warm-up on each, the two alternate
  (``--pairs`` of each); the seconds are the medians, ``speedup`` the median of the per-pair
  ``t1 / t2``.

Run: ``python benchmarks/edge_mechanisms.py [--sizes 1000 10000 100000] [--sample-sizes ... 1000000] [--pairs 3]``
``python benchmarks/edge_mechanisms.py --skip mcmc sample local dask --convergence cora --real``
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import paired_times  # type: ignore[import-not-found]

from privgraph.graph import GraphData, in_sorted
from privgraph.mechanisms.edges.edge_rr import EdgeRR
from privgraph.mechanisms.edges.priv_hrg import PrivHRG
from privgraph.mechanisms.hrg import Dendrogram, Phase, exponent, run_mcmc, sample_all
from privgraph.mechanisms.hrg.convergence import Proxy, clear_check_cache, convergence_check

SEED = 12345
REPEATS = 3


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def best_of(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def ba_graph(n: int, *, m: int = 3, rho: float = 0.5, seed: int = SEED) -> GraphData:
    """``networkx.barabasi_albert_graph(n, m, seed)``, each edge private with probability ``rho``."""
    import networkx as nx

    g = nx.barabasi_albert_graph(n, m, seed=seed)
    flat = np.fromiter((x for e in g.edges() for x in e), dtype=np.int64, count=2 * g.number_of_edges())
    e = flat.reshape(-1, 2).T
    private = np.random.default_rng(seed + 1).random(e.shape[1]) < rho
    return GraphData.from_edges(n, e, private=private)


def edge_rr_dendrogram(graph: GraphData, rng: np.random.Generator, *, all_private: bool = False) -> Dendrogram:
    """The random initial dendrogram EdgeRR builds (leaves ``V_pri``), or privHRG's (all edges private)."""
    if all_private:
        e = graph.edges("all")
        leaves = np.unique(e.ravel())
        return Dendrogram.random(graph.num_nodes, leaves, np.zeros((2, 0), np.int64), e, rng)
    v = graph.private_nodes()
    pub = graph.edges_public
    pub = pub[:, in_sorted(pub[0], v) & in_sorted(pub[1], v)]
    return Dendrogram.random(graph.num_nodes, v, pub, graph.edges_private, rng)


def bench_mcmc(graph: GraphData, *, steps: int, burn_in: float, label: str = "ba", pairs: int = REPEATS) -> None:
    """Steps/s of the public, private and privHRG rules on ``graph``, and the from-scratch ratio."""
    n = graph.num_nodes
    rng = np.random.default_rng(SEED)
    for rule, all_private in (("public", False), ("private", False), ("priv_hrg", True)):
        d = edge_rr_dendrogram(graph, rng, all_private=all_private)
        a_pri = exponent(0.5, int(d.w_pri.sum()))
        phase = {
            "public": lambda k: Phase("public", k, 1.0, 0.0),
            "private": lambda k: Phase("private", k, 0.0, a_pri),
            "priv_hrg": lambda k: Phase("private", k, 0.0, a_pri),
        }[rule]
        run_mcmc(d, [phase(int(burn_in * d.n))], rng)  # burn-in (also warms the JIT)
        d.recompute()  # the recomputation's warm-up
        d.log_likelihood()
        chunk = max(steps // pairs, 1)  # the timed steps in `pairs` chunks, each after a recomputation
        accepted = []

        def chunk_steps() -> None:
            accepted.append(sum(run_mcmc(d, [phase(chunk)], rng).accepted.values()))

        t = paired_times(lambda: (d.recompute(), d.log_likelihood()), chunk_steps, pairs=pairs, warmup=False)
        steps_run, seconds = chunk * pairs, sum(t["b"])
        emit({
            "bench": "hrg_mcmc",
            "graph": label,
            "n": n,
            "leaves": d.n,
            "edges": d.num_edges,
            "rule": rule,
            "steps": steps_run,
            "seconds": round(seconds, 4),
            "steps_per_s": round(steps_run / seconds),
            "acceptance_rate": round(sum(accepted) / steps_run, 4),
            "depth": d.depth(),
            "scratch_seconds": round(t["a_seconds"], 5),
            "ratio_scratch_to_step": round(t["ratio"] * chunk, 1),  # scratch_i / (chunk_i / chunk)
            "pairs": t["pairs"],
        })


def bench_sampling(graph: GraphData, *, fit_steps: float, label: str = "ba") -> None:
    """Time and peak memory of sampling all private edges from a fitted EdgeRR release."""
    # the sampling cost does not depend on the fit's quality: a short chain (below the documented
    # minimum, so run through fit_hrg directly, not through EdgeRR, which refuses it)
    from privgraph.mechanisms.hrg import fit_hrg

    m = EdgeRR(epsilon=1.0, rounds=1)
    leaves, pub, mask, _ = m._inputs(graph)
    t0 = time.perf_counter()
    fitted = fit_hrg(
        graph.num_nodes, leaves, pub, graph.edges_private, mask, eps1=m.eps1, eps2=m.eps2,
        schedule=lambda n, a: [Phase("joint", int(fit_steps * n), 1.0, a)], rng=np.random.default_rng(SEED),
        tau_b=m.tau_b, tau_c=m.tau_c,
    )
    fit_seconds = time.perf_counter() - t0
    rng = np.random.default_rng(SEED + 1)
    seconds, edges = best_of(lambda: sample_all(fitted.release, rng))
    tracemalloc.start()
    sample_all(fitted.release, np.random.default_rng(SEED + 2))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    emit({
        "bench": "hrg_sample",
        "graph": label,
        "n": graph.num_nodes,
        "private_leaves": int(fitted.release.private_order.size),
        "private_edges_in": int(graph.edges_private.shape[1]),
        "sampled_edges": int(edges.shape[1]),
        "fit_steps_per_leaf": fit_steps,
        "fit_seconds": round(fit_seconds, 3),
        "seconds": round(seconds, 4),
        "edges_per_s": round(edges.shape[1] / seconds),
        "peak_traced_mib": round(peak / 2**20, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    })


def dataset_graph(name: str = "cora") -> GraphData:
    """Cora or MUSAE Facebook with 20 % private edges (``rho = 0.2``, ``split_seed = 0``), from
    ``PRIVGRAPH_DATA_ROOT``."""
    import os
    from pathlib import Path

    from privgraph.ingest.datasets import load_dataset

    root = Path(os.environ.get("PRIVGRAPH_DATA_ROOT", "../shared/datasets"))
    return load_dataset(name, root=root, rho=0.2, split_seed=0)


def _budget_summary(b: dict[str, Any]) -> dict[str, Any]:
    return {
        "steps_per_leaf": b["steps_per_leaf"],
        "rhat": {k: (None if v is None else round(v, 4)) for k, v in b["rhat"].items()},
        "geweke_z": {k: [None if z is None else round(z, 2) for z in v] for k, v in b["geweke_z"].items()},
        "passed": b["passed"],
    }


def bench_convergence(graph: GraphData, mech: Any, *, label: str, real: bool = False, fit: bool = False,
                      pairs: int = 1) -> None:
    """The public check's cost and choice; with ``real``, the REAL chain's R-hat at that choice and
    one whole fit's seconds (developer measurements: computed from private edges, not stored)."""
    mechanism = type(mech).name
    schedule = getattr(mech, "schedule", "private")
    records = []

    def cold() -> None:
        clear_check_cache()  # a cold check: its chains run
        records.append(mech.convergence_check(graph))

    # cold, then the same check again in the process (the kept record), in turn
    t = paired_times(cold, lambda: mech.convergence_check(graph), pairs=pairs, warmup=False)
    rec, seconds, kept = records[0], t["a_seconds"], t["b_seconds"]
    out: dict[str, Any] = {
        "bench": "hrg_convergence", "graph": label, "mechanism": mechanism, "schedule": schedule,
        "epsilon": mech.epsilon, "leaves": rec["proxy"]["leaves"], "proxy": rec["proxy"]["kind"],
        "kernel": rec["kernel"], "passed": rec["passed"],
        "passed_steps_per_leaf": rec["passed_steps_per_leaf"],
        "required_steps_per_leaf": rec["required_steps_per_leaf"], "check_seconds": round(seconds, 2),
        "proxy_steps": rec["proxy_steps_run"], "proxy_steps_per_s": round(rec["proxy_steps_run"] / seconds),
        "kept_check_seconds": round(kept, 4), "ratio_cold_to_kept": round(t["ratio"]), "check_pairs": t["pairs"],
    }
    if "per_block" in rec:
        passed = [b["passed_steps_per_leaf"] for b in rec["per_block"]]
        out.update(blocks=rec["proxy"]["blocks"], block_passing_budgets={
            str(s): passed.count(s) for s in sorted({p for p in passed if p is not None})},
            blocks_failed=passed.count(None))
    else:
        out.update(proxy_edges=rec["proxy"]["private_role_edges"],
                   budgets=[_budget_summary(b) for b in rec["budgets"]])
    if fit and rec["passed"]:
        t0 = time.perf_counter()
        fitted = mech.fit(graph, np.random.default_rng(SEED))
        out.update(fit_seconds=round(time.perf_counter() - t0, 2), fit_steps=fitted.info["steps"],
                   check_and_fit_seconds=round(seconds + time.perf_counter() - t0, 2))
    emit(out)
    if not (real and rec["passed"]):
        return
    need = rec["required_steps_per_leaf"]
    if mechanism == "priv_hrg":
        e = graph.edges("all")
        leaves = np.unique(e.ravel())
        target = Proxy(graph.num_nodes, leaves, np.zeros((2, 0), np.int64), e, None, {"kind": "REAL"})
        kernel = Phase("private", 0, 0.0, exponent(mech.eps1, leaves.size))
    else:
        leaves, pub, mask, v = mech._inputs(graph)
        target = Proxy(graph.num_nodes, leaves, pub, graph.edges_private, mask, {"kind": "REAL"})
        kernel = mech._kernel(exponent(mech.eps1, v.size))
    t0 = time.perf_counter()
    rr = convergence_check(target, kernel, min_steps_per_leaf=need, max_steps_per_leaf=need, seed=1)
    real_seconds = time.perf_counter() - t0
    fits = []

    def fit_cold() -> None:
        clear_check_cache()
        fits.append(mech.fit(graph, np.random.default_rng(SEED)))

    # a cold fit, then a comparison's next run (the check is kept), in turn
    ft = paired_times(fit_cold, lambda: mech.fit(graph, np.random.default_rng(SEED + 1)), pairs=pairs, warmup=False)
    fitted, fit_seconds, fit_kept = fits[0], ft["a_seconds"], ft["b_seconds"]
    emit({
        "bench": "hrg_convergence_real", "developer_only": True, "graph": label, "mechanism": mechanism,
        "schedule": schedule, "steps_per_leaf": need, "real": _budget_summary(rr["budgets"][0]),
        "real_seconds": round(real_seconds, 2), "fit_seconds": round(fit_seconds, 2),
        "fit_seconds_check_kept": round(fit_kept, 2), "ratio_fit_cold_to_kept": round(ft["ratio"], 2),
        "check_pairs": ft["pairs"],
        "fit_steps": fitted.info["steps"], "fit_steps_per_leaf": fitted.info["steps_per_leaf"],
        "private_chain_geweke_z": {
            k: v["geweke_z"] for k, v in fitted.mcmc.to_dict()["convergence"].items()
        },
    })


def bench_local(graph: GraphData, name: str, *, label: str = "ba", pairs: int = REPEATS) -> None:
    """One process: the per-node mechanism over all of V_pri, time and peak traced memory."""
    from privgraph.mechanisms import build_mechanism
    from privgraph.mechanisms.edges.dprr import private_csr

    cand = graph.private_nodes()
    # Warner RR's output grows like |V_pri|^2 / (e^eps + 1) at any fixed eps: time it at the eps
    # that gives about 10 false reports per node, ln(|V_pri| / 10), so that the output stays linear
    eps = 1.0 if name == "dprr" else float(np.log(max(cand.size / 10.0, 2.0)))
    mech = build_mechanism(name, {"epsilon": eps})
    indptr, indices = private_csr(graph.edges_private, graph.num_nodes)
    run = lambda: mech.privatize_nodes(cand, indptr, indices, cand, np.random.default_rng(SEED))  # noqa: E731
    reports = run()  # the output's size; the warm-up
    t = paired_times(run, lambda: np.random.default_rng(SEED).random(reports.shape[1]), pairs=pairs, warmup=False)
    seconds, base = t["a_seconds"], t["b_seconds"]
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    emit({
        "bench": "local", "mechanism": name, "epsilon": round(eps, 3), "graph": label, "n": graph.num_nodes,
        "private_nodes": int(cand.size), "private_edges_in": int(graph.edges_private.shape[1]),
        "reports": int(reports.shape[1]), "seconds": round(seconds, 4),
        "reports_per_s": round(reports.shape[1] / seconds), "baseline_uniform_seconds": round(base, 5),
        "ratio_to_uniform": round(t["ratio"], 1), "pairs": t["pairs"], "peak_traced_mib": round(peak / 2**20, 1),
    })


def bench_dask_speedup(graph: GraphData, name: str, params: dict[str, Any], *, parts: int = 8,
                       label: str = "ba", pairs: int = REPEATS) -> None:
    """privatize_graph's edge stage with 1 and 2 Dask workers; EdgeRR is fitted inside (serial)
    so its figure includes the global fit (reported separately by hrg_sample)."""
    from privgraph.mechanisms import build_mechanism
    from tasks.dask_executor import DaskExecutor
    from privgraph.parts.partition import partition_graph
    from privgraph.privatize.release import privatize_graph

    mech = build_mechanism(name, params)
    partitioning = partition_graph(graph, parts, "hash")
    # both clusters up at once, so that their runs alternate (the idle one's workers wait)
    with DaskExecutor(n_workers=1, threads_per_worker=1) as ex1, DaskExecutor(n_workers=2, threads_per_worker=1) as ex2:
        def whole(ex: Any) -> Callable[[], Any]:
            return lambda: privatize_graph(graph, features=None, edges=mech, partitioning=partitioning,
                                           root_seed=np.random.SeedSequence(SEED), executor=ex)

        # the warm-up: workers import privgraph and numba compiles
        t = paired_times(whole(ex1), whole(ex2), pairs=pairs, warmup=True)
        record = {
            "bench": "dask_speedup", "mechanism": name, "graph": label, "n": graph.num_nodes,
            "parts": parts, "seconds_1_worker": round(t["a_seconds"], 3), "seconds_2_workers": round(t["b_seconds"], 3),
            "speedup": round(t["ratio"], 2), "pairs": t["pairs"],
        }
        from privgraph.mechanisms.edges.shapes import LocalReports

        if isinstance(mech, LocalReports):
            # the per-node part alone: the map over partitions (scatter of the CSR included)
            from privgraph.seeding import stage_seed

            def per_node(ex: Any) -> Callable[[], Any]:
                return lambda: mech.node_reports(graph, partitioning.parts,
                                                 stage_seed(np.random.SeedSequence(SEED), "edges"), ex)

            t = paired_times(per_node(ex1), per_node(ex2), pairs=pairs, warmup=True)
            record.update({
                "per_node_seconds_1_worker": round(t["a_seconds"], 3),
                "per_node_seconds_2_workers": round(t["b_seconds"], 3),
                "per_node_speedup": round(t["ratio"], 2),
            })
    emit(record)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000],
                   help="BA graph sizes for the MCMC timings")
    p.add_argument("--sample-sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000],
                   help="BA graph sizes for the sampling timings")
    p.add_argument("--steps", type=int, default=1_000_000, help="timed MCMC steps per rule")
    p.add_argument("--burn-in", type=float, default=5.0, help="MCMC burn-in, steps per leaf")
    p.add_argument("--sample-steps", type=float, default=2.0, help="MCMC steps per leaf before sampling")
    p.add_argument("--local-sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000],
                   help="BA graph sizes for DPRR / Warner RR")
    p.add_argument("--dask-size", type=int, default=300_000, help="BA graph size for the 1 vs 2 worker timing")
    p.add_argument("--pairs", type=int, default=REPEATS,
                   help="interleaved timed runs of each side of a ratio (MCMC, local, dask)")
    p.add_argument("--check-pairs", type=int, default=1,
                   help="interleaved cold and kept convergence checks (and fits, with --real)")
    p.add_argument("--skip", nargs="*", default=[], choices=["mcmc", "sample", "local", "dask"])
    p.add_argument("--convergence", nargs="*", default=[],
                   help="graphs for the public convergence check: 'cora' and/or 'ba<n>' (e.g. ba10000)")
    p.add_argument("--convergence-mechanisms", nargs="*", default=["edge_rr:alternating", "priv_hrg"],
                   help="edge_rr:alternating, edge_rr:joint, priv_hrg")
    p.add_argument("--block-leaves", type=int, default=None,
                   help="EdgeRR/privHRG block_leaves (a public block tree; default: one chain)")
    p.add_argument("--fit", action="store_true", help="also one whole fit with the check kept (fit_seconds)")
    p.add_argument("--real", action="store_true",
                   help="also the REAL chain's R-hat at the chosen steps and one fit's seconds (developer only)")
    args = p.parse_args(argv)
    graphs: dict[int, GraphData] = {}

    def graph(n: int) -> GraphData:
        if n not in graphs:
            graphs[n] = ba_graph(n)
        return graphs[n]

    if "mcmc" not in args.skip:
        for n in args.sizes:
            bench_mcmc(graph(n), steps=args.steps, burn_in=args.burn_in, pairs=args.pairs)
    if "sample" not in args.skip:
        for n in args.sample_sizes:
            bench_sampling(graph(n), fit_steps=args.sample_steps)
    if "local" not in args.skip:
        for n in args.local_sizes:
            for name in ("dprr", "warner_rr"):
                bench_local(graph(n), name, pairs=args.pairs)
    for name in args.convergence:
        g = dataset_graph(name) if name in ("cora", "facebook") else ba_graph(int(name[2:]), rho=0.2)
        for spec in args.convergence_mechanisms:
            mech = (
                PrivHRG(epsilon=1.0, block_leaves=args.block_leaves) if spec == "priv_hrg"
                else EdgeRR(epsilon=1.0, rounds=1, schedule=spec.split(":")[1], block_leaves=args.block_leaves)
            )
            bench_convergence(g, mech, label=name, real=args.real, fit=args.fit, pairs=args.check_pairs)
    if "dask" not in args.skip:
        g = graph(args.dask_size)
        for name, params in (
            ("dprr", {"epsilon": 1.0}),
            ("warner_rr", {"epsilon": float(np.log(args.dask_size / 10))}),
            ("edge_rr", {"epsilon": 1.0, "rounds": 1}),  # steps: the public check's ("auto")
        ):
            bench_dask_speedup(g, name, params, pairs=args.pairs)


if __name__ == "__main__":
    main()
