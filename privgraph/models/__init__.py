"""Graph neural networks for utility evaluation; all randomness comes from explicit generators."""

from privgraph.models.gap import GAPClassifier
from privgraph.models.gat import GAT
from privgraph.models.gcn import GCN, GeneratorDropout, GraphConvolution
from privgraph.models.gin import GIN
from privgraph.models.kprop import KProp
from privgraph.models.sage import GraphSAGE

__all__ = ["GAPClassifier", "GAT", "GCN", "GIN", "GeneratorDropout", "GraphConvolution", "GraphSAGE", "KProp"]
