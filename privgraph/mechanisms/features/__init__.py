"""Feature (and label) mechanisms: each node's vector is randomized locally."""

from privgraph.mechanisms.features.feature_rr import FeatureRR, worst_case_log_ratio

__all__ = ["FeatureRR", "worst_case_log_ratio"]
