"""Evaluate: train the GNN on the private graph and on the clean graph, same split and seeds."""

from __future__ import annotations

from typing import Any

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.config import EvaluateConfig
from privgraph.graph import GraphData
from privgraph.training import evaluate_utility
from tasks.observe import prefect_progress


@task(name="evaluate", cache_policy=NO_CACHE, persist_result=False)
def evaluate(
    private: GraphData,
    clean: GraphData,
    config: EvaluateConfig,
    seed: np.random.SeedSequence,
    label_epsilon: float | None = None,
    label_classes: int | None = None,
) -> dict[str, Any]:
    """Progress (``training k/N, ETA``: clean and private model per run) goes to the task's log
    and the process's listeners."""
    return evaluate_utility(
        private, clean, runs=config.runs, seed_sequence=seed, epochs=config.epochs,
        hidden=config.hidden, lr=config.lr, weight_decay=config.weight_decay,
        dropout=config.dropout, aggr=config.aggr, device=config.device, patience=config.patience,
        model=config.model, kprop_features=config.kprop_features,
        kprop_labels=config.kprop_labels, drop=config.drop, label_epsilon=label_epsilon,
        label_classes=label_classes, progress=prefect_progress(),
    )
