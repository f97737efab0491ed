"""Graph neural networks for utility evaluation; all randomness comes from explicit generators."""

from privgraph.evaluate.models.gap import GAPClassifier
from privgraph.evaluate.models.gat import GAT
from privgraph.evaluate.models.gcn import GCN, GeneratorDropout, GraphConvolution
from privgraph.evaluate.models.gin import GIN
from privgraph.evaluate.models.kprop import KProp
from privgraph.evaluate.models.sage import GraphSAGE

__all__ = ["GAPClassifier", "GAT", "GCN", "GIN", "GeneratorDropout", "GraphConvolution", "GraphSAGE", "KProp"]
