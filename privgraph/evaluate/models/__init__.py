"""Graph neural networks for utility evaluation; all randomness comes from explicit generators.

Importing the package registers every model of :data:`~privgraph.evaluate.models.basic.MODELS`
(:func:`~privgraph.evaluate.models.basic.register_model`)."""

from privgraph.evaluate.models.basic import MODELS, GeneratorDropout, NodeGNN, register_model
from privgraph.evaluate.models.gap import GAPClassifier
from privgraph.evaluate.models.gat import GAT
from privgraph.evaluate.models.gcn import GCN, GraphConvolution
from privgraph.evaluate.models.gin import GIN
from privgraph.evaluate.models.kprop import KProp
from privgraph.evaluate.models.sage import GraphSAGE

__all__ = ["MODELS", "GAPClassifier", "GAT", "GCN", "GIN", "GeneratorDropout", "GraphConvolution", "GraphSAGE", "KProp",
           "NodeGNN", "register_model"]
