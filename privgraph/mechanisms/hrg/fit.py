r"""The global, expensive part shared by EdgeRR and privHRG: MCMC, then CalculateNoisyProb.

:func:`fit_hrg` builds a random dendrogram :math:`D_0`, runs the configured MCMC schedule, and
noises the private probabilities of the final dendrogram :math:`D^*`. It returns a
:class:`FittedHRG`: the release (a :class:`~privgraph.mechanisms.hrg.noisy_prob.NoisyDendrogram`,
what sampling needs and all that is covered by the guarantee) and the MCMC diagnostics (NOT
covered: keep them in the private run record).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from privgraph.mechanisms.base import check_generator
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
    schedule: Callable[[int, float], list[Phase]],
    rng: np.random.Generator,
    trace_every: int = 0,
    tau_b: float,
    tau_c: float,
    extra_info: dict[str, Any] | None = None,
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
    """
    rng = check_generator(rng)
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
        **(extra_info or {}),
    }
    return FittedHRG(release=release, mcmc=result, info=info)
