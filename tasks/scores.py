"""Scores: HeteroRR's importance (SHAP on public data), sensitivity and theta for FeatureRR."""

from __future__ import annotations

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.config import EmbedConfig
from privgraph.datasets import data_root
from privgraph.embed.cache import EmbeddingCache
from privgraph.embed.stage import build_embedder, face_masked_embeddings, face_variant
from privgraph.graph import GraphData
from privgraph.scoring import ScoreResult, ScoresConfig, compute_scores


@task(name="scores", cache_policy=NO_CACHE, persist_result=False)
def score(
    graph: GraphData, config: ScoresConfig, seed: np.random.SeedSequence, private_labels: np.ndarray | None = None,
    embed: EmbedConfig | None = None, root: str | None = None,
) -> ScoreResult:
    """Scores are cached per input fingerprint by privgraph (not by Prefect: the input is raw).
    ``private_labels``: the nodes whose label the pipeline's declaration makes private. With
    ``sensitivity.faces`` (image graphs), beta compares the public images' embeddings with those of
    the same images with their faces masked, by the ``embed`` stage's model."""
    faces = config.sensitivity.faces if config.sensitivity is not None else None
    if faces is None or embed is None:
        return compute_scores(graph, config, seed=seed, private_labels=private_labels)
    embedder = build_embedder(embed.model_dump(), root or data_root())
    cache = EmbeddingCache() if embed.cache else None

    def masked(nodes: np.ndarray) -> np.ndarray:
        return face_masked_embeddings(graph, nodes, embedder, threshold=faces.threshold, margin=faces.margin,
                                      mask=faces.mask, cache=cache)[0]

    masked_id = f"{embedder.model_id}/{face_variant(faces.threshold, faces.margin, faces.mask)}"
    return compute_scores(graph, config, seed=seed, private_labels=private_labels, masked_rows=masked,
                          masked_id=masked_id)
