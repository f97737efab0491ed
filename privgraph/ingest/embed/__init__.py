"""Image embeddings for image-attributed graphs: ResNet-50 features (:mod:`.backbone`), face
boxes and masks (:mod:`.faces`, RetinaFace), and the owner's private embedding cache
(:mod:`.cache`).

The names below are loaded on first use: importing the package (e.g. for its cache) does not
import torch or onnxruntime.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ResNetEmbedder": "backbone", "preprocess": "backbone", "LAYERS": "backbone", "PREPROCESS_ID": "backbone",
    "FaceBox": "faces", "detect_faces": "faces", "face_mask": "faces", "mask_faces": "faces",
    "EmbeddingCache": "cache", "cached_embed": "cache",
}

__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"privgraph.ingest.embed.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'privgraph.ingest.embed' has no attribute {name!r}")
