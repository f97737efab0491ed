"""Image embeddings for image-attributed graphs: ResNet-50 features (:mod:`.backbone`), face
boxes and masks (:mod:`.faces`, RetinaFace), and the owner's private embedding cache
(:mod:`.cache`)."""

from __future__ import annotations

from privgraph.embed.backbone import LAYERS, PREPROCESS_ID, ResNetEmbedder, preprocess
from privgraph.embed.cache import EmbeddingCache, cached_embed
from privgraph.embed.faces import FaceBox, detect_faces, face_mask, mask_faces

__all__ = [
    "ResNetEmbedder",
    "preprocess",
    "LAYERS",
    "PREPROCESS_ID",
    "FaceBox",
    "detect_faces",
    "face_mask",
    "mask_faces",
    "EmbeddingCache",
    "cached_embed",
]
