"""What the image path costs, as JSON lines: ResNet-50 embedding images/s per batch size (the
reference: batch 1, measured in the same run), RetinaFace detection images/s, the time to decode
and preprocess alone (the floor a fast model meets: "limited by decoding"), and the embedding
cache's speed-up (a warm read against the cold run that filled it).

Images: the bundled photo graph (``photos``: 128 px PNG crops of scikit-image's photos), written
under a temporary cache directory. Weights: ``random`` (no ImageNet weights here; the cost of a
forward pass does not depend on the weights). Device: CUDA when present (float16 autocast), else
the CPU; ``device`` is on every line.

Run: ``python benchmarks/embed.py [--images 64] [--batches 1 8 32] [--workers 0]``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32])
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PRIVGRAPH_CACHE_DIR"] = tmp
        from PIL import Image

        from privgraph.datasets import load_dataset
        from privgraph.embed.backbone import ResNetEmbedder, preprocess
        from privgraph.embed.cache import EmbeddingCache, cached_embed
        from privgraph.embed.faces import detect_faces

        g = load_dataset("photos", num_nodes=args.images, seed=0)
        paths = list(g.meta["image_paths"])

        t0 = time.perf_counter()
        for p in paths:
            with Image.open(p) as im:
                preprocess(im)
        decode_s = time.perf_counter() - t0
        _emit({"bench": "decode+preprocess", "images": len(paths), "seconds": round(decode_s, 3),
               "images_per_s": round(len(paths) / decode_s, 1)})

        ref = None
        for b in args.batches:
            emb = ResNetEmbedder("random", batch_size=b, num_workers=args.workers)
            emb.embed_paths(paths[: min(b, len(paths))])  # warm-up (allocations, cuDNN autotune)
            t0 = time.perf_counter()
            emb.embed_paths(paths)
            s = time.perf_counter() - t0
            ref = ref or s
            _emit({"bench": "resnet50", "device": str(emb.device), "amp": emb.amp, "batch_size": b,
                   "workers": args.workers, "images": len(paths), "seconds": round(s, 3),
                   "images_per_s": round(len(paths) / s, 2), "speedup_vs_batch1": round(ref / s, 2),
                   "decode_share": round(decode_s / s, 3)})

        rgb = []
        for p in paths:
            with Image.open(p) as im:
                rgb.append(np.asarray(im.convert("RGB")))
        t0 = time.perf_counter()
        found = sum(bool(detect_faces(x)) for x in rgb)
        s = time.perf_counter() - t0
        _emit({"bench": "retinaface", "images": len(rgb), "with_faces": found, "seconds": round(s, 3),
               "images_per_s": round(len(rgb) / s, 2)})

        emb = ResNetEmbedder("random", batch_size=max(args.batches), num_workers=args.workers)
        cache = EmbeddingCache()
        t0 = time.perf_counter()
        cached_embed(paths, emb, cache)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        _, stats = cached_embed(paths, emb, cache)
        warm = time.perf_counter() - t0
        _emit({"bench": "embedding cache", "images": len(paths), "cold_s": round(cold, 3), "warm_s": round(warm, 4),
               "hits": stats["hits"], "speedup": round(cold / warm, 1)})


if __name__ == "__main__":
    main()
