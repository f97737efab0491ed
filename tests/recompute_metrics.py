"""Recompute published versions' shareable metrics in a FRESH process, from the stored versions and
the public configuration alone (no raw data is read): what a reader of a version holding the run's
seed can do, and what the non-interference test compares with the published metrics.

    python -m tests.recompute_metrics CONFIG PIPELINE STORE VERSION [VERSION ...]

prints one JSON object ``{version: metrics}``;

    python -m tests.recompute_metrics --serve

answers one JSON line ``{"config", "pipeline", "store", "version"}`` on stdin with one JSON line
``{"metrics": ...}`` (or ``{"error": ...}``) on stdout, until stdin closes: one process, started
once, for a whole test module (it never sees the runs' raw data either). One intra-op torch
thread, as the test runs its flows.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any


def recompute(config: str, pipeline: str, store: str, version: str) -> dict[str, Any]:
    """The shareable metrics of ``pipeline``/``version`` in ``store``, from the stored version and
    ``config`` (public configuration and the run's seed) alone."""
    from privgraph.config_loader import load_config
    from privgraph.evaluation import evaluation_entropy, version_metrics
    from privgraph.storage import open_store

    cfg = load_config(config).get(pipeline)
    st = open_store(store)
    graph, _ = st.load_graph(pipeline, version)
    return version_metrics(graph, cfg, st.read_manifest(pipeline, version), evaluation_entropy(cfg.seed))


def main(argv: list[str]) -> int:
    import torch

    torch.set_num_threads(1)
    if argv == ["--serve"]:
        for line in sys.stdin:
            try:
                req = json.loads(line)
                out: dict[str, Any] = {"metrics": recompute(req["config"], req["pipeline"], req["store"], req["version"])}
            except Exception:  # noqa: BLE001 - reported to the test, which fails on it
                out = {"error": traceback.format_exc()}
            print(json.dumps(out, sort_keys=True), flush=True)
        return 0
    config, pipeline, store, *versions = argv
    print(json.dumps({v: recompute(config, pipeline, store, v) for v in versions}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
