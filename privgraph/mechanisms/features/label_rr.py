r"""LabelRR: k-ary randomized response on node labels (LPGNN's label perturbation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from privgraph.errors import GraphValidationError
from privgraph.graph import SPLIT_MASKS, UNLABELLED, GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.base import EpsilonRange, check_generator
from privgraph.guarantee.params import check_int
from privgraph.mechanisms.features.scaled import bernoulli_exact
from privgraph.mechanisms.randomized_response import (
    label_rr_flip_probability,
    label_rr_keep_probability,
    label_rr_transition_matrix,
)
from privgraph.mechanisms.registry import register_mechanism

__all__ = ["LabelRR"]


def _as_mask_names(mask: Any) -> tuple[str, ...] | None:
    if mask is None:
        return None
    names = (mask,) if isinstance(mask, str) else mask
    if not isinstance(names, Sequence) or isinstance(names, (bytes, bytearray)):
        raise TypeError(f"mask must be None, a mask name or a list of them, got {mask!r}")
    out: list[str] = []
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"mask names must be strings, got {n!r}")
        if n not in SPLIT_MASKS:
            raise ValueError(f"mask must name GraphData masks among {list(SPLIT_MASKS)}, got {n!r}")
        if n not in out:
            out.append(n)
    if not out:
        raise ValueError("mask must name at least one of the graph's masks (or be None: all nodes)")
    return tuple(out)


@register_mechanism
class LabelRR:
    r"""k-ary randomized response on node labels, as LPGNN perturbs labels.

    Reference: S. Sajadmanesh and D. Gatica-Perez, "Locally Private Graph Neural Networks",
    ACM CCS 2021 (arXiv:2006.05535), label perturbation by generalized randomized response
    (talk slides, paper 003: "Randomized Response for label differential privacy"); the
    mechanism is Warner's randomized response generalized to :math:`c` categories
    (Kairouz, Oh, Viswanath, "Extremal Mechanisms for Local Differential Privacy", 2014).

    .. math::
        \Pr(y' \mid y) = \begin{cases}
            \dfrac{e^\varepsilon}{e^\varepsilon + c - 1}, & y' = y,\\[2ex]
            \dfrac{1}{e^\varepsilon + c - 1}, & y' \ne y \text{ (each of the } c - 1 \text{ others)}.
        \end{cases}

    Privacy: every column of the kernel holds one :math:`e^\varepsilon/(e^\varepsilon+c-1)` and
    :math:`c-1` entries :math:`1/(e^\varepsilon+c-1)`, so the worst-case ratio is exactly
    :math:`e^\varepsilon` (checked in the tests): each perturbed label is
    :math:`\varepsilon`-label-LDP, given that the number of classes :math:`c` is public.

    Which nodes are perturbed: ``mask`` names GraphData masks (e.g. ``["train_mask",
    "val_mask"]``, the labels LPGNN collects from nodes); :meth:`privatize` perturbs the labels
    of the nodes in their union and leaves every other label AS IT IS. Those unperturbed labels
    are not protected: they must be public, or withheld from the release (the guarantee says
    so). ``mask=None`` perturbs every label.

    Args:
        epsilon (float): the budget :math:`\varepsilon` of one node's label,
            :math:`0 < \varepsilon \le 50` (above 50 float64 cannot realise the flip
            probability :math:`\approx (c-1)e^{-\varepsilon}` and the guarantee would fail).
        num_classes (int, optional): the PUBLIC number of classes :math:`c \ge 2`
            (default: ``None``: :meth:`privatize` takes ``graph.meta["num_classes"]`` and refuses
            a graph without it; it never counts the private labels).
        mask (str or list of str, optional): names among ``train_mask``, ``val_mask``,
            ``test_mask`` (default: ``None``, all nodes).

    Shapes:
        - :meth:`privatize_labels`: int labels :math:`[n]` in :math:`[0, c)` -> int64 :math:`[n]`
        - :meth:`transition_matrix`: float64 :math:`[c, c]`

    Runtime:
        :math:`O(n)`: two uniform doubles (one 106-bit comparison that realises the float64
        keep/flip probabilities exactly) and one uniform integer :math:`r \in [0, c-1)` per
        label; a replaced label is :math:`r + [r \ge y]` (a uniform OTHER class).

    Utility:
        :math:`\Pr(y' = y) = e^\varepsilon / (e^\varepsilon + c - 1)` (LPGNN's :math:`Acc^*`,
        the accuracy ceiling on noisy labels); class frequencies are recovered without bias by
        inverting the kernel.
    """

    name: ClassVar[str] = "label_rr"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        note=(
            "one label, one budget: the less likely of keep / flip, (c - 1) / (e^eps + c - 1), is "
            "drawn with bernoulli_exact, exact as a float64 >= 2^-54 (to 2^-106 absolute, rounded "
            "up, below: a relative 6e-11 at 50); the replacement class is an exact uniform integer"
        ),
    )
    scope: ClassVar[Scope] = Scope.LABELS

    def __init__(self, *, epsilon: float, num_classes: int | None = None, mask: Any = None) -> None:
        # [low, 50] on the one label's budget (refused at load time)
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.num_classes = None if num_classes is None else check_int(num_classes, "num_classes", minimum=2)
        self.mask = _as_mask_names(mask)

    # -- public parameters --------------------------------------------------------------------
    @property
    def guarantee(self) -> Guarantee:
        assumptions = [
            "the number of classes is public",
            "each node's label is randomized independently (local model)",
        ]
        if self.mask is not None:
            assumptions.append(
                f"only labels of nodes in {' | '.join(self.mask)} are perturbed; the other labels "
                "are released unchanged and must be public or withheld"
            )
        return Guarantee(
            kind=GuaranteeKind.LABEL_LDP,
            epsilon=self.epsilon,  # the kernel's column ratio is e^eps exactly
            scope=Scope.LABELS,
            assumptions=tuple(assumptions),
        )

    def params(self) -> dict[str, Any]:
        """Public parameters for the manifest (plain Python values, no data)."""
        return {
            "epsilon": self.epsilon,
            "num_classes": self.num_classes,
            "mask": None if self.mask is None else list(self.mask),
        }

    def __repr__(self) -> str:
        return f"LabelRR(epsilon={self.epsilon!r}, num_classes={self.num_classes!r})"

    def keep_probability(self, num_classes: int | None = None) -> float:
        """:math:`\\Pr(y' = y)` for ``c`` classes."""
        return label_rr_keep_probability(self.epsilon, self._resolve_c(num_classes))

    def transition_matrix(self, num_classes: int | None = None) -> np.ndarray:
        """The exact kernel ``P[y, y'] = Pr(y' | y)`` ``[c, c]``."""
        return label_rr_transition_matrix(self.epsilon, self._resolve_c(num_classes))

    # -- privatization ------------------------------------------------------------------------
    def privatize_labels(
        self, y: Any, num_classes: int | None, rng: np.random.Generator
    ) -> np.ndarray:
        """Perturb every label of ``y`` ``[n]`` -> int64 ``[n]``.

        Randomness layout: ``rng.random((n, 2))`` (a 106-bit uniform per label: the less likely
        of keep/flip is drawn with :func:`~privgraph.mechanisms.features.scaled.bernoulli_exact`,
        so both probabilities are realised exactly in float64), then
        ``rng.integers(0, c - 1, n)`` (exact uniform integers) for the replacement class.
        """
        rng = check_generator(rng)
        c = self._resolve_c(num_classes)
        y = self._check_labels(y, c)
        n = y.shape[0]
        p_keep = label_rr_keep_probability(self.epsilon, c)
        p_flip = label_rr_flip_probability(self.epsilon, c)
        u = rng.random((n, 2))
        if p_flip <= p_keep:
            keep = ~bernoulli_exact(np.full(n, p_flip), u[:, 0], u[:, 1])
        else:
            keep = bernoulli_exact(np.full(n, p_keep), u[:, 0], u[:, 1])
        other = rng.integers(0, c - 1, size=n, dtype=np.int64)
        other += other >= y  # a uniform class among the c - 1 others
        return np.where(keep, y, other)

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """A copy of ``graph`` whose labels of the masked nodes (all nodes: ``mask=None``) are
        perturbed; unlabelled nodes (``-1``) stay ``-1``."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        if graph.y is None:
            raise ValueError("LabelRR: graph.y is None (the graph has no labels to privatize)")
        if graph.y.ndim != 1:
            raise ValueError(
                f"LabelRR: expects single labels y [n], got shape {list(graph.y.shape)} "
                "(multi-label targets need a per-class mechanism)"
            )
        c = self.num_classes
        if c is None:
            c = graph.meta.get("num_classes")
            if c is None:
                raise ValueError(
                    "LabelRR: the number of classes must be public: pass num_classes= or set "
                    "graph.meta['num_classes'] (it is never counted from the private labels)"
                )
            c = check_int(c, "graph.meta['num_classes']", minimum=2)
        if self.mask is None:
            nodes = np.arange(graph.num_nodes)
        else:
            sel = np.zeros(graph.num_nodes, dtype=bool)
            for name in self.mask:
                m = getattr(graph, name)
                if m is None:
                    raise ValueError(f"LabelRR: mask names {name!r} but graph.{name} is None")
                sel |= m
            nodes = np.flatnonzero(sel)
        nodes = nodes[graph.y[nodes] != UNLABELLED]  # an unlabelled node is never touched
        y_new = graph.y.copy()
        y_new[nodes] = self.privatize_labels(graph.y[nodes], c, rng)
        return graph.replace(y=y_new)

    # -- helpers ------------------------------------------------------------------------------
    def _resolve_c(self, num_classes: int | None) -> int:
        if num_classes is None:
            if self.num_classes is None:
                raise ValueError("num_classes is needed (the number of classes is public)")
            return self.num_classes
        c = check_int(num_classes, "num_classes", minimum=2)
        if self.num_classes is not None and c != self.num_classes:
            raise ValueError(f"num_classes={c} but the mechanism is configured for {self.num_classes}")
        return c

    @staticmethod
    def _check_labels(y: Any, c: int) -> np.ndarray:
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be a 1-D array of labels [n], got shape {list(y.shape)}")
        if y.dtype == np.bool_ or not np.issubdtype(y.dtype, np.integer):
            raise TypeError(f"y must hold integer labels, got dtype {y.dtype}")
        y = y.astype(np.int64)
        bad = np.flatnonzero((y < 0) | (y >= c))
        if bad.size:  # the rows and values are private labels: the owner's record, not the message
            raise GraphValidationError(
                f"y: labels out of range [0, {c}) (num_classes, a public setting): a label is outside the "
                "configured classes (which rows: the owner's private record)",
                private_detail={"rows": bad.tolist(), "labels": y[bad].tolist(), "num_classes": c},
            )
        return y
