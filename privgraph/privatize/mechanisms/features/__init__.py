"""Feature (and label) mechanisms: each node's vector is randomized locally."""

from privgraph.privatize.mechanisms.features.duchi import DuchiMechanism
from privgraph.privatize.mechanisms.features.feature_rr import FeatureRR, worst_case_log_ratio
from privgraph.privatize.mechanisms.features.hybrid import HybridMechanism
from privgraph.privatize.mechanisms.features.label_rr import LabelRR
from privgraph.privatize.mechanisms.features.laplace import LaplaceMechanism
from privgraph.privatize.mechanisms.features.multibit import MultiBitEncoder
from privgraph.privatize.mechanisms.features.piecewise import PiecewiseMechanism
from privgraph.privatize.mechanisms.features.pm_sub import PMSubMechanism
from privgraph.privatize.mechanisms.features.three_output import ThreeOutputMechanism
from privgraph.privatize.mechanisms.registry import import_mechanism_modules

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

import_mechanism_modules(__name__, __path__)  # a module that registers a mechanism is all it takes
