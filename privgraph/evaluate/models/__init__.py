"""Graph neural networks for utility evaluation; all randomness comes from explicit generators.

Importing the package registers every model of :data:`~privgraph.evaluate.models.basic.MODELS`:
it imports each of its modules that applies :func:`~privgraph.evaluate.models.basic.register_model`."""

from privgraph.evaluate.models.basic import MODELS, GeneratorDropout, NodeGNN, register_model
from privgraph.evaluate.models.gap import GAPClassifier
from privgraph.evaluate.models.gat import GAT
from privgraph.evaluate.models.gcn import GCN, GraphConvolution
from privgraph.evaluate.models.gin import GIN
from privgraph.evaluate.models.kprop import KProp
from privgraph.evaluate.models.sage import GraphSAGE
from privgraph.mechanisms.registry import import_registering_modules

__all__ = ["MODELS", "GAPClassifier", "GAT", "GCN", "GIN", "GeneratorDropout", "GraphConvolution", "GraphSAGE", "KProp",
           "NodeGNN", "register_model"]

import_registering_modules(__name__, __path__, "register_model")  # a model's module is all it takes
