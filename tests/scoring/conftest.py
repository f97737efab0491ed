"""Small synthetic graphs for the scoring tests: column 0 determines the label, the rest is noise."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.graph import GraphData


def make_graph(n: int = 240, d: int = 6, classes: int = 3, seed: int = 0, meta_classes: bool = True) -> GraphData:
    rng = np.random.default_rng(seed)
    x = rng.random((n, d)).astype(np.float32)
    y = np.minimum((x[:, 0] * classes).astype(np.int64), classes - 1)
    train = np.zeros(n, bool)
    train[: n // 2] = True
    test = np.zeros(n, bool)
    test[3 * n // 4 :] = True
    val = ~train & ~test
    meta = {"num_classes": classes} if meta_classes else {}
    return GraphData(num_nodes=n, x=x, y=y, train_mask=train, val_mask=val, test_mask=test, meta=meta)


@pytest.fixture
def synth() -> GraphData:
    return make_graph()


@pytest.fixture
def make_synth():
    """The synthetic-graph factory (importlib import mode: tests cannot import conftest)."""
    return make_graph
