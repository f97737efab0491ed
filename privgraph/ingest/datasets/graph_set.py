"""GraphSet: a labelled collection of graphs for graph classification (paper 004, Sec. IV-A, V).

Each graph is a :class:`~privgraph.graph.GraphData` with its own public and private edges; the
set carries one int64 label per graph. :func:`split_private_users` simulates paper 004's
customized setting ("We randomly selected alpha n users as non-private users", Sec. V-B): in
every graph a seeded, public choice of ``round(private_fraction * n)`` nodes are PRIVATE users
and the others non-private; an edge stays private iff BOTH its endpoints are private users,
because a non-private user publishes her neighbour list, which discloses her edges with private
users (Sec. IV-A: "even if k friends are non-private, only k edges with them will be disclosed
... All edges between private users will be kept secret"). ``private_fraction = 1 - alpha``;
``1.0`` is the paper's common setting (every edge private).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from privgraph.ingest.datasets.split import check_fraction
from privgraph.errors import GraphValidationError, data_refusal
from privgraph.graph import GraphData
from privgraph.seeding import as_generator, as_seed_sequence, partition_seeds

__all__ = ["GraphSet", "PRIVATE_USER_SELECTION", "mark_private_users", "split_private_users"]

#: how :func:`mark_private_users` chooses the private users (recorded in ``meta``; never the seed)
PRIVATE_USER_SELECTION = (
    "per graph i: exactly round(private_fraction * n_i) nodes chosen uniformly without replacement "
    "(seeded numpy Generator of child i of the split seed); an edge is private iff both endpoints "
    "are private users (paper 004, Sec. IV-A customized setting)"
)


@dataclasses.dataclass(frozen=True, eq=False)
class GraphSet:
    """A labelled set of graphs (graph classification; paper 004, Sec. IV-A).

    Args:
        graphs (tuple[GraphData, ...]): the graphs; each keeps its own ``edges_public`` /
            ``edges_private``; ``x`` is ``None`` for every graph or a float32 matrix of the same
            width for every graph. A list is accepted and stored as a tuple.
        labels (np.ndarray): int64 ``[len(graphs)]`` graph labels, ``>= 0``, at least two distinct
            classes. Stored as a read-only copy.
        name (str): the dataset's name (e.g. ``"REDDIT-BINARY"``).
        meta (dict): public provenance (never a seed, never private rows).

    Raises:
        GraphValidationError: one line naming the problem (lengths differ, a non-GraphData
            entry, negative or non-integer labels, fewer than two classes, mixed feature widths).
    """

    graphs: tuple[GraphData, ...]
    labels: np.ndarray
    name: str = "graphs"
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        graphs = tuple(self.graphs) if isinstance(self.graphs, (list, tuple)) else None
        if graphs is None:
            raise GraphValidationError(f"GraphSet: graphs must be a tuple or list of GraphData, got {type(self.graphs).__name__}")
        bad = [i for i, g in enumerate(graphs) if not isinstance(g, GraphData)]
        if bad:
            raise GraphValidationError(
                f"GraphSet: graphs[{bad[0]}] is a {type(graphs[bad[0]]).__name__}, not a GraphData"
            )
        if not graphs:
            raise GraphValidationError("GraphSet: no graphs")
        labels = np.asarray(self.labels)
        if labels.ndim != 1:
            raise GraphValidationError(f"GraphSet: labels must have shape [num_graphs], got {list(labels.shape)}")
        if labels.shape[0] != len(graphs):
            raise GraphValidationError(f"GraphSet: {len(graphs)} graphs but {labels.shape[0]} labels")
        if labels.dtype == np.bool_ or not np.issubdtype(labels.dtype, np.number):
            raise GraphValidationError(f"GraphSet: labels must be integers, got dtype {labels.dtype}")
        if not np.issubdtype(labels.dtype, np.integer):
            ok = np.isfinite(labels) & (labels == np.round(labels))
            if not ok.all():
                raise GraphValidationError(f"GraphSet: non-integer label at graph {int(np.flatnonzero(~ok)[0])}")
        labels = labels.astype(np.int64)
        if (labels < 0).any():
            i = int(np.flatnonzero(labels < 0)[0])
            raise data_refusal(f"GraphSet: a negative label at graph {i}", graph=i, label=labels[i])
        if np.unique(labels).size < 2:
            raise data_refusal(f"GraphSet: at least 2 classes needed, all {len(graphs)} graphs have one label",
                               label=labels[0])
        widths = {g.num_features if g.x is not None else None for g in graphs}
        if len(widths) > 1:
            first = next(i for i, g in enumerate(graphs) if (g.x is None) != (graphs[0].x is None)
                         or g.num_features != graphs[0].num_features)
            raise GraphValidationError(
                f"GraphSet: graph {first} has {graphs[first].num_features if graphs[first].x is not None else 'no'} "
                f"features but graph 0 has {graphs[0].num_features if graphs[0].x is not None else 'no'} features"
            )
        if not isinstance(self.name, str) or not self.name.strip():
            raise GraphValidationError(f"GraphSet: name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.meta, dict):
            raise GraphValidationError(f"GraphSet: meta must be a dict, got {type(self.meta).__name__}")
        labels = labels.copy()
        labels.setflags(write=False)
        object.__setattr__(self, "graphs", graphs)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "meta", dict(self.meta))

    # -- views ----------------------------------------------------------------------------------
    @property
    def num_classes(self) -> int:
        """``max(label) + 1`` (labels are class indices ``0 .. C-1``)."""
        return int(self.labels.max()) + 1

    @property
    def num_features(self) -> int:
        """Node feature width (0 when the graphs are unattributed)."""
        return self.graphs[0].num_features

    def __len__(self) -> int:
        return len(self.graphs)

    def __iter__(self) -> Iterator[GraphData]:
        return iter(self.graphs)

    def __getitem__(self, i: int) -> GraphData:
        return self.graphs[i]

    def replace_graphs(self, new_graphs: Sequence[GraphData], **meta: Any) -> GraphSet:
        """A validated copy with the graphs replaced (same labels and name); ``meta`` entries are
        added to a copy of the set's meta. The new graphs must be as many as the old ones."""
        if len(new_graphs) != len(self.graphs):
            raise GraphValidationError(
                f"GraphSet.replace_graphs: {len(new_graphs)} new graphs for a set of {len(self.graphs)}"
            )
        return GraphSet(tuple(new_graphs), self.labels, self.name, {**self.meta, **meta})

    def summary(self) -> dict[str, Any]:
        """Public-safe counts (no rows)."""
        n = np.array([g.num_nodes for g in self.graphs])
        return {
            "name": self.name,
            "num_graphs": len(self),
            "num_classes": self.num_classes,
            "num_features": self.num_features,
            "num_nodes_max": int(n.max()),
            "num_nodes_mean": float(n.mean()),
            "class_counts": np.bincount(self.labels, minlength=self.num_classes).tolist(),
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (f"GraphSet(name={self.name!r}, num_graphs={s['num_graphs']}, "
                f"num_classes={s['num_classes']}, num_features={s['num_features']})")


def mark_private_users(graph: GraphData, private_fraction: float, *, seed: Any) -> GraphData:
    """Make ``round(private_fraction * n)`` seeded-random nodes private users (paper 004, Sec. V-B)
    and mark an edge private iff both its endpoints are private users (Sec. IV-A).

    Any previous marking is replaced (the choice reads all edges, in sorted order, and the seed).
    ``seed``: an int >= 0, a ``SeedSequence`` or a ``Generator`` (public randomness, PCG64).
    ``meta`` gets ``private_user_fraction`` and ``num_private_users`` (never the seed).
    """
    f = check_fraction(private_fraction, "private_fraction")
    n = graph.num_nodes
    k = int(round(f * n))
    private_user = np.zeros(n, dtype=bool)
    if k == n:
        private_user[:] = True
    elif k:
        private_user[as_generator(seed).choice(n, size=k, replace=False)] = True
    e = graph.edges("all")
    if e.shape[1]:
        e = e[:, np.lexsort((e[1], e[0]))]
    private = private_user[e[0]] & private_user[e[1]]
    meta = {**graph.meta, "private_user_fraction": f, "num_private_users": k}
    return graph.replace(
        edges_public=np.ascontiguousarray(e[:, ~private]),
        edges_private=np.ascontiguousarray(e[:, private]),
        meta=meta,
    )


def split_private_users(graph_set: GraphSet, private_fraction: float, *, seed: Any) -> GraphSet:
    """:func:`mark_private_users` on every graph; graph ``i`` is seeded by child ``i`` of ``seed``
    (:func:`~privgraph.seeding.partition_seeds`), so its split does not depend on the others.

    ``seed``: an int >= 0 or a ``SeedSequence`` (a split is a dataset definition: reproducible).
    """
    f = check_fraction(private_fraction, "private_fraction")
    seeds = partition_seeds(as_seed_sequence(seed), len(graph_set))
    graphs = [mark_private_users(g, f, seed=s) for g, s in zip(graph_set.graphs, seeds, strict=True)]
    return graph_set.replace_graphs(
        graphs, private_user_fraction=f, private_user_selection=PRIVATE_USER_SELECTION
    )
