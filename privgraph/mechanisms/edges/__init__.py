"""Edge mechanisms: privatize the private edges of a graph; public edges are kept as they are.

Each mechanism is one module here: a class on one of the shapes of
:mod:`~privgraph.mechanisms.edges.shapes`, registered by its decorator.
"""

from privgraph.mechanisms.edges.class_counts import NeighbourClassCounts
from privgraph.mechanisms.edges.dprr import DPRR, expected_noisy_degree, expected_report_probability
from privgraph.mechanisms.edges.edge_arrays import merge_with_public, private_csr, symmetrize_reports
from privgraph.mechanisms.edges.edge_rand import EdgeRand
from privgraph.mechanisms.edges.edge_rr import EdgeRR
from privgraph.mechanisms.edges.gap import AggregationPerturbation
from privgraph.mechanisms.edges.lapgraph import LapGraph
from privgraph.mechanisms.edges.local_lap import LocalLap
from privgraph.mechanisms.edges.nonpriv_part import NonPrivPart
from privgraph.mechanisms.edges.priv_hrg import PrivHRG
from privgraph.mechanisms.edges.shapes import (
    SHAPES,
    Aggregates,
    Central,
    EdgeMechanism,
    EdgeRelease,
    FittedModel,
    LocalReports,
    NoisyDegrees,
)
from privgraph.mechanisms.edges.warner_rr import WarnerRR
from privgraph.mechanisms.registry import import_registering_modules

__all__ = [
    "SHAPES",
    "Aggregates",
    "AggregationPerturbation",
    "Central",
    "DPRR",
    "EdgeMechanism",
    "EdgeRand",
    "EdgeRelease",
    "EdgeRR",
    "FittedModel",
    "LapGraph",
    "LocalLap",
    "LocalReports",
    "NeighbourClassCounts",
    "NoisyDegrees",
    "NonPrivPart",
    "PrivHRG",
    "WarnerRR",
    "expected_noisy_degree",
    "expected_report_probability",
    "merge_with_public",
    "private_csr",
    "symmetrize_reports",
]

import_registering_modules(__name__, __path__)  # a module that registers a mechanism is all it takes
