r"""The PUBLIC proxy targets of the convergence check (:mod:`~privgraph.mechanisms.hrg.convergence`):
the same leaves and acceptance rule as the private chain, a public stand-in for the private edges.

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
  (measurements: docs/guarantees.md, "The convergence check's measurements").

Neither reads a private edge, nor the private edge count. The synthetic edges come from the
``numpy.random.SeedSequence(seed)`` child ``(0,)`` of the check's PUBLIC seed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numba
import numpy as np

from privgraph.graph import in_sorted, sorted_unique
from privgraph.guarantee.params import check_int
from privgraph.mechanisms.hrg.dendrogram import Dendrogram

__all__ = [
    "DEFAULT_PROXY_MEAN_DEGREE",
    "Proxy",
    "check_seed",
    "synthetic_edges",
    "edge_rr_proxy",
    "priv_hrg_proxy",
]

#: The public mean degree of privHRG's synthetic proxy (an assumption about the private graph's
#: density, configurable; not read from the data).
DEFAULT_PROXY_MEAN_DEGREE = 4.0


def check_seed(value: Any, name: str = "convergence_seed") -> int:
    """A public seed: an int (not bool) ``>= 0``."""
    return check_int(value, name, minimum=0)



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

    Heavy-tailed because the MCMC's mixing is governed by degree heterogeneity more than by
    density (why this model: docs/guarantees.md, "The convergence check's measurements").
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
