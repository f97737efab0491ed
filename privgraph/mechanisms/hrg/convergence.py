r"""The PUBLIC convergence check that sets the MCMC length of EdgeRR and privHRG.

The dendrogram MCMC of EdgeRR (paper 002, Alg. 2, Eq. 12-14) and privHRG is charged as an
exponential mechanism (:math:`\varepsilon_{e1}`), whose law is the chain's STATIONARY law, and
Alg. 2's "if converged", read off the private chain, would be an unprotected data-dependent
stopping rule. This module chooses the length from PUBLIC data only, before the private chain
runs, and returns a record that can be published (reasoning: docs/guarantees.md, "Why a public
check sets the chain's length").

What it reads. The leaf set (:math:`V_{pri}`, or the nodes with an edge: treated as public), the
public edges, the mechanism's public schedule and coefficient
:math:`a_{pri} = \varepsilon_{e1} / (2\Delta_e)` (a function of :math:`\varepsilon_{e1}` and
:math:`|V_{pri}|`), public sizes, and a PUBLIC seed (never the run's secret noise seed: the
record is published, and a published function of a small secret seed would let anyone test
candidate seeds). It never reads a private edge, nor the private edge count.

The proxy target (same leaves, same acceptance rule, a public stand-in for the private edges):
:mod:`~privgraph.mechanisms.hrg.proxy` (EdgeRR: the public edges among the leaves in both roles;
privHRG: a synthetic preferential-attachment graph of a configured, public mean degree).

What is certified. The check runs ONE kernel: the joint chain's (EdgeRR ``joint``:
:math:`a_{pub} = 1, a_{pri} = \varepsilon_{e1}/(2\Delta_e)`; its length is certified), or the
private phase's (EdgeRR ``alternating``: :math:`a_{pub} = 0`; the length of EACH private phase is
certified, since the output is the exponential mechanism only if the last private phase mixes
from any start; privHRG: the chain's length).

The diagnostic. :data:`CHECK_CHAINS` independent chains, each from its own random dendrogram,
are continued through budgets doubling from :data:`MIN_STEPS_PER_LEAF` steps per leaf to a cap
(:data:`MAX_STEPS_PER_LEAF`); at each budget ``s`` the first :data:`WARMUP_FRACTION` of every
trace is discarded and the rank-normalized split :math:`\hat R` (Vehtari, Gelman, Simpson,
Carpenter and Buerkner 2021: the larger of the bulk and the folded value) is computed on each
log-likelihood trace (public and private roles, the constant ones skipped). ``s`` passes when every
trace has :math:`\hat R <` :data:`RHAT_THRESHOLD`. Geweke's z per chain (first 10 % against last
50 % of the kept half) is recorded for reading, not as a gate (with 4 chains x 2 traces it would
fail a stationary chain a third of the time at :math:`|z| < 2`). The first passing budget
:math:`s^*` gives ``required_steps_per_leaf`` :math:`= \lceil` :data:`SAFETY_FACTOR`
:math:`\cdot s^* \rceil`: what ``"auto"`` runs and what a configured number must reach.

The measurements behind the constants (Cora, a 10^4-node BA graph, blocks):
docs/guarantees.md, "The convergence check's measurements".

What this does NOT show: :math:`\hat R` compares chains on the proxy's log-likelihood, a scalar
summary; it supports convergence of the proxy chain and, through the proxy's likeness, of the
private one; it does not prove that the private chain is at its stationary law after the recorded
steps. The guarantee says so.

All randomness comes from ``numpy.random.SeedSequence(seed)`` children: ``(0,)`` the proxy's
synthetic edges, ``(1, c)`` chain ``c``. The result is deterministic given the public inputs and
the seed, whatever the number of threads.
"""

from __future__ import annotations

import concurrent.futures
import copy
import hashlib
import json
import math
import numbers
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from privgraph.guarantee.params import check_int
from privgraph.mechanisms.hrg.blocks import LeafBlocks, run_blocks
from privgraph.mechanisms.hrg.mcmc import Phase, convergence_stats, run_mcmc
from privgraph.mechanisms.hrg.proxy import (
    Proxy,
    check_seed,
)

__all__ = [
    "RHAT_THRESHOLD",
    "CHECK_CHAINS",
    "SAFETY_FACTOR",
    "WARMUP_FRACTION",
    "MIN_STEPS_PER_LEAF",
    "MAX_STEPS_PER_LEAF",
    "split_rhat",
    "convergence_check",
    "block_convergence_check",
    "clear_check_cache",
    "check_steps_setting",
]

#: The bar of the rank-normalized split R-hat (Vehtari et al. 2021 recommend 1.01 for posterior
#: inference with many effective draws; 1.05 is the older, common bar for "the chains agree").
RHAT_THRESHOLD = 1.05
#: Independent chains of the check, each from its own random dendrogram.
CHECK_CHAINS = 4
#: The first half of every trace is warm-up and is not compared (so a passing budget ``s`` says the
#: chains agreed from ``s / 2`` on).
WARMUP_FRACTION = 0.5
#: ``"auto"`` runs the private chain for this multiple of the first passing budget, and a
#: configured step count must reach it too: the private target differs from the proxy's (other
#: edges, same leaves and rule), and at the first passing budget the proxy has just passed.
SAFETY_FACTOR = 2.0
#: The documented minimum of the steps per leaf of any certified EdgeRR/privHRG chain (the joint
#: chain, one private phase, privHRG's chain), refused at construction below it; also the check's
#: first budget. Measured (docs/guarantees.md): no chain on a graph of Cora's size passed the check with
#: fewer, not even on a structureless Erdos-Renyi graph (R-hat 1.40 at 250, 1.22 at 500, 1.02 at
#: 1000 steps per leaf, privHRG's coefficient, 2708 leaves); the real chains needed 4000 or more.
MIN_STEPS_PER_LEAF = 1000
#: The default cap of the check's doubling budgets (steps per leaf). A check that has not passed
#: by then refuses the release.
MAX_STEPS_PER_LEAF = 64_000
#: At most this many trace points per chain are compared (evenly thinned).
_POINTS = 1000
#: Trace points recorded per chain over the first budget (more over later ones).
_TRACE_POINTS_FIRST = 400


def check_convergence_settings(chains: Any, max_steps_per_leaf: Any, seed: Any) -> tuple[int, int, int]:
    """``(chains, max_steps_per_leaf, seed)`` of the check, validated: at least 2 chains, a cap of at
    least :data:`MIN_STEPS_PER_LEAF`, a public seed ``>= 0`` (EdgeRR's and privHRG's parameters)."""
    return (
        check_int(chains, "convergence_chains", minimum=2),
        check_int(max_steps_per_leaf, "convergence_max_steps_per_leaf", minimum=MIN_STEPS_PER_LEAF),
        check_seed(seed, "convergence_seed"),
    )


def check_steps_setting(value: Any, name: str, *, minimum: float = MIN_STEPS_PER_LEAF) -> float | str:
    """A steps-per-leaf setting: ``"auto"``, or a real number (not bool), finite and ``>= minimum``.

    Raises ``ValueError`` naming ``name`` and :data:`MIN_STEPS_PER_LEAF` below the minimum.
    """
    if isinstance(value, str):
        if value == "auto":
            return "auto"
        raise ValueError(f"{name} must be 'auto' or a number of steps per leaf, got {value!r}")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be 'auto' or a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {v}")
    if v < minimum:
        raise ValueError(
            f"{name} = {v:g} is below the documented minimum of {minimum:g} MCMC steps per leaf "
            f"(MIN_STEPS_PER_LEAF in privgraph.mechanisms.hrg.convergence: no chain measured on a graph "
            f"of Cora's size passed the convergence check with fewer); use 'auto' (the public "
            f"convergence check chooses) or more"
        )
    return v


# -- the diagnostic --------------------------------------------------------------------------------
def _rhat_plain(z: np.ndarray) -> float:
    """Classic R-hat of ``z`` ``[m, n]`` (m sequences of n draws)."""
    n = z.shape[1]
    means = z.mean(axis=1)
    w = float(z.var(axis=1, ddof=1).mean())
    b = float(n * means.var(ddof=1))
    if w <= 0.0:
        return 1.0 if b <= 0.0 else math.inf
    var_hat = (n - 1) / n * w + b / n
    return math.sqrt(var_hat / w)


def _rank_normal(x: np.ndarray) -> np.ndarray:
    """Pooled ranks (ties averaged) mapped to normal scores, ``(r - 3/8) / (S + 1/4)``."""
    from scipy.special import ndtri  # lazy: scipy.special and scipy.stats take seconds to import, and every
    from scipy.stats import rankdata  # CLI command reads the config

    r = rankdata(x, method="average").reshape(x.shape)
    return ndtri((r - 0.375) / (x.size + 0.25))


def split_rhat(traces: np.ndarray) -> float | None:
    r"""Rank-normalized split :math:`\hat R` (Vehtari et al. 2021, Eq. 4-6 and the folded form).

    Each chain is split into halves (``2 m`` sequences), the pooled draws are replaced by normal
    scores of their ranks, and the classic :math:`\hat R = \sqrt{\widehat{var}^+ / W}` is computed;
    the same for the folded draws :math:`|x - \mathrm{median}(x)|`; the larger is returned.

    Args:
        traces (np.ndarray): float ``[chains, points]``, ``chains >= 2``.

    Returns:
        float | None: the statistic (``1.0`` for a constant input), ``None`` with fewer than 4
        points per chain.
    """
    x = np.asarray(traces, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"traces must be [chains >= 2, points], got shape {list(x.shape)}")
    half = x.shape[1] // 2
    if half < 2:
        return None
    if not np.all(np.isfinite(x)):
        return math.inf
    if np.all(x == x.flat[0]):
        return 1.0
    split = np.concatenate([x[:, :half], x[:, x.shape[1] - half :]], axis=0)
    bulk = _rhat_plain(_rank_normal(split))
    folded = np.abs(split - np.median(split))
    tail = _rhat_plain(_rank_normal(folded))
    return float(max(bulk, tail))


# -- the check -------------------------------------------------------------------------------------
def _window(traces: list[tuple[np.ndarray, np.ndarray, np.ndarray]], start: int) -> dict[str, np.ndarray]:
    """Per role, ``[chains, points]`` of the trace points after step ``start``, evenly thinned."""
    res: dict[str, np.ndarray] = {}
    for i, role in ((1, "public"), (2, "private")):
        rows = [t[i][t[0] > start] for t in traces]
        length = min(r.size for r in rows)
        idx = np.linspace(0, length - 1, _POINTS).round().astype(np.int64) if length > _POINTS else np.arange(length)
        res[role] = np.stack([r[:length][idx] for r in rows])
    return res


def _diagnose(series: dict[str, np.ndarray], threshold: float) -> dict[str, Any]:
    rhat: dict[str, float | None] = {}
    geweke: dict[str, list[float | None]] = {}
    ok = True
    for role, x in series.items():
        if x.size == 0 or np.all(x == x.flat[0]):
            rhat[role] = None  # constant (no such edges, or a zero coefficient): nothing to compare
            geweke[role] = []
            continue
        r = split_rhat(x)
        if r is None or not math.isfinite(r) or r >= threshold:
            ok = False
        rhat[role] = r if (r is not None and math.isfinite(r)) else None
        geweke[role] = [convergence_stats(row)["geweke_z"] for row in x]
    points = max((x.shape[1] for x in series.values()), default=0)
    return {"rhat": rhat, "geweke_z": geweke, "points_per_chain": int(points), "passed": ok}


def convergence_check(
    proxy: Proxy,
    kernel: Phase,
    *,
    seed: int = 0,
    chains: int = CHECK_CHAINS,
    min_steps_per_leaf: int = MIN_STEPS_PER_LEAF,
    max_steps_per_leaf: int = MAX_STEPS_PER_LEAF,
    rhat_threshold: float = RHAT_THRESHOLD,
    safety_factor: float = SAFETY_FACTOR,
    schedule_info: dict[str, Any] | None = None,
    threads: int | None = None,
    on_budget: Callable[[dict[str, Any]], None] | None = None,
    keep: bool = True,
) -> dict[str, Any]:
    r"""Run the check on ``proxy`` (module docs) and return its JSON-able record.

    Args:
        proxy (Proxy): a PUBLIC target (:func:`edge_rr_proxy`, :func:`priv_hrg_proxy`).
        kernel (Phase): the acceptance rule to certify (its ``steps`` are ignored): the joint
            chain's, or the private phase's (EdgeRR ``alternating``, privHRG), with the same
            coefficients as the private chain.
        seed (int, optional): the PUBLIC seed of the chains (default: ``0``).
        chains (int, optional): independent chains, ``>= 2`` (default: :data:`CHECK_CHAINS`).
        min_steps_per_leaf, max_steps_per_leaf (int, optional): the first budget and the cap;
            budgets double from the first while ``<=`` the cap.
        rhat_threshold (float, optional): the bar on :math:`\hat R` (default: 1.05).
        safety_factor (float, optional): ``required = ceil(safety_factor * first passing budget)``.
        schedule_info (dict, optional): public description of the schedule, copied to the record.
        threads (int, optional): chains run in parallel threads (default: ``min(chains, cpus)``);
            the result does not depend on it.
        on_budget (Callable, optional): called with each budget's entry as it is done (progress).
        keep (bool, optional): read and keep the record in the process's cache (default:
            ``True``; :func:`block_convergence_check` keeps its blocks' records as one).

    Returns:
        dict: ``passed``, ``passed_steps_per_leaf``, ``required_steps_per_leaf`` (``None`` when no
        budget passed), ``budgets`` (per budget: steps per leaf, :math:`\hat R` per role, Geweke z
        per chain and role, pass), the proxy's description, the thresholds. Every number in it is
        a function of the proxy (public), the kernel and the seed.

    Runtime: ``chains * s_last * n`` MCMC steps (each chain is continued from one budget to the
    next), in parallel threads; ``O(n + m)`` memory per chain plus its trace. The record is a
    function of public inputs only, so the last :data:`CHECK_CACHE_SIZE` records are kept in the
    process: the same check again (a comparison's next run at the same epsilon, on the same leaf
    set) returns a copy at once, ``on_budget`` called for each budget as before.
    """
    seed = check_seed(seed)
    if not isinstance(kernel, Phase):
        raise TypeError(f"kernel must be a Phase, got {type(kernel).__name__}")
    chains = check_int(chains, "chains", minimum=2)
    min_steps = check_int(min_steps_per_leaf, "min_steps_per_leaf", minimum=1)
    max_steps = check_int(max_steps_per_leaf, "max_steps_per_leaf", minimum=min_steps)
    _check_thresholds(rhat_threshold, safety_factor)
    threads = min(chains, os.cpu_count() or 1) if threads is None else check_int(threads, "threads", minimum=1)
    key = _check_key(proxy, kernel, seed, chains, min_steps, max_steps, rhat_threshold, safety_factor, schedule_info)
    cached = _kept(key) if keep else None
    if cached is not None:
        record = copy.deepcopy(cached)
        for entry in record["budgets"]:
            if on_budget is not None:
                on_budget(entry)
        return record
    record = _run_check(proxy, kernel, seed, chains, min_steps, max_steps, float(rhat_threshold),
                        float(safety_factor), schedule_info, threads, on_budget)
    if keep:
        _keep(key, record)
    return record


def _check_thresholds(rhat_threshold: Any, safety_factor: Any) -> None:
    """The bar on R-hat a number > 1 and the safety factor a number >= 1 (``ValueError`` naming them)."""
    if isinstance(rhat_threshold, bool) or not isinstance(rhat_threshold, (int, float)) or not rhat_threshold > 1.0:
        raise ValueError(f"rhat_threshold must be a number > 1, got {rhat_threshold!r}")
    if isinstance(safety_factor, bool) or not isinstance(safety_factor, (int, float)) or not safety_factor >= 1.0:
        raise ValueError(f"safety_factor must be a number >= 1, got {safety_factor!r}")


#: How many convergence-check records a process keeps (:func:`convergence_check`).
CHECK_CACHE_SIZE = 32
_CHECK_CACHE: OrderedDict[str, dict[str, Any]] = OrderedDict()
_CHECK_LOCK = threading.Lock()


def _kept(key: str) -> dict[str, Any] | None:
    with _CHECK_LOCK:
        cached = _CHECK_CACHE.get(key)
        if cached is not None:
            _CHECK_CACHE.move_to_end(key)
    return cached


def _keep(key: str, record: dict[str, Any]) -> None:
    with _CHECK_LOCK:
        _CHECK_CACHE[key] = copy.deepcopy(record)
        while len(_CHECK_CACHE) > CHECK_CACHE_SIZE:
            _CHECK_CACHE.popitem(last=False)


def clear_check_cache() -> None:
    """Forget the kept check records (the next check runs its chains)."""
    with _CHECK_LOCK:
        _CHECK_CACHE.clear()


def _check_key(proxy: Proxy, kernel: Phase, *settings: Any) -> str:
    """SHA-256 of everything a check's record depends on: the PUBLIC proxy's arrays and
    description, the kernel's coefficients and the check's settings."""
    h = hashlib.sha256()
    for a in (proxy.leaf_nodes, proxy.edges_public, proxy.edges_private, proxy.private_leaf, proxy.public_leaf):
        if a is None:
            h.update(b"none")
        else:
            a = np.ascontiguousarray(a)
            h.update(str((a.dtype.str, a.shape)).encode())
            h.update(a.tobytes())
    h.update(json.dumps([proxy.num_nodes, proxy.info, kernel.kind, float(kernel.a_pub), float(kernel.a_pri),
                         *settings], sort_keys=True, default=str).encode())
    return h.hexdigest()


def _new_record(
    proxy: Proxy, kernel: Phase, chains: int, min_steps: int, max_steps: int, rhat_threshold: float,
    safety_factor: float, schedule_info: dict[str, Any] | None,
) -> dict[str, Any]:
    """The check's record before any budget has run: its method, inputs and settings, not passed."""
    return {
        "method": (
            f"{chains} chains from independent random dendrograms on a PUBLIC proxy target, each "
            f"continued through budgets doubling from {min_steps} steps per leaf; rank-normalized "
            f"split R-hat (bulk and folded, Vehtari et al. 2021) of each log-likelihood trace after "
            f"discarding the first {WARMUP_FRACTION:g} as warm-up; passes when every trace has "
            f"R-hat < {rhat_threshold:g}"
        ),
        "reads_private_data": False,
        "proxy": dict(proxy.info),
        "kernel": {"kind": kernel.kind, "a_pub": float(kernel.a_pub), "a_pri": float(kernel.a_pri)},
        "schedule": dict(schedule_info or {}),
        "chains": chains,
        "rhat_threshold": float(rhat_threshold),
        "warmup_fraction": WARMUP_FRACTION,
        "safety_factor": float(safety_factor),
        "min_steps_per_leaf": min_steps,
        "max_steps_per_leaf": max_steps,
        "budgets": [],
        "passed": False,
        "passed_steps_per_leaf": None,
        "required_steps_per_leaf": None,
        "proxy_steps_run": 0,
        "guarantee_note": (
            "supports convergence on a public proxy with the same leaves and MCMC kernel; it does "
            "not prove that the private chain is at its stationary law after the recorded steps"
        ),
    }


def _run_check(
    proxy: Proxy, kernel: Phase, seed: int, chains: int, min_steps: int, max_steps: int, rhat_threshold: float,
    safety_factor: float, schedule_info: dict[str, Any] | None, threads: int,
    on_budget: Callable[[dict[str, Any]], None] | None,
) -> dict[str, Any]:
    """The check itself (:func:`convergence_check`, arguments validated there)."""
    n = int(proxy.leaf_nodes.size)
    budgets: list[int] = []
    s = min_steps
    while s <= max_steps:
        budgets.append(s)
        s *= 2
    record = _new_record(proxy, kernel, chains, min_steps, max_steps, rhat_threshold, safety_factor, schedule_info)
    if n < 3:  # at most one dendrogram: every chain is at its stationary law
        record.update(passed=True, passed_steps_per_leaf=min_steps,
                      required_steps_per_leaf=int(math.ceil(safety_factor * min_steps)),
                      trivial="fewer than 3 leaves: no MCMC move exists")
        return record
    trace_every = max(1, int(round(min_steps * n)) // _TRACE_POINTS_FIRST)
    gens = [np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, c))) for c in range(chains)]
    dens = [proxy.dendrogram(g) for g in gens]
    acc: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(chains)]
    done = 0

    def _advance(c: int, inc: int, offset: int) -> None:
        r = run_mcmc(dens[c], [Phase(kernel.kind, inc, kernel.a_pub, kernel.a_pri)], gens[c], trace_every=trace_every)
        acc[c].append((r.trace_step + offset, r.trace_public, r.trace_private))

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads) if threads > 1 else None
    try:
        for s in budgets:
            total = int(round(s * n))
            inc, offset = total - done, done
            if pool is None:
                for c in range(chains):
                    _advance(c, inc, offset)
            else:
                list(pool.map(_advance, range(chains), [inc] * chains, [offset] * chains))
            done = total
            traces = [tuple(np.concatenate([t[i] for t in acc[c]]) for i in range(3)) for c in range(chains)]
            diag = _diagnose(_window(traces, int(math.floor(WARMUP_FRACTION * total))), float(rhat_threshold))
            record["budgets"].append({"steps_per_leaf": s, **diag})
            if on_budget is not None:
                on_budget(record["budgets"][-1])
            if diag["passed"]:
                record.update(
                    passed=True, passed_steps_per_leaf=s,
                    required_steps_per_leaf=int(math.ceil(safety_factor * s)),
                )
                break
    finally:
        if pool is not None:
            pool.shutdown()
    record["proxy_steps_run"] = int(chains * done)
    return record


def block_convergence_check(
    proxies: list[Proxy], blocks: LeafBlocks, kernel: Phase, *, threads: int | None = None, **settings: Any
) -> dict[str, Any]:
    r"""The check on each block's PUBLIC proxy (:mod:`~privgraph.mechanisms.hrg.blocks`: one chain
    per block, so each block's chain is certified on its own), the blocks' checks in parallel
    threads (one thread each; the record does not depend on ``threads``).

    ``settings`` are :func:`convergence_check`'s (``seed``, ``chains``, ``max_steps_per_leaf``,
    ...). The record has the single check's keys, over the blocks: ``passed`` when every block
    passed, ``passed_steps_per_leaf`` and ``required_steps_per_leaf`` the largest of the blocks'
    (what a configured number of steps must reach), and ``per_block``: each block's leaves, first
    passing budget, required steps (what ``"auto"`` runs on that block), largest final R-hat and
    proxy steps. Every number is a function of the public proxies, the kernel and the seed; the
    process keeps the whole record as one entry of :func:`convergence_check`'s cache."""
    if len(proxies) != blocks.count:
        raise ValueError(f"block_convergence_check: {len(proxies)} proxies for {blocks.count} blocks")
    key = hashlib.sha256(json.dumps([_check_key(p, kernel, sorted(settings.items())) for p in proxies]
                                    + [blocks.summary(), blocks.merges.tolist()], default=str).encode()).hexdigest()
    cached = _kept(key)
    if cached is not None:
        return copy.deepcopy(cached)
    records = run_blocks(lambda b: convergence_check(proxies[b], kernel, threads=1, keep=False, **settings),
                         blocks.count, [int(p.leaf_nodes.size) for p in proxies], threads)
    per_block = []
    for p, rec in zip(proxies, records, strict=True):
        last = rec["budgets"][-1]["rhat"] if rec["budgets"] else {}
        values = [v for v in last.values() if v is not None]
        per_block.append({
            "leaves": int(p.leaf_nodes.size), "passed": rec["passed"],
            "passed_steps_per_leaf": rec["passed_steps_per_leaf"],
            "required_steps_per_leaf": rec["required_steps_per_leaf"],
            "final_rhat": max(values) if values else None, "proxy_steps_run": rec["proxy_steps_run"],
        })
    passed = all(r["passed"] for r in records)
    first = records[0]
    record = {
        **{k: first[k] for k in ("reads_private_data", "kernel", "schedule", "chains", "rhat_threshold",
                                 "warmup_fraction", "safety_factor", "min_steps_per_leaf", "max_steps_per_leaf",
                                 "guarantee_note")},
        "method": f"per block of a PUBLIC block tree: {first['method']}",
        "proxy": {"kind": first["proxy"]["kind"], "description": first["proxy"]["description"],
                  "leaves": blocks.n, "blocks": blocks.summary()},
        "passed": passed,
        "passed_steps_per_leaf": max(r["passed_steps_per_leaf"] for r in records) if passed else None,
        "required_steps_per_leaf": max(r["required_steps_per_leaf"] for r in records) if passed else None,
        "proxy_steps_run": int(sum(r["proxy_steps_run"] for r in records)),
        "per_block": per_block,
    }
    _keep(key, record)
    return record
