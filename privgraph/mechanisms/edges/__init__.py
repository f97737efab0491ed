"""Edge mechanisms: privatize the private edges of a graph; public edges are kept as they are."""

from privgraph.mechanisms.edges.dprr import (
    DPRR,
    expected_noisy_degree,
    expected_report_probability,
    merge_with_public,
    private_csr,
    symmetrize_reports,
)

__all__ = [
    "DPRR",
    "expected_noisy_degree",
    "expected_report_probability",
    "merge_with_public",
    "private_csr",
    "symmetrize_reports",
]
