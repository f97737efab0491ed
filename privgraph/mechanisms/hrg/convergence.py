r"""The PUBLIC convergence check that sets the MCMC length of EdgeRR and privHRG.

Why. The dendrogram MCMC of EdgeRR (paper 002, Alg. 2, Eq. 12-14) and privHRG is charged as an
exponential mechanism (:math:`\varepsilon_{e1}`), whose law is the chain's STATIONARY law. After a
finite number of steps the output's law is the chain's law at that step, which equals the
stationary law only approximately; a chain that has not mixed (Geweke z of -14 and -19 were seen
with 50 + 50 steps per leaf on Cora) is not the exponential mechanism in any useful sense. Alg. 2
stops "if converged", which read off the private chain would be a data-dependent (unprotected)
stopping rule. This module instead chooses the length from PUBLIC data only, before the private
chain runs, and returns a record that can be published.

What it reads. The leaf set (:math:`V_{pri}`, or the nodes with an edge: treated as public), the
public edges, the mechanism's public schedule and coefficient
:math:`a_{pri} = \varepsilon_{e1} / (2\Delta_e)` (a function of :math:`\varepsilon_{e1}` and
:math:`|V_{pri}|`), public sizes, and a PUBLIC seed (never the run's secret noise seed: the
record is published, and a published function of a small secret seed would let anyone test
candidate seeds). It never reads a private edge, nor the private edge count.

The proxy target (same leaves, same acceptance rule, a public stand-in for the private edges):

- EdgeRR (:func:`edge_rr_proxy`, ``"public_edges"``): the public edges among the leaves play the
  public role exactly as in the real chain AND the private role (those with both ends private
  leaves; :class:`~privgraph.mechanisms.hrg.dendrogram.Dendrogram` ``allow_shared``). When fewer
  than :math:`\lceil |V_{pri}| / 2 \rceil` such edges exist (every node of :math:`V_{pri}` has a
  private edge, so :math:`|E_{pri}| \ge |V_{pri}| / 2` is a PUBLIC lower bound), edges of a
  synthetic preferential-attachment tree on the private leaves top the private role up to it.
- privHRG (:func:`priv_hrg_proxy`, ``"synthetic_preferential_attachment"``): every edge is
  private, so the private role is a Barabasi-Albert graph on the same leaves with a configured,
  public mean degree (:data:`DEFAULT_PROXY_MEAN_DEGREE`), never the private edge count. A
  heavy-tailed stand-in, because degree heterogeneity, not density, is what slows the chain
  (measured on Cora's 2708 nodes at privHRG's coefficient: an Erdos-Renyi graph of the same size
  passes at 1000 steps per leaf, the real graph at 32000, this BA graph at 64000).

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

Measurements behind the constants (Cora, ``rho = 0.2``, ``split_seed = 0``: 1328 leaves in
:math:`V_{pri}`, 1331 public edges among them, 1056 private; :math:`\varepsilon_{e1} = 0.5`;
2-core machine; ``benchmarks/edge_mechanisms.py --convergence``):

- EdgeRR ``joint``: the proxy's :math:`\hat R` stays at 2.5-2.9 from 125 to 32000 steps per leaf,
  then 1.93 (64000), 1.44 (128000), 1.26 (256000; 520 s for the 4 chains): the joint chain, at
  temperature 1 on the public likelihood, does not mix on Cora within any practical budget (it
  needed 16000, 32000 and 64000 steps per leaf on random graphs with 55, 118 and 281 leaves), and
  the check refuses it at the default cap; the REAL joint chain agrees (R-hat 3.1 at the old
  50 + 50, 1.99 at 16000, 2.18 at 32000, 1.54 at 64000);
- EdgeRR ``alternating`` (one private phase): the proxy passes at 8000 (7-14 s for the 4
  chains), so ``"auto"`` runs 16000 per private phase; the REAL private kernel (developer
  measurement, not published) passes at 4000 and has R-hat 1.015 at 16000;
- privHRG (2708 leaves, the BA proxy of mean degree 4): the proxy passes at 64000 (R-hat 1.14 at
  16000, 1.07 at 32000, 1.03 at 64000; 320 s), so ``"auto"`` runs 128000; the real chain passes
  at 32000 (1.087 at 16000, 1.049 at 32000): the proxy is the slower of the two;
- a 10^4-node BA graph (m = 3, ``rho = 0.2``, 6252 leaves): the ``alternating`` proxy does not
  pass within the default cap (R-hat 1.07 at 32000, 1.13 at 64000; 391 s), while the real private
  kernel (on another random 20 % split of the same graph) passes at 16000: the proxy's private
  role (about 11.2k public edges among the leaves) is about twice as dense as the private graph
  (about 6.0k edges), which slows it; raise
  ``convergence_max_steps_per_leaf`` to release there;
- with ``block_leaves = 256`` (:mod:`~privgraph.mechanisms.hrg.blocks`: one chain and one check
  per public block) the same 10^4-node graph passes in 4.5 s (32 blocks, each at 1000-2000 steps
  per leaf), MUSAE Facebook's 15,946 leaves in 41 s (64 blocks, 1000-16000) and a 10^5-node BA
  graph's 63,561 leaves in 59 s (256 blocks);
- no chain of Cora's size passed below 1000 steps per leaf, not even on an Erdos-Renyi graph
  (:math:`\hat R` 1.40 at 250, 1.22 at 500, 1.02 at 1000): :data:`MIN_STEPS_PER_LEAF`.

What this does NOT show: :math:`\hat R` compares chains on the proxy's log-likelihood, a scalar
summary; it supports convergence of the proxy chain and, through the proxy's likeness, of the
private one; it does not prove that the private chain is at its stationary law after the recorded
steps. The guarantee says so.

All randomness comes from ``numpy.random.SeedSequence(seed)`` children: ``(0,)`` the proxy's
synthetic edges, ``(1, c)`` chain ``c``. The result is deterministic given the public inputs and the seed, whatever the
number of threads.
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
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
import numba
from scipy.special import ndtri
from scipy.stats import rankdata

from privgraph.graph import in_sorted, sorted_unique
from privgraph.params import check_int
from privgraph.mechanisms.hrg.blocks import LeafBlocks, run_blocks
from privgraph.mechanisms.hrg.dendrogram import Dendrogram
from privgraph.mechanisms.hrg.mcmc import Phase, convergence_stats, run_mcmc

__all__ = [
    "RHAT_THRESHOLD",
    "CHECK_CHAINS",
    "SAFETY_FACTOR",
    "WARMUP_FRACTION",
    "MIN_STEPS_PER_LEAF",
    "MAX_STEPS_PER_LEAF",
    "DEFAULT_PROXY_MEAN_DEGREE",
    "Proxy",
    "split_rhat",
    "synthetic_edges",
    "edge_rr_proxy",
    "priv_hrg_proxy",
    "convergence_check",
    "block_convergence_check",
    "clear_check_cache",
    "check_seed",
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
#: first budget. Measured (module docs): no chain on a graph of Cora's size passed the check with
#: fewer, not even on a structureless Erdos-Renyi graph (R-hat 1.40 at 250, 1.22 at 500, 1.02 at
#: 1000 steps per leaf, privHRG's coefficient, 2708 leaves); the real chains needed 4000 or more.
MIN_STEPS_PER_LEAF = 1000
#: The default cap of the check's doubling budgets (steps per leaf). A check that has not passed
#: by then refuses the release.
MAX_STEPS_PER_LEAF = 64_000
#: The public mean degree of privHRG's synthetic proxy (an assumption about the private graph's
#: density, configurable; not read from the data).
DEFAULT_PROXY_MEAN_DEGREE = 4.0
#: At most this many trace points per chain are compared (evenly thinned).
_POINTS = 1000
#: Trace points recorded per chain over the first budget (more over later ones).
_TRACE_POINTS_FIRST = 400


def check_seed(value: Any, name: str = "convergence_seed") -> int:
    """A public seed: an int (not bool) ``>= 0``."""
    return check_int(value, name, minimum=0)


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


# -- proxies ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Proxy:
    """A target for the check: a dendrogram's leaves and the edges in the public/private roles.

    Attributes:
        num_nodes: node count of the graph.
        leaf_nodes: int64 ``[n]`` sorted leaf ids.
        edges_public, edges_private: int64 ``[2, m]`` edges in the two roles (may share pairs).
        private_leaf: boolean ``[n]`` mask of the private leaves, or ``None`` (all).
        info: JSON-able public description (kind, sizes, how it was built).
        public_leaf: boolean ``[n]`` mask of the public leaves, or ``None`` (the leaves with one
            of ``edges_public``); a block's proxy carries the whole graph's, as its real chain does.
    """

    num_nodes: int
    leaf_nodes: np.ndarray
    edges_public: np.ndarray
    edges_private: np.ndarray
    private_leaf: np.ndarray | None
    info: dict[str, Any]
    public_leaf: np.ndarray | None = None

    def dendrogram(self, rng: np.random.Generator) -> Dendrogram:
        """A random starting dendrogram over the proxy (randomness from ``rng`` only)."""
        return Dendrogram.random(
            self.num_nodes, self.leaf_nodes, self.edges_public, self.edges_private, rng,
            private_leaf=self.private_leaf, allow_shared=True, public_leaf=self.public_leaf,
        )


def _empty() -> np.ndarray:
    return np.zeros((2, 0), dtype=np.int64)


@numba.njit(cache=True)
def _preferential_attachment(n, m, u):  # pragma: no cover - jitted
    """Barabasi-Albert on ``0..n-1``: a clique on the first ``m + 1`` nodes, then node ``t`` joins
    ``m`` earlier nodes, each the end of a uniformly chosen earlier edge end (``u``: pre-drawn
    uniforms, one per attempt); a repeated pick is dropped. Returns ``(src, dst, count)``."""
    k0 = min(n, m + 1)
    cap = k0 * (k0 - 1) // 2 + max(n - k0, 0) * m
    src = np.empty(cap, dtype=np.int64)
    dst = np.empty(cap, dtype=np.int64)
    ends = np.empty(2 * cap + 1, dtype=np.int64)
    cnt = 0
    for i in range(k0):
        for j in range(i + 1, k0):
            src[cnt] = i
            dst[cnt] = j
            ends[2 * cnt] = i
            ends[2 * cnt + 1] = j
            cnt += 1
    picked = np.empty(max(m, 1), dtype=np.int64)
    q = 0
    for t in range(k0, n):
        total = 2 * cnt
        got = 0
        for _ in range(m):
            v = ends[min(int(u[q] * total), total - 1)]
            q += 1
            dup = False
            for z in range(got):
                if picked[z] == v:
                    dup = True
            if dup:
                continue
            picked[got] = v
            got += 1
        for z in range(got):
            src[cnt] = picked[z]
            dst[cnt] = t
            ends[2 * cnt] = picked[z]
            ends[2 * cnt + 1] = t
            cnt += 1
    return src, dst, cnt


def synthetic_edges(
    num_nodes: int, leaf_nodes: np.ndarray, mean_degree: float, rng: np.random.Generator
) -> np.ndarray:
    r"""A public synthetic graph on ``leaf_nodes``: Barabasi-Albert preferential attachment with
    :math:`m = \max(1, \mathrm{round}(\bar d / 2))` edges per new node (mean degree about
    :math:`2m`, power-law degrees with exponent 3), nodes in a random order.

    Why this model: the MCMC's mixing is governed by the degree heterogeneity more than by the
    density (measured on Cora's 2708 nodes, privHRG's coefficient at eps_1 = 0.5, 4 chains: an
    Erdos-Renyi graph of Cora's size passes R-hat < 1.05 at 1000 steps per leaf, this BA graph
    (mean degree 4) at 64000, the real Cora graph at 32000); a structureless stand-in would be
    optimistic.
    ``O(n m)`` time and memory; randomness from ``rng`` only.

    Returns:
        np.ndarray: int64 ``[2, k]`` graph node ids, ``u < v``, sorted, no duplicates.
    """
    leaf_nodes = np.asarray(leaf_nodes, dtype=np.int64)
    n = int(leaf_nodes.size)
    if n < 2:
        return _empty()
    m = max(1, int(round(float(mean_degree) / 2.0)))
    perm = rng.permutation(n)
    u = rng.random(max(n - m - 1, 0) * m + 1)
    src, dst, cnt = _preferential_attachment(np.int64(n), np.int64(m), u)
    a = leaf_nodes[perm[src[:cnt]]]
    b = leaf_nodes[perm[dst[:cnt]]]
    keys = sorted_unique(np.minimum(a, b) * np.int64(num_nodes) + np.maximum(a, b))
    return np.stack([keys // num_nodes, keys % num_nodes]).astype(np.int64)


def _union(a: np.ndarray, b: np.ndarray, num_nodes: int) -> np.ndarray:
    keys = sorted_unique(np.concatenate([a[0] * np.int64(num_nodes) + a[1], b[0] * np.int64(num_nodes) + b[1]]))
    return np.stack([keys // num_nodes, keys % num_nodes]).astype(np.int64)


def edge_rr_proxy(
    num_nodes: int,
    leaf_nodes: np.ndarray,
    edges_public: np.ndarray,
    private_leaf: np.ndarray | None,
    seed: int = 0,
    public_leaf: np.ndarray | None = None,
) -> Proxy:
    r"""EdgeRR's public proxy: the public edges among the leaves in both roles (module docs).

    Args:
        num_nodes (int): node count of the graph.
        leaf_nodes (np.ndarray): the dendrogram's sorted leaves (public).
        edges_public (np.ndarray): int64 ``[2, m]`` public edges among the leaves.
        private_leaf (np.ndarray, optional): mask of the private leaves (``None``: all).
        seed (int, optional): the PUBLIC seed (child ``(0,)`` draws the top-up edges).
        public_leaf (np.ndarray, optional): the public leaves (default: the ends of
            ``edges_public``; a block's proxy passes the whole graph's flags).
    """
    seed = check_seed(seed)
    leaf_nodes = np.asarray(leaf_nodes, dtype=np.int64)
    pub = np.asarray(edges_public, dtype=np.int64).reshape(2, -1)
    n = int(leaf_nodes.size)
    mask = np.ones(n, dtype=bool) if private_leaf is None else np.asarray(private_leaf, dtype=bool)
    priv_nodes = leaf_nodes[mask]
    both = in_sorted(pub[0], priv_nodes) & in_sorted(pub[1], priv_nodes) if pub.size else np.zeros(0, bool)
    role = pub[:, both]
    floor = (int(priv_nodes.size) + 1) // 2
    topped = 0
    if role.shape[1] < floor and priv_nodes.size >= 2:
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))
        extra = synthetic_edges(num_nodes, priv_nodes, 2.0, rng)
        keys_role = role[0] * np.int64(num_nodes) + role[1]
        keys_extra = extra[0] * np.int64(num_nodes) + extra[1]
        extra = extra[:, ~in_sorted(keys_extra, sorted_unique(keys_role))]
        need = floor - role.shape[1]
        if extra.shape[1] > need:
            extra = extra[:, np.sort(rng.choice(extra.shape[1], size=need, replace=False))]
        topped = int(extra.shape[1])
        role = _union(role, extra, num_nodes)
    info = {
        "kind": "public_edges",
        "description": (
            "the public edges among the leaves play the public role as in the real chain and the "
            "private role (those between two private leaves); topped up with edges of a synthetic "
            "preferential-attachment tree on the private leaves to ceil(|V_pri| / 2), the public "
            "lower bound of |E_pri|, when fewer"
        ),
        "leaves": n,
        "private_leaves": int(priv_nodes.size),
        "public_role_edges": int(pub.shape[1]),
        "private_role_edges": int(role.shape[1]),
        "synthetic_edges": topped,
    }
    return Proxy(int(num_nodes), leaf_nodes, pub, role, None if private_leaf is None else mask, info,
                 None if public_leaf is None else np.asarray(public_leaf, dtype=bool))


def priv_hrg_proxy(
    num_nodes: int, leaf_nodes: np.ndarray, mean_degree: float = DEFAULT_PROXY_MEAN_DEGREE, seed: int = 0
) -> Proxy:
    r"""privHRG's public proxy: a synthetic preferential-attachment graph on the same leaves with
    the configured public mean degree (:func:`synthetic_edges`); nothing of it read from the data."""
    seed = check_seed(seed)
    leaf_nodes = np.asarray(leaf_nodes, dtype=np.int64)
    n = int(leaf_nodes.size)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))
    edges = synthetic_edges(num_nodes, leaf_nodes, mean_degree, rng)
    info = {
        "kind": "synthetic_preferential_attachment",
        "description": (
            "a Barabasi-Albert graph on the same leaves (m = max(1, round(mean_degree / 2)) edges "
            "per new node, random node order), mean_degree configured and public; the private "
            "edge count is never read"
        ),
        "leaves": n,
        "private_leaves": n,
        "mean_degree": float(mean_degree),
        "public_role_edges": 0,
        "private_role_edges": int(edges.shape[1]),
        "synthetic_edges": int(edges.shape[1]),
    }
    return Proxy(int(num_nodes), leaf_nodes, _empty(), edges, None, info)


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
    if isinstance(rhat_threshold, bool) or not isinstance(rhat_threshold, (int, float)) or not rhat_threshold > 1.0:
        raise ValueError(f"rhat_threshold must be a number > 1, got {rhat_threshold!r}")
    if isinstance(safety_factor, bool) or not isinstance(safety_factor, (int, float)) or not safety_factor >= 1.0:
        raise ValueError(f"safety_factor must be a number >= 1, got {safety_factor!r}")
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
    record: dict[str, Any] = {
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
