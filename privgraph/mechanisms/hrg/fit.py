r"""The global, expensive part shared by EdgeRR and privHRG: MCMC, then CalculateNoisyProb.

:func:`fit_hrg` builds a random dendrogram :math:`D_0`, runs the configured MCMC schedule, and
noises the private probabilities of the final dendrogram :math:`D^*`; with a PUBLIC block tree
(:mod:`~privgraph.mechanisms.hrg.blocks`), one chain per block, the blocks' dendrograms joined
under the tree's top. It returns a
:class:`FittedHRG`: the release (a :class:`~privgraph.mechanisms.hrg.noisy_prob.NoisyDendrogram`,
what sampling needs and all that is covered by the guarantee) and the MCMC diagnostics (NOT
covered: keep them in the private run record).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from privgraph.mechanisms.base import check_generator
from privgraph.mechanisms.hrg.blocks import LeafBlocks, block_edges, compose, run_blocks
from privgraph.mechanisms.hrg.dendrogram import Dendrogram
from privgraph.mechanisms.hrg.mcmc import MCMCResult, Phase, exponent, private_sensitivity, run_mcmc
from privgraph.mechanisms.hrg.noisy_prob import NoisyDendrogram, noisy_dendrogram

__all__ = ["FittedHRG", "fit_hrg"]


@dataclasses.dataclass(frozen=True, eq=False)
class FittedHRG:
    """A fitted noisy dendrogram.

    Attributes:
        release: the :class:`NoisyDendrogram` (DP given the public leaf sets; sampling from it is
            post-processing).
        mcmc: the chain's record (steps, acceptance, log-likelihood trace). Derived from private
            edges and NOT covered by the guarantee: never publish it.
        info: public numbers of the run (budget split, sensitivity, exponent, leaf counts, step
            counts, and ``"convergence_check"``: the record of the PUBLIC check that chose or
            checked the step counts; computed without reading a private edge, for the manifest).
    """

    release: NoisyDendrogram
    mcmc: MCMCResult
    info: dict[str, Any]

    def diagnostics(self) -> dict[str, Any]:
        """JSON-able diagnostics: ``info``, the release summary, the MCMC record with its trace and
        convergence statistics. No seeds. The trace is private-run-record material."""
        return {
            "info": dict(self.info),
            "release": self.release.summary(),
            "mcmc": self.mcmc.to_dict(),
            "covered_by_guarantee": False,
            "note": (
                "the log-likelihood trace and convergence statistics are computed from the private "
                "edges; they are not differentially private: keep them out of published artifacts"
            ),
        }


def fit_hrg(
    num_nodes: int,
    leaf_nodes: np.ndarray,
    edges_public: np.ndarray,
    edges_private: np.ndarray,
    private_leaf: np.ndarray | None,
    *,
    eps1: float,
    eps2: float,
    schedule: Callable[[int, float], list[Phase]] | Sequence[Callable[[int, float], list[Phase]]],
    rng: np.random.Generator,
    trace_every: int = 0,
    tau_b: float,
    tau_c: float,
    extra_info: dict[str, Any] | None = None,
    blocks: LeafBlocks | None = None,
) -> FittedHRG:
    r"""Alg. 2 up to line 20: random :math:`D_0`, MCMC, CalculateNoisyProb.

    Args:
        num_nodes (int): node count of the graph.
        leaf_nodes (np.ndarray): sorted graph node ids of the dendrogram's leaves.
        edges_public, edges_private (np.ndarray): int64 ``[2, m]`` edges among the leaves.
        private_leaf (np.ndarray, optional): boolean mask of the leaves in :math:`V_{pri}`.
        eps1, eps2 (float): the budgets of the MCMC and of the noisy probabilities.
        schedule (Callable): ``schedule(n_leaves, a_pri) -> list[Phase]`` with ``a_pri`` the private
            coefficient :math:`\varepsilon_{e1} / (2 \Delta_e)`.
        rng (np.random.Generator): the only source of randomness.
        trace_every (int, optional): trace interval (``0``: about 1000 points).
        tau_b, tau_c (float): CalculateNoisyProb's thresholds.
        extra_info (dict, optional): PUBLIC entries added to ``info`` (the chosen steps per leaf
            and the public convergence check's record, ``"convergence_check"``).
        blocks (LeafBlocks, optional): a PUBLIC block tree over the leaves
            (:mod:`~privgraph.mechanisms.hrg.blocks`): one chain per block, in parallel threads,
            each from its own random dendrogram with the whole graph's coefficient and its own
            ``schedule[b]`` (``schedule`` is then one callable per block); the blocks' dendrograms
            are joined by the block tree. ``None``: one chain over all leaves.
    """
    rng = check_generator(rng)
    if blocks is not None:
        if not isinstance(schedule, Sequence) or len(schedule) != blocks.count:
            raise ValueError(f"fit_hrg: with {blocks.count} blocks, schedule must hold one callable per block")
        d, result = _fit_blocks(num_nodes, leaf_nodes, edges_public, edges_private, private_leaf, blocks,
                                eps1, schedule, rng, trace_every)
        n_private = int(d.w_pri.sum())
        a_pri = exponent(eps1, n_private)
        phases = schedule[0](d.n, a_pri)  # the blocks' schedules have the same phases
    else:
        d = Dendrogram.random(num_nodes, leaf_nodes, edges_public, edges_private, rng, private_leaf=private_leaf)
        n_private = int(d.w_pri.sum())
        a_pri = exponent(eps1, n_private)
        phases = schedule(d.n, a_pri)
        result = run_mcmc(d, phases, rng, trace_every=trace_every)
    release = noisy_dendrogram(d, eps2, rng, tau_b=tau_b, tau_c=tau_c)
    info = {
        "eps1": float(eps1),
        "eps2": float(eps2),
        "n_leaves": int(d.n),
        "n_private": n_private,
        "sensitivity": private_sensitivity(n_private),
        "exponent": float(a_pri),
        "steps": {k: int(v) for k, v in result.steps.items()},
        "phases": len(phases),
        **({"blocks": blocks.summary()} if blocks is not None else {}),
        **(extra_info or {}),
    }
    return FittedHRG(release=release, mcmc=result, info=info)


def _fit_blocks(
    num_nodes: int, leaf_nodes: np.ndarray, edges_public: np.ndarray, edges_private: np.ndarray,
    private_leaf: np.ndarray | None, blocks: LeafBlocks, eps1: float,
    schedule: Sequence[Callable[[int, float], list[Phase]]], rng: np.random.Generator, trace_every: int,
) -> tuple[Dendrogram, MCMCResult]:
    """One chain per block (module docs of :mod:`~privgraph.mechanisms.hrg.blocks`), composed."""
    leaf_nodes = np.asarray(leaf_nodes, dtype=np.int64)
    if blocks.n != leaf_nodes.size:
        raise ValueError(f"fit_hrg: the blocks cover {blocks.n} leaves, the dendrogram has {leaf_nodes.size}")
    mask = np.ones(leaf_nodes.size, dtype=bool) if private_leaf is None else np.asarray(private_leaf, dtype=bool)
    a_pri = exponent(eps1, int(mask.sum()))
    pub = np.asarray(edges_public, dtype=np.int64).reshape(2, -1)
    pri = np.asarray(edges_private, dtype=np.int64).reshape(2, -1)
    pub_local = np.searchsorted(leaf_nodes, pub)
    public = np.bincount(pub_local.ravel(), minlength=leaf_nodes.size) > 0  # the whole graph's flags
    pub_b = block_edges(blocks, pub_local)
    pri_b = block_edges(blocks, np.searchsorted(leaf_nodes, pri))
    children = rng.spawn(blocks.count)

    def work(b: int) -> tuple[Dendrogram, MCMCResult]:
        idx = blocks.blocks[b]
        nodes = leaf_nodes[idx]
        db = Dendrogram.random(num_nodes, nodes, leaf_nodes[pub_b[b]], leaf_nodes[pri_b[b]], children[b],
                               private_leaf=mask[idx], public_leaf=public[idx])
        return db, run_mcmc(db, schedule[b](db.n, a_pri), children[b], trace_every=trace_every)

    fitted = run_blocks(work, blocks.count, [b.size for b in blocks.blocks])
    left, right, root = compose(blocks, [(db.left, db.right, db.root) for db, _ in fitted])
    d = Dendrogram.from_structure(num_nodes, leaf_nodes, pub, pri, left, right, root, private_leaf=private_leaf)
    return d, _joined_result([r for _, r in fitted], d.log_likelihood())


def _joined_result(results: list[MCMCResult], final: tuple[float, float]) -> MCMCResult:
    """The blocks' chains as one record: steps and acceptances summed; trace point ``i`` is the
    sum of every block's ``i``-th point (each block at the same fraction of its own chain when the
    trace interval is automatic) plus the top nodes' constant terms, its step the steps all blocks
    had run by then. Private-run-record material, as any trace."""
    kinds = tuple(dict.fromkeys(k for r in results for k in r.phase_kinds))
    steps = {k: sum(r.steps.get(k, 0) for r in results) for k in kinds}
    accepted = {k: sum(r.accepted.get(k, 0) for r in results) for k in kinds}
    points = min(r.trace_step.size for r in results)
    top = (final[0] - sum(r.final_log_likelihood[0] for r in results),
           final[1] - sum(r.final_log_likelihood[1] for r in results))
    longest = max(results, key=lambda r: sum(r.steps.values()))
    return MCMCResult(
        steps=steps, accepted=accepted, trace_every=max(r.trace_every for r in results),
        trace_step=sum((r.trace_step[:points] for r in results), np.zeros(points, dtype=np.int64)),
        trace_phase=np.array([kinds.index(longest.phase_kinds[i]) for i in longest.trace_phase[:points]], dtype=np.int64),
        trace_public=sum((r.trace_public[:points] for r in results), np.zeros(points)) + top[0],
        trace_private=sum((r.trace_private[:points] for r in results), np.zeros(points)) + top[1],
        phase_kinds=kinds, final_log_likelihood=final,
    )
