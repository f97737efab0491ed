"""GraphData: the one in-memory graph type of privgraph.

An undirected graph whose edges are split into PUBLIC edges (released as they are) and PRIVATE
edges (the ones a mechanism protects). Every undirected edge is stored once, as a column
``(u, v)`` with ``u < v`` of an int64 array of shape ``[2, m]``. Construction validates the arrays
and raises :class:`~privgraph.errors.GraphValidationError` naming the problem and the first
offending rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from collections.abc import Callable, Mapping
from typing import Any, Literal

import numpy as np

from privgraph.errors import GraphValidationError, data_refusal

__all__ = [
    "GraphData",
    "GraphValidationError",
    "MAX_CLASSES",
    "MAX_NODES",
    "SPLIT_MASKS",
    "UNLABELLED",
    "canonical_edges",
    "check_edge_list",
    "in_sorted",
    "sorted_unique",
]

_MAX_SHOWN = 5
#: the label of a node without one (single-label ``y``): in no train/val/test mask, never
#: touched by label RR, and kept as -1 in every release
UNLABELLED = -1
#: the split masks of a graph, in order
SPLIT_MASKS = ("train_mask", "val_mask", "test_mask")
#: the most nodes a graph may have: METIS and the CSR index arrays use 32-bit node ids
MAX_NODES = 2**31 - 1
#: the most classes a single-label ``y`` may have (labels ``0 .. MAX_CLASSES - 1``): each class is an
#: output unit of every model and a category of label RR
MAX_CLASSES = 1000


def _rows(idx: np.ndarray) -> str:
    shown = ", ".join(str(int(i)) for i in idx[:_MAX_SHOWN])
    more = f" (and {len(idx) - _MAX_SHOWN} more)" if len(idx) > _MAX_SHOWN else ""
    return f"[{shown}]{more}"


def _as_edge_array(edges: Any, name: str) -> np.ndarray:
    if edges is None:
        return np.zeros((2, 0), dtype=np.int64)
    arr = np.asarray(edges)
    if arr.dtype == np.bool_:
        raise GraphValidationError(f"{name}: node ids must be integers, got a boolean array")
    if arr.ndim != 2 or arr.shape[0] != 2:
        raise GraphValidationError(f"{name}: expected shape [2, m], got {list(arr.shape)}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            bad = np.flatnonzero(~np.isfinite(arr).all(0) | (arr != np.round(arr)).any(0))
            raise GraphValidationError(f"{name}: non-integer node ids at columns {_rows(bad)}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def canonical_edges(edges: np.ndarray) -> np.ndarray:
    """Return ``edges`` ([2, m]) with each column ordered ``u < v`` (no other change).

    >>> canonical_edges(np.array([[3, 0], [1, 2]])).tolist()
    [[1, 0], [3, 2]]
    """
    edges = np.asarray(edges, dtype=np.int64)
    return np.stack([np.minimum(edges[0], edges[1]), np.maximum(edges[0], edges[1])])


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an int64 array, by sorting.

    (numpy 2.4's hash-based ``np.unique``/``np.isin`` are ~50x slower than a sort on large int64
    key arrays; privgraph uses these two helpers for every edge-key set operation.)

    >>> sorted_unique(np.array([5, 1, 5, 3], dtype=np.int64)).tolist()
    [1, 3, 5]
    """
    k = np.sort(keys)
    if k.size:
        k = k[np.concatenate([[True], k[1:] != k[:-1]])]
    return k


def in_sorted(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_set)`` for a sorted ``sorted_set``, by binary search.

    >>> in_sorted(np.array([1, 2, 9]), np.array([1, 3, 9])).tolist()
    [True, False, True]
    """
    if sorted_set.size == 0:
        return np.zeros(np.shape(values), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_set, values), sorted_set.size - 1)
    return sorted_set[pos] == values


def check_edge_list(
    e: np.ndarray,
    num_nodes: int,
    *,
    prefix: str = "edges",
    where: Callable[[np.ndarray], str] | None = None,
    require_canonical: bool = False,
) -> None:
    """Raise GraphValidationError for ids out of range, self-loops, ``u > v`` (when
    ``require_canonical``) and duplicate edges, in either direction.

    ``where(indices)`` words the offending positions (default: ``columns [..]``; a file loader
    passes one that names the file's lines). The message names positions only; the offending
    edges are the error's ``private_detail`` (:func:`~privgraph.errors.data_refusal`).
    """
    where = where or (lambda idx: f"columns {_rows(idx)}")
    pre = f"{prefix}: " if prefix else ""
    n = num_nodes
    if e.shape[1] == 0:
        return

    def refuse(rule: str, idx: np.ndarray, **more: object) -> GraphValidationError:
        # the edges' ends are the user's (maybe private) data: the owner's record, not the message
        return data_refusal(f"{pre}{rule}", at=where(idx), edges=e[:, idx[:_MAX_SHOWN]].T, **more)

    out = np.flatnonzero(((e < 0) | (e >= n)).any(0))
    if out.size:
        raise refuse(f"node ids out of range [0, {n}) at {where(out)}", out)
    loops = np.flatnonzero(e[0] == e[1])
    if loops.size:
        raise refuse(f"self-loops at {where(loops)}", loops)
    if require_canonical:
        rev = np.flatnonzero(e[0] > e[1])
        if rev.size:
            raise refuse(f"edges must be stored once with u < v; {where(rev)} have u > v; use "
                         "GraphData.from_edges to canonicalise", rev)
    keys = _edge_keys(e, n)
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    later = np.flatnonzero(ks[1:] == ks[:-1]) + 1
    if later.size:
        dup = np.sort(order[later])
        first_same = where(np.array([int(order[np.searchsorted(ks, keys[dup[0]])])]))
        raise refuse(f"duplicate edges (the same undirected edge, in either direction) at {where(dup)}; the "
                     f"first repeats {first_same}", dup)


def _edge_keys(edges: np.ndarray, num_nodes: int) -> np.ndarray:
    """One int64 key per undirected edge (u < v): ``u * n + v``."""
    c = canonical_edges(edges)
    return c[0] * np.int64(num_nodes) + c[1]


@dataclasses.dataclass(eq=False)
class GraphData:
    """An undirected, attributed graph with public and private edges.

    Args:
        num_nodes (int): number of nodes ``n``; node ids are ``0 .. n-1``.
        x (np.ndarray, optional): float32 node features ``[n, d]`` (default: ``None``).
        y (np.ndarray, optional): int64 labels ``[n]`` or multi-label ``[n, C]`` (default: ``None``).
        edges_public (np.ndarray): int64 ``[2, m_pub]`` undirected edges, ``u < v``.
        edges_private (np.ndarray): int64 ``[2, m_pri]`` undirected edges, ``u < v``.
        train_mask, val_mask, test_mask (np.ndarray, optional): boolean ``[n]`` node splits.
        meta (dict): names, feature bounds, provenance. Never holds private rows.
        aggregates (np.ndarray, optional): float32 ``[K + 1, n, d]``, the hop-wise node
            aggregates an aggregation-perturbation release (GAP) publishes in place of private
            edges: hop 0 the encoded features, hop ``k`` the noisy aggregate of hop ``k - 1``
            (default: ``None``).

    Edges given as ``(v, u)`` with ``v > u`` are an error, not silently flipped: use
    :meth:`from_edges` to build from arbitrary-order edge lists.

    >>> g = GraphData(num_nodes=3, edges_public=[[0], [1]], edges_private=[[1], [2]])
    >>> g.edges("all").tolist()
    [[0, 1], [1, 2]]
    >>> GraphData(num_nodes=2, edges_public=[[1], [0]])
    Traceback (most recent call last):
    ...
    privgraph.errors.GraphValidationError: edges_public: ...

    Raises:
        GraphValidationError: ids out of range, self-loops, duplicate or reversed-duplicate edges,
            an edge both public and private, NaN/inf features, or row counts that disagree.
    """

    num_nodes: int
    x: np.ndarray | None = None
    y: np.ndarray | None = None
    edges_public: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((2, 0), np.int64))
    edges_private: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((2, 0), np.int64))
    train_mask: np.ndarray | None = None
    val_mask: np.ndarray | None = None
    test_mask: np.ndarray | None = None
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    aggregates: np.ndarray | None = None

    def __post_init__(self) -> None:
        if isinstance(self.num_nodes, bool) or not isinstance(self.num_nodes, (int, np.integer)):
            raise GraphValidationError(f"num_nodes must be an int, got {self.num_nodes!r}")
        self.num_nodes = int(self.num_nodes)
        if self.num_nodes < 0:
            raise GraphValidationError(f"num_nodes must be >= 0, got {self.num_nodes}")
        if self.num_nodes > MAX_NODES:
            raise GraphValidationError(f"num_nodes is {self.num_nodes}; privgraph handles at most {MAX_NODES} (2^31 - 1) nodes")
        self.edges_public = _as_edge_array(self.edges_public, "edges_public")
        self.edges_private = _as_edge_array(self.edges_private, "edges_private")
        self._validate_edges("edges_public", self.edges_public)
        self._validate_edges("edges_private", self.edges_private)
        self._validate_disjoint()
        self._validate_x()
        self._validate_y()
        for name in SPLIT_MASKS:
            self._validate_mask(name)
        self._validate_aggregates()

    def _validate_aggregates(self) -> None:
        if self.aggregates is None:
            return
        a = np.asarray(self.aggregates)
        if a.ndim != 3 or a.shape[0] < 2 or a.shape[1] != self.num_nodes:
            raise GraphValidationError(
                f"aggregates must have shape [hops + 1 >= 2, num_nodes={self.num_nodes}, d], got {list(a.shape)}"
            )
        if not np.issubdtype(a.dtype, np.floating):
            raise GraphValidationError(f"aggregates must be floating point, got {a.dtype}")
        bad = np.flatnonzero(~np.isfinite(a).all(axis=(0, 2)))
        if bad.size:
            raise GraphValidationError(f"aggregates: non-finite values at nodes {_rows(bad)}")
        self.aggregates = np.ascontiguousarray(a, dtype=np.float32)

    # -- validation -------------------------------------------------------------------------
    def _validate_edges(self, name: str, e: np.ndarray) -> None:
        check_edge_list(e, self.num_nodes, prefix=name, require_canonical=True)

    def _validate_disjoint(self) -> None:
        if self.edges_public.shape[1] == 0 or self.edges_private.shape[1] == 0:
            return
        pub = _edge_keys(self.edges_public, self.num_nodes)
        pri = _edge_keys(self.edges_private, self.num_nodes)
        both = np.flatnonzero(in_sorted(pri, np.sort(pub)))
        if both.size:
            raise data_refusal(f"edges both public and private: edges_private columns {_rows(both)}",
                               edges=self.edges_private[:, both[:_MAX_SHOWN]].T)

    def _validate_x(self) -> None:
        if self.x is None:
            return
        x = np.asarray(self.x)
        if x.ndim != 2:
            raise GraphValidationError(f"x: expected shape [n, d], got {list(x.shape)}")
        if x.shape[0] != self.num_nodes:
            raise GraphValidationError(
                f"x has {x.shape[0]} rows but num_nodes is {self.num_nodes}"
            )
        if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
            raise GraphValidationError(f"x: expected real numbers, got dtype {x.dtype}")
        x = np.ascontiguousarray(x, dtype=np.float32)
        finite = np.isfinite(x)
        if not finite.all():
            bad = np.flatnonzero(~finite.all(1))
            col = int(np.flatnonzero(~finite[bad[0]])[0])
            raise data_refusal(f"x: NaN or inf in rows {_rows(bad)} (first: row {int(bad[0])}, column {col})",
                               rows=bad, first_row_values=x[bad[0]])
        self.x = x

    def _validate_y(self) -> None:
        if self.y is None:
            return
        y = np.asarray(self.y)
        if y.ndim not in (1, 2):
            raise GraphValidationError(f"y: expected shape [n] or [n, C], got {list(y.shape)}")
        if y.shape[0] != self.num_nodes:
            raise GraphValidationError(f"y has {y.shape[0]} rows but num_nodes is {self.num_nodes}")
        if self.x is not None and y.shape[0] != self.x.shape[0]:
            raise GraphValidationError(
                f"y has {y.shape[0]} rows but x has {self.x.shape[0]} rows"
            )
        if y.size and not np.issubdtype(y.dtype, np.integer):
            ok = np.isfinite(y) & (y == np.round(y))
            if not ok.all():
                bad = np.flatnonzero(~ok.reshape(len(y), -1).all(1))
                raise data_refusal(f"y: non-integer labels in rows {_rows(bad)}", rows=bad, labels=y[bad])
        y = np.ascontiguousarray(y, dtype=np.int64)
        low = UNLABELLED if y.ndim == 1 else 0  # -1 marks an unlabelled node (single labels only)
        if y.size and (y < low).any():
            bad = np.flatnonzero((y < low).reshape(len(y), -1).any(1))
            what = "labels below -1 (-1 marks an unlabelled node)" if y.ndim == 1 else "negative labels"
            raise data_refusal(f"y: {what} in rows {_rows(bad)}", rows=bad, labels=y[bad])
        if y.ndim == 1 and y.size and y.max() >= MAX_CLASSES:
            bad = np.flatnonzero(y >= MAX_CLASSES)
            raise data_refusal(f"y: class ids of {MAX_CLASSES} or more in rows {_rows(bad)}; labels are 0..C-1 "
                               f"with C <= {MAX_CLASSES}", rows=bad, labels=y[bad])
        self.y = y

    def _validate_mask(self, name: str) -> None:
        m = getattr(self, name)
        if m is None:
            return
        m = np.asarray(m)
        if m.shape != (self.num_nodes,):
            raise GraphValidationError(
                f"{name}: expected shape [{self.num_nodes}], got {list(m.shape)}"
            )
        if m.dtype != np.bool_:
            raise GraphValidationError(f"{name}: expected a boolean mask, got dtype {m.dtype}")
        setattr(self, name, m)

    # -- construction helpers ---------------------------------------------------------------
    @classmethod
    def from_edges(
        cls,
        num_nodes: int,
        edges: Any,
        private: Any = None,
        *,
        drop_self_loops: bool = False,
        deduplicate: bool = False,
        **kwargs: Any,
    ) -> GraphData:
        """Build a graph from an edge list in any order (``[2, m]``), canonicalising ``u < v``.

        ``private`` is an optional boolean ``[m]`` marking private edges. Self-loops and duplicate
        edges are errors unless ``drop_self_loops`` / ``deduplicate`` is set (loaders of datasets
        that are known to carry them, e.g. Planetoid's ``graph`` dict, set these). When
        deduplicating, an edge listed both public and private is kept as private.
        """
        e = _as_edge_array(edges, "edges")
        if private is None:
            priv = np.zeros(e.shape[1], bool)
        else:
            raw = np.asarray(private)
            ok = raw.dtype == np.bool_ or (
                np.issubdtype(raw.dtype, np.number) and np.isin(raw, (0, 1)).all()
            )
            if not ok:
                bad = np.flatnonzero(~np.isin(raw, (0, 1))) if np.issubdtype(raw.dtype, np.number) else np.arange(raw.size)
                raise GraphValidationError(f"private: expected booleans (or 0/1), bad values at rows {_rows(bad)}")
            priv = raw.astype(bool)
        if priv.shape != (e.shape[1],):
            raise GraphValidationError(
                f"private: expected a boolean mask of length {e.shape[1]}, got shape {list(priv.shape)}"
            )
        rows = lambda idx: f"rows {_rows(idx)}"  # noqa: E731 - input rows, not columns
        if e.shape[1] and ((e < 0) | (e >= num_nodes)).any():
            check_edge_list(e, num_nodes, where=rows)  # raises the range error
        if drop_self_loops:
            keep = e[0] != e[1]
            e, priv = e[:, keep], priv[keep]
        c = canonical_edges(e)
        if deduplicate and c.shape[1]:
            keys = c[0] * np.int64(num_nodes) + c[1]
            # private first so that np.unique keeps the private copy of a doubly-listed edge
            order = np.lexsort((~priv, keys))
            keys_o = keys[order]
            first = np.ones(len(keys_o), bool)
            first[1:] = keys_o[1:] != keys_o[:-1]
            sel = np.sort(order[first])
            c, priv = c[:, sel], priv[sel]
        else:
            # self-loops and both-direction duplicates, reported with the input's row numbers
            check_edge_list(e, num_nodes, where=rows)
        return cls(num_nodes=num_nodes, edges_public=c[:, ~priv], edges_private=c[:, priv], **kwargs)

    def replace(self, **changes: Any) -> GraphData:
        """A validated copy with some fields replaced (the original is never mutated)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields["meta"] = dict(self.meta)
        fields.update(changes)
        return GraphData(**fields)

    # -- views --------------------------------------------------------------------------------
    @property
    def num_features(self) -> int:
        return 0 if self.x is None else int(self.x.shape[1])

    @property
    def num_edges(self) -> int:
        return int(self.edges_public.shape[1] + self.edges_private.shape[1])

    def labelled(self) -> np.ndarray | None:
        """Boolean ``[n]``: the nodes that carry a label (``y != -1``); ``None`` without labels.
        Which nodes are labelled is public, like the node split: label mechanisms privatize the
        values, never the presence (an unlabelled node stays ``-1`` in every release)."""
        if self.y is None:
            return None
        if self.y.ndim == 2:
            return np.ones(self.num_nodes, dtype=bool)
        return self.y != UNLABELLED

    @property
    def num_classes(self) -> int:
        if self.y is None:
            return 0
        if self.y.ndim == 2:
            return int(self.y.shape[1])
        return int(self.y.max()) + 1 if self.y.size else 0

    def edges(self, which: Literal["all", "public", "private"] = "all") -> np.ndarray:
        """Undirected edges ``[2, m]`` (``u < v``) of the requested kind."""
        if which == "public":
            return self.edges_public
        if which == "private":
            return self.edges_private
        if which == "all":
            return np.concatenate([self.edges_public, self.edges_private], axis=1)
        raise ValueError(f"edges: which must be 'all', 'public' or 'private', got {which!r}")

    def private_nodes(self) -> np.ndarray:
        """Sorted ids of the nodes incident to a private edge (V_pri; treated as public)."""
        return sorted_unique(self.edges_private.ravel())

    def degrees(self, which: Literal["all", "public", "private"] = "all") -> np.ndarray:
        e = self.edges(which)
        return np.bincount(e.ravel(), minlength=self.num_nodes).astype(np.int64)

    def keyed_digest(self, key: bytes) -> str:
        """HMAC-SHA256 under ``key`` over every array of the graph (private ones included).

        Identifies an input for whoever holds ``key`` (the data owner: see
        :func:`privgraph.storage.private_record.owner_key`) and for nobody else. There is no
        unkeyed hash of a whole graph in privgraph: a hash of low-entropy private data (which
        edges are private, a label) is a release of it, recovered by trying candidates. The
        public part of an input is fingerprinted by :meth:`privgraph.config.disclosure.Disclosure.fingerprint`.
        """
        if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
            raise ValueError("keyed_digest: key must be at least 16 bytes")
        h = hmac.new(bytes(key), digestmod=hashlib.sha256)
        h.update(f"n={self.num_nodes}".encode())
        for name in ("x", "y", "edges_public", "edges_private", "train_mask", "val_mask", "test_mask", "aggregates"):
            a = getattr(self, name)
            if name == "aggregates" and a is None:
                continue  # graphs without aggregates keep their digests
            h.update(name.encode())
            if a is not None:
                a = np.ascontiguousarray(a)
                h.update(str((a.dtype.str, a.shape)).encode())
                h.update(a.tobytes())
        return h.hexdigest()

    def to_pyg(self, edges: Literal["all", "public", "private"] = "all") -> Any:
        """A ``torch_geometric.data.Data`` with both directions of the chosen edges."""
        import torch  # lazy: torch, only where a model is trained
        from torch_geometric.data import Data  # lazy: PyG, as torch

        e = self.edges(edges)
        ei = np.concatenate([e, e[::-1]], axis=1)
        data = Data(edge_index=torch.from_numpy(np.ascontiguousarray(ei)), num_nodes=self.num_nodes)
        if self.x is not None:
            data.x = torch.from_numpy(self.x)
        if self.y is not None:
            data.y = torch.from_numpy(self.y)
        for name in SPLIT_MASKS:
            m = getattr(self, name)
            if m is not None:
                data[name] = torch.from_numpy(m)
        return data

    def summary(self) -> Mapping[str, Any]:
        """Public-safe counts (no rows) for logs and manifests."""
        return {
            "num_nodes": self.num_nodes,
            "num_features": self.num_features,
            "num_classes": self.num_classes,
            "num_edges_public": int(self.edges_public.shape[1]),
            "num_edges_private": int(self.edges_private.shape[1]),
            **({} if self.aggregates is None else {"aggregate_hops": int(self.aggregates.shape[0] - 1),
                                                    "aggregate_dim": int(self.aggregates.shape[2])}),
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"GraphData(num_nodes={s['num_nodes']}, num_features={s['num_features']}, "
            f"edges_public={s['num_edges_public']}, edges_private={s['num_edges_private']})"
        )
