"""What training on privatized features costs, as JSON lines: epochs/s and test accuracy of the
GCN on the full released feature matrix against the same model on its first k principal axes
(``evaluate.feature_dim``), measured interleaved: each run (seed) trains the full matrix, then
each k in turn, so that machine load slows the reference and the projections alike.

The release is FeatureRR (eps 1, 2 bins, uniform theta: the ``facebook`` pipeline's features):
dense, so the first layer costs O(n d hidden) per pass. Projection onto k principal axes of the
release (post-processing) makes it O(n k hidden), plus a one-off randomized SVD (``proj_s``).
Each line: dataset, feature_dim (``null``: the full matrix, the reference), seconds per epoch,
epochs/s, the speed-up against the reference (the median over the runs of the reference's seconds
per epoch over this k's in the same run), the projection's seconds and the test accuracy (mean
over ``--runs`` seeds, against the raw labels). CPU, or CUDA when present (``device``).

Run: ``PRIVGRAPH_DATA_ROOT=../shared/datasets python benchmarks/training.py [--datasets facebook cora] [--dims 512 256 128] [--runs 2] [--epochs 100]``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import median_ratio  # type: ignore[import-not-found]

from privgraph.ingest.datasets import data_root, load_dataset
from privgraph.mechanisms.features.feature_rr import FeatureRR
from privgraph.seeding import noise_generator
from privgraph.evaluate.training import fit_node_classifier


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def _sync(dev) -> None:
    """Wait for queued CUDA kernels, so a wall-clock interval covers the work (no-op on the CPU)."""
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["facebook", "cora"])
    ap.add_argument("--dims", nargs="+", type=int, default=[512, 256, 128])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--epsilon", type=float, default=1.0)
    args = ap.parse_args()
    for name in args.datasets:
        g = load_dataset(name, root=data_root(), rho=0.2)
        release = FeatureRR(epsilon=args.epsilon, bins=2).privatize(g, noise_generator(0))
        # warm-up, not timed: the first fit pays for the CUDA context and kernel loading
        fit_node_classifier(release, seed=0, epochs=2, patience=None, eval_y=g.y)
        dims = [None, *args.dims]
        spe: dict[int | None, list[float]] = {dim: [] for dim in dims}
        accs: dict[int | None, list[float]] = {dim: [] for dim in dims}
        proj: dict[int | None, list[float]] = {dim: [] for dim in dims}
        device = ""
        for run in range(args.runs):  # each run: the reference, then every k, in turn
            for dim in dims:
                t0 = time.perf_counter()
                m = fit_node_classifier(release, seed=run, epochs=args.epochs, patience=None, eval_y=g.y,
                                        feature_dim=dim)
                t = time.perf_counter() - t0
                if dim is not None:  # the projection's own cost, timed apart ON THE TRAINING DEVICE
                    import torch

                    from privgraph.evaluate.model_inputs import principal_basis

                    dev = torch.device(m.result["device"])
                    x = torch.from_numpy(release.x - release.x.mean(axis=0, keepdims=True)).to(dev)
                    principal_basis(x, dim, torch.Generator(device=dev).manual_seed(run))  # warm-up
                    _sync(dev)
                    t1 = time.perf_counter()
                    principal_basis(x, dim, torch.Generator(device=dev).manual_seed(run))
                    _sync(dev)
                    proj[dim].append(time.perf_counter() - t1)
                spe[dim].append((t - (proj[dim][-1] if proj[dim] else 0.0)) / m.result["epochs_run"])
                accs[dim].append(m.result["test_acc"])
                device = m.result["device"]
        for dim in dims:
            s = float(np.median(spe[dim]))
            _emit({"bench": "training/feature_dim", "dataset": name, "nodes": g.num_nodes,
                   "features": int(g.num_features), "release": f"feature_rr eps {args.epsilon}",
                   "feature_dim": dim, "epochs": args.epochs, "runs": args.runs,
                   "seconds_per_epoch": round(s, 4), "epochs_per_s": round(1.0 / s, 2),
                   "speedup_vs_full": round(median_ratio(spe[None], spe[dim]), 2),
                   "proj_s": round(float(np.median(proj[dim])), 2) if proj[dim] else 0.0,
                   "test_acc_mean": round(float(np.mean(accs[dim])), 4), "test_acc": [round(a, 4) for a in accs[dim]],
                   "device": device})


if __name__ == "__main__":
    main()
