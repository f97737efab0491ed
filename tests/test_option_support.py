"""THE table of dataset options x paths (privgraph/ingest/option_support.py), walked cell by cell:
every option is honoured on a path (a real privatize run on that path stores a version that
shows it: its public edges and node split are the in-memory loader's for the same options and
seeds, and each option moves them) or refused there when the configuration loads (one line, exit
code 2, before any data is read). A dataset key that the table does not list fails here."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from privgraph.config.loader import parse_config
from privgraph.config.pipeline import DatasetConfig
from privgraph.errors import ConfigError
from privgraph.ingest.datasets import CUT_EDGES_OPTION, SPLIT_FILE_OPTION, SPLIT_OPTIONS, load_dataset
from privgraph.ingest.option_support import FILES, MEMORY, OPTION_SUPPORT, PATHS, SCALE
from privgraph.ingest.partitioned_graph import load_partitioned_graph
from privgraph.ingest.partitioned_writer import write_partitioned_graph

N = 240
#: the options of run "random" (every option on a random split) and run "file" (a split file)
RANDOM = {"rho": 0.3, "split_seed": 5, "node_split_seed": 2,
          "options": {"train": 0.4, "val": 0.3, "drop_cut_edges": True}}
FILE = {"rho": 0.25, "options": {"split": "split.json", "drop_cut_edges": True}}
#: the layout and extra sections that put a pipeline on each path
ON_PATH: dict[str, dict[str, Any]] = {
    MEMORY: {"partitions": {"num_parts": 2, "method": "hash"}},
    FILES: {"partitions": {"num_parts": 2, "method": "hash", "layout": "files"}},
    SCALE: {"partitions": {"num_parts": 2, "method": "hash", "layout": "files"}},
}


def _pipeline(root: Path, tmp: Path, dataset: dict[str, Any], path: str) -> dict[str, Any]:
    p: dict[str, Any] = {
        "dataset": {"root": str(root), **dataset},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"edges": 2.0},
        "executor": "serial",
        "seed": 3,
        "storage": str(tmp / "store"),
        "private_records": str(tmp / "private"),
        **ON_PATH[path],
    }
    if path == FILES and dataset["name"] == "partitioned":  # whole-graph scores keep it off the path at scale
        p["features"] = {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0}
        p["budget"]["features"] = 1.0
        p["scores"] = {"gamma": 1.0,
                       "public_nodes": {"rule": "random", "size": 40}}
    return p


def _with(dataset: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(dataset))
    if key.startswith("options."):
        out.setdefault("options", {})[key.removeprefix("options.")] = value
    else:
        out[key] = value
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Generic files without a private column (rho marks the edges), labels with unlabelled nodes,
    a split file, and the same graph ingested as a partitioned graph."""
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    u, v = rng.integers(0, N, 3000), rng.integers(0, N, 3000)
    keep = u != v
    _, first = np.unique(np.minimum(u[keep], v[keep]) * N + np.maximum(u[keep], v[keep]), return_index=True)
    e = np.stack([u[keep], v[keep]])[:, np.sort(first)[:1100]]
    (root / "edges.csv").write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in e.T.tolist()))
    np.save(root / "x.npy", rng.random((N, 4)).astype(np.float32))
    y = rng.integers(0, 3, N)
    y[rng.random(N) < 0.1] = -1
    np.save(root / "y.npy", y)
    lab = np.flatnonzero(y >= 0)
    (root / "split.json").write_text(json.dumps({"train": lab[::3].tolist(), "val": lab[1::3].tolist(),
                                                  "test": lab[2::3].tolist()}))
    write_partitioned_graph(root / "edges.csv", features=root / "x.npy", labels=root / "y.npy",
                            split=root / "split.json", destination=root / "graph", range_size=100)
    return root


GENERIC = {"edges": "edges.csv", "features": "x.npy", "labels": "y.npy"}


# -- the table covers every option ----------------------------------------------------------------
def test_every_dataset_key_whose_effect_is_the_loaders_is_in_the_table():
    """A new ``dataset`` key or split option must get a row: the table is where a path says it
    honours it or refuses it."""
    keys = {o.key for o in OPTION_SUPPORT}
    fields = set(DatasetConfig.model_fields) - {"name", "options"}
    common = {f"options.{k}" for k in (*SPLIT_OPTIONS, CUT_EDGES_OPTION, SPLIT_FILE_OPTION)}
    partitioned = {f"options.{k}" for k in inspect.signature(load_partitioned_graph).parameters}
    assert fields | common | partitioned <= keys, (fields | common | partitioned) - keys
    assert all(o.paths <= set(PATHS) and o.paths for o in OPTION_SUPPORT)
    assert all(o.elsewhere for o in OPTION_SUPPORT if o.paths != set(PATHS))


# -- refused cells ----------------------------------------------------------------------------------
REFUSED = [(o.key, p) for o in OPTION_SUPPORT for p in PATHS if p not in o.paths]
VALUES = {"rho": 0.2, "split_seed": 0, "node_split_seed": 1, "options.train": 0.5, "options.val": 0.25,
          "options.split": "split.json", "options.drop_cut_edges": False}


@pytest.mark.parametrize("key, path", REFUSED, ids=[f"{k}@{p}" for k, p in REFUSED])
def test_an_option_a_path_does_not_honour_is_refused_at_load(tmp_path, root, key, path):
    dataset = _with({"name": "partitioned", "options": {"path": "graph"}}, key, VALUES[key])
    doc = {"pipelines": {"p": _pipeline(root, tmp_path, dataset, path)}}
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    msg = str(info.value)
    assert msg.startswith(f"pipelines.p: dataset.{key}: not applied on the path at scale") and "\n" not in msg
    assert "privgraph ingest" in msg, msg
    # the same value is accepted on a path that honours it (the refusal is the path's, not the value's)
    ok = next(p for p in PATHS if p != path and p in next(o for o in OPTION_SUPPORT if o.key == key).paths)
    parse_config({"pipelines": {"p": _pipeline(root, tmp_path, dataset, ok)}})


# -- honoured cells: real runs ------------------------------------------------------------------------
@pytest.fixture
def harness(prefect_server_env: dict[str, str]):
    """The flows in this process report to the session's Prefect server (one per xdist worker,
    shared with the CLI tests): no server of this module's own to start."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: prefect_server_env["PREFECT_API_URL"]}):
        yield


def _stored(tmp: Path, root: Path, dataset: dict[str, Any], path: str):
    """Run pipeline ``p`` on ``path`` without evaluation; the stored version's graph."""
    from flows.privatize import privatize_flow
    from privgraph.storage import open_store

    cfg = tmp / "pipelines.yaml"
    cfg.write_text(yaml.safe_dump({"pipelines": {"p": _pipeline(root, tmp, dataset, path)}}))
    res = privatize_flow(pipeline="p", config_path=str(cfg), evaluate=False)
    graph, _ = open_store(tmp / "store").load_graph("p", res["version"])
    return graph


def _sorted(e: np.ndarray) -> np.ndarray:
    return e[:, np.lexsort((e[1], e[0]))]


def _shown(graph) -> dict[str, np.ndarray]:
    """What a version shows of the dataset options: its public edges and its node split."""
    return {"edges_public": _sorted(graph.edges_public),
            **{m: getattr(graph, m) for m in ("train_mask", "val_mask", "test_mask")}}


def _expected(root: Path, dataset: dict[str, Any]) -> dict[str, np.ndarray]:
    kw = {k: v for k, v in dataset.items() if k not in ("name", "options")}
    return _shown(load_dataset(dataset["name"], root=root, **kw, **dataset.get("options", {})))


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in a)


CELLS = [("random", MEMORY), ("random", FILES), ("file", MEMORY), ("file", FILES),
         ("partitioned", MEMORY), ("partitioned", FILES), ("partitioned", SCALE)]


@pytest.mark.flow
@pytest.mark.parametrize("run, path", CELLS, ids=[f"{r}@{p}" for r, p in CELLS])
def test_every_honoured_cell_shows_in_the_stored_version(tmp_path, root, harness, run, path):
    if run == "partitioned":  # options.path and root, on every path: the ingested graph, as it is
        dataset = {"name": "partitioned", "options": {"path": "graph"}}
        expected = _shown(load_partitioned_graph(root / "graph"))
    else:
        extra = RANDOM if run == "random" else FILE
        dataset = {"name": "generic", **{k: v for k, v in extra.items() if k != "options"},
                   "options": {**GENERIC, **extra["options"]}}
        expected = _expected(root, dataset)
        honoured = {o.key for o in OPTION_SUPPORT if path in o.paths}
        given = set(dataset) - {"name", "options", "root"} | {f"options.{k}" for k in extra["options"]}
        assert given <= honoured
        for key in given:  # each option moves what the version shows: the check below is not vacuous
            if key.startswith("options."):
                gone = {key.removeprefix("options.")} | ({CUT_EDGES_OPTION} if key == "options.split" else set())
                rest = {k: v for k, v in dataset["options"].items() if k not in gone}
                without = {**dataset, "options": rest}
            else:
                without = {k: v for k, v in dataset.items() if k != key}
                if key == "split_seed":
                    without = {**without, "split_seed": 1}
                if key == "node_split_seed":
                    without = {**without, "node_split_seed": 0}
            assert not _same(_expected(root, without), expected), key
    shown = _shown(_stored(tmp_path, root, dataset, path))
    for k, want in expected.items():
        assert np.array_equal(shown[k], want), k
