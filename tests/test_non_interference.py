"""Non-interference: a published version reveals nothing beyond its ledger (issues 9 and 24).

For every pipeline shipped in pipelines.yaml (at test scale), one more that the shipped ones do not
cover (a user's generic files with unlabelled nodes and ``rule: random``, privatized through the
partitioned files layout, ``partitions.layout: files``), the same graph ingested as a partitioned
graph (the flow's path at scale, evaluated from the version's parts), and each scope (edges,
features, labels), ``privgraph run --ci`` runs twice with the same seed on NEIGHBOURING inputs: one
private edge added between two nodes that already have private edges (so V_pri, declared public,
does not move), one private node's feature vector changed (in an image graph, its image file), one
private label changed. Then EVERY published channel is read and compared:

* the stored objects and the manifest (``artifacts show --json`` must print exactly the stored
  manifest, ``artifacts list --json`` exactly its listing);
* the shareable Prefect artifacts (ledger, metrics);
* Prefect's logs of every flow and task run of the run, and their names, parameters, tags and
  final states, read back through the API;
* ``run --ci``'s JSON on stdout and the markdown it appends to ``$GITHUB_STEP_SUMMARY``;
* refusal messages (a refused run has no version: the exit code, the JSON, the step summary, the
  logs and the run states are all that it publishes).

Timestamps, ids, durations, the version id (a hash of the stored objects) and each run's own
temporary directory are normalised. What may then differ between the two runs is only:

* the stored object that the mechanism covering the change outputs (``edges.parquet`` or GAP's
  ``aggregates.npy`` for an edge, ``features.npy`` for a feature row, ``labels.npy`` for a label;
  in a partitioned version, the ``part-<i>.`` objects of that name) and its checksum in the
  manifest;
* the manifest sections that are functions of the stored objects, each RECOMPUTED here from the
  stored objects alone and required equal to what was published: ``graph`` (their counts) and
  ``metrics`` (recomputed in a fresh process, started once for the module, from the stored version
  and the public configuration, no raw data: :mod:`tests.recompute_metrics`); every channel that
  shows the metrics must show exactly the manifest's.

Anything else that moves is a leak, whatever it is called: a fingerprint, a count, theta, a log
line, a refusal message. A scope in which a pipeline keeps nothing private (e.g. the labels of
``cora``, released as they are) has no neighbouring input; the test then checks that the
published manifest declares that part public, with the YAML path that declares it.

The real loader reads files on disk for the generic pipeline, for ``images-heterorr`` (the bundled
photo graph written as an image-graph directory; its neighbours are edited files) and for
``sbm-gap-node`` (its graph written as a user's generic files); the neighbour of a file-backed run
is a second directory of edited files. The other shipped pipelines get their (test-scale) graph
through the ingest task (``tasks.ingest.load_dataset`` swapped for it); the rest is the real CLI and
flow. Pipelines with ``evaluate.attacks`` run them: their scores must reach the owner's private
record and move nothing above. GAP at node level is also run with one neighbour crossing the
public degree bound (:func:`test_a_refusal_at_the_degree_bound_publishes_one_bit`), and
:func:`test_every_planted_leak_is_caught` proves the checks can fail.

Test scale: the evaluation trains 1 run of 3 epochs (LPGNN's K search on the grid [0, 2], ensembles
of 2), the scores' importance surrogate 100 lbfgs iterations; Facebook is the subgraph induced by
its first 1,200 nodes (after the pipeline's own rho split), ``cora-heterorr``'s and
``cora-private``'s Cora the one induced by the 640 training and validation nodes and 300 test
nodes; the SBMs have 1,000 nodes, the photo graph 60; the
flows run serially (the output does not depend on the executor: tests/test_privatize.py) with one
torch thread (bit-identical training in the fresh process that recomputes the metrics).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from privgraph.config.disclosure import disclosure_of
from privgraph.graph import GraphData
from tests.prefect_server import api_rows, final_task_runs

pytestmark = [pytest.mark.flow, pytest.mark.dataset]

REPO = Path(__file__).resolve().parents[1]
SHIPPED: dict[str, dict[str, Any]] = yaml.safe_load((REPO / "pipelines.yaml").read_text())["pipelines"]
SCOPES = ("edges", "features", "labels")
SEED = 20261123
#: the stored objects each scope's mechanism releases (gap releases aggregates.npy for the edges)
OBJECT = {"edges": ("edges.parquet", "aggregates.npy"), "features": ("features.npy",), "labels": ("labels.npy",)}
#: manifest sections that are functions of the stored objects: recomputed, then allowed to move
DERIVED = ("graph", "metrics")
FACEBOOK_NODES = 1200
#: Cora pipelines run on the subgraph induced by the training and validation nodes and 300 test nodes
CORA_INDUCED = ("cora-heterorr", "cora-private")
SBM_NODES = 1000
PHOTOS_NODES = 60
GENERIC_NODES = 400
#: pipelines whose input is read from files on disk by the real loader (the others are handed over)
FROM_FILES = ("generic-unlabelled", "images-heterorr", "partitioned-scale", "sbm-gap-node")

#: a user's own graph: unlabelled nodes, scores from a random public subset, every scope private,
#: privatized through the partitioned files layout (its staging area is in the owner's private records)
GENERIC_UNLABELLED: dict[str, Any] = {
    "description": "a user's generic files: unlabelled nodes, theta from a random public node subset",
    "dataset": {"name": "generic", "options": {}},
    "scores": {"gamma": 1.0, "public_nodes": {"rule": "random", "size": 40}},
    "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
    "edges": {"mechanism": "dprr", "epsilon": 1.0},
    "labels": {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 3, "mask": ["train_mask"]},
    "budget": {"features": 1.0, "edges": 2.0, "labels": 1.0},
    "partitions": {"num_parts": 2, "layout": "files"},
    "evaluate": {"attacks": ["linkteller", "membership"]},
}
#: the same graph ingested as a partitioned graph (``privgraph ingest --rho 0.3 --split-seed 3``: the
#: generic graph's own marking, drawn by the ingest from an edge list without a private column): the
#: path on which no process holds the graph (flows/privatize_at_scale.py), evaluated at scale from the
#: version's parts
PARTITIONED_SCALE: dict[str, Any] = {
    "description": "a partitioned graph: the privatize flow's path at scale, with its evaluation",
    "dataset": {"name": "partitioned", "options": {}},
    **{k: GENERIC_UNLABELLED[k] for k in ("features", "edges", "labels", "budget")},
    "partitions": {"num_parts": 2, "method": "metis", "layout": "files"},
    "evaluate": {"clusters_per_batch": 1},
}
PIPELINES: dict[str, dict[str, Any]] = {**SHIPPED, "generic-unlabelled": GENERIC_UNLABELLED,
                                        "partitioned-scale": PARTITIONED_SCALE}


# -- inputs -----------------------------------------------------------------------------------------
def _induced(graph: GraphData, nodes: np.ndarray) -> GraphData:
    """The subgraph induced by ``nodes`` (sorted ids, renumbered ``0 ..``; public/private marking
    and splits kept)."""
    new_id = np.full(graph.num_nodes, -1, dtype=np.int64)
    new_id[nodes] = np.arange(nodes.size)

    def keep(e: np.ndarray) -> np.ndarray:
        return new_id[e[:, (new_id[e[0]] >= 0) & (new_id[e[1]] >= 0)]]

    masks = {m: getattr(graph, m)[nodes] for m in ("train_mask", "val_mask", "test_mask") if getattr(graph, m) is not None}
    return GraphData(num_nodes=int(nodes.size), x=graph.x[nodes], y=graph.y[nodes], edges_public=keep(graph.edges_public),
                     edges_private=keep(graph.edges_private), meta=dict(graph.meta), **masks)


def _generic_graph() -> GraphData:
    """400 nodes, every fourth unlabelled, features in [0, 1], 30% of the edges private."""
    from privgraph.ingest.datasets.split import random_node_split, split_public_private
    from privgraph.ingest.datasets.synthetic import sbm_graph

    g = sbm_graph(GENERIC_NODES, num_classes=3, avg_degree=6.0, num_features=8, seed=7)
    y = g.y.copy()
    y[::4] = -1
    x = (g.x - g.x.min(0)) / (g.x.max(0) - g.x.min(0))
    masks = random_node_split(GENERIC_NODES, train=0.5, val=0.25, seed=1, labelled=y >= 0)
    g = g.replace(x=x.astype(np.float32), y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2])
    return split_public_private(g, 0.3, seed=3)


def _input_graph(name: str, data_root: Path) -> GraphData:
    """The pipeline's input at test scale, as its ingest loads it."""
    from privgraph.ingest.datasets import load_dataset

    if name in ("generic-unlabelled", "partitioned-scale"):
        return _generic_graph()
    ds = copy.deepcopy(SHIPPED[name]["dataset"])
    options = dict(ds.get("options") or {})
    if ds["name"] == "sbm":
        options["num_nodes"] = SBM_NODES
    if ds["name"] == "photos":
        options["num_nodes"] = PHOTOS_NODES
    g = load_dataset(ds["name"], root=data_root, rho=ds.get("rho"), split_seed=ds.get("split_seed", 0), **options)
    if ds["name"] == "facebook":
        g = _induced(g, np.arange(FACEBOOK_NODES))
    if name in CORA_INDUCED:  # EdgeRR's chain grows with V_pri: every train and val node, 300 test nodes
        split = g.train_mask | g.val_mask
        g = _induced(g, np.sort(np.concatenate([np.flatnonzero(split), np.flatnonzero(g.test_mask)[:300]])))
    return g


def _write_input(name: str, graph: GraphData, data: Path) -> dict[str, Any]:
    """Write a file-backed pipeline's input under ``data``; returns its test-scale ``dataset`` section."""
    from privgraph.ingest.datasets.photo_graph import write_photo_graph
    from tests.graph_files import write_generic

    if name == "images-heterorr":
        opts = SHIPPED[name]["dataset"]["options"]
        write_photo_graph(data / "photos", num_nodes=PHOTOS_NODES, seed=opts["seed"],
                          private_fraction=opts["private_fraction"])
        return {"name": "images", "root": str(data), "options": {"path": "photos"}}
    options = write_generic(graph, data)
    if name == "partitioned-scale":
        _ingest_rho_marked(graph, data, options)
        return {"name": "partitioned", "root": str(data), "options": {"path": "graph"}}
    return {"name": "generic", "root": str(data), "options": options}


#: the ingest options of ``partitioned-scale``: :func:`_generic_graph`'s own marking (rho 0.3, seed 3)
PARTITIONED_RHO = {"rho": 0.3, "split_seed": 3}


def _ingest(data: Path, options: dict[str, Any], dest: str, *, flags: bool, **ingest: Any) -> Path:
    """``privgraph ingest`` of the generic files under ``data`` into ``data/dest`` (``flags``: with
    their private column; else the edge list without it)."""
    from privgraph.ingest.partitioned_options import IngestOptions
    from privgraph.ingest.partitioned_writer import write_partitioned_graph

    edges = data / options["edges"]
    if not flags:
        edges = data / "edges-unmarked.csv"
        edges.write_text("".join(line.rsplit(",", 1)[0] + "\n" for line in (data / options["edges"]).read_text().splitlines()))
    write_partitioned_graph(edges, features=data / options["features"], labels=data / options["labels"],
                            split=data / options["split"], num_nodes=options["num_nodes"], destination=data / dest,
                            range_size=150, options=IngestOptions(**ingest))
    return data / dest


def _ingest_rho_marked(graph: GraphData, data: Path, options: dict[str, Any]) -> bool:
    """``data/graph``: ``graph`` as ``privgraph ingest --rho 0.3 --split-seed 3`` writes it. The base
    input is written that way, by the ingest's own draw (equal to the graph's marking: the same
    rule); a neighbour (one private edge more, or one private row edited: a marking no draw gives)
    is its ranges with the base's ``graph.json``, which says how the edges were marked: the
    directory the ingest would write, edited."""
    from privgraph.ingest.partitioned_graph import GRAPH_FILE, load_partitioned_graph

    unmarked = _ingest(data, options, "unmarked-graph", flags=False, **PARTITIONED_RHO)
    marked = load_partitioned_graph(unmarked)
    same = all(np.array_equal(getattr(marked, k), getattr(graph, k)) for k in ("edges_public", "edges_private", "x", "y"))
    if same:
        unmarked.rename(data / "graph")
        return True
    _ingest(data, options, "graph", flags=True)
    (data / "graph" / GRAPH_FILE).write_bytes((unmarked / GRAPH_FILE).read_bytes())
    shutil.rmtree(unmarked)
    return False


def _test_scale_config(name: str, tmp: Path, dataset: dict[str, Any] | None = None, **changes: Any) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    p = copy.deepcopy(PIPELINES[name])
    p["evaluate"] = {**(p.get("evaluate") or {}), "runs": 1, "epochs": 3}
    if "kprop_search" in p["evaluate"]:  # the search and the ensemble still run, on a 2 x 2 grid, 2 members
        p["evaluate"].update(kprop_search=[0, 2], ensemble=min(2, p["evaluate"].get("ensemble", 1)))
    if "scores" in p:  # the importance surrogate's lbfgs: 100 iterations (Cora's 1,000 took 27 s)
        p["scores"] = {**p["scores"], "importance": {**(p["scores"].get("importance") or {}), "max_iter": 100}}
    p.update(executor="serial", seed=SEED, storage=str(tmp / "store"), private_records=str(tmp / "private"))
    if dataset is not None:
        p["dataset"] = dataset
        p["dataset"].pop("rho", None)
    p.pop("schedule", None)
    p.update(changes)
    path = tmp / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {name: p}}))
    return path


# -- neighbouring inputs ----------------------------------------------------------------------------
def _private_edge_to_add(graph: GraphData) -> tuple[int, int] | None:
    """Two nodes of V_pri that are not adjacent: adding their edge keeps V_pri as it is."""
    vpri = graph.private_nodes()
    if vpri.size < 3:
        return None
    rng = np.random.default_rng(0)
    n = np.int64(graph.num_nodes)
    existing = set((graph.edges("all")[0] * n + graph.edges("all")[1]).tolist())
    while True:
        u, v = np.sort(rng.choice(vpri, 2, replace=False))
        if int(u * n + v) not in existing:
            return int(u), int(v)


def _neighbour(graph: GraphData, disclosure: Any, scope: str) -> GraphData | None:
    """``graph`` with one private item of ``scope`` changed, or None when the scope has none."""
    if scope not in disclosure.private_scopes():
        return None
    if scope == "edges":
        pair = _private_edge_to_add(graph)
        if pair is None:
            return None
        return graph.replace(edges_private=np.concatenate([graph.edges_private, [[pair[0]], [pair[1]]]], axis=1))
    if scope == "features":
        rows = np.flatnonzero(~disclosure.public_feature_rows(graph))
        i = int(rows[0])
        other = int(next(j for j in rows[1:] if not np.array_equal(graph.x[j], graph.x[i])))
        x = graph.x.copy()
        x[i] = graph.x[other]  # another node's row: within the public bounds
        return graph.replace(x=x)
    rows = np.flatnonzero(disclosure.private_label_rows(graph) & graph.labelled())
    if rows.size == 0:
        return None
    i = int(rows[0])
    y = graph.y.copy()
    y[i] = (y[i] + 1) % int(graph.y.max() + 1)
    return graph.replace(y=y)


def _image_neighbour(base: Path, dest: Path, graph: GraphData, disclosure: Any, scope: str) -> bool:
    """The photo graph directory ``base`` copied to ``dest`` with one private item edited on disk:
    a private edge row added to edges.csv, or a private node's image file replaced by another's."""
    if scope not in disclosure.private_scopes() or scope == "labels":
        return False
    shutil.copytree(base, dest)
    if scope == "edges":
        pair = _private_edge_to_add(graph)
        if pair is None:
            return False
        with open(dest / "edges.csv", "a", encoding="utf-8") as fh:
            fh.write(f"{pair[0]},{pair[1]},true\n")
        return True
    nodes = pd.read_csv(dest / "nodes.csv").set_index("id")
    rows = np.flatnonzero(~disclosure.public_feature_rows(graph))
    target = dest / nodes.loc[int(rows[0]), "image"]
    donor = next(dest / nodes.loc[int(j), "image"] for j in rows[1:]
                 if (dest / nodes.loc[int(j), "image"]).read_bytes() != target.read_bytes())
    target.write_bytes(donor.read_bytes())
    return True


# -- one run through the CLI, everything it publishes ---------------------------------------------
def _cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from privgraph.cli import app

    return CliRunner().invoke(app, list(args))


def _run(cfg: Path, name: str, monkeypatch: pytest.MonkeyPatch, graph: GraphData | None = None,
         *options: str) -> dict[str, Any]:
    """``privgraph run NAME --ci [OPTIONS]`` in this process (the module's Prefect API), and
    everything it published; ``graph``: handed to the ingest task (None: the real loader reads the
    files)."""
    import tasks.ingest
    from prefect.logging.handlers import APILogWorker

    from privgraph.storage import open_store
    from privgraph.storage.private_record import private_refusals_dir, read_private_record

    tmp = cfg.parent
    if graph is not None:
        monkeypatch.setattr(tasks.ingest, "load_dataset", lambda *a, **k: graph)
    flows_before = {f["id"] for f in api_rows("/flow_runs/filter", {})}
    artifacts_before = {a["id"] for a in api_rows("/artifacts/filter", {})}
    summary = tmp / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    res = _cli("run", name, "--config", str(cfg), "--ci", *options)
    APILogWorker.drain_all(timeout=30)
    ci = json.loads(next(line for line in reversed(res.stdout.splitlines()) if line.startswith("{")))
    flows = [f for f in api_rows("/flow_runs/filter", {}) if f["id"] not in flows_before]
    ids = [f["id"] for f in flows]
    run: dict[str, Any] = {
        "tmp": tmp, "exit_code": res.exit_code, "ci": ci, "summary": summary.read_text(),
        "flows": flows,
        "tasks": final_task_runs(ids),
        "logs": api_rows("/logs/filter", {"logs": {"flow_run_id": {"any_": ids}}, "sort": "TIMESTAMP_ASC"}) if ids else [],
        "artifacts": sorted((a for a in api_rows("/artifacts/filter", {}) if a["id"] not in artifacts_before),
                            key=lambda a: a["created"]),
        "version": ci.get("version"),
    }
    private = yaml.safe_load(cfg.read_text())["pipelines"][name]["private_records"]
    if run["version"] is None:  # refused: the owner's record of why, if the refusal has private detail
        folder = private_refusals_dir(private, name)
        run["refusals"] = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
        return run
    store = open_store(str(tmp / "store"))
    run["manifest"] = store.read_manifest(name, run["version"])
    run["objects"] = store.read_objects(name, run["version"])
    run["manifest_bytes"] = (tmp / "store" / name / run["version"] / "manifest.json").read_bytes()
    run["show"] = _cli("artifacts", "show", run["version"], "--store", str(tmp / "store"), "--json",
                       "--private-records", private).stdout
    run["list"] = _cli("artifacts", "list", "--store", str(tmp / "store"), "--json", "--private-records", private).stdout
    run["record"] = read_private_record(private, name, run["version"])
    return run


# -- what a run published, normalised -----------------------------------------------------------------
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b")
_DURATION = re.compile(r"\b\d+ h \d+ min\b|\b\d+ min \d+ s\b|\b\d+(?:\.\d+)? s\b")
_TASK_SUFFIX = re.compile(r"-[0-9a-f]{3}$")


def _normalise(text: str, run: dict[str, Any]) -> str:
    """Ids, durations, the version id and the run's own directory replaced by placeholders."""
    if run.get("version"):
        text = text.replace(run["version"], "<version>")
    text = text.replace(str(run["tmp"]), "<tmp>")
    return _DURATION.sub("<t>", _UUID.sub("<id>", text))


def _manifest_view(manifest: dict[str, Any]) -> dict[str, Any]:
    m = copy.deepcopy(manifest)
    for key in ("version", "created"):
        m.pop(key, None)
    m.get("seal", {}).pop("signature", None)
    return m


def published(run: dict[str, Any]) -> dict[str, Any]:
    """Every channel of one run, normalised (what two neighbouring runs must share)."""
    from tasks.artifacts import PRIVATE_PREFIX, artifact_key, is_shareable

    def norm(value: Any) -> Any:
        return json.loads(_normalise(json.dumps(value, sort_keys=True), run))

    flow_names = {f["id"]: _normalise(f["name"], run) for f in run["flows"]}
    task_names = {t["id"]: _TASK_SUFFIX.sub("", _normalise(t["name"], run)) for t in run["tasks"]}
    logs: dict[str, list[list[Any]]] = {}
    for entry in run["logs"]:
        where = f"{flow_names.get(entry['flow_run_id'], '?')} :: {task_names.get(entry['task_run_id'], '-')}"
        logs.setdefault(where, []).append([entry["level"], _normalise(entry["message"], run)])
    ci = dict(run["ci"])
    ci["seconds"] = "<t>"
    name = ci["pipeline"]
    view: dict[str, Any] = {
        "exit_code": run["exit_code"],
        "ci": norm(ci),
        "flow runs": sorted(norm([flow_names[f["id"]], f["state_type"], f["state"].get("message") or "",
                                  f["parameters"], sorted(f["tags"])]) for f in run["flows"]),
        "task runs": sorted(norm([task_names[t["id"]], t["state_type"], t["state"].get("message") or "",
                                  sorted(t["tags"])]) for t in run["tasks"]),
        "logs": logs,
        "artifacts": [[a["key"], _normalise(a["data"], run)] for a in run["artifacts"] if is_shareable(a["key"] or "", name)],
        "private artifacts": sorted(a["key"] for a in run["artifacts"]
                                    if (a["key"] or "").startswith(artifact_key(name, PRIVATE_PREFIX))),
        # an artifact without a key (Prefect's own): compared as it is
        "other artifacts": sorted(norm([a["type"], a["description"] or "", str(a["data"])]) for a in run["artifacts"]
                                  if not a["key"]),
    }
    if run["version"] is not None:
        view["manifest"] = _manifest_view(run["manifest"])
        view["objects"] = {k: hashlib.sha256(v).hexdigest() for k, v in run["objects"].items()}
    return view


def consistency(run: dict[str, Any]) -> list[str]:
    """Every channel that shows a function of the stored objects shows exactly that function of
    THIS run's stored objects (metrics: checked against the fresh-process recomputation
    separately, :func:`metrics_recomputed`)."""
    from tasks.artifacts import PRIVATE_PREFIX, artifact_key, is_shareable
    from privgraph.cli import ci_markdown
    from privgraph.publish.run_report import metrics_markdown
    from privgraph.storage.base import VersionInfo
    from privgraph.storage.graph_io import objects_to_graph

    out = []
    name = run["ci"]["pipeline"]
    if run["summary"] != ci_markdown(run["ci"]):
        out.append("the step summary holds more than run --ci's JSON")
    for a in run["artifacts"]:
        key = a["key"]
        if key is None:
            continue  # Prefect's own (compared between the runs as it is)
        if not (is_shareable(key, name) or (key.startswith(artifact_key(name, PRIVATE_PREFIX))
                                            and a["data"].startswith("# PRIVATE EVALUATION"))):
            out.append(f"artifact {key!r} is neither shareable nor titled as private evaluation")
    if run["version"] is None:
        return out
    manifest = run["manifest"]
    graph = objects_to_graph(run["objects"], manifest["num_nodes"])
    if manifest["graph"] != json.loads(json.dumps(dict(graph.summary()))):
        out.append("manifest field graph is not the stored objects' summary")
    if set(manifest) - {"pipeline", "description", "dataset", "public_input_fingerprint", "public", "num_nodes",
                        "graph", "mechanisms", "ledger", "budget", "privatized", "stats", "validation", "metrics",
                        "scores", "code_version", "embed", "format", "version", "created", "objects", "seal"}:
        out.append(f"manifest fields nobody declared: {sorted(set(manifest))}")
    if run["ci"].get("metrics") != manifest["metrics"]:
        out.append("run --ci's metrics are not the manifest's")
    for a in run["artifacts"]:
        if a["key"] == artifact_key(name, "metrics") and a["data"] != metrics_markdown(name, run["version"], manifest["metrics"]):
            out.append("the metrics artifact holds more than the stored manifest's metrics")
    checked = {"seal": True, "objects": True, "signer": manifest["seal"]["public_key"], "signer_trusted": True}
    if json.loads(run["show"]) != {**manifest, "checked": checked}:
        out.append("artifacts show --json is not the stored manifest and what it checked")
    seal = {"signer": manifest["seal"]["public_key"], "trusted_key": True}  # the owner's key, under --private-records
    if json.loads(run["list"]) != [{**VersionInfo.from_manifest(manifest).to_dict(), "seal": seal}]:
        out.append("artifacts list --json is not the stored manifest's listing")
    return out


class Recomputer:
    """One FRESH process (:mod:`tests.recompute_metrics` ``--serve``), started once for the module,
    that answers a stored version's shareable metrics from the version and the public
    configuration alone, or evaluated against a raw graph it is given (``raw``); ``plants``:
    leaks of :mod:`tests.planted_leaks` installed in it (the meta-test's)."""

    def __init__(self, plants: tuple[str, ...] = ()) -> None:
        flags = [arg for p in plants for arg in ("--plant", p)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.recompute_metrics", "--serve", *flags], cwd=REPO, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ),
        )

    def send(self, cfg: Path, name: str, store: Path, version: str, raw: Path | None = None) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"config": str(cfg), "pipeline": name, "store": str(store), "version": version,
                                          **({} if raw is None else {"raw": str(raw)})}) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        """The metrics, or ``{"error": the traceback's last line}``."""
        assert self.proc.stdout is not None
        out = json.loads(self.proc.stdout.readline())
        return {"error": out["error"].strip().splitlines()[-1]} if "error" in out else out["metrics"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@dataclasses.dataclass
class FreshProcesses:
    """The module's fresh processes: ``recompute`` never sees raw data; ``variants[k]`` evaluates
    every version against its raw variant ``k`` only (:func:`raw_variants`), so no process sees
    two raw graphs of one version."""

    recompute: Recomputer
    variants: tuple[Recomputer, ...]

    @classmethod
    def start(cls, plants: tuple[str, ...] = ()) -> FreshProcesses:
        return cls(Recomputer(plants), tuple(Recomputer(plants) for _ in range(RAW_VARIANTS)))

    def close(self) -> None:
        for proc in (self.recompute, *self.variants):
            proc.close()


_FRESH: list[FreshProcesses] = []
RAW_VARIANTS = 2


def raw_variants(graph: GraphData, feature_dim: int | None) -> list[GraphData]:
    """Raw graphs that differ from ``graph`` wherever it is private and keep what the version
    shares with it (nodes, splits, public edges): labels changed at every labelled node (variant
    0: class + 1; variant 1: class 0 at nine in ten), the private edges rewired (as many, random
    pairs of V_pri), the features changed (rows permuted; noise added; random ones of the version's
    width where the input's are computed by the flow, an image graph's)."""
    out = []
    for k in range(RAW_VARIANTS):
        rng = np.random.default_rng(100 + k)
        changes: dict[str, Any] = {}
        if graph.y is not None and graph.y.ndim == 1:
            y, known = graph.y.copy(), graph.y >= 0
            classes = int(y.max()) + 1
            y[known] = (y[known] + 1) % classes if k == 0 else np.where(rng.random(int(known.sum())) < 0.9, 0, y[known])
            changes["y"] = y
        vpri, m, n = graph.private_nodes(), graph.edges_private.shape[1], np.int64(graph.num_nodes)
        if m and vpri.size > 2:
            pairs = np.sort(rng.choice(vpri, size=(4 * m + 16, 2)), axis=1)
            keys = np.unique(pairs[:, 0] * n + pairs[:, 1])
            keys = keys[(keys // n != keys % n) & ~np.isin(keys, graph.edges_public[0] * n + graph.edges_public[1])]
            keys = rng.permutation(keys)[:m]
            changes["edges_private"] = np.stack([keys // n, keys % n])
        if graph.x is None:
            if feature_dim is not None:
                changes["x"] = rng.normal(size=(graph.num_nodes, feature_dim)).astype(np.float32)
        elif k == 0:
            changes["x"] = graph.x[rng.permutation(graph.num_nodes)]
        else:
            changes["x"] = np.clip(graph.x + rng.normal(0.0, 0.5, graph.x.shape), graph.x.min(), graph.x.max()).astype(np.float32)
        out.append(graph.replace(**changes))
    return out


def metrics_recomputed(runs: list[dict[str, Any]], cfgs: list[Path], name: str, graph: GraphData | None = None,
                       fresh: FreshProcesses | None = None) -> list[str]:
    """Each published run's metrics recomputed in a fresh process from its stored version and
    public configuration alone: the published ones must be exactly those. With ``graph`` (the
    runs' raw input), each version is also evaluated against every raw variant of it
    (:func:`raw_variants`), each in its own fresh process: the shareable metrics must not move by
    one byte, whatever the raw graph (a metric read from raw data that happens to agree with the
    version's own is seen there)."""
    from tests.recompute_metrics import write_raw_graph

    fresh = fresh or _FRESH[0]
    out = []
    for run, cfg in zip(runs, cfgs, strict=True):
        if run["version"] is None or run["manifest"].get("metrics") is None:
            continue
        store, published = run["tmp"] / "store", run["manifest"]["metrics"]
        raws = []
        if graph is not None:
            dim = run["manifest"]["graph"].get("num_features")
            for k, variant in enumerate(raw_variants(graph, dim)):
                raws.append(write_raw_graph(variant, run["tmp"] / f"raw-variant-{k}.npz"))
        fresh.recompute.send(cfg, name, store, run["version"])
        for proc, raw in zip(fresh.variants, raws):
            proc.send(cfg, name, store, run["version"], raw)
        again = fresh.recompute.receive()
        if set(again) == {"error"}:
            out.append(f"metrics: the stored version cannot be evaluated in a fresh process ({again['error']})")
        elif again != published:
            out.append(f"metrics: the published metrics are not those of the stored version ({sorted(_diff(again, published))[:5]})")
        for k, proc in enumerate(fresh.variants[:len(raws)]):
            answer = proc.receive()
            if set(answer) == {"error"}:
                out.append(f"metrics: the stored version cannot be evaluated against raw variant {k} ({answer['error']})")
                continue
            moved = _diff(json.loads(json.dumps(answer, sort_keys=True)), published)
            if moved:
                out.append(f"metrics: the shareable metrics move with the raw graph (raw variant {k}: {sorted(moved)[:5]})")
    return out


def inside(run: dict[str, Any], graph: GraphData, cfg: Path, name: str) -> list[str]:
    """What one run's stored version holds, checked on its own (:mod:`tests.release_checks`):
    every object canonical, every scope's output what its mechanism says given ``graph`` (the
    run's input) and the seed."""
    from privgraph.config.loader import load_config
    from tests.release_checks import canonical_violations, release_violations

    if run["version"] is None:
        return []
    found = canonical_violations(run)
    return found or release_violations(graph, run["objects"], load_config(cfg).get(name), SEED)


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    """The paths (``a.b[0]``) at which two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else str(k)
            out += [p] if (k not in a or k not in b) else _diff(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def _allowed(path: str, scope: str) -> bool:
    """What the covering mechanism's output may move: its stored object(s) and their checksum,
    and the manifest sections recomputed from the stored objects (plus their copies: the
    metrics in run --ci's JSON and the metrics artifact, each checked equal to the manifest's)."""
    stored = re.match(r"^(?:manifest\.)?objects\.(?:part-\d{5}\.)?(.+)$", path)  # a partitioned version's part too
    if stored and any(stored.group(1).startswith(obj) for obj in OBJECT[scope]):
        return True
    if any(path == f"manifest.{d}" or path.startswith(f"manifest.{d}.") for d in DERIVED):
        return True
    return path == "ci.metrics" or path.startswith("ci.metrics.") or path.startswith("metrics artifact")


def violations(base: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Everything that moved between two runs on neighbouring inputs and may not have."""
    scope = other["scope"]
    a, b = published(base), published(other)
    name = base["ci"]["pipeline"]
    for view in (a, b):  # the metrics artifact is checked equal to the manifest's metrics: set it apart
        arts = view.pop("artifacts")
        from tasks.artifacts import artifact_key

        view["artifacts"] = [x for x in arts if x[0] != artifact_key(name, "metrics")]
        view["metrics artifact"] = [x for x in arts if x[0] == artifact_key(name, "metrics")]
    out = consistency(base) + consistency(other)
    out += [f"{p.split('.')[0].split('[')[0]}: {p}" for p in _diff(a, b) if not _allowed(p, scope)]
    return out


# -- the test ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def harness():
    import torch
    from tests.prefect_server import owned_prefect_test_harness

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-identical training here and in the fresh process that recomputes
    _FRESH.append(FreshProcesses.start())
    try:
        with owned_prefect_test_harness():
            yield
    finally:
        _FRESH.pop().close()
        torch.set_num_threads(threads)


@pytest.fixture
def owner(tmp_path_factory, monkeypatch):
    """One owner (one HMAC key, one signing key: the seal's public key must not move) and one
    score cache for every run."""
    monkeypatch.setenv("PRIVGRAPH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "score-cache"))
    monkeypatch.setenv("PRIVGRAPH_HOME", str(tmp_path_factory.getbasetemp() / "owner-home"))


@pytest.fixture(scope="module")
def base_runs() -> dict[str, Any]:
    return {}


def _base(name: str, base_runs: dict[str, Any], data_root: Path, tmp_path_factory, monkeypatch) -> tuple[Path, GraphData, dict[str, Any]]:
    if name not in base_runs:
        tmp = tmp_path_factory.mktemp(f"{name}-base")
        graph = _input_graph(name, data_root)
        if name in FROM_FILES:
            cfg = _test_scale_config(name, tmp, _write_input(name, graph, tmp / "data"))
            run = _run(cfg, name, monkeypatch)
        else:
            cfg = _test_scale_config(name, tmp)
            run = _run(cfg, name, monkeypatch, graph)
        assert run["exit_code"] == 0, run["ci"]
        base_runs[name] = (cfg, graph, run, metrics_recomputed([run], [cfg], name, graph) + inside(run, graph, cfg, name))
    cfg, graph, run, recomputed = base_runs[name]
    return cfg, graph, run, recomputed


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_a_published_version_reveals_nothing_beyond_its_ledger(
    name, scope, harness, owner, base_runs, data_root, tmp_path_factory, monkeypatch
):
    from privgraph.config.loader import load_config

    cfg, graph, base, recomputed = _base(name, base_runs, data_root, tmp_path_factory, monkeypatch)
    disclosure = disclosure_of(load_config(cfg), name)
    tmp = tmp_path_factory.mktemp(f"{name}-{scope}")
    if name == "images-heterorr":
        ok = _image_neighbour(cfg.parent / "data" / "photos", tmp / "data" / "photos", graph, disclosure, scope)
        other_cfg = _test_scale_config(name, tmp, {"name": "images", "root": str(tmp / "data"),
                                                   "options": {"path": "photos"}}) if ok else None
    else:
        neighbour = _neighbour(graph, disclosure, scope)
        other_cfg = None if neighbour is None else (
            _test_scale_config(name, tmp, _write_input(name, neighbour, tmp / "data")) if name in FROM_FILES
            else _test_scale_config(name, tmp))
    if other_cfg is None:
        # nothing of this scope is private in this pipeline: then the manifest must say it is public
        public = base["manifest"]["public"]
        declared = {"edges": "edges_public", "features": "features", "labels": "labels"}[scope]
        assert declared in public and public[declared]["declared_by"].startswith(f"pipelines.{name}"), public
        if scope == "edges":
            assert "private_nodes" not in public and not graph.edges_private.size
        return
    other = _run(other_cfg, name, monkeypatch, None if name in FROM_FILES else neighbour)
    other["scope"] = scope
    assert other["exit_code"] == 0, other["ci"]
    assert other["record"]["input_identity"] != base["record"]["input_identity"]  # the inputs differ
    assert recomputed == []
    if name == "images-heterorr":  # the image neighbour's input: the private edge its edges.csv gained
        neighbour = _neighbour(graph, disclosure, "edges") if scope == "edges" else graph
    assert metrics_recomputed([other], [other_cfg], name) + inside(other, neighbour, other_cfg, name) == []
    seen = published(other)  # every channel was read back
    assert seen["logs"] and seen["flow runs"] and seen["task runs"] and seen["artifacts"] and seen["ci"]["metrics"]
    assert violations(base, other) == []
    if (PIPELINES[name].get("evaluate") or {}).get("attacks"):  # they ran, on raw data, and stayed in the owner's record
        scored = other["record"]["private_evaluation"]["attacks"]["private"]
        assert "linkteller" in scored and "auc" in scored["linkteller"], scored
        text = json.dumps(published(other))
        assert "linkteller\": {" not in text and "\"auc\"" not in text


# -- GAP at node level: a neighbour that crosses the public degree bound ------------------------------
def test_a_refusal_at_the_degree_bound_publishes_one_bit(harness, owner, data_root, tmp_path_factory, monkeypatch):
    """The base graph is within the bound and publishes; its neighbour (one more private edge at a
    node of the largest private degree) crosses it and is refused: that bit is what the guarantee
    says the refusal publishes. Nothing else may depend on the data: a second neighbour, over the
    bound at another node too, publishes byte-identical channels (message, exit code, JSON, step
    summary, logs, states), no version is staged, and which nodes are over the bound (private)
    is in the owner's record only."""
    name = "sbm-gap-node"
    graph = _input_graph(name, data_root)
    degree = np.bincount(graph.edges_private.ravel(), minlength=graph.num_nodes)
    bound = int(degree.max())  # the base is exactly at the bound
    edges = SHIPPED[name]["edges"] | {"max_degree": bound}
    at_bound = np.flatnonzero(degree == bound)
    have = set(map(tuple, graph.edges("all").T.tolist()))

    def add_edge_at(g: GraphData, u: int) -> GraphData:
        v = next(int(w) for w in g.private_nodes() if w != u and (min(u, w), max(u, w)) not in have
                 and degree[w] < bound - 1)
        have.add((min(u, v), max(u, v)))
        return g.replace(edges_private=np.concatenate([g.edges_private, [[min(u, v)], [max(u, v)]]], axis=1))

    crossing = add_edge_at(graph, int(at_bound[0]))
    runs, cfgs = [], []
    for tag, g in (("within", graph), ("crossing", crossing), ("crossing-twice", add_edge_at(crossing, int(at_bound[-1])))):
        tmp = tmp_path_factory.mktemp(f"gap-bound-{tag}")
        cfgs.append(_test_scale_config(name, tmp, _write_input(name, g, tmp / "data"), edges=edges))
        runs.append(_run(cfgs[-1], name, monkeypatch))
    within, once, twice = runs
    assert within["exit_code"] == 0 and within["version"] is not None
    assert inside(within, graph, cfgs[0], name) == []  # at the bound: node-level GAP's statistic plus noise
    for run in (once, twice):
        assert run["exit_code"] == 2 and run["version"] is None and run["ci"]["status"] == "failed"
        assert f"more than max_degree = {bound} private edges" in run["ci"]["error"]
        assert not list((run["tmp"] / "store").rglob("*.npy")) and not list((run["tmp"] / "store").rglob("*.parquet"))
        [refusal] = run["refusals"]  # the owner's record: which nodes, their private degrees
        assert refusal["detail"]["max_degree"] == bound and refusal["detail"]["private_degrees"]
    assert twice["refusals"][0]["detail"] != once["refusals"][0]["detail"]
    for run in (once, twice):
        run["scope"] = "edges"
    assert violations(once, twice) == []
    digits = set(re.findall(r"\d+", once["ci"]["error"])) - {str(bound)}
    assert not digits, once["ci"]["error"]  # the message holds the public bound and nothing counted


# -- the checks can fail ------------------------------------------------------------------------------
def test_every_planted_leak_is_caught(harness, owner, data_root, tmp_path_factory, monkeypatch, request):
    """Leaks planted one per channel, each computed from a private feature row (the neighbour
    changes the one row that the planted theta reads although the declaration keeps it private):
    a manifest field (``release.*``, as issue 24 found one), a shareable metric, a log line, the
    public fingerprint, theta, and a refusal message; and the three that issue 42's audit found
    passing: schema metadata inside each part's ``edges.parquet`` (the covering object) sized by
    the raw number of private edges, written by a leaky encoder that privgraph's own re-encoding
    check shares (so only the test's own decoding can see it); the raw number of private edges
    added to one cell of class counts' ``aggregates.npy``; and a shareable metric read from the
    RAW training labels that agrees with the version's own by chance (planted in the fresh
    processes too, as a scratch copy of the code would have it). Every plant must be caught."""
    import flows.privatize
    import tasks.evaluate
    import tasks.partition
    import tasks.privatize
    from prefect import get_run_logger

    from privgraph.storage.arrow_io import read_parquet_bytes
    from privgraph.mechanisms.edges.class_counts import NeighbourClassCounts
    from privgraph.storage import graph_io
    from tests.planted_leaks import install

    from privgraph.config.disclosure import Disclosure
    from privgraph.errors import GraphValidationError
    from privgraph.ingest.scoring.public_subset import PublicRows, PublicSubset, restrict_rows

    name = "generic-unlabelled"
    graph = _input_graph(name, data_root)
    real_rows, real_build = Disclosure.public_rows, flows.privatize.build_manifest
    real_partition, real_metrics = tasks.partition.partition_graph, tasks.evaluate.version_metrics
    real_inputs, real_feature_rows = Disclosure.public_inputs, Disclosure.public_feature_rows

    def declared(self: Disclosure, g: GraphData) -> np.ndarray:
        out = np.zeros(g.num_nodes, bool)
        out[real_rows(self, g).nodes] = True
        return out

    def planted_row(g: GraphData, d: Disclosure) -> int:  # an undeclared row with a label
        return int(np.flatnonzero(~declared(d, g) & g.labelled())[0])

    def secret(g: GraphData) -> float:
        return round(float(g.x.astype(np.float64).sum()), 6)

    def leaky_rows(self: Disclosure, g: GraphData) -> PublicRows:  # theta reads one undeclared row
        view = real_rows(self, g)
        nodes = np.sort(np.append(view.nodes, planted_row(g, self)))
        return PublicRows(restrict_rows(g, nodes), PublicSubset(nodes, np.zeros(nodes.size, bool), view.subset.description))

    def leaky_build(**kw: Any) -> dict[str, Any]:
        m = real_build(**kw)
        m["release"] = {"features": {"input_sum": secret(kw["graph_in"])}}
        return m

    def leaky_partition(g: GraphData, *a: Any, **k: Any) -> Any:
        get_run_logger().info("partitioning a graph whose features sum to %s", secret(g))
        return real_partition(g, *a, **k)

    def leaky_metrics(version: GraphData, *a: Any, clean: GraphData | None = None, **k: Any) -> dict[str, Any]:
        m = real_metrics(version, *a, clean=clean, **k)
        return {**m, "clean_feature_sum": secret(clean)}

    def leaky_inputs(self: Disclosure, g: GraphData) -> Any:
        yield from real_inputs(self, g)
        yield "x", g.x

    monkeypatch.setattr(Disclosure, "public_rows", leaky_rows)
    monkeypatch.setattr(Disclosure, "public_feature_rows", declared)
    monkeypatch.setattr(flows.privatize, "build_manifest", leaky_build)
    monkeypatch.setattr(tasks.partition, "partition_graph", leaky_partition)
    monkeypatch.setattr(tasks.evaluate, "version_metrics", leaky_metrics)
    monkeypatch.setattr(Disclosure, "public_inputs", leaky_inputs)

    raw_private: dict[str, int] = {}
    real_through_files, real_edges_bytes = tasks.privatize.privatize_through_files, graph_io._edges_bytes

    def leaky_through_files(g: GraphData, **k: Any) -> Any:  # remembers the raw private edge count
        raw_private["edges"] = int(g.edges_private.shape[1])
        return real_through_files(g, **k)

    def leaky_edges_bytes(pub: np.ndarray, pri: np.ndarray) -> bytes:  # ... and writes it into every edges.parquet
        import pyarrow.parquet as pq

        table = read_parquet_bytes(real_edges_bytes(pub, pri))
        out = io.BytesIO()
        pq.write_table(table.replace_schema_metadata({"pad": "x" * raw_private.get("edges", 0)}), out, compression="zstd")
        return out.getvalue()

    install("raw_label_share", monkeypatch.setattr)
    fresh = FreshProcesses.start(plants=("raw_label_share",))
    request.addfinalizer(fresh.close)

    def run(tag: str, g: GraphData) -> tuple[dict[str, Any], Path]:
        tmp = tmp_path_factory.mktemp(f"planted-{tag}")
        cfg = _test_scale_config(name, tmp, _write_input(name, g, tmp / "data"))
        return _run(cfg, name, monkeypatch), cfg

    from privgraph.config.loader import load_config

    base, base_cfg = run("base", graph)
    d = disclosure_of(load_config(base_cfg), name)
    i = planted_row(graph, d)
    x = graph.x.copy()
    x[i] = 1.0 - x[i]
    other, other_cfg = run("neighbour", graph.replace(x=x))
    other["scope"] = "features"
    found = (violations(base, other) + metrics_recomputed([base], [base_cfg], name, graph, fresh)
             + metrics_recomputed([other], [other_cfg], name, fresh=fresh)
             + inside(base, graph, base_cfg, name) + inside(other, graph.replace(x=x), other_cfg, name))
    caught = {
        "release.*": any("manifest.release" in v for v in found),
        "metrics.*": any(v.startswith("metrics:") and "clean_feature_sum" in v for v in found),
        "a log line": any(v.startswith("logs:") and "partition" in v for v in found),
        "the fingerprint": any("manifest.public_input_fingerprint" in v for v in found),
        "theta": any("manifest.mechanisms" in v and "theta" in v for v in found),
        "a metric read from raw labels": any("move with the raw graph" in v and "class0_share" in v for v in found),
    }
    assert all(caught.values()), (caught, found)

    # metadata inside the covering object (one run: the check is of each run's objects on their own;
    # a version that privgraph's own reader refuses would hide the metric plants above from the
    # fresh processes)
    monkeypatch.setattr(tasks.privatize, "privatize_through_files", leaky_through_files)
    monkeypatch.setattr(graph_io, "_edges_bytes", leaky_edges_bytes)
    padded, padded_cfg = run("metadata", graph)
    assert padded["exit_code"] == 0, padded["ci"]  # privgraph's reader re-encodes with the leaky encoder: it passes
    found = inside(padded, graph, padded_cfg, name)
    assert any(re.search(r"part-\d{5}\.edges\.parquet is not the canonical", v) for v in found), found
    monkeypatch.setattr(graph_io, "_edges_bytes", real_edges_bytes)

    # a refusal whose message carries a private value
    def leaky_refusal(g: GraphData, *a: Any, **k: Any) -> Any:
        raise GraphValidationError(f"refused: the features sum to {secret(g)}")

    monkeypatch.setattr(tasks.partition, "partition_graph", leaky_refusal)
    refused, _ = run("refused-base", graph)
    refused_other, _ = run("refused-neighbour", graph.replace(x=x))
    refused_other["scope"] = "features"
    found = violations(refused, refused_other)
    assert refused["exit_code"] == refused_other["exit_code"] == 2
    assert any(v.startswith("ci:") for v in found) and any(v.startswith("logs:") or v.startswith("flow runs:")
                                                           for v in found), found

    # a value inside a mechanism's output: the raw number of private edges in one class-count cell
    real_aggregate = NeighbourClassCounts.aggregate

    def leaky_aggregate(self: NeighbourClassCounts, encoded: Any, edges: np.ndarray, *a: Any, **k: Any) -> np.ndarray:
        out = real_aggregate(self, encoded, edges, *a, **k)
        out[1, 0, 0] += float(np.count_nonzero(k["private_edge_mask"]))
        return out

    for owner_, attr, real in ((Disclosure, "public_rows", real_rows), (Disclosure, "public_feature_rows", real_feature_rows),
                               (Disclosure, "public_inputs", real_inputs), (flows.privatize, "build_manifest", real_build),
                               (tasks.partition, "partition_graph", real_partition),
                               (tasks.evaluate, "version_metrics", real_metrics)):
        monkeypatch.setattr(owner_, attr, real)  # the plants above off: this run carries this one
    monkeypatch.setattr(NeighbourClassCounts, "aggregate", leaky_aggregate)
    counts_graph = _input_graph("cora-private", data_root)
    counts_cfg = _test_scale_config("cora-private", tmp_path_factory.mktemp("planted-class-counts"))
    counts = _run(counts_cfg, "cora-private", monkeypatch, counts_graph)
    assert counts["exit_code"] == 0, counts["ci"]
    assert any("aggregates.npy are not the statistic plus the seed's noise" in v
               for v in inside(counts, counts_graph, counts_cfg, "cora-private")), "the class-count cell was not caught"


# -- an option the path at scale ignores ----------------------------------------------------------------
def test_the_scale_base_is_marked_by_the_ingests_own_draw(tmp_path):
    """``partitioned-scale``'s base input is the ingest's ``--rho`` draw itself (the generic graph's
    marking is that draw); only its neighbours are edited ranges."""
    from tests.graph_files import write_generic

    graph = _generic_graph()
    assert _ingest_rho_marked(graph, tmp_path / "base", write_generic(graph, tmp_path / "base"))
    pair = _private_edge_to_add(graph)
    neighbour = graph.replace(edges_private=np.concatenate([graph.edges_private, [[pair[0]], [pair[1]]]], axis=1))
    assert not _ingest_rho_marked(neighbour, tmp_path / "other", write_generic(neighbour, tmp_path / "other"))
    assert (tmp_path / "base" / "graph" / "graph.json").read_bytes() == (tmp_path / "other" / "graph" / "graph.json").read_bytes()


def test_an_option_the_path_at_scale_ignores_is_caught(harness, owner, tmp_path_factory, monkeypatch):
    """The leak of issue 56 planted back: the path at scale takes ``dataset.rho`` and ignores it (its
    refusal at load removed), so the edges that rho declares private are stored raw as public edges.
    Neighbouring inputs (one more edge between two nodes of V_pri: private by the declaration) must
    be told apart on a published channel (the public input fingerprint) and the stored version
    against the declared input (its public edges are not the declared ones)."""
    import privgraph.config.pipeline as pipeline_config
    import tasks.ingest
    from tests.graph_files import write_generic

    monkeypatch.setattr(pipeline_config, "check_options_on_path", lambda *a, **k: None)
    monkeypatch.setattr(tasks.ingest, "check_options_on_path", lambda *a, **k: None)
    name = "partitioned-scale"
    graph = _generic_graph()  # as rho 0.3, seed 3 declares it
    pair = _private_edge_to_add(graph)
    neighbour = graph.replace(edges_private=np.concatenate([graph.edges_private, [[pair[0]], [pair[1]]]], axis=1))
    runs = []
    for tag, g in (("base", graph), ("neighbour", neighbour)):
        tmp = tmp_path_factory.mktemp(f"ignored-rho-{tag}")
        options = write_generic(g, tmp / "data")
        _ingest(tmp / "data", options, "graph", flags=False)  # no marking: every edge public in the files
        cfg = _test_scale_config(name, tmp, {"name": "partitioned", "root": str(tmp / "data"), "options": {"path": "graph"}})
        doc = yaml.safe_load(cfg.read_text())
        doc["pipelines"][name]["dataset"].update(PARTITIONED_RHO)  # declared, and ignored by the plant
        cfg.write_text(yaml.safe_dump(doc))
        runs.append((cfg, _run(cfg, name, monkeypatch, None, "--no-evaluate")))
    (base_cfg, base), (other_cfg, other) = runs
    assert base["exit_code"] == other["exit_code"] == 0, (base["ci"], other["ci"])
    other["scope"] = "edges"
    found = violations(base, other) + inside(base, graph, base_cfg, name) + inside(other, neighbour, other_cfg, name)
    assert any("manifest.public_input_fingerprint" in v for v in found), found
    assert any("the public edges are not released as they are" in v for v in found), found
