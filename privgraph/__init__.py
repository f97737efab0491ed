"""privgraph: differentially private graphs, end to end.

The library is pure Python/NumPy/PyTorch: it imports neither Prefect nor Dask's distributed
scheduler (``privgraph.parallel`` opens a Dask client only when asked to).
"""

from privgraph.errors import GraphValidationError, PrivgraphError
from privgraph.graph import GraphData

__version__ = "0.1.0"
__all__ = ["GraphData", "GraphValidationError", "PrivgraphError", "__version__"]
