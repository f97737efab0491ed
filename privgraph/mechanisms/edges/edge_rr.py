"""EdgeRR: the PHRG mechanism of HeteroRR for private edges (paper 002, Sec. III-B, Alg. 2-3).

The MCMC's length comes from the PUBLIC convergence check
(:mod:`privgraph.mechanisms.hrg.convergence`). Measurements behind its defaults (this repository's
``benchmarks/edge_mechanisms.py --convergence``; 2-core machine, 4 chains; R-hat: rank-normalized
split, bar 1.05): docs/guarantees.md, "The convergence check's measurements". The budget's split
and the steps' choice, shared with privHRG: :mod:`privgraph.mechanisms.edges.hrg_settings`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData, in_sorted, sorted_unique
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.guarantee.params import check_int, check_probability
from privgraph.mechanisms.base import EpsilonRange, check_generator
from privgraph.mechanisms.edges.edge_arrays import merge_with_public
from privgraph.mechanisms.edges.hrg_settings import (
    HRG_EPSILON_RANGE,
    check_threshold,
    chosen_steps,
    fit_schedule,
    split_budget,
)
from privgraph.mechanisms.hrg.blocks import LeafBlocks, bisection_blocks, block_edges, check_block_leaves
from privgraph.mechanisms.hrg.convergence import (
    CHECK_CHAINS,
    MAX_STEPS_PER_LEAF,
    MIN_STEPS_PER_LEAF,
    RHAT_THRESHOLD,
    SAFETY_FACTOR,
    check_convergence_settings,
    check_steps_setting,
    block_convergence_check,
    convergence_check,
)
from privgraph.mechanisms.hrg.proxy import edge_rr_proxy
from privgraph.mechanisms.hrg.fit import FittedHRG, fit_hrg
from privgraph.mechanisms.hrg.mcmc import Phase, exponent, private_sensitivity
from privgraph.mechanisms.hrg.noisy_prob import TAU_B, TAU_C, NoisyDendrogram
from privgraph.mechanisms.hrg.sample import sample_all, sample_internal_nodes, split_internal_nodes
from privgraph.mechanisms.edges.shapes import FittedModel
from privgraph.mechanisms.registry import register_mechanism

__all__ = ["EdgeRR", "HRG_EPSILON_RANGE", "split_budget", "chosen_steps", "fit_schedule"]

_LEAVES = ("private", "all")
_SCHEDULES = ("alternating", "joint")


@register_mechanism
class EdgeRR(FittedModel):
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

    The chain's length (Alg. 2's "if converged") is set BEFORE the private chain runs by the
    public convergence check (:mod:`privgraph.mechanisms.hrg.convergence`): 4 chains with the same
    acceptance rule on a public proxy (the public edges among the leaves in both roles), doubling
    from :data:`~privgraph.mechanisms.hrg.convergence.MIN_STEPS_PER_LEAF` steps per leaf until the
    rank-normalized split R-hat of every log-likelihood trace is below 1.05. What it certifies:
    with ``joint``, the joint chain's length (public + private steps per leaf); with
    ``alternating``, the length of EACH private phase (``private_steps_per_leaf / rounds``), since
    the output is the exponential mechanism only if the last private phase mixes from any start.
    ``"auto"`` runs :data:`~privgraph.mechanisms.hrg.convergence.SAFETY_FACTOR` (2) times the first
    passing budget (``alternating``: every phase that long, public phases as long as private ones).
    The check's record is ``FittedHRG.info["convergence_check"]`` (public).

    Args:
        epsilon (float): :math:`\varepsilon_e = \varepsilon_{e1} + \varepsilon_{e2}`, in
            ``[2^-19, 26]``; :math:`\varepsilon_{e1}` in ``[2^-20, 13]`` and
            :math:`\varepsilon_{e2}` in the discrete Laplace range (:data:`HRG_EPSILON_RANGE`).
        eps1_share (float, optional): :math:`\varepsilon_{e1} / \varepsilon_e`, in (0, 1)
            (default: ``0.5``; the paper gives no split).
        rounds (int, optional): iterations of Alg. 2's outer loop; they split the steps
            (default: ``10``).
        public_steps_per_leaf, private_steps_per_leaf (float or ``"auto"``, optional): the steps
            per leaf of all public and all private phases (``joint``: their sum is the joint
            chain's length); both ``"auto"`` (from the check's ``required_steps_per_leaf``) or both
            numbers whose certified quantity (``joint``: the sum; ``alternating``:
            ``private_steps_per_leaf / rounds``) is at least
            :data:`~privgraph.mechanisms.hrg.convergence.MIN_STEPS_PER_LEAF` (1000; refused here)
            and at least what the check requires (refused by :meth:`fit`, before the private chain
            runs) (default: ``"auto"``).
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
        convergence_chains (int, optional): chains of the public check, ``>= 2`` (default: ``4``).
        convergence_max_steps_per_leaf (int, optional): the check's cap; a check that has not
            passed by then refuses the release (default:
            :data:`~privgraph.mechanisms.hrg.convergence.MAX_STEPS_PER_LEAF`).
        convergence_seed (int, optional): the check's PUBLIC seed (never the run's noise seed:
            the check's record is published). Not in :meth:`params` (manifests and ledgers refuse
            any key naming a seed); the default ``0`` makes the record reproducible by anyone
            (default: ``0``).
        block_leaves (int, optional): ``None``: one chain over all leaves; an int ``>= 16``: when
            there are more leaves, the dendrogram's top is a PUBLIC block tree (recursive METIS
            bisection of the public edges among the leaves into blocks of at most this many
            leaves), each block gets its own chain and its own public check, the chains run in
            parallel threads (:mod:`~privgraph.mechanisms.hrg.blocks`: the output is the
            exponential mechanism over the dendrograms with that top). What makes 10^4-10^5 leaves
            converge (default: ``None``).

    Shapes:
        - input: ``edges_public`` :math:`[2, |E_{pub}|]`, ``edges_private`` :math:`[2, |E_{pri}|]`
        - output: ``edges_private`` :math:`[2, m']` sampled pairs of :math:`V_{pri}` not in
          ``edges_public``; :math:`E[m'] \approx \sum_r \bar L_r \bar R_r \tilde p_r`.

    Runtime:
        Fit: :math:`O(n + m \cdot depth)` to build, then :math:`O(1 + \bar d)`-ish per MCMC step
        (incremental counts, see :mod:`privgraph.mechanisms.hrg.dendrogram`): the check runs
        ``4 s^*`` steps per leaf (its 4 chains in parallel threads), the private chain ``2 s^*``
        (``joint``) or ``rounds * 4 s^*`` (``alternating``: public and private phases of
        ``2 s^*`` each); :math:`O(n)` for the noisy probabilities. Measured (Cora, ``rho = 0.2``,
        2 cores): ``alternating`` with ``rounds = 1``: check 14 s (s* = 8000), whole fit 24 s;
        ``joint``: the check does not pass within the default cap (about 5 min), so it refuses. Sampling:
        :math:`O(n + \text{output})`, parallel per chunk of internal nodes (:meth:`split`,
        :meth:`sample`). Never :math:`O(n^2)`.

    Notes:
        What holds at finite steps: the released dendrogram's law is the chain's law after the
        recorded number of steps; :math:`\varepsilon_{e1}` is the exponential mechanism's only to
        the extent that law is at its stationary law. The public check supports convergence on a
        public proxy of the same leaves and rule; it does not prove it on the private target.
        With ``schedule="alternating"`` the chain alternates kernels with different targets; its
        output law is the exponential mechanism only when the last private phase has mixed from
        any start (what the check certifies, on the proxy). The trace of :meth:`diagnostics` is
        computed from private edges and is not covered by the guarantee.
    """

    name: ClassVar[str] = "edge_rr"
    epsilon_range: ClassVar[EpsilonRange] = HRG_EPSILON_RANGE
    scope: ClassVar[Scope] = Scope.EDGES

    def __init__(
        self,
        *,
        epsilon: float,
        eps1_share: float = 0.5,
        rounds: int = 10,
        public_steps_per_leaf: float | str = "auto",
        private_steps_per_leaf: float | str = "auto",
        trace_every: int = 0,
        leaves: str = "private",
        schedule: str = "alternating",
        tau_b: float = TAU_B,
        tau_c: float = TAU_C,
        convergence_chains: int = CHECK_CHAINS,
        convergence_max_steps_per_leaf: int = MAX_STEPS_PER_LEAF,
        convergence_seed: int = 0,
        block_leaves: int | None = None,
    ) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.eps1_share = check_probability(eps1_share, "eps1_share", open_low=True, open_high=True)
        self.block_leaves = check_block_leaves(block_leaves)
        self.rounds = check_int(rounds, "rounds", minimum=1)
        pub = check_steps_setting(public_steps_per_leaf, "public_steps_per_leaf", minimum=0.0)
        pri = check_steps_setting(private_steps_per_leaf, "private_steps_per_leaf", minimum=0.0)
        if (pub == "auto") != (pri == "auto"):
            raise ValueError(
                f"public_steps_per_leaf and private_steps_per_leaf must both be 'auto' or both numbers, "
                f"got {public_steps_per_leaf!r} and {private_steps_per_leaf!r}"
            )
        if pub != "auto":
            if schedule == "joint":
                certified, what = float(pub) + float(pri), "public_steps_per_leaf + private_steps_per_leaf"
            else:
                certified = float(pri) / self.rounds
                what = "private_steps_per_leaf / rounds (one private phase)"
            if certified < MIN_STEPS_PER_LEAF:
                raise ValueError(
                    f"{what} = {certified:g} is below the documented minimum of {MIN_STEPS_PER_LEAF} MCMC "
                    f"steps per leaf (MIN_STEPS_PER_LEAF in privgraph.mechanisms.hrg.convergence: no chain "
                    f"measured on a graph of Cora's size passed the convergence check with fewer); use "
                    f"'auto' for both (the public convergence check chooses) or more"
                )
        self.public_steps_per_leaf: float | str = pub
        self.private_steps_per_leaf: float | str = pri
        self.trace_every = check_int(trace_every, "trace_every", minimum=0)
        if leaves not in _LEAVES:
            raise ValueError(f"leaves must be one of {_LEAVES}, got {leaves!r}")
        if schedule not in _SCHEDULES:
            raise ValueError(f"schedule must be one of {_SCHEDULES}, got {schedule!r}")
        self.leaves = leaves
        self.schedule = schedule
        self.tau_b = check_threshold(tau_b, "tau_b")
        self.tau_c = check_threshold(tau_c, "tau_c")
        self.convergence_chains, self.convergence_max_steps_per_leaf, self.convergence_seed = (
            check_convergence_settings(convergence_chains, convergence_max_steps_per_leaf, convergence_seed)
        )
        self.eps1, self.eps2 = split_budget(self.epsilon, self.eps1_share, owner=type(self).name)

    # -- public parameters --------------------------------------------------------------------
    @property
    def auto(self) -> bool:
        """Whether the step counts are chosen by the public convergence check."""
        return self.public_steps_per_leaf == "auto"

    def _certified_text(self) -> str:
        if self.schedule == "joint":
            return "the joint chain's length (public + private steps per leaf)"
        return "the length of each private phase (private_steps_per_leaf / rounds), whose kernel must mix from any start"

    def _steps_text(self) -> str:
        if self.auto:
            return (
                f"steps per leaf chosen by the public convergence check (SAFETY_FACTOR {SAFETY_FACTOR:g} x "
                f"its first passing budget), recorded with the release; {self.rounds} rounds, schedule "
                f"{self.schedule!r}"
            )
        return (
            f"{self.rounds} rounds of {self.public_steps_per_leaf!r} public and "
            f"{self.private_steps_per_leaf!r} private steps per leaf in all (schedule {self.schedule!r}), "
            f"fixed in advance and at least what the public convergence check requires"
        )

    @property
    def guarantee(self) -> Guarantee:
        assumptions = [
            "V_pri (nodes with private edges) is public",
            "public edges are released as they are",
            f"finite-step MCMC: the released dendrogram's law is the chain's law after the recorded "
            f"number of steps ({self._steps_text()}); eps_e1 = {self.eps1!r} is the exponential "
            f"mechanism's only to the extent that law is at the chain's stationary law",
            f"{self._certified_text()} comes from a PUBLIC convergence check ({self.convergence_chains} chains "
            f"from random dendrograms on a proxy target: the public edges among the leaves in the public "
            f"and private roles, same acceptance rule and coefficients; rank-normalized split R-hat < "
            f"{RHAT_THRESHOLD:g} on the log-likelihood traces; at least {MIN_STEPS_PER_LEAF} steps per "
            f"leaf); it supports convergence on the public proxy, it does not prove it on the private "
            f"target",
            "private steps accept with exp(eps_e1 / (2 Delta_e) * dL_pri), Delta_e = ln N + "
            "(N - 1) ln(N / (N - 1)), N = floor(|V_pri|^2 / 4) (Lemma 4, Appendix B)",
            f"CalculateNoisyProb: discrete Laplace noise (eps_e2 = {self.eps2!r}) on private edge "
            "counts, each edge counted once (parallel composition)",
            "the MCMC trace (diagnostics) is not covered and is never published",
        ]
        if self.block_leaves is not None:
            assumptions.append(
                f"with more than {self.block_leaves} leaves, the dendrogram's top is a PUBLIC block tree "
                f"(recursive METIS bisection of the public edges among the leaves into blocks of at most "
                f"{self.block_leaves} leaves): the exponential mechanism ranges over the dendrograms with "
                f"that top (same score and Delta_e); its law is the product of one per block, sampled by "
                f"one chain per block, each block's length from its own public check"
            )
        if self.schedule == "alternating":
            assumptions.append(
                "schedule 'alternating' (Alg. 2): public and private phases have different targets; "
                "the output law is the exponential mechanism only when the last private phase has "
                "mixed from any start ('joint' has the exponential mechanism as its stationary law)"
            )
        return Guarantee(
            kind=GuaranteeKind.EDGE_DP,
            epsilon=self.epsilon,  # split_budget keeps eps1 + eps2 <= epsilon in floats
            scope=Scope.EDGES,
            assumptions=tuple(assumptions),
        )

    def params(self) -> dict[str, Any]:
        """Public parameters for the manifest (the split and steps per graph: :meth:`params_for`).

        ``convergence_seed`` is left out: manifests and ledgers refuse any key naming a seed."""
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
            "convergence_chains": self.convergence_chains,
            "convergence_max_steps_per_leaf": self.convergence_max_steps_per_leaf,
            "block_leaves": self.block_leaves,
        }

    def params_for(self, n_private: int, n_leaves: int | None = None) -> dict[str, Any]:
        """:meth:`params` plus ``eps1``, ``eps2``, the sensitivity, the exponent and the step counts
        (``"auto"`` when the public convergence check sets them: they are in the fit's ``info``)."""
        n_private = check_int(n_private, "n_private", minimum=0)
        n_leaves = n_private if n_leaves is None else check_int(n_leaves, "n_leaves", minimum=n_private)
        steps: dict[str, int] | str = "auto"
        if not self.auto:
            steps = {}
            for ph in self._phases(n_leaves, exponent(self.eps1, n_private)):
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
            f"schedule={self.schedule!r}, block_leaves={self.block_leaves!r})"
        )

    # -- the schedule -------------------------------------------------------------------------
    def _public_fraction(self) -> float:
        if self.auto:
            return 0.5
        total = float(self.public_steps_per_leaf) + float(self.private_steps_per_leaf)
        return float(self.public_steps_per_leaf) / total if total > 0 else 0.5

    def _per_leaf(self, certified: float | None) -> tuple[float, float]:
        """``(public, private)`` steps per leaf in all; ``certified`` is the check's quantity (the
        joint chain's length, or one private phase's), ``None`` for the configured numbers."""
        if certified is None:
            if self.auto:
                raise ValueError("the step counts are 'auto': pass the check's steps per leaf")
            return float(self.public_steps_per_leaf), float(self.private_steps_per_leaf)
        if self.schedule == "joint":
            f = self._public_fraction()
            return f * certified, (1.0 - f) * certified
        pri = certified * self.rounds
        f = self._public_fraction()
        return (pri * f / (1.0 - f) if f < 1.0 else 0.0), pri

    def _phases(self, n_leaves: int, a_pri: float, certified: float | None = None) -> list[Phase]:
        """The schedule (``rounds`` rounds); ``certified``: see :meth:`_per_leaf`."""
        pub_pl, pri_pl = self._per_leaf(certified)
        pub = int(round(pub_pl * n_leaves / self.rounds))
        pri = int(round(pri_pl * n_leaves / self.rounds))
        if self.schedule == "joint":
            return [Phase("joint", pub + pri, 1.0, a_pri) for _ in range(self.rounds)]
        out: list[Phase] = []
        for _ in range(self.rounds):
            out.append(Phase("public", pub, 1.0, 0.0))
            out.append(Phase("private", pri, 0.0, a_pri))
        return out

    def _kernel(self, a_pri: float) -> Phase:
        """The acceptance rule the check certifies: the joint chain's, or the private phase's."""
        if self.schedule == "joint":
            return Phase("joint", 0, 1.0, a_pri)
        return Phase("private", 0, 0.0, a_pri)

    def _configured_certified(self) -> float | str:
        if self.auto:
            return "auto"
        if self.schedule == "joint":
            return float(self.public_steps_per_leaf) + float(self.private_steps_per_leaf)
        return float(self.private_steps_per_leaf) / self.rounds

    def _inputs(self, graph: GraphData) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
        """Leaves, public edges among them, private-leaf mask (``None``: all) and V_pri."""
        v_pri = graph.private_nodes()
        pub = graph.edges_public
        if self.leaves == "private":
            keep = in_sorted(pub[0], v_pri) & in_sorted(pub[1], v_pri) if pub.size else np.zeros(0, bool)
            return v_pri, pub[:, keep], None, v_pri
        leaf_nodes = sorted_unique(np.concatenate([pub.ravel(), graph.edges_private.ravel()]))
        return leaf_nodes, pub, in_sorted(leaf_nodes, v_pri), v_pri

    def _blocks(self, leaf_nodes: np.ndarray, pub: np.ndarray) -> LeafBlocks | None:
        """The PUBLIC block tree over the leaves (``None``: one chain)."""
        if self.block_leaves is None or leaf_nodes.size <= self.block_leaves:
            return None
        return bisection_blocks(int(leaf_nodes.size), np.searchsorted(leaf_nodes, pub), self.block_leaves)

    def convergence_check(self, graph: GraphData) -> dict[str, Any]:
        """The PUBLIC convergence check for ``graph`` (:mod:`privgraph.mechanisms.hrg.convergence`).

        Reads the leaves (:math:`V_{pri}`, public), the public edges and the public parameters,
        never a private edge; deterministic given ``convergence_seed``. Returns the JSON-able record
        (``required_steps_per_leaf``: what ``"auto"`` runs and a configured sum must reach; with
        blocks, per block in ``per_block``).
        """
        return self._check(graph)[0]

    def _check(self, graph: GraphData) -> tuple[dict[str, Any], LeafBlocks | None]:
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        leaf_nodes, pub, private_leaf, v_pri = self._inputs(graph)
        kernel = self._kernel(exponent(self.eps1, int(v_pri.size)))
        settings = dict(
            seed=self.convergence_seed, chains=self.convergence_chains,
            max_steps_per_leaf=self.convergence_max_steps_per_leaf,
            schedule_info={
                "schedule": self.schedule, "rounds": self.rounds,
                "public_fraction": self._public_fraction(),
                "certifies": "joint chain length" if self.schedule == "joint" else "one private phase",
            },
        )
        blocks = self._blocks(leaf_nodes, pub)
        if blocks is None:
            proxy = edge_rr_proxy(graph.num_nodes, leaf_nodes, pub, private_leaf, self.convergence_seed)
            return convergence_check(proxy, kernel, **settings), None
        local = np.searchsorted(leaf_nodes, pub)
        public = np.bincount(local.ravel(), minlength=leaf_nodes.size) > 0  # the whole graph's, as the chains'
        inner = block_edges(blocks, local)
        proxies = [
            edge_rr_proxy(graph.num_nodes, leaf_nodes[idx], leaf_nodes[inner[b]],
                          None if private_leaf is None else private_leaf[idx], self.convergence_seed,
                          public_leaf=public[idx])
            for b, idx in enumerate(blocks.blocks)
        ]
        return block_convergence_check(proxies, blocks, kernel, **settings), blocks

    # -- privatization ------------------------------------------------------------------------
    def fit(self, graph: GraphData, rng: np.random.Generator) -> FittedHRG:
        """The global part: the public convergence check, random :math:`D_0`, MCMC,
        CalculateNoisyProb (Alg. 2 lines 1-20); with ``block_leaves``, one chain per public block.

        Returns:
            FittedHRG: ``.release`` (the noisy dendrogram over the chosen leaves) for
            :meth:`sample`; ``.mcmc`` for :meth:`diagnostics`; ``.info["convergence_check"]``, the
            check's public record.

        Raises:
            ValidationFailedError: the check did not pass within its cap, or the configured steps
                are below what it requires; raised before the private chain runs.
        """
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        rng = check_generator(rng)
        record, blocks = self._check(graph)
        what = (
            "public_steps_per_leaf + private_steps_per_leaf" if self.schedule == "joint"
            else "private_steps_per_leaf / rounds (one private phase)"
        )
        certified = chosen_steps(self._configured_certified(), record, self.name, what)
        per_leaf = certified if self.auto else None
        pub_pl, pri_pl = self._per_leaf(per_leaf)
        leaf_nodes, pub, private_leaf, _ = self._inputs(graph)
        schedule = fit_schedule(self._phases, per_leaf, self.auto, record, blocks)
        return fit_hrg(
            graph.num_nodes, leaf_nodes, pub, graph.edges_private, private_leaf,
            eps1=self.eps1, eps2=self.eps2, schedule=schedule, rng=rng,
            trace_every=self.trace_every, tau_b=self.tau_b, tau_c=self.tau_c, blocks=blocks,
            extra_info={
                "steps_per_leaf": {"public": pub_pl, "private": pri_pl},
                "certified_steps_per_leaf": float(certified),
                "convergence_check": record,
            },
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
