"""The ``embed`` stage: node images -> ResNet-50 features, and face-masked embeddings of the
PUBLIC images for HeteroRR's sensitivity (Eq. 5).

:func:`embed_graph` replaces ``x`` of an image graph (``meta["image_paths"]``, from
:mod:`privgraph.ingest.datasets.image_graph`) by its embeddings, reading the owner's private cache
first. :func:`face_masked_embeddings` returns ``zhat`` of Eq. 5 for the nodes it is given (the
caller passes the declared-public subset only): each image with the RetinaFace boxes masked,
embedded by the same model. Face boxes are never returned or stored; only embeddings are cached.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from privgraph.ingest.embed.backbone import PREPROCESS_ID, ResNetEmbedder
from privgraph.ingest.embed.cache import EmbeddingCache, cached_embed, image_sha256
from privgraph.ingest.embed.faces import detect_faces, face_mask, mask_faces
from privgraph.graph import GraphData

__all__ = ["build_embedder", "embed_graph", "face_masked_embeddings", "face_variant", "resolve_weights"]


def resolve_weights(weights: str, root: str | os.PathLike[str] | None = None) -> str | Path:
    """``"random"`` and ``"torch_home"`` as they are; a relative file path under ``root`` (the
    data root), an absolute one as it is."""
    if weights in ("random", "torch_home"):
        return weights
    p = Path(weights).expanduser()
    return p if p.is_absolute() or root is None else Path(root) / p


def build_embedder(settings: Mapping[str, Any], root: str | os.PathLike[str] | None = None) -> ResNetEmbedder:
    """A :class:`ResNetEmbedder` from the pipeline's ``embed`` settings (``weights``, ``layer``,
    ``batch_size``, ``num_workers``, ``device``, ``amp``, ``init``).

    Raises:
        ConfigError: the weights file is missing (one line: where to put it)."""
    return ResNetEmbedder(
        resolve_weights(settings["weights"], root), layer=settings.get("layer", "avgpool"),
        device=settings.get("device", "auto"), batch_size=settings.get("batch_size", 32),
        num_workers=settings.get("num_workers", 0), amp=settings.get("amp"), seed=settings.get("init", 0),
    )


def _image_paths(graph: GraphData) -> list[Path]:
    paths = graph.meta.get("image_paths")
    if paths is None or len(paths) != graph.num_nodes:
        raise ValueError("embed: the graph has no image per node (meta['image_paths']); load an image dataset "
                         "('images' or 'photos')")
    return [Path(p) for p in paths]


def embed_graph(
    graph: GraphData, embedder: ResNetEmbedder, *, cache: EmbeddingCache | None = None
) -> tuple[GraphData, dict[str, Any], dict[str, int]]:
    """``graph`` with ``x`` the float32 embeddings ``[n, d]`` of its node images.

    Returns ``(graph, record, cache_stats)``: ``record`` says what produced the features (model,
    layer, dimension, weights id, whether the weights are a random initialisation, the
    preprocessing): configuration and public weights only, for the manifest; ``cache_stats``
    (hits / misses of the owner's cache) is operational and belongs to the run's log only.
    """
    paths = _image_paths(graph)
    if cache is None:
        x = np.asarray(embedder.embed_paths(paths), dtype=np.float32)
        stats = {"hits": 0, "misses": len(paths)}
    else:
        x, stats = cached_embed(paths, embedder, cache)
    record = {
        "model": "resnet50", "layer": embedder.layer, "dim": int(x.shape[1]),
        "weights": embedder.weights_id, "random_weights": embedder.weights_path is None,
        "preprocess": PREPROCESS_ID,
        "note": ("random initialisation (no ImageNet weights): a test configuration"
                 if embedder.weights_path is None else "a torchvision ResNet-50 state dict, by its SHA-256"),
    }
    meta = {**graph.meta, "feature_source": "embed"}
    return graph.replace(x=x, meta=meta), record, stats


def face_variant(threshold: float, margin: float, mask: str) -> str:
    """The cache variant naming a face-masked embedding."""
    return f"masked:retinaface:{threshold!r}:{margin!r}:{mask}"


def face_masked_embeddings(
    graph: GraphData, nodes: Sequence[int] | np.ndarray, embedder: ResNetEmbedder, *,
    threshold: float = 0.9, margin: float = 0.1, mask: str = "zero", cache: EmbeddingCache | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """``zhat`` of Eq. 5 for ``nodes``: each node's image with its RetinaFace boxes (score above
    ``threshold``, enlarged by ``margin``) masked (``"zero"``: black; ``"mean"``: the image's mean
    colour), embedded by ``embedder``. An image without a face is embedded as it is (its
    ``|z - zhat|`` is 0). Returns the float32 ``[len(nodes), d]`` array and
    ``{"hits", "misses", "faces"}`` (faces: the number of images in which a face was found among
    the misses; the boxes themselves are neither returned nor stored).

    The caller passes PUBLIC nodes only: the result is published through theta."""
    paths = _image_paths(graph)
    sel = [paths[int(i)] for i in np.asarray(nodes, dtype=np.int64)]
    variant = face_variant(threshold, margin, mask)
    keys = [EmbeddingCache.key(image_sha256(p), embedder.model_id, variant) for p in sel] if cache is not None else []
    found, missing = cache.get_many(keys) if cache is not None else ({}, list(range(len(sel))))
    with_faces = 0
    if missing:
        masked = []
        for i in missing:
            with Image.open(sel[i]) as im:
                rgb = np.asarray(im.convert("RGB"))
            boxes = detect_faces(rgb, threshold=threshold)
            with_faces += bool(boxes)
            masked.append(mask_faces(rgb, face_mask(rgb.shape[:2], boxes, margin=margin), value=mask) if boxes else rgb)
        fresh = np.asarray(embedder.embed_arrays(masked), dtype=np.float32)
        for row, i in enumerate(missing):
            found[i] = fresh[row]
            if cache is not None:
                cache.put(keys[i], fresh[row])
    out = np.stack([found[i] for i in range(len(sel))]) if sel else np.zeros((0, embedder.dim), np.float32)
    return out, {"hits": len(sel) - len(missing), "misses": len(missing), "faces": with_faces}

