"""Edge mechanisms: privatize the private edges of a graph; public edges are kept as they are."""

from privgraph.privatize.mechanisms.edges.class_counts import NeighbourClassCounts
from privgraph.privatize.mechanisms.edges.dprr import (
    DPRR,
    expected_noisy_degree,
    expected_report_probability,
    merge_with_public,
    private_csr,
    symmetrize_reports,
)
from privgraph.privatize.mechanisms.edges.edge_rand import EdgeRand
from privgraph.privatize.mechanisms.edges.edge_rr import EdgeRR
from privgraph.privatize.mechanisms.edges.gap import AggregationPerturbation
from privgraph.privatize.mechanisms.edges.lapgraph import LapGraph
from privgraph.privatize.mechanisms.edges.local_lap import LocalLap
from privgraph.privatize.mechanisms.edges.nonpriv_part import NonPrivPart
from privgraph.privatize.mechanisms.edges.priv_hrg import PrivHRG
from privgraph.privatize.mechanisms.edges.warner_rr import WarnerRR

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
