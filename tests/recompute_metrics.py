"""Recompute published versions' shareable metrics in a FRESH process, from the stored versions and
the public configuration alone (no raw data is read): what a reader of a version holding the run's
seed can do, and what the non-interference test compares with the published metrics.

    python -m tests.recompute_metrics CONFIG PIPELINE STORE VERSION [VERSION ...]

prints one JSON object ``{version: metrics}``. One intra-op torch thread, as the test runs its flows.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    import torch

    torch.set_num_threads(1)
    from privgraph.config_loader import load_config
    from privgraph.evaluation import evaluation_entropy, version_metrics
    from privgraph.storage import open_store

    config, pipeline, store, *versions = argv
    cfg = load_config(config).get(pipeline)
    st = open_store(store)
    out = {}
    for version in versions:
        graph, _ = st.load_graph(pipeline, version)
        out[version] = version_metrics(graph, cfg, st.read_manifest(pipeline, version), evaluation_entropy(cfg.seed))
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
