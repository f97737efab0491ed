"""Feature (and label) mechanisms: each node's vector is randomized locally."""

from privgraph.mechanisms.features.duchi import DuchiMechanism
from privgraph.mechanisms.features.feature_rr import FeatureRR, worst_case_log_ratio
from privgraph.mechanisms.features.hybrid import HybridMechanism
from privgraph.mechanisms.features.label_rr import LabelRR
from privgraph.mechanisms.features.laplace import LaplaceMechanism
from privgraph.mechanisms.features.multibit import MultiBitEncoder
from privgraph.mechanisms.features.piecewise import PiecewiseMechanism
from privgraph.mechanisms.features.pm_sub import PMSubMechanism
from privgraph.mechanisms.features.three_output import ThreeOutputMechanism
from privgraph.mechanisms.registry import import_registering_modules

__all__ = [
    "DuchiMechanism",
    "FeatureRR",
    "HybridMechanism",
    "LabelRR",
    "LaplaceMechanism",
    "MultiBitEncoder",
    "PMSubMechanism",
    "PiecewiseMechanism",
    "ThreeOutputMechanism",
    "worst_case_log_ratio",
]

import_registering_modules(__name__, __path__)  # a module that registers a mechanism is all it takes
