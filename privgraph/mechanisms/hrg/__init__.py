"""Hierarchical random graphs (HRG) under differential privacy: the machinery of EdgeRR and privHRG.

- :mod:`~privgraph.mechanisms.hrg.dendrogram`: the dendrogram as flat arrays, its public/private
  counts, the log-likelihood of Eq. 10/11 and the incremental Fig. 5 move (its compiled kernels:
  :mod:`~privgraph.mechanisms.hrg.dendrogram_kernels`);
- :mod:`~privgraph.mechanisms.hrg.mcmc`: Lemma 4's sensitivity and the public/private/joint MCMC;
- :mod:`~privgraph.mechanisms.hrg.noisy_prob`: CalculateNoisyProb (Alg. 3) and the release;
- :mod:`~privgraph.mechanisms.hrg.sample`: sampling private edges in ``O(output)``, per chunk;
- :mod:`~privgraph.mechanisms.hrg.fit`: the global fit (MCMC + noisy probabilities) shared by
  EdgeRR and privHRG;
- :mod:`~privgraph.mechanisms.hrg.convergence`: the PUBLIC convergence check that chooses (or
  checks) the MCMC's length from a public proxy target
  (:mod:`~privgraph.mechanisms.hrg.proxy`), before the private chain runs.
"""

from privgraph.mechanisms.hrg.dendrogram import Dendrogram, binary_log_likelihood, log_likelihood_terms
from privgraph.mechanisms.hrg.mcmc import (
    MCMCResult,
    Phase,
    convergence_stats,
    exponent,
    private_sensitivity,
    run_mcmc,
)
from privgraph.mechanisms.hrg.fit import FittedHRG, fit_hrg
from privgraph.mechanisms.hrg.convergence import (
    MIN_STEPS_PER_LEAF,
    Proxy,
    convergence_check,
    split_rhat,
)
from privgraph.mechanisms.hrg.proxy import edge_rr_proxy, priv_hrg_proxy
from privgraph.mechanisms.hrg.noisy_prob import NoisyDendrogram, calculate_noisy_prob, noisy_dendrogram
from privgraph.mechanisms.hrg.sample import sample_all, sample_internal_nodes, split_internal_nodes

__all__ = [
    "MIN_STEPS_PER_LEAF",
    "Proxy",
    "convergence_check",
    "edge_rr_proxy",
    "priv_hrg_proxy",
    "split_rhat",
    "Dendrogram",
    "FittedHRG",
    "MCMCResult",
    "NoisyDendrogram",
    "Phase",
    "binary_log_likelihood",
    "calculate_noisy_prob",
    "convergence_stats",
    "exponent",
    "fit_hrg",
    "log_likelihood_terms",
    "noisy_dendrogram",
    "private_sensitivity",
    "run_mcmc",
    "sample_all",
    "sample_internal_nodes",
    "split_internal_nodes",
]
