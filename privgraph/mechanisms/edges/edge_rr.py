"""EdgeRR: the PHRG mechanism of HeteroRR for private edges (paper 002, Sec. III-B, Alg. 2-3)."""

from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData, in_sorted, sorted_unique
from privgraph.mechanisms.base import (
    EpsilonRange,
    Guarantee,
    GuaranteeKind,
    Scope,
    check_generator,
    check_int,
    check_probability,
)
from privgraph.mechanisms.edges.dprr import merge_with_public
from privgraph.mechanisms.hrg.fit import FittedHRG, fit_hrg
from privgraph.mechanisms.hrg.mcmc import Phase, exponent, private_sensitivity
from privgraph.mechanisms.hrg.noisy_prob import TAU_B, TAU_C, NoisyDendrogram
from privgraph.mechanisms.hrg.sample import sample_all, sample_internal_nodes, split_internal_nodes

__all__ = ["EdgeRR", "split_budget", "check_steps"]

_LEAVES = ("private", "all")
_SCHEDULES = ("alternating", "joint")


def check_steps(value: Any, name: str) -> float:
    """Validate a steps-per-leaf count: a real number (not bool), finite, >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {v}")
    return v


def split_budget(epsilon: float, share: float) -> tuple[float, float]:
    """``(eps1, eps2) = (share * epsilon, epsilon - eps1)`` with ``eps1 + eps2 <= epsilon`` in floats."""
    eps1 = epsilon * share
    eps2 = epsilon - eps1
    while eps2 > 0 and eps1 + eps2 > epsilon:  # never let float rounding overspend
        eps2 = math.nextafter(eps2, 0.0)
    if not (eps1 > 0 and eps2 > 0):
        raise ValueError(f"epsilon={epsilon} with eps1_share={share} leaves a budget of 0 for one part")
    return eps1, eps2


def _threshold(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {v}")
    return v


class EdgeRR:
    r"""EdgeRR (paper 002, Sec. III-B, Alg. 2 and 3): a PHRG fitted by a public/private MCMC.

    The dendrogram :math:`D` carries public and private counts (Eq. 10):

    .. math::
        \log\mathcal{L}(D) = \sum_r \underbrace{e_r \ln p_r + (L_r R_r - e_r)\ln(1 - p_r)}_{public}
        + \underbrace{\bar e_r \ln \bar p_r + (\bar L_r \bar R_r - \bar e_r)\ln(1 - \bar p_r)}_{private}.

    Alg. 2 repeats, ``rounds`` times, a public phase (Metropolis on
    :math:`\log\mathcal{L}_{pub}`, Eq. 12) and a private phase (the exponential mechanism's
    acceptance :math:`\min(1, \exp(\varepsilon_{e1} \Delta\log\mathcal{L}_{pri} / (2\Delta_e)))`,
    Eq. 14 with the factor 2), with
    :math:`\Delta_e = \ln N + (N - 1)\ln(N/(N - 1))`, :math:`N = \lfloor |V_{pri}|^2/4 \rfloor`
    (Lemma 4, Appendix B). CalculateNoisyProb (Alg. 3) then releases the private probabilities with
    discrete Laplace noise (:math:`\varepsilon_{e2}`, parallel composition), and private edges
    are sampled among :math:`V_{pri}` (Alg. 2, lines 21-29) and merged with the public edges,
    which are released as they are.

    ``schedule="joint"`` instead runs one chain accepting with
    :math:`\exp(\Delta\log\mathcal{L}_{pub} + \varepsilon_{e1}\Delta\log\mathcal{L}_{pri} / (2\Delta_e))`:
    its stationary law is exactly an exponential mechanism (with a public-data base measure),
    which the alternating chain's stationary law is not in general (see Notes).

    Args:
        epsilon (float): :math:`\varepsilon_e = \varepsilon_{e1} + \varepsilon_{e2}` (> 0).
        eps1_share (float, optional): :math:`\varepsilon_{e1} / \varepsilon_e`, in (0, 1)
            (default: ``0.5``; the paper gives no split).
        rounds (int, optional): iterations of Alg. 2's outer loop (default: ``10``).
        public_steps_per_leaf (float, optional): public steps in all, per leaf (default: ``50``).
        private_steps_per_leaf (float, optional): private steps in all, per leaf (default: ``50``).
        trace_every (int, optional): log-likelihood trace interval in steps; ``0`` gives about
            1000 points (default: ``0``).
        leaves (str, optional): ``"private"``: the dendrogram's leaves are :math:`V_{pri}` and the
            public likelihood uses the public edges among them; ``"all"``: every node with an edge
            (the paper's Eq. 10, public counts over :math:`V_{pub}`, private over
            :math:`V_{pri}`) (default: ``"private"``).
        schedule (str, optional): ``"alternating"`` (Alg. 2) or ``"joint"`` (default:
            ``"alternating"``).
        tau_b, tau_c (float, optional): CalculateNoisyProb's thresholds (default: privHRG's
            ``0.05`` and ``0.01``).

    Shapes:
        - input: ``edges_public`` :math:`[2, |E_{pub}|]`, ``edges_private`` :math:`[2, |E_{pri}|]`
        - output: ``edges_private`` :math:`[2, m']` sampled pairs of :math:`V_{pri}` not in
          ``edges_public``; :math:`E[m'] \approx \sum_r \bar L_r \bar R_r \tilde p_r`.

    Runtime:
        Fit: :math:`O(n + m \cdot depth)` to build, then :math:`O(1 + \bar d)`-ish per MCMC step
        (incremental counts, see :mod:`privgraph.mechanisms.hrg.dendrogram`), :math:`O(n)` for the
        noisy probabilities. Sampling: :math:`O(n + \text{output})`, parallel per chunk of
        internal nodes (:meth:`split`, :meth:`sample`). Never :math:`O(n^2)`.

    Notes:
        The guarantee is :math:`\varepsilon_{e1} + \varepsilon_{e2}` edge DP for the private edges
        provided the MCMC has reached its stationary law (like privHRG; the step counts are fixed
        in advance and recorded). With ``schedule="alternating"`` the chain alternates kernels
        with different targets; its output law is the exponential mechanism only when the last
        private phase has mixed from any start. The trace of :meth:`diagnostics` is computed
        from private edges and is not covered by the guarantee.
    """

    name: ClassVar[str] = "edge_rr"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange()
    scope: ClassVar[Scope] = Scope.EDGES

    def __init__(
        self,
        *,
        epsilon: float,
        eps1_share: float = 0.5,
        rounds: int = 10,
        public_steps_per_leaf: float = 50.0,
        private_steps_per_leaf: float = 50.0,
        trace_every: int = 0,
        leaves: str = "private",
        schedule: str = "alternating",
        tau_b: float = TAU_B,
        tau_c: float = TAU_C,
    ) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.eps1_share = check_probability(eps1_share, "eps1_share", open_low=True, open_high=True)
        self.rounds = check_int(rounds, "rounds", minimum=1)
        self.public_steps_per_leaf = check_steps(public_steps_per_leaf, "public_steps_per_leaf")
        self.private_steps_per_leaf = check_steps(private_steps_per_leaf, "private_steps_per_leaf")
        self.trace_every = check_int(trace_every, "trace_every", minimum=0)
        if leaves not in _LEAVES:
            raise ValueError(f"leaves must be one of {_LEAVES}, got {leaves!r}")
        if schedule not in _SCHEDULES:
            raise ValueError(f"schedule must be one of {_SCHEDULES}, got {schedule!r}")
        self.leaves = leaves
        self.schedule = schedule
        self.tau_b = _threshold(tau_b, "tau_b")
        self.tau_c = _threshold(tau_c, "tau_c")
        self.eps1, self.eps2 = split_budget(self.epsilon, self.eps1_share)

    # -- public parameters --------------------------------------------------------------------
    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.EDGE_DP,
            epsilon=self.epsilon,  # split_budget keeps eps1 + eps2 <= epsilon in floats
            scope=Scope.EDGES,
            assumptions=(
                "V_pri (nodes with private edges) is public",
                "public edges are released as they are",
                f"the MCMC approximates the exponential mechanism (eps_e1 = {self.eps1!r}) only at "
                f"convergence; steps = {self.rounds} rounds of {self.public_steps_per_leaf!r} public "
                f"and {self.private_steps_per_leaf!r} private steps per leaf in all "
                f"(schedule {self.schedule!r}), fixed in advance",
                "private steps accept with exp(eps_e1 / (2 Delta_e) * dL_pri), Delta_e = ln N + "
                "(N - 1) ln(N / (N - 1)), N = floor(|V_pri|^2 / 4) (Lemma 4, Appendix B)",
                f"CalculateNoisyProb: discrete Laplace noise (eps_e2 = {self.eps2!r}) on private edge "
                "counts, each edge counted once (parallel composition)",
                "the MCMC trace (diagnostics) is not covered and is never published",
            ),
        )

    def params(self) -> dict[str, Any]:
        """Public parameters for the manifest (the split and steps per graph: :meth:`params_for`)."""
        return {
            "epsilon": self.epsilon,
            "eps1_share": self.eps1_share,
            "rounds": self.rounds,
            "public_steps_per_leaf": self.public_steps_per_leaf,
            "private_steps_per_leaf": self.private_steps_per_leaf,
            "trace_every": self.trace_every,
            "leaves": self.leaves,
            "schedule": self.schedule,
            "tau_b": self.tau_b,
            "tau_c": self.tau_c,
        }

    def params_for(self, n_private: int, n_leaves: int | None = None) -> dict[str, Any]:
        """:meth:`params` plus ``eps1``, ``eps2``, the sensitivity, the exponent and the step counts."""
        n_private = check_int(n_private, "n_private", minimum=0)
        n_leaves = n_private if n_leaves is None else check_int(n_leaves, "n_leaves", minimum=n_private)
        phases = self._phases(n_leaves, exponent(self.eps1, n_private))
        steps: dict[str, int] = {}
        for ph in phases:
            steps[ph.kind] = steps.get(ph.kind, 0) + ph.steps
        return {
            **self.params(),
            "eps1": self.eps1,
            "eps2": self.eps2,
            "n_private": n_private,
            "n_leaves": n_leaves,
            "sensitivity": private_sensitivity(n_private),
            "exponent": exponent(self.eps1, n_private),
            "steps": steps,
        }

    def __repr__(self) -> str:
        return (
            f"EdgeRR(epsilon={self.epsilon!r}, eps1_share={self.eps1_share!r}, rounds={self.rounds}, "
            f"public_steps_per_leaf={self.public_steps_per_leaf!r}, "
            f"private_steps_per_leaf={self.private_steps_per_leaf!r}, leaves={self.leaves!r}, "
            f"schedule={self.schedule!r})"
        )

    # -- the schedule -------------------------------------------------------------------------
    def _phases(self, n_leaves: int, a_pri: float) -> list[Phase]:
        pub = int(round(self.public_steps_per_leaf * n_leaves / self.rounds))
        pri = int(round(self.private_steps_per_leaf * n_leaves / self.rounds))
        if self.schedule == "joint":
            return [Phase("joint", pub + pri, 1.0, a_pri) for _ in range(self.rounds)]
        out: list[Phase] = []
        for _ in range(self.rounds):
            out.append(Phase("public", pub, 1.0, 0.0))
            out.append(Phase("private", pri, 0.0, a_pri))
        return out

    # -- privatization ------------------------------------------------------------------------
    def fit(self, graph: GraphData, rng: np.random.Generator) -> FittedHRG:
        """The global part: random :math:`D_0`, MCMC, CalculateNoisyProb (Alg. 2 lines 1-20).

        Returns:
            FittedHRG: ``.release`` (the noisy dendrogram over the chosen leaves) for
            :meth:`sample`; ``.mcmc`` for :meth:`diagnostics`.
        """
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        rng = check_generator(rng)
        v_pri = graph.private_nodes()
        pub = graph.edges_public
        if self.leaves == "private":
            leaf_nodes = v_pri
            keep = in_sorted(pub[0], v_pri) & in_sorted(pub[1], v_pri) if pub.size else np.zeros(0, bool)
            pub = pub[:, keep]
            private_leaf = None
        else:
            leaf_nodes = sorted_unique(np.concatenate([pub.ravel(), graph.edges_private.ravel()]))
            private_leaf = in_sorted(leaf_nodes, v_pri)
        return fit_hrg(
            graph.num_nodes, leaf_nodes, pub, graph.edges_private, private_leaf,
            eps1=self.eps1, eps2=self.eps2, schedule=self._phases, rng=rng,
            trace_every=self.trace_every, tau_b=self.tau_b, tau_c=self.tau_c,
        )

    @staticmethod
    def _release(fitted: FittedHRG | NoisyDendrogram) -> NoisyDendrogram:
        if isinstance(fitted, FittedHRG):
            return fitted.release
        if isinstance(fitted, NoisyDendrogram):
            return fitted
        raise TypeError(f"fitted must be a FittedHRG or NoisyDendrogram, got {type(fitted).__name__}")

    def split(self, fitted: FittedHRG | NoisyDendrogram, parts: int) -> list[np.ndarray]:
        """Internal nodes in ``parts`` chunks of about equal expected output (for the parallel map)."""
        return split_internal_nodes(self._release(fitted), parts)

    def sample(
        self, fitted: FittedHRG | NoisyDendrogram, internal_nodes: Any, rng: np.random.Generator
    ) -> np.ndarray:
        """Private edges sampled at ``internal_nodes`` (one chunk): int64 ``[2, k]``, ``u < v``, sorted.

        Post-processing of the release; chunks with their own seeds together have the law of one
        pass (nodes are independent). Merge the chunks' union with the public edges by
        :func:`~privgraph.mechanisms.edges.dprr.merge_with_public`.
        """
        return sample_internal_nodes(self._release(fitted), internal_nodes, rng)

    def diagnostics(self, fitted: FittedHRG) -> dict[str, Any]:
        """The MCMC trace and convergence statistics as JSON-able data (no seeds).

        Computed from private edges and NOT covered by the guarantee: for the private run record.
        """
        if not isinstance(fitted, FittedHRG):
            raise TypeError(f"fitted must be a FittedHRG, got {type(fitted).__name__}")
        return fitted.diagnostics()

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """Fit, sample every internal node, drop samples that are public edges (one process).

        Returns a copy of ``graph`` whose ``edges_private`` are the sampled pairs of
        :math:`V_{pri}` that are not public edges; ``edges_public`` are kept as they are.
        """
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        rng = check_generator(rng)
        fitted = self.fit(graph, rng)
        noisy = sample_all(fitted.release, rng)
        return graph.replace(edges_private=merge_with_public(noisy, graph.edges_public))
