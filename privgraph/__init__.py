"""privgraph: differentially private graphs, end to end.

The library is pure Python/NumPy/PyTorch: it imports neither Prefect nor Dask
(``privgraph.parts.executor`` maps partitions over any executor; the Dask one is
``tasks.dask_executor``; tests/test_layering.py checks it).
"""

from privgraph.errors import GraphValidationError, PrivgraphError
from privgraph.graph import GraphData

__version__ = "0.1.0"
__all__ = ["GraphData", "GraphValidationError", "PrivgraphError", "__version__"]
