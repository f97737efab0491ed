"""A graph written as a user's own files (docs/your-own-graph.md's shapes), so that tests run
the real loader path: ``edges.csv`` (``src,dst,private``), ``features.npy``, ``labels.csv``
(``id,label``; unlabelled nodes left out) and ``split.json`` (id lists)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.graph import GraphData


def write_generic(graph: GraphData, directory: Path) -> dict[str, Any]:
    """Write ``graph`` under ``directory``; returns the generic dataset's ``options`` (file names
    relative to ``directory``, which is the data root)."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [f"{u},{v},false\n" for u, v in graph.edges_public.T.tolist()]
    rows += [f"{u},{v},true\n" for u, v in graph.edges_private.T.tolist()]
    (directory / "edges.csv").write_text("src,dst,private\n" + "".join(rows))
    options: dict[str, Any] = {"edges": "edges.csv", "num_nodes": graph.num_nodes}
    if graph.x is not None:
        np.save(directory / "features.npy", np.ascontiguousarray(graph.x))
        options["features"] = "features.npy"
    if graph.y is not None:
        labelled = np.flatnonzero(graph.y >= 0)
        (directory / "labels.csv").write_text("id,label\n" + "".join(f"{i},{int(graph.y[i])}\n" for i in labelled))
        options["labels"] = "labels.csv"
    if graph.train_mask is not None:
        split = {part: np.flatnonzero(getattr(graph, f"{part}_mask")).tolist() for part in ("train", "val", "test")}
        (directory / "split.json").write_text(json.dumps(split))
        options["split"] = "split.json"
    return options
