"""Privacy attacks on a trained model and a released graph: what an adversary recovers.

One module per attack, pure library (no Prefect, no Dask): :mod:`~privgraph.evaluate.attacks.linkteller`
(influence analysis), :mod:`~privgraph.evaluate.attacks.link_stealing` (posterior similarity,
unsupervised and supervised), :mod:`~privgraph.evaluate.attacks.membership` (training-node membership),
:mod:`~privgraph.evaluate.attacks.attribute` (private feature rows reconstructed from the release);
the candidate pairs in :mod:`~privgraph.evaluate.attacks.pairs` and the scores (ROC-AUC with a bootstrap
interval, precision@k) in :mod:`~privgraph.evaluate.attacks.scoring`; the evaluation stage that runs the
configured attacks on a clean and a private model in :func:`~privgraph.evaluate.attacks.suite.run_attacks`. Every score is computed against raw
data: a PRIVATE evaluation, for the owner's private record and artifacts titled as such, never a
shareable version.
"""

from privgraph.evaluate.attacks.attribute import attribute_inference
from privgraph.evaluate.attacks.link_stealing import link_stealing_supervised, link_stealing_unsupervised
from privgraph.evaluate.attacks.linkteller import linkteller, linkteller_scores
from privgraph.evaluate.attacks.membership import membership_inference, membership_shadow
from privgraph.evaluate.attacks.pairs import PairSample, private_edge_pairs
from privgraph.evaluate.attacks.scoring import AttackResult, bootstrap_auc_ci, precision_at_k, roc_auc
from privgraph.evaluate.attacks.suite import run_attacks

__all__ = [
    "AttackResult",
    "PairSample",
    "attribute_inference",
    "bootstrap_auc_ci",
    "link_stealing_supervised",
    "link_stealing_unsupervised",
    "linkteller",
    "linkteller_scores",
    "membership_inference",
    "membership_shadow",
    "precision_at_k",
    "private_edge_pairs",
    "roc_auc",
    "run_attacks",
]
