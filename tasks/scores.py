"""Scores: HeteroRR's importance (SHAP on public data), sensitivity and theta for FeatureRR."""

from __future__ import annotations

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.graph import GraphData
from privgraph.scoring import ScoreResult, ScoresConfig, compute_scores


@task(name="scores", cache_policy=NO_CACHE, persist_result=False)
def score(
    graph: GraphData, config: ScoresConfig, seed: np.random.SeedSequence, private_labels: np.ndarray | None = None
) -> ScoreResult:
    """Scores are cached per input fingerprint by privgraph (not by Prefect: the input is raw).
    ``private_labels``: the nodes whose label the pipeline's declaration makes private."""
    return compute_scores(graph, config, seed=seed, private_labels=private_labels)
