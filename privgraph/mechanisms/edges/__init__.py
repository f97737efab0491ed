"""Edge mechanisms: privatize the private edges of a graph; public edges are kept as they are."""

from privgraph.mechanisms.edges.class_counts import NeighbourClassCounts
from privgraph.mechanisms.edges.dprr import (
    DPRR,
    expected_noisy_degree,
    expected_report_probability,
    merge_with_public,
    private_csr,
    symmetrize_reports,
)
from privgraph.mechanisms.edges.edge_rand import EdgeRand
from privgraph.mechanisms.edges.edge_rr import EdgeRR
from privgraph.mechanisms.edges.gap import AggregationPerturbation
from privgraph.mechanisms.edges.lapgraph import LapGraph
from privgraph.mechanisms.edges.local_lap import LocalLap
from privgraph.mechanisms.edges.nonpriv_part import NonPrivPart
from privgraph.mechanisms.edges.priv_hrg import PrivHRG
from privgraph.mechanisms.edges.warner_rr import WarnerRR

__all__ = [
    "AggregationPerturbation",
    "DPRR",
    "EdgeRand",
    "EdgeRR",
    "LapGraph",
    "LocalLap",
    "NeighbourClassCounts",
    "NonPrivPart",
    "PrivHRG",
    "WarnerRR",
    "expected_noisy_degree",
    "expected_report_probability",
    "merge_with_public",
    "private_csr",
    "symmetrize_reports",
]
