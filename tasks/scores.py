"""Scores: HeteroRR's importance (SHAP on public data), sensitivity and theta for FeatureRR."""

from __future__ import annotations

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.config.pipeline import EmbedConfig
from privgraph.ingest.datasets import data_root
from privgraph.ingest.embed.cache import EmbeddingCache
from privgraph.graph import GraphData
from privgraph.ingest.scoring import ScoreResult, ScoresConfig, compute_scores
from privgraph.ingest.scoring.public_subset import PublicRows


@task(name="scores", cache_policy=NO_CACHE, persist_result=False)
def scores(
    rows: PublicRows, config: ScoresConfig, seed: np.random.SeedSequence,
    embed: EmbedConfig | None = None, root: str | None = None,
) -> ScoreResult:
    """theta from the pipeline's declared-public rows only (``rows``:
    :meth:`privgraph.config.disclosure.Disclosure.public_rows`, a graph of those rows and nothing else).
    Scores are cached by privgraph (not by Prefect: the rows are raw). With ``sensitivity.faces``
    (image graphs), beta compares the public images' embeddings with those of the same images with
    their faces masked, by the ``embed`` stage's model."""
    faces = config.sensitivity.faces if config.sensitivity is not None else None
    if faces is None or embed is None:
        return compute_scores(rows, config, seed=seed)
    from privgraph.ingest.embed.stage import build_embedder, face_masked_embeddings, face_variant  # torch: image graphs only

    embedder = build_embedder(embed.model_dump(), root or data_root())
    cache = EmbeddingCache() if embed.cache else None

    def masked(view: GraphData) -> np.ndarray:
        return face_masked_embeddings(view, np.arange(view.num_nodes), embedder, threshold=faces.threshold,
                                      margin=faces.margin, mask=faces.mask, cache=cache)[0]

    masked_id = f"{embedder.model_id}/{face_variant(faces.threshold, faces.margin, faces.mask)}"
    return compute_scores(rows, config, seed=seed, masked_rows=masked, masked_id=masked_id)
