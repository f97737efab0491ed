r"""Noisy neighbour class counts: each node's private neighbours counted per (public) class, with
discrete Laplace noise, released in place of the private edges.

A node's label is best predicted from its neighbours' labels (homophily), and that is what a GNN
over the edges learns. This mechanism releases exactly that evidence, and nothing else about the
private edges: for each node :math:`v` of :math:`V_{pri}` and each class :math:`k`,

.. math::
    \tilde c_{vk} = \big|\{w \in N_{pri}(v) : \ell(w) = k\}\big| + Z_{vk}, \qquad
    \Pr(Z_{vk} = z) \propto e^{-(\varepsilon / 2)|z|},

where :math:`\ell` is a PUBLIC class per node: the version's training label where it has one,
else the class predicted by the feature-only model (the floor: trained on the released features
and labels over no edge, :func:`privgraph.evaluate.training.fit_node_classifier`), so :math:`\ell` is
post-processing of earlier releases and reads no private edge. The release is
``[2, n, C]``: hop 0 the one-hot rows of :math:`\ell` (public), hop 1 the noisy counts (rows
outside :math:`V_{pri}` are 0 and take no noise; :math:`V_{pri}` is public, as for every
privgraph edge mechanism). Evaluations decode it with :func:`decode_class_counts` (the base
model's class probabilities times :math:`e^{\beta \tilde c_v}`, :math:`\beta` chosen on
validation: the one-step smoothing of Correct and Smooth over the released counts).

Privacy. One private edge :math:`\{u, v\}` changes :math:`c_{u, \ell(v)}` and
:math:`c_{v, \ell(u)}` by 1 each and nothing else: L1 sensitivity 2, so discrete Laplace noise
of parameter :math:`\varepsilon / 2` per count (the geometric mechanism, Ghosh, Roughgarden &
Sundararajan 2009) is pure :math:`\varepsilon`-edge DP, sampled exactly
(:func:`~privgraph.mechanisms.noise.discrete_laplace`). Each node's own row is
:math:`\varepsilon / 2`-edge LDP on its neighbour list (one bit moves one count), so the counts
may equally be computed and noised by the nodes themselves. Where some edges are public, they
are released as they are and not counted here (anyone can count them).

This is privgraph's own mechanism (no paper of ``../shared/papers`` defines it); the idea of
releasing noisy aggregates in place of edges is GAP's (:mod:`privgraph.mechanisms.edges.gap`),
here with the aggregate reduced to ``C`` integer counts of public classes, whose pure-DP noise
at eps 1 (std 2.8 per count) is below GAP's Gaussian noise on unit rows (std 5.3 per coordinate of
16 at eps 1, delta 1e-5).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.base import MAX_EXACT_EPSILON, EpsilonRange, check_generator
from privgraph.mechanisms.edges.shapes import Aggregates
from privgraph.mechanisms.noise import discrete_laplace
from privgraph.mechanisms.registry import register_mechanism
from privgraph.guarantee.params import check_int

__all__ = ["COUNT_WEIGHTS", "NeighbourClassCounts", "decode_class_counts", "released_class_counts"]

#: the weights beta of the released counts tried by :func:`decode_class_counts` (chosen on validation)
COUNT_WEIGHTS = (0.05, 0.1, 0.2, 0.35, 0.5, 1.0, 2.0)


@register_mechanism
class NeighbourClassCounts(Aggregates):
    r"""Noisy counts of each node's private neighbours per public class (see the module).

    Args:
        epsilon (float): the edge-level budget, in ``[2^-19, 50]``: each count takes discrete
            Laplace noise of parameter ``epsilon / 2`` (L1 sensitivity 2).
        encoder_epochs (int): the epochs of the feature-only model whose predictions are the
            public classes of unlabelled nodes (default: ``100``).

    Shapes:
        - input: the public classes one-hot ``[n, C]``, all edges ``[2, m]`` with the mask of the
          private ones, ``V_pri``
        - output: ``[2, n, C]`` (float32 in the stored version)

    Runtime: :math:`O(m + |V_{pri}| C)`.
    """

    name: ClassVar[str] = "class_counts"
    scope: ClassVar[Scope] = Scope.EDGES
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        low=2.0**-19,
        high=MAX_EXACT_EPSILON,
        note="each count takes exact discrete Laplace noise at epsilon / 2, which the sampler realises "
             "exactly for parameters >= 2^-20",
    )
    #: what the aggregates are computed from: the public classes (GAP's: the encoder's hidden layer)
    encoding: ClassVar[str] = "classes"

    def __init__(self, *, epsilon: float, encoder_epochs: int = 100) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.encoder_epochs = check_int(encoder_epochs, "encoder_epochs", minimum=1)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.EDGE_DP,
            epsilon=self.epsilon,
            scope=Scope.EDGES,
            assumptions=(
                "V_pri (nodes with private edges) is public; rows of other nodes are 0 and take no noise",
                "the classes counted are public: the version's training labels, else the feature-only "
                "model's prediction from the released features and labels (post-processing)",
                "edges are undirected: one edge moves one count of each endpoint (L1 sensitivity 2); "
                "discrete Laplace noise at epsilon / 2 per count",
                "each node's row alone is epsilon / 2-edge LDP on its neighbour list",
                "public edges are released as they are; private edges are not released",
            ),
        )

    def params(self) -> dict[str, Any]:
        """The constructor's parameters (they rebuild this mechanism)."""
        return {"epsilon": self.epsilon, "encoder_epochs": self.encoder_epochs}

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``|V_pri|`` (the rows that take noise), for the ledger."""
        return {**self.params(), "private_nodes": check_int(n_max, "n_max", minimum=0),
                "noise": {"law": "discrete Laplace", "parameter": self.epsilon / 2, "sensitivity_l1": 2}}

    def __repr__(self) -> str:
        return f"NeighbourClassCounts(epsilon={self.epsilon!r}, encoder_epochs={self.encoder_epochs})"

    def aggregate(
        self, encoded: np.ndarray, edges: np.ndarray, private_nodes: np.ndarray, rng: np.random.Generator,
        *, private_edge_mask: np.ndarray | None = None, **_: Any,
    ) -> np.ndarray:
        """The release ``[2, n, C]`` (float64): hop 0 ``encoded`` (the public classes, one-hot
        ``[n, C]``), hop 1 each node's count of private neighbours per class plus discrete
        Laplace noise at ``epsilon / 2`` on the rows of ``private_nodes`` (sorted ids of
        ``V_pri``). ``edges``: all edges ``[2, m]``; ``private_edge_mask``: which are private
        (default: all)."""
        rng = check_generator(rng)
        onehot = np.asarray(encoded, dtype=np.float64)
        if onehot.ndim != 2 or not np.all((onehot == 0) | (onehot == 1)) or np.any(onehot.sum(axis=1) != 1):
            raise ValueError("class_counts: the public classes must be one-hot rows [n, C]")
        n, classes = onehot.shape
        e = np.asarray(edges, dtype=np.int64).reshape(2, -1)
        if private_edge_mask is not None:
            mask = np.asarray(private_edge_mask, dtype=bool)
            if mask.shape != (e.shape[1],):
                raise ValueError(f"class_counts: private_edge_mask must have one entry per edge ({e.shape[1]}), "
                                 f"got {list(mask.shape)}")
            e = e[:, mask]
        label = onehot.argmax(axis=1)
        counts = np.zeros(n * classes, dtype=np.int64)
        np.add.at(counts, e[0] * classes + label[e[1]], 1)
        np.add.at(counts, e[1] * classes + label[e[0]], 1)
        counts = counts.reshape(n, classes)
        rows = np.asarray(private_nodes, dtype=np.int64)
        if rows.size:
            counts[rows] += discrete_laplace(rng, self.epsilon / 2, rows.size * classes).reshape(rows.size, classes)
        return np.stack([onehot, counts.astype(np.float64)])


def released_class_counts(aggregates: np.ndarray | None, num_classes: int) -> np.ndarray | None:
    """The noisy counts ``[n, C]`` of a :class:`NeighbourClassCounts` release, recognised by its
    shape ``[2, n, C]`` and its hop 0 of one-hot rows (GAP's hop 0 holds unit rows of an
    encoding); None for any other aggregates, or none."""
    if aggregates is None:
        return None
    a = np.asarray(aggregates)
    if a.ndim != 3 or a.shape[0] != 2 or a.shape[2] != num_classes:
        return None
    hop0 = a[0]
    if not (np.all((hop0 == 0) | (hop0 == 1)) and np.all(hop0.sum(axis=1) == 1)):
        return None
    return np.asarray(a[1], dtype=np.float64)


def decode_class_counts(base: np.ndarray, counts: np.ndarray, weight: float) -> np.ndarray:
    r"""Class probabilities ``[n, C]``: :math:`\mathrm{softmax}(\log p_v + \beta \tilde c_v)`, a
    base model's probabilities ``base`` updated by the released counts (each counted neighbour of
    class ``k`` multiplies the odds of ``k`` by :math:`e^\beta`, a naive-Bayes vote).
    Post-processing of the release."""
    logits = np.log(np.clip(np.asarray(base, dtype=np.float64), 1e-12, None)) + float(weight) * counts
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)
