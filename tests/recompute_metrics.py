"""Recompute published versions' shareable metrics in a FRESH process, from the stored versions and
the public configuration alone (no raw data is read): what a reader of a version holding the run's
seed can do, and what the non-interference test compares with the published metrics.

    python -m tests.recompute_metrics CONFIG PIPELINE STORE VERSION [VERSION ...]

prints one JSON object ``{version: metrics}``;

    python -m tests.recompute_metrics --serve [--plant NAME ...]

answers one JSON line ``{"config", "pipeline", "store", "version"[, "raw"]}`` on stdin with one JSON
line ``{"metrics": ...}`` (or ``{"error": ...}``) on stdout, until stdin closes: one process,
started once, for a whole test module. With ``"raw"`` (an ``.npz`` of a raw graph,
:func:`write_raw_graph`) the version is evaluated as its owner's evaluation does, against that raw
graph (:func:`privgraph.evaluate.metrics.version_metrics` with ``clean``), and only the shareable metrics
are answered: the non-interference test requires them byte-identical whatever the raw graph.
``--plant NAME`` installs a leak of :mod:`tests.planted_leaks` first (the meta-test's). One
intra-op torch thread, as the test runs its flows.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.graph import SPLIT_MASKS, GraphData


def write_raw_graph(graph: GraphData, path: Path) -> Path:
    """``graph``'s arrays in one ``.npz`` (what a raw-graph evaluation reads)."""
    arrays = {k: getattr(graph, k) for k in ("x", "y", "edges_public", "edges_private", *SPLIT_MASKS)
              if getattr(graph, k) is not None}
    np.savez(path, num_nodes=np.int64(graph.num_nodes), **arrays)
    return path


def _read_raw_graph(path: str) -> GraphData:
    with np.load(path, allow_pickle=False) as z:
        fields = {k: z[k] for k in z.files if k != "num_nodes"}
        return GraphData(num_nodes=int(z["num_nodes"]), **fields)


def recompute(config: str, pipeline: str, store: str, version: str, raw: str | None = None) -> dict[str, Any]:
    """The shareable metrics of ``pipeline``/``version`` in ``store``, from the stored version and
    ``config`` (public configuration and the run's seed) alone; with ``raw`` (a raw graph's
    ``.npz``), evaluated against it as the owner's evaluation is, its shareable part only."""
    from privgraph.config.loader import load_config
    from privgraph.evaluate.metrics import evaluation_entropy, version_metrics
    from privgraph.storage import open_store
    from privgraph.evaluate.selection import OWNER_ONLY

    cfg = load_config(config).get(pipeline)
    if cfg.runs_at_scale:  # evaluated at scale, from the version's parts: the same function, serially
        from privgraph.config.disclosure import disclosure_of
        from privgraph.evaluate.scale_metrics import version_metrics_at_scale
        from privgraph.parts.executor import SerialExecutor

        return version_metrics_at_scale(store, pipeline, version, cfg.evaluate, evaluation_entropy(cfg.seed),
                                        disclosure_of(load_config(config), pipeline), SerialExecutor())
    st = open_store(store)
    graph, _ = st.load_graph(pipeline, version)
    clean = None if raw is None else _read_raw_graph(raw)
    metrics = version_metrics(graph, cfg, st.read_manifest(pipeline, version), evaluation_entropy(cfg.seed), clean=clean)
    metrics.pop(OWNER_ONLY, None)
    return metrics


def main(argv: list[str]) -> int:
    import torch

    torch.set_num_threads(1)
    if argv[:1] == ["--serve"]:
        from tests.planted_leaks import install

        for i, flag in enumerate(argv[1:-1], start=1):
            if flag == "--plant":
                install(argv[i + 1])
        for line in sys.stdin:
            try:
                req = json.loads(line)
                out: dict[str, Any] = {"metrics": recompute(req["config"], req["pipeline"], req["store"], req["version"],
                                                            req.get("raw"))}
            except Exception:  # noqa: BLE001 - reported to the test, which fails on it
                out = {"error": traceback.format_exc()}
            print(json.dumps(out, sort_keys=True), flush=True)
        return 0
    config, pipeline, store, *versions = argv
    print(json.dumps({v: recompute(config, pipeline, store, v) for v in versions}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
