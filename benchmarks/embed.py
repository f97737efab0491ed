"""What the image path costs, as JSON lines: ResNet-50 embedding images/s per batch size (the
reference: batch 1), RetinaFace detection images/s, the time to decode and preprocess alone (the
floor a fast model meets: "limited by decoding"), and the embedding cache's speed-up (a warm read
against the cold run that filled it).

The ratios are measured interleaved, so that machine load slows both sides alike: the images are
cut into ``--rounds`` slices (2 by default; fewer when a slice would hold fewer images than the
largest batch), and each slice is embedded at every batch size in turn (after one untimed batch
each), then embedded cold into a fresh cache and read back warm. ``seconds`` is the sum over the
slices (every image once, as one run), ``speedup_vs_batch1`` and the cache's ``speedup`` the
median of the per-slice ratios.

Images: the bundled photo graph (``photos``: 128 px PNG crops of scikit-image's photos), written
under a temporary cache directory. Weights: ``random`` (no ImageNet weights here; the cost of a
forward pass does not depend on the weights). Device: CUDA when present (float16 autocast), else
the CPU; ``device`` is on every line.

Run: ``python benchmarks/embed.py [--images 64] [--batches 1 8 32] [--workers 0] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import median_ratio  # type: ignore[import-not-found]


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32])
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=2, help="slices of the images, each timed at every batch size in turn")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PRIVGRAPH_CACHE_DIR"] = tmp
        from PIL import Image

        from privgraph.ingest.datasets import load_dataset
        from privgraph.ingest.embed.backbone import ResNetEmbedder, preprocess
        from privgraph.ingest.embed.cache import EmbeddingCache, cached_embed
        from privgraph.ingest.embed.faces import detect_faces

        g = load_dataset("photos", num_nodes=args.images, seed=0)
        paths = list(g.meta["image_paths"])

        t0 = time.perf_counter()
        for p in paths:
            with Image.open(p) as im:
                preprocess(im)
        decode_s = time.perf_counter() - t0
        _emit({"bench": "decode+preprocess", "images": len(paths), "seconds": round(decode_s, 3),
               "images_per_s": round(len(paths) / decode_s, 1)})

        # each slice at least as large as the largest batch, so that every batch size runs full batches
        rounds = max(1, min(args.rounds, len(paths) // max(args.batches)))
        slices = [list(c) for c in np.array_split(np.array(paths, dtype=object), rounds)]
        embedders = {b: ResNetEmbedder("random", batch_size=b, num_workers=args.workers) for b in args.batches}
        for b, emb in embedders.items():
            emb.embed_paths(paths[: min(b, len(paths))])  # warm-up (allocations, cuDNN autotune)
        times: dict[int, list[float]] = {b: [] for b in args.batches}
        for chunk in slices:
            for b, emb in embedders.items():
                t0 = time.perf_counter()
                emb.embed_paths(chunk)
                times[b].append(time.perf_counter() - t0)
        ref = times[args.batches[0]]
        for b, emb in embedders.items():
            s = sum(times[b])
            _emit({"bench": "resnet50", "device": str(emb.device), "amp": emb.amp, "batch_size": b,
                   "workers": args.workers, "images": len(paths), "seconds": round(s, 3),
                   "images_per_s": round(len(paths) / s, 2), "speedup_vs_batch1": round(median_ratio(ref, times[b]), 2),
                   "rounds": rounds, "decode_share": round(decode_s / s, 3)})
        del embedders

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
        cold, warm, hits = [], [], 0
        for i, chunk in enumerate(slices):  # per slice: cold into a fresh cache, then warm from it
            cache = EmbeddingCache(os.path.join(tmp, f"embeddings-{i}"))
            t0 = time.perf_counter()
            cached_embed(chunk, emb, cache)
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _, stats = cached_embed(chunk, emb, cache)
            warm.append(time.perf_counter() - t0)
            hits += stats["hits"]
        _emit({"bench": "embedding cache", "images": len(paths), "cold_s": round(sum(cold), 3),
               "warm_s": round(sum(warm), 4), "hits": hits, "speedup": round(median_ratio(cold, warm), 1),
               "rounds": rounds})


if __name__ == "__main__":
    main()
