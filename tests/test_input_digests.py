"""The public input fingerprint and the owner's keyed identity of a partitioned graph, streamed: equal
to the in-memory values of the loaded graph for every shape of declaration, the fingerprint blind
to private edges and rows and computed by a task that the client never helps by reading the graph,
the identity computed in the client, its key sent to no task."""

from __future__ import annotations

import copy
import json
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privgraph.config.disclosure import disclosure_of
from privgraph.config.loader import parse_config
from privgraph.errors import ConfigError
from privgraph.ingest import partitioned_graph
from privgraph.ingest.partitioned_graph import load_partitioned_graph, open_partitioned_graph
from privgraph.ingest.partitioned_writer import write_partitioned_graph
from privgraph.publish import input_digests as input_digests_module
from privgraph.publish.input_digests import input_digests, keyed_identity_of, public_fingerprint_of
from tests.spawn_executor import SpawnExecutor

KEY = bytes(range(32))

BASE: dict[str, Any] = {
    "dataset": {"name": "sbm", "rho": 0.3, "options": {"num_nodes": 200}},
    "features": {"mechanism": "feature_rr", "epsilon": 1.0},
    "edges": {"mechanism": "dprr", "epsilon": 1.0},
    "labels": {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 3, "mask": ["train_mask"]},
    "scores": {"gamma": 1.0, "public_nodes": {"rule": "random", "size": 20}},
    "budget": {"features": 1.0, "edges": 2.0, "labels": 1.0},
}


def _pipeline(**changes: Any) -> dict[str, Any]:
    """BASE with sections replaced (None removes one)."""
    p = copy.deepcopy(BASE)
    for k, v in changes.items():
        if v is None:
            p.pop(k, None)
            p["budget"].pop(k, None)
        else:
            p[k] = v
    return p


#: declarations of every shape: private edges or none, a features mechanism with a rule (random by
#: size or fraction, train_mask; rule all, which the in-memory selection refuses whenever there are
#: features, so the streamed one must refuse alike) or without scores, or none; labels private in a
#: mask, all, none
DECLARATIONS: dict[str, dict[str, Any]] = {
    "random-size": _pipeline(),
    "random-fraction": _pipeline(scores={"gamma": 1.0, "public_nodes": {"rule": "random", "fraction": 0.3}}),
    "train-mask-rule": _pipeline(labels={"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 3,
                                         "mask": ["val_mask"]},
                                 scores={"gamma": 1.0, "public_nodes": {"rule": "train_mask"}}),
    "features-no-scores": _pipeline(scores=None),
    "rule-all-charged": _pipeline(scores={"gamma": 1.0, "public_nodes": {"rule": "all", "charge_epsilon": 1.0}}),
    "all-public": _pipeline(dataset={"name": "sbm", "rho": 0.0, "options": {"num_nodes": 200}},
                            features=None, labels=None, scores=None),
    "every-label-private": _pipeline(labels={"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 3},
                                     scores=None),
    "generic": _pipeline(dataset={"name": "generic", "options": {"edges": "edges.csv"}}, labels=None,
                         scores={"gamma": 1.0, "public_nodes": {"rule": "random", "size": 40}}),
}


def _disclosure(name: str):
    return disclosure_of(parse_config({"pipelines": {name: copy.deepcopy(DECLARATIONS[name])}}), name)


def _files(tmp: Path, n: int, m: int, *, d: int = 4, labels: bool = True, split: bool = True,
           private: float = 0.3, seed: int = 0) -> dict[str, Any]:
    """A generic graph's files: ``m`` distinct edges (a share ``private`` of them private),
    features, labels (some -1) and a split of the labelled nodes."""
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, n, 4 * m), rng.integers(0, n, 4 * m)
    keep = u != v
    u, v = u[keep], v[keep]
    _, first = np.unique(np.minimum(u, v) * n + np.maximum(u, v), return_index=True)
    pick = np.sort(first)[:m]
    files: dict[str, Any] = {"edges": tmp / "edges.csv", "num_nodes": n}
    pd.DataFrame({"src": u[pick], "dst": v[pick], "private": rng.random(pick.size) < private}).to_csv(
        files["edges"], index=False)
    if d:
        files["features"] = tmp / "x.npy"
        np.save(files["features"], rng.normal(size=(n, d)).astype(np.float32))
    if labels:
        files["labels"] = tmp / "y.npy"
        y = rng.integers(0, 3, n)
        y[rng.random(n) < 0.1] = -1
        np.save(files["labels"], y)
        if split:
            lab = np.flatnonzero(y >= 0)
            files["split"] = tmp / "split.json"
            files["split"].write_text(json.dumps({"train": lab[::3].tolist(), "val": lab[1::3].tolist(),
                                                  "test": lab[2::3].tolist()}))
    return files


def _graph(tmp: Path, range_size: int, n: int = 203, m: int = 600, name: str = "graph", **kw: Any):
    tmp.mkdir(parents=True, exist_ok=True)
    files = _files(tmp, n, m, **kw)
    return write_partitioned_graph(files.pop("edges"), destination=tmp / name, range_size=range_size, **files)


def _assert_same_fingerprint(graph: Any, loaded: Any, d: Any) -> None:
    """The streamed fingerprint is the in-memory one, or raises the same error (a mask the graph
    lacks, a rule that refuses the graph)."""
    try:
        want = d.fingerprint(loaded)
    except (ConfigError, ValueError) as exc:
        with pytest.raises(type(exc), match="^" + re.escape(str(exc)) + "$"):
            public_fingerprint_of(graph, d)
    else:
        assert public_fingerprint_of(graph, d) == want


@pytest.mark.parametrize("range_size", [50, 64, 203, 1000])
@pytest.mark.parametrize("name", sorted(DECLARATIONS))
def test_the_streamed_values_are_the_in_memory_ones(tmp_path, range_size, name):
    graph = _graph(tmp_path, range_size)
    loaded = load_partitioned_graph(graph.path)
    _assert_same_fingerprint(graph, loaded, _disclosure(name))
    assert keyed_identity_of(graph, KEY) == loaded.keyed_digest(KEY)


@pytest.mark.parametrize("kw", [
    {"d": 0, "labels": False},        # edges only
    {"labels": False},                # features, no labels
    {"d": 0},                         # labels and split, no features
    {"split": False},                 # labels, no split
    {"private": 0.0},                 # no private edge
    {"private": 1.0},                 # no public edge
])
@pytest.mark.parametrize("name", ["random-size", "features-no-scores", "all-public", "every-label-private"])
def test_graphs_without_fields_or_edges_of_a_kind(tmp_path, kw, name):
    graph = _graph(tmp_path, 40, **kw)
    loaded = load_partitioned_graph(graph.path)
    _assert_same_fingerprint(graph, loaded, _disclosure(name))
    assert keyed_identity_of(graph, KEY) == loaded.keyed_digest(KEY)


def _rewrite(tmp: Path, change: str) -> tuple[Any, Any]:
    """Two graphs written from files that differ in one place (under declaration ``random-size``):
    ``change`` adds a private edge between two nodes of V_pri, changes a private feature row, or
    adds a public edge."""
    a = _graph(tmp / "a", 50)
    loaded = load_partitioned_graph(a.path)
    d = _disclosure("random-size")
    (tmp / "b").mkdir()
    files = _files(tmp / "b", 203, 600)
    if change == "features":
        x = np.load(files["features"])
        x[int(np.flatnonzero(~d.public_feature_rows(loaded))[0])] += 0.25
        np.save(files["features"], x)
    else:
        edges = pd.read_csv(files["edges"])
        have = set(zip(edges["src"], edges["dst"])) | set(zip(edges["dst"], edges["src"]))
        ends = loaded.private_nodes() if change == "private-edge" else range(203)
        u, v = next((u, v) for u in ends for v in ends if u < v and (u, v) not in have)
        row = pd.DataFrame({"src": [u], "dst": [v], "private": [change == "private-edge"]})
        pd.concat([edges, row], ignore_index=True).to_csv(files["edges"], index=False)
    b = write_partitioned_graph(files.pop("edges"), destination=tmp / "b" / "graph", range_size=50, **files)
    return a, b


@pytest.mark.parametrize(("change", "moves"), [("private-edge", False), ("features", False), ("public-edge", True)])
def test_the_fingerprint_moves_with_public_inputs_only(tmp_path, change, moves):
    a, b = _rewrite(tmp_path, change)
    d = _disclosure("random-size")
    fa, fb = public_fingerprint_of(a, d), public_fingerprint_of(b, d)
    assert (fa != fb) is moves
    assert fb == d.fingerprint(load_partitioned_graph(b.path))
    assert keyed_identity_of(a, KEY) != keyed_identity_of(b, KEY)  # the owner's identity sees everything


def test_refusals(tmp_path):
    graph = _graph(tmp_path, 50)
    with pytest.raises(ValueError, match="key must be at least 16 bytes"):
        keyed_identity_of(graph, b"short")
    with pytest.raises(TypeError, match="PartitionedGraph"):
        public_fingerprint_of(load_partitioned_graph(graph.path), _disclosure("generic"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Disclosure"):
        public_fingerprint_of(graph, "generic")  # type: ignore[arg-type]


def test_the_client_never_reads_the_graph_for_the_fingerprint(tmp_path, monkeypatch):
    """The client's readers of ranges and of the whole graph raise; the fingerprint's task runs in a
    spawned process; what goes to the task and comes back stays small (a 2,000-node graph)."""
    graph = _graph(tmp_path, 500, n=2000, m=6000)
    d = _disclosure("random-size")
    want = d.fingerprint(load_partitioned_graph(graph.path))

    def refuse(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the client read the graph")

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(int).result()
        for module in (partitioned_graph, input_digests_module):
            for name in ("read_node_range", "read_edge_range", "load_partitioned_graph"):
                if hasattr(module, name):
                    monkeypatch.setattr(module, name, refuse)
        monkeypatch.setattr(np, "load", refuse)
        ex = SpawnExecutor(pool)
        got = public_fingerprint_of(open_partitioned_graph(graph.path), d, executor=ex)
        monkeypatch.undo()
    assert got == want
    assert 0 < ex.largest_sent < 4096 and 0 < ex.largest_received < 4096


def _assert_sent_no_secret(sent: list[bytes], key: bytes, identity: str) -> None:
    """No pickled map holds the key, nor the identity (an HMAC under it) as hex or as bytes."""
    assert sent  # not vacuous: the fingerprint's task was sent
    for blob in sent:
        assert key not in blob
        assert identity.encode() not in blob and bytes.fromhex(identity) not in blob


def test_the_key_and_any_hmac_stay_in_the_client(tmp_path):
    """input_digests, the flow's call, with its fingerprint's task in a spawned process: every map
    sent to the executor (function, payloads, seeds, shared arguments, pickled) holds neither the
    key nor an HMAC under it; the values are the in-memory ones."""
    graph = _graph(tmp_path, 500, n=2000, m=6000)
    loaded = load_partitioned_graph(graph.path)
    d = _disclosure("random-size")
    want = d.fingerprint(loaded), loaded.keyed_digest(KEY)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        ex = SpawnExecutor(pool)
        got = input_digests(open_partitioned_graph(graph.path), d, KEY, executor=ex)
    assert got == want
    assert len(ex.sent) == 1  # one map: the fingerprint's task
    _assert_sent_no_secret(ex.sent, KEY, got[1])


def test_input_digests_raises_the_fingerprints_error(tmp_path):
    """A declaration that refuses the graph (rule all with features) fails the fingerprint while the
    identity succeeds: input_digests raises the fingerprint's error, as public_fingerprint_of does."""
    graph = _graph(tmp_path, 50)
    d = _disclosure("rule-all-charged")
    with pytest.raises((ConfigError, ValueError)) as want:
        public_fingerprint_of(graph, d)
    with pytest.raises(type(want.value), match="^" + re.escape(str(want.value)) + "$"):
        input_digests(graph, d, KEY)


@pytest.mark.dask
def test_the_same_values_on_a_dask_worker(tmp_path):
    import pickle

    from tasks.dask_executor import DaskExecutor

    graph = _graph(tmp_path, 40)
    d = _disclosure("random-size")
    sent: list[bytes] = []
    with DaskExecutor(n_workers=2, threads_per_worker=1) as ex:
        dask_map = ex.map

        def recording_map(fn, payloads, seeds, shared):  # type: ignore[no-untyped-def]
            sent.append(pickle.dumps((fn, payloads, seeds, shared)))
            return dask_map(fn, payloads, seeds, shared)

        ex.map = recording_map  # type: ignore[method-assign]
        got = public_fingerprint_of(graph, d, executor=ex)
        both = input_digests(graph, d, KEY, executor=ex)  # the flow's call: the task and the identity side by side
    want = (public_fingerprint_of(graph, d), keyed_identity_of(graph, KEY))
    assert got == want[0] and both == want
    assert input_digests(graph, d, KEY) == want  # without an executor
    _assert_sent_no_secret(sent, KEY, want[1])


def test_input_digests_refuses_before_reading(tmp_path, monkeypatch):
    graph = _graph(tmp_path, 40)
    monkeypatch.setattr(input_digests_module, "read_node_range", lambda *a, **k: pytest.fail("a range was read"))
    with pytest.raises(ValueError, match="at least 16 bytes"):
        input_digests(graph, _disclosure("generic"), b"short")
    with pytest.raises(TypeError, match="must be a Disclosure"):
        input_digests(graph, "generic", KEY)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    return _graph(tmp_path_factory.mktemp("large"), 400, n=12000, m=30000, d=32)


@pytest.mark.parametrize("name", ["features-no-scores", "random-size"])
def test_memory_is_one_range_not_the_graph(large, name):
    """NumPy's traced peak while streaming stays a small share of the loaded graph's arrays (ranges of
    400 of 12,000 nodes): no O(n) or O(m) array but V_pri's booleans and, under a rule, the labels
    and split the rule reads (about a tenth of the graph here: 32 features)."""
    import tracemalloc

    graph = large
    loaded = load_partitioned_graph(graph.path)
    whole = sum(a.nbytes for a in (loaded.x, loaded.y, loaded.edges_public, loaded.edges_private))
    del loaded
    d = _disclosure(name)
    for compute in (lambda: public_fingerprint_of(graph, d), lambda: keyed_identity_of(graph, KEY)):
        tracemalloc.start()
        try:
            compute()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < whole / 5, (peak, whole)
