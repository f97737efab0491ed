"""Embed: ResNet-50 features of an image graph's node images (the owner's private cache first)."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from privgraph.config.pipeline import EmbedConfig, PipelineConfig
from privgraph.ingest.datasets import data_root
from privgraph.ingest.embed.cache import EmbeddingCache
from privgraph.graph import GraphData
from tasks.ingest import ingest


@task(name="embed", cache_policy=NO_CACHE, persist_result=False)
def embed(graph: GraphData, config: EmbedConfig, root: str | None = None) -> tuple[GraphData, dict[str, Any]]:
    """The graph with its image embeddings as ``x``, and the manifest's record of the model.
    Raw images and their embeddings are never persisted by Prefect (NO_CACHE). The log line holds
    public quantities only: the cache's hit and miss counts depend on the private images (one
    changed image is one more miss), so they are not logged (issue 24, leak 2)."""
    from privgraph.ingest.embed.stage import build_embedder, embed_graph  # torch: image graphs only

    embedder = build_embedder(config.model_dump(), root or data_root())
    graph, record, _ = embed_graph(graph, embedder, cache=EmbeddingCache() if config.cache else None)
    get_run_logger().info("embedded %d images with %s on %s", graph.num_nodes, embedder.model_id, embedder.device)
    return graph, record


def ingest_with_features(cfg: PipelineConfig, name: str) -> tuple[GraphData, dict[str, Any] | None]:
    """The pipeline's input as every flow reads it: ingest, then (image datasets) embed.
    Returns the graph and the embed record (``None`` without an embed stage). ``name``: the
    pipeline's, for the owner's record of a refusal."""
    graph = ingest(cfg.dataset, cfg.private_records, name)
    if cfg.embed is None:
        return graph, None
    return embed(graph, cfg.embed, cfg.dataset.root)
