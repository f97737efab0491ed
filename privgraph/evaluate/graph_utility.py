r"""Graph-utility report: how far a released graph's structure is from the original's.

The query set of PGB (Liu et al., "PGB: A PubMed Graph Benchmark for privacy-preserving graph
synthesis", and the DP graph-synthesis literature it follows), each computed on the original and
on the released edge set over the same nodes, in O(E) or O(sum of squared degrees) with sparse
matrices (never over node pairs), or sampled with the error stated:

* degree distribution: Kolmogorov-Smirnov statistic and KL divergence (histograms, add-one
  smoothing) between the two degree sequences;
* triangle count (exact, row-chunked :math:`\mathrm{diag}(A^3)/2`), global clustering
  (3 triangles / wedges) and average local clustering: relative errors;
* communities: label propagation (semi-synchronous, a fixed number of sweeps, ties broken by the
  Generator passed in) on each graph; the modularity of each partition on its own graph and the
  NMI between the two partitions;
* degree assortativity (Pearson over edges);
* effective diameter: the 90th percentile of shortest-path lengths from ``sources`` nodes drawn
  uniformly (BFS), whose sampling error the report states as a bootstrap interval over sources;
* eigenvector centrality (power iteration): the overlap of the top-k nodes;
* the two degree histograms themselves, for :func:`structure_plot_png` (one entry per degree
  present: O(sqrt(E)) numbers).

Computed on the raw graph, the report is a PRIVATE evaluation for the data owner.
"""

from __future__ import annotations

import io
import textwrap
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

__all__ = ["adjacency", "graph_utility_report", "structure_plot_png", "structure_stats"]


def adjacency(edges: np.ndarray, num_nodes: int) -> sp.csr_matrix:
    """The symmetric 0/1 adjacency (CSR) of an undirected edge list ``[2, m]`` (duplicates and
    self-loops dropped)."""
    e = np.asarray(edges, dtype=np.int64)
    keep = e[0] != e[1]
    u, v = e[0][keep], e[1][keep]
    a = sp.coo_matrix((np.ones(2 * u.size, dtype=np.float64), (np.r_[u, v], np.r_[v, u])), shape=(num_nodes, num_nodes)).tocsr()
    a.data[:] = 1.0  # duplicates summed by tocsr: back to 0/1
    a.sum_duplicates()
    a.data[:] = 1.0
    return a


def _triangles_per_node(a: sp.csr_matrix, chunk: int = 20000) -> np.ndarray:
    """Triangles at each node: rowsum((A @ A) * A) / 2, computed ``chunk`` rows at a time."""
    n = a.shape[0]
    out = np.empty(n)
    for s in range(0, n, chunk):
        rows = a[s:s + chunk]
        out[s:s + chunk] = np.asarray((rows @ a).multiply(rows).sum(axis=1)).ravel() / 2.0
    return out


def _label_propagation(a: sp.csr_matrix, rng: np.random.Generator, sweeps: int = 20) -> np.ndarray:
    """Community labels by semi-synchronous label propagation: each sweep, a random half of the
    nodes takes the most frequent label among its neighbours (ties: the smallest, after a random
    relabelling); O(E) per sweep; stops early once a sweep changes fewer than 1 in 10^4 labels."""
    n = a.shape[0]
    labels = np.arange(n)
    coo = a.tocoo()
    for _ in range(sweeps):
        perm = rng.permutation(n)  # a random order of labels breaks ties without bias
        lab = perm[labels]
        counts = sp.csr_matrix((np.ones(coo.nnz), (coo.row, lab[coo.col])), shape=(n, n))
        counts.sum_duplicates()  # also sorts each row's labels
        nonempty = np.flatnonzero(np.diff(counts.indptr) > 0)
        best = np.full(n, -1)
        if nonempty.size:
            rows = np.repeat(np.arange(n), np.diff(counts.indptr))
            rowmax = np.maximum.reduceat(counts.data, counts.indptr[nonempty])
            top = np.zeros(n)
            top[nonempty] = rowmax
            hit = np.flatnonzero(counts.data == top[rows])
            first_rows, first = np.unique(rows[hit], return_index=True)  # the smallest label at the max
            best[first_rows] = counts.indices[hit[first]]
        update = (best >= 0) & (rng.random(n) < 0.5)
        new = lab.copy()
        new[update] = best[update]
        changed = int(np.count_nonzero(new != lab))
        inv = np.empty(n, dtype=np.int64)
        inv[perm] = np.arange(n)
        labels = inv[new]
        if changed < max(1, n // 10_000):
            break
    _, labels = np.unique(labels, return_inverse=True)
    return labels


def _modularity(a: sp.csr_matrix, labels: np.ndarray) -> float:
    m2 = a.sum()
    if m2 == 0:
        return 0.0
    deg = np.asarray(a.sum(axis=1)).ravel()
    coo = a.tocoo()
    inside = float(coo.data[labels[coo.row] == labels[coo.col]].sum())
    tot = np.bincount(labels, weights=deg)
    return inside / m2 - float((tot**2).sum()) / m2**2


def _eigenvector_centrality(a: sp.csr_matrix, iterations: int = 200) -> np.ndarray:
    n = a.shape[0]
    x = np.full(n, 1.0 / np.sqrt(max(n, 1)))
    for _ in range(iterations):
        y = a @ x + x  # A + I: the same eigenvectors, no oscillation on bipartite parts
        norm = np.linalg.norm(y)
        if norm == 0:
            return x
        y /= norm
        if np.abs(y - x).max() < 1e-10:
            return y
        x = y
    return x


def _effective_diameter(
    a: sp.csr_matrix, rng: np.random.Generator, sources: int, chunk: int = 8
) -> tuple[float, tuple[float, float]]:
    """90th percentile of finite BFS distances from ``sources`` random nodes, with a 95% bootstrap
    interval over the sources (the sampling error). Each source keeps only its histogram of
    distances: memory O(chunk * n + sources * diameter)."""
    n = a.shape[0]
    src = rng.choice(n, min(sources, n), replace=False)
    hists: list[np.ndarray] = []
    for s0 in range(0, src.size, chunk):
        d = shortest_path(a, unweighted=True, indices=src[s0:s0 + chunk])
        for row in np.atleast_2d(d):
            v = row[np.isfinite(row) & (row > 0)].astype(np.int64)
            hists.append(np.bincount(v))
    width = max((h.size for h in hists), default=0)
    if width == 0:
        return 0.0, (0.0, 0.0)
    h = np.zeros((len(hists), width))
    for i, x in enumerate(hists):
        h[i, : x.size] = x

    def p90(counts: np.ndarray) -> float:
        """numpy's (linear) 90th percentile of the values counted in ``counts``, in O(diameter)."""
        total = int(counts.sum())
        if total == 0:
            return 0.0
        cum = np.cumsum(counts)
        q = 0.9 * (total - 1)
        k = int(np.floor(q))
        lo = int(np.searchsorted(cum, k + 1))
        hi = int(np.searchsorted(cum, min(k + 2, total)))
        return float(lo + (q - k) * (hi - lo))

    boot = [p90(h[rng.integers(0, len(hists), len(hists))].sum(axis=0)) for _ in range(100)]
    return p90(h.sum(axis=0)), (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))


def structure_stats(a: sp.csr_matrix, rng: np.random.Generator, *, sources: int = 64) -> dict[str, Any]:
    """The report's statistics of one graph (see the module docstring)."""
    deg = np.asarray(a.sum(axis=1)).ravel()
    tri = _triangles_per_node(a)
    wedges = deg * (deg - 1) / 2.0
    triangles = float(tri.sum() / 3.0)
    coo = sp.triu(a, k=1).tocoo()
    du, dv = deg[coo.row], deg[coo.col]
    x, y = np.r_[du, dv], np.r_[dv, du]
    assort = float(np.corrcoef(x, y)[0, 1]) if x.size > 1 and x.std() > 0 and y.std() > 0 else 0.0
    labels = _label_propagation(a, rng)
    diameter, ci = _effective_diameter(a, rng, sources)
    return {
        "degrees": deg,
        "triangles": triangles,
        "global_clustering": float(3.0 * triangles / wedges.sum()) if wedges.sum() else 0.0,
        "average_clustering": float(np.where(wedges > 0, tri / np.maximum(wedges, 1), 0.0).mean()),
        "communities": labels,
        "modularity": _modularity(a, labels),
        "assortativity": assort,
        "effective_diameter": diameter,
        "effective_diameter_ci": ci,
        "eigenvector": _eigenvector_centrality(a),
    }


def _kl(p_deg: np.ndarray, q_deg: np.ndarray) -> float:
    top = int(max(p_deg.max(initial=0), q_deg.max(initial=0))) + 1
    p = np.bincount(p_deg.astype(np.int64), minlength=top) + 1.0
    q = np.bincount(q_deg.astype(np.int64), minlength=top) + 1.0
    p, q = p / p.sum(), q / q.sum()
    return float((p * np.log(p / q)).sum())


def _rel(a: float, b: float) -> float:
    return abs(b - a) / abs(a) if a else float(b != 0)


def graph_utility_report(
    original: np.ndarray, released: np.ndarray, num_nodes: int, rng: np.random.Generator, *,
    sources: int = 64, top_k: int = 100,
) -> dict[str, Any]:
    """Compare two edge lists ``[2, m]`` over the same ``num_nodes`` nodes (see the module
    docstring); every value is a plain float, JSON-ready."""
    from scipy.stats import ks_2samp  # lazy: scipy.stats (~0.4 s), only for the report (the CLI imports the plot)
    from sklearn.metrics import normalized_mutual_info_score  # lazy: scikit-learn, only for the report

    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"graph_utility_report: rng must be a numpy Generator, got {type(rng).__name__}")
    a, b = adjacency(original, num_nodes), adjacency(released, num_nodes)
    seed = int(rng.integers(2**63 - 1))  # the same draws for both graphs: equal graphs, equal answers
    s = structure_stats(a, np.random.default_rng(seed), sources=sources)
    t = structure_stats(b, np.random.default_rng(seed), sources=sources)
    k = min(top_k, num_nodes)
    top_a = set(np.argsort(-s["eigenvector"], kind="stable")[:k].tolist())
    top_b = set(np.argsort(-t["eigenvector"], kind="stable")[:k].tolist())
    out: dict[str, Any] = {
        "nodes": int(num_nodes), "edges": {"original": int(a.nnz // 2), "released": int(b.nnz // 2)},
        "degree_ks": float(ks_2samp(s["degrees"], t["degrees"]).statistic),
        "degree_kl": _kl(s["degrees"], t["degrees"]),
        "community_nmi": float(normalized_mutual_info_score(s["communities"], t["communities"])),
        f"eigenvector_top{k}_overlap": len(top_a & top_b) / k,
    }
    top = int(max(s["degrees"].max(initial=0), t["degrees"].max(initial=0))) + 1
    hs, ht = (np.bincount(d.astype(np.int64), minlength=top) for d in (s["degrees"], t["degrees"]))
    present = np.flatnonzero((hs > 0) | (ht > 0))  # at most one entry per distinct degree: O(sqrt(E))
    out["degree_histogram"] = {"degree": present.tolist(), "original": hs[present].tolist(), "released": ht[present].tolist()}
    for key in ("triangles", "global_clustering", "average_clustering", "modularity", "assortativity", "effective_diameter"):
        out[key] = {"original": s[key], "released": t[key], "relative_error": _rel(s[key], t[key])}
    out["effective_diameter"]["ci95_original"] = list(s["effective_diameter_ci"])
    out["effective_diameter"]["ci95_released"] = list(t["effective_diameter_ci"])
    return out


def structure_plot_png(title: str, report: dict[str, Any]) -> bytes:
    """The report as a PNG: the degree distributions of both graphs (complementary CDF, log-log)
    and a bar per statistic (relative error, KS distance, 1 - NMI, 1 - top-k overlap; 0 = kept)."""
    import matplotlib  # lazy: matplotlib, only for the plot

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # lazy: matplotlib, after choosing its backend

    fig = Figure(figsize=(11, 4.5), dpi=110)
    ax, bx = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    h = report["degree_histogram"]
    d = np.asarray(h["degree"], dtype=float)
    for key, style in (("original", "-"), ("released", "--")):
        c = np.asarray(h[key], dtype=float)
        ccdf = c[::-1].cumsum()[::-1] / max(c.sum(), 1.0)  # P(degree >= d)
        keep = (d > 0) & (ccdf > 0)
        ax.plot(d[keep], ccdf[keep], style, marker=".", linewidth=1, label=f"{key} ({report['edges'][key]:,} edges)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("degree d")
    ax.set_ylabel("fraction of nodes with degree >= d")
    ax.set_title(f"degree distribution (KS {report['degree_ks']:.3f}, KL {report['degree_kl']:.3f})", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    topk = next(k for k in report if k.startswith("eigenvector_top"))
    bars = [(k.replace("_", " "), report[k]["relative_error"]) for k in
            ("triangles", "global_clustering", "average_clustering", "modularity", "assortativity", "effective_diameter")]
    bars += [("degree KS", report["degree_ks"]), ("1 - community NMI", 1.0 - report["community_nmi"]),
             (f"1 - {topk.replace('_', ' ')}", 1.0 - report[topk])]
    names, values = zip(*bars)
    bx.barh(range(len(values)), values, color="tab:blue")
    bx.set_yticks(range(len(values)), labels=names, fontsize=8)
    bx.invert_yaxis()
    bx.set_xlabel("relative error / distance (0: preserved)")
    for i, v in enumerate(values):
        bx.text(v, i, f" {v:.3g}", va="center", fontsize=7)
    bx.set_xlim(0, max(1.0, 1.15 * max(values)))
    fig.suptitle(textwrap.fill(title, 110), fontsize=9)
    # fixed margins (tight_layout measured every text: as long as the rendering itself)
    fig.subplots_adjust(left=0.07, right=0.97, bottom=0.12, top=0.84, wspace=0.62)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
