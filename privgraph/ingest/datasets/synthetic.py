"""Synthetic graphs: a stochastic block model with label-correlated features, in O(n + m)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from privgraph.ingest.datasets.split import random_node_split
from privgraph.graph import GraphData
from privgraph.seeding import as_generator

__all__ = ["sbm_graph"]


def _int_arg(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _real_arg(value: Any, name: str, low: float, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < low or v > high:
        raise ValueError(f"{name} must be finite and in [{low}, {high}], got {value!r}")
    return v


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values (``np.unique`` in numpy 2.x hashes first, several times slower here)."""
    keys = np.sort(keys)
    if len(keys) > 1:
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    return keys


def _trim(rng: np.random.Generator, keys: np.ndarray, count: int) -> np.ndarray:
    """A uniform ``count``-subset of ``keys`` (sorted distinct), by dropping random extras.

    The distinct values of i.i.d. uniform draws form a uniformly random subset given its size
    (exchangeability), and so does a uniform subset of it.
    """
    extra = len(keys) - count
    if extra <= 0:
        return keys
    return np.delete(keys, rng.choice(len(keys), size=extra, replace=False))


def _sample_pairs(rng: np.random.Generator, size: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` distinct unordered pairs ``i < j`` of ``[0, size)``, uniformly (local indices).

    Sparse case: draw endpoints i.i.d., drop self-loops and repeats, top up until at least
    ``count`` distinct pairs, then drop random extras (a uniform ``count``-subset). Dense case
    (``count`` at least half of the pairs, so the pairs number O(count)): choose among the
    enumerated pairs.
    """
    empty = np.zeros(0, dtype=np.int64)
    if count == 0:
        return empty, empty
    total = size * (size - 1) // 2
    if 2 * count >= total:
        i, j = np.triu_indices(size, 1)
        keys = i.astype(np.int64) * size + j
        keys = keys[rng.choice(total, size=count, replace=False)]
    else:
        keys = empty
        while len(keys) < count:
            need = count - len(keys)
            draw = need + need // 8 + 16
            u = rng.integers(size, size=draw, dtype=np.int64)
            v = rng.integers(size, size=draw, dtype=np.int64)
            keep = u != v
            u, v = u[keep], v[keep]
            keys = _sorted_unique(np.concatenate([keys, np.minimum(u, v) * size + np.maximum(u, v)]))
        keys = _trim(rng, keys, count)
    return keys // size, keys % size


def _sample_between(
    rng: np.random.Generator, y: np.ndarray, count: int, total: int
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` distinct node pairs ``u < v`` with ``y[u] != y[v]``, uniformly among the ``total``.

    Sparse case: i.i.d. endpoints over all nodes, rejecting same-class pairs (with balanced
    classes, k >= 2, at least half are accepted) and repeats, then dropping random extras, as in
    :func:`_sample_pairs`. Dense case (``count >= total / 2``, so n^2 = O(count)): choose among
    the enumerated pairs.
    """
    empty = np.zeros(0, dtype=np.int64)
    if count == 0:
        return empty, empty
    n = len(y)
    if 2 * count >= total:
        i, j = np.triu_indices(n, 1)
        keep = y[i] != y[j]
        keys = i[keep].astype(np.int64) * n + j[keep]
        keys = keys[rng.choice(len(keys), size=count, replace=False)]
    else:
        keys = empty
        while len(keys) < count:
            need = count - len(keys)
            draw = 2 * need + 16
            u = rng.integers(n, size=draw, dtype=np.int64)
            v = rng.integers(n, size=draw, dtype=np.int64)
            keep = y[u] != y[v]
            u, v = u[keep], v[keep]
            keys = _sorted_unique(np.concatenate([keys, np.minimum(u, v) * n + np.maximum(u, v)]))
        keys = _trim(rng, keys, count)
    return keys // n, keys % n


def _sbm_edges(rng: np.random.Generator, y: np.ndarray, k: int, avg_degree: float, homophily: float) -> np.ndarray:
    """The SBM's edges ``[2, m]`` (``u < v``) over the ``k`` blocks of ``y``: per block,
    ``Binomial(pairs_k, p_in)`` distinct within-class pairs, then ``Binomial(pairs_between, p_out)``
    distinct between-class pairs, with ``p_in``, ``p_out`` spreading the expected
    ``n * avg_degree / 2`` edges by ``homophily``."""
    members = np.argsort(y, kind="stable")
    sizes = np.bincount(y, minlength=k).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    n = int(y.size)
    within = int((sizes * (sizes - 1) // 2).sum())
    between = (n * (n - 1) // 2) - within
    expected = n * avg_degree / 2.0
    if between == 0:
        share_in, share_out = expected, 0.0
    elif within == 0:
        share_in, share_out = 0.0, expected
    else:
        share_in, share_out = homophily * expected, (1.0 - homophily) * expected
    p_in = share_in / within if within else 0.0
    p_out = share_out / between if between else 0.0
    for p, what in ((p_in, "within-class"), (p_out, "between-class")):
        if p > 1.0:
            raise ValueError(
                f"infeasible parameters: the {what} edge probability would be {p:.3g} > 1 "
                f"(num_nodes={n}, num_classes={k}, avg_degree={avg_degree}, homophily={homophily})"
            )

    src, dst = [], []
    for a in range(k):  # within-class edges, block by block
        size = int(sizes[a])
        pairs = size * (size - 1) // 2
        if pairs == 0 or p_in == 0.0:
            continue
        count = int(rng.binomial(pairs, p_in))
        i, j = _sample_pairs(rng, size, count)
        u, v = members[starts[a] + i], members[starts[a] + j]
        src.append(np.minimum(u, v))
        dst.append(np.maximum(u, v))
    if between and p_out > 0.0:  # between-class edges: one draw over all of them, O(k + n + m)
        count = int(rng.binomial(between, p_out))
        u, v = _sample_between(rng, y, count, between)
        src.append(u)
        dst.append(v)
    if src:
        return np.stack([np.concatenate(src), np.concatenate(dst)])
    return np.zeros((2, 0), dtype=np.int64)


def sbm_graph(
    num_nodes: int,
    *,
    num_classes: int = 4,
    avg_degree: float = 10.0,
    homophily: float = 0.8,
    num_features: int = 32,
    feature_signal: float = 1.0,
    train: float = 0.5,
    val: float = 0.25,
    seed: Any = None,
) -> GraphData:
    """A stochastic block model with label-correlated features, built in O(n + m).

    Nodes get balanced random classes (the blocks). The expected edge count ``n * avg_degree / 2``
    is split into a within-class share ``homophily`` and a between-class share
    ``1 - homophily``, each spread evenly over the node pairs of its kind (``p_in``, ``p_out``);
    each block draws its within-class edge count from ``Binomial(pairs_k, p_in)``, the
    between-class count is ``Binomial(pairs_between, p_out)``, and that many distinct pairs are
    placed by sampling endpoints (no enumeration of node pairs, O(k + n + m)). Features are
    ``sigmoid(mu[y] + N(0, I))`` with class means ``mu ~ N(0, feature_signal^2 I)``: they lie in
    ``[0, 1]``, the public bounds recorded in ``meta``. All edges are public; the node split is
    random (``train`` / ``val`` / rest). The same seed gives the same graph.

    STATS: ``n`` nodes, about ``n * avg_degree / 2`` edges, ``num_features`` features in [0, 1],
    ``num_classes`` classes, edge homophily about ``homophily``.

    Args:
        num_nodes (int): ``n >= 1``.
        num_classes (int): number of blocks/classes, ``1 .. n``.
        avg_degree (float): expected average degree.
        homophily (float): expected fraction of edges within a class, in ``[0, 1]`` (ignored when
            ``num_classes == 1``).
        num_features (int): feature dimension (``0``: no features).
        feature_signal (float): scale of the class means relative to the unit noise.
        train, val (float): node split fractions.
        seed: ``None``, an int, a ``SeedSequence`` or a ``Generator``.

    Raises:
        ValueError: an invalid or infeasible parameter (e.g. a within-class edge probability > 1).
    """
    n = _int_arg(num_nodes, "num_nodes", 1)
    k = _int_arg(num_classes, "num_classes", 1)
    if k > n:
        raise ValueError(f"num_classes ({k}) must be <= num_nodes ({n})")
    avg_degree = _real_arg(avg_degree, "avg_degree", 0.0)
    homophily = _real_arg(homophily, "homophily", 0.0, 1.0)
    d = _int_arg(num_features, "num_features", 0)
    feature_signal = _real_arg(feature_signal, "feature_signal", 0.0)

    rng_labels, rng_edges, rng_features, rng_split = as_generator(seed).spawn(4)

    y = rng_labels.permutation(np.arange(n, dtype=np.int64) % k)
    edges = _sbm_edges(rng_edges, y, k, avg_degree, homophily)

    x = _sbm_features(rng_features, y, k, d, feature_signal) if d else None
    train_mask, val_mask, test_mask = random_node_split(n, train=train, val=val, seed=rng_split)
    params = {"num_nodes": n, "num_classes": k, "avg_degree": avg_degree, "homophily": homophily,
              "num_features": d, "feature_signal": feature_signal}
    return GraphData(
        num_nodes=n,
        x=x,
        y=y,
        edges_public=edges,
        train_mask=train_mask,
        val_mask=val_mask,
        test_mask=test_mask,
        meta=_sbm_meta(params, train, val),
    )


def _sbm_features(rng: np.random.Generator, y: np.ndarray, k: int, d: int, feature_signal: float) -> np.ndarray:
    """float32 ``[n, d]`` features ``sigmoid(mu[y] + N(0, I))``, class means ``mu ~ N(0, signal^2 I)``."""
    mu = rng.standard_normal((k, d), dtype=np.float32) * np.float32(feature_signal)
    x = rng.standard_normal((y.size, d), dtype=np.float32)
    x += mu[y]
    from scipy.special import expit  # lazy: importing privgraph (a config check) imports no scipy.special

    expit(x, out=x)
    return x


def _sbm_meta(params: dict[str, Any], train: float, val: float) -> dict[str, Any]:
    """The SBM graph's ``meta``: its parameters, the public feature bounds [0, 1] and the split."""
    return {
        "name": "sbm",
        "source": "synthetic: stochastic block model (privgraph.ingest.datasets.sbm_graph)",
        "params": params,
        "feature_bounds": [0.0, 1.0],
        "feature_bounds_source": "generator definition (sigmoid of Gaussian features)",
        "split": f"random node split {train:g}/{val:g}/{1 - train - val:g} (seeded)",
    }
