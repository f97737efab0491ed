"""Graph neural networks for utility evaluation; all randomness comes from explicit generators."""

from privgraph.models.gcn import GCN, GeneratorDropout, GraphConvolution

__all__ = ["GCN", "GeneratorDropout", "GraphConvolution"]
