"""The one declaration of what is public, the public input fingerprint and the owner's keyed identity."""

from __future__ import annotations

import copy
import hashlib
import os

import numpy as np
import pytest

from privgraph.config.disclosure import disclosure_of
from privgraph.config.loader import parse_config
from privgraph.ingest.datasets.split import split_public_private
from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.storage.private_record import input_identity, owner_key, owner_key_path

BASE = {
    "pipelines": {
        "p": {
            "dataset": {"name": "sbm", "rho": 0.3, "options": {"num_nodes": 200}},
            "features": {"mechanism": "feature_rr", "epsilon": 1.0},
            "edges": {"mechanism": "dprr", "epsilon": 1.0},
            "labels": {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 3, "mask": ["train_mask"]},
            "scores": {"gamma": 1.0, "public_nodes": {"rule": "random", "size": 20}},
            "budget": {"features": 1.0, "edges": 2.0, "labels": 1.0},
        }
    }
}


@pytest.fixture(scope="module")
def graph():
    return split_public_private(sbm_graph(200, num_classes=3, avg_degree=6.0, num_features=5, seed=3), 0.3, seed=1)


@pytest.fixture(scope="module")
def disclosure():
    return disclosure_of(parse_config(copy.deepcopy(BASE)), "p")


def _old_fingerprint(g) -> str:
    """The manifest field of privgraph before issue 9: an unsalted SHA-256 of every array."""
    h = hashlib.sha256()
    h.update(f"n={g.num_nodes}".encode())
    for name in ("x", "y", "edges_public", "edges_private", "train_mask", "val_mask", "test_mask"):
        a = getattr(g, name)
        h.update(name.encode())
        if a is not None:
            a = np.ascontiguousarray(a)
            h.update(str((a.dtype.str, a.shape)).encode())
            h.update(a.tobytes())
    return h.hexdigest()


def _neighbours(graph, d):
    """One private edge added (between two V_pri nodes), one private feature row, one private label."""
    vpri = graph.private_nodes()
    n = graph.num_nodes
    have = set((graph.edges("all")[0] * n + graph.edges("all")[1]).tolist())
    u, v = next((a, b) for a in vpri for b in vpri if a < b and a * n + b not in have)
    edge = graph.replace(edges_private=np.concatenate([graph.edges_private, [[u], [v]]], axis=1))
    i = int(np.flatnonzero(~d.public_feature_rows(graph))[0])
    x = graph.x.copy()
    x[i] += 0.25
    j = int(np.flatnonzero(d.private_label_rows(graph))[0])
    y = graph.y.copy()
    y[j] = (y[j] + 1) % 3
    return {"edge": edge, "features": graph.replace(x=x), "label": graph.replace(y=y)}


def test_the_public_fingerprint_does_not_move_with_private_data(graph, disclosure):
    """Leak 1: the old field moved with every private edge, feature row and label (two hashes
    decide an unknown edge); the public fingerprint moves only with public inputs."""
    fp = disclosure.fingerprint(graph)
    for what, g in _neighbours(graph, disclosure).items():
        assert disclosure.fingerprint(g) == fp, what
        assert _old_fingerprint(g) != _old_fingerprint(graph), what  # what the old manifest leaked
    # public inputs do move it: a public edge, a public feature row, a public label, the split
    pub_row = int(np.flatnonzero(disclosure.public_feature_rows(graph))[0])
    x = graph.x.copy()
    x[pub_row] += 0.25
    pub_label = int(np.flatnonzero(~disclosure.private_label_rows(graph))[0])
    y = graph.y.copy()
    y[pub_label] = (y[pub_label] + 1) % 3
    moved = [graph.replace(edges_public=graph.edges_public[:, 1:]), graph.replace(x=x), graph.replace(y=y),
             graph.replace(test_mask=~graph.test_mask)]
    assert all(disclosure.fingerprint(g) != fp for g in moved)


def test_the_declaration_materializes_on_the_graph(graph, disclosure):
    assert disclosure.private_scopes() == ("edges", "features", "labels")
    assert np.array_equal(disclosure.private_label_rows(graph), graph.train_mask)
    rows = disclosure.public_feature_rows(graph)
    assert rows.sum() == 20 and not (rows & graph.train_mask).any() and not (rows & graph.test_mask).any()
    section = disclosure.manifest_section()
    assert section["private_nodes"]["declared_by"] == "pipelines.p.dataset.rho"
    assert section["labels_outside_mask"]["declared_by"] == "pipelines.p.labels.mask"
    assert section["public_feature_rows"]["declared_by"] == "pipelines.p.scores.public_nodes.rule"


def test_nonpriv_part_declares_v_pri_public():
    """Leak 4: NonPriv-Part claims epsilon 0 while the manifest records |V_pri|; the assumption
    and the manifest's public section now say that V_pri is public."""
    from privgraph.mechanisms import build_mechanism

    data = copy.deepcopy(BASE)
    data["pipelines"]["p"]["edges"] = {"mechanism": "nonpriv_part"}
    d = disclosure_of(parse_config(data), "p")
    assert "private_nodes" in d.manifest_section()
    g = build_mechanism("nonpriv_part", {}).guarantee
    assert g.epsilon == 0.0 and any("V_pri" in a and "public" in a for a in g.assumptions)


def test_the_owners_key_and_keyed_identity(graph, tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    key = owner_key(tmp_path)
    path = owner_key_path(tmp_path)
    assert path == tmp_path / "keys" / "input-hmac.key" and len(key) == 32
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    assert owner_key(tmp_path) == key  # read, not recreated
    ident = input_identity(graph, tmp_path)
    assert ident.startswith("hmac-sha256:") and ident == input_identity(graph, tmp_path)
    d = disclosure_of(parse_config(copy.deepcopy(BASE)), "p")
    for g in _neighbours(graph, d).values():
        assert input_identity(g, tmp_path) != ident
    # another owner's key: another identity (no one without the key can test candidates)
    monkeypatch.setenv("PRIVGRAPH_HOME", str(tmp_path / "home"))
    assert owner_key_path(tmp_path) == tmp_path / "home" / "keys" / "input-hmac.key"
    assert input_identity(graph, tmp_path) != ident
    assert key.hex() not in ident and os.urandom(0) == b""
    with pytest.raises(ValueError, match="16 bytes"):
        graph.keyed_digest(b"short")


def test_the_scores_read_only_the_rows_the_declaration_makes_public(tmp_path):
    """Issue 24, leak 1: with unlabelled nodes and rule ``random``, the declaration drew the public
    nodes over all nodes and the scores over the labelled ones: most rows theta read were private,
    and changing one moved theta while the fingerprint stood still. Now ONE selection makes both,
    the scores get a view holding the declared rows only, and theta does not move with any other
    row. Real loader path: the user's files on disk."""
    from privgraph.ingest.datasets import load_dataset
    from privgraph.ingest.scoring import compute_scores
    from tests.graph_files import write_generic

    g = sbm_graph(300, num_classes=3, avg_degree=6.0, num_features=8, seed=5)
    y = g.y.copy()
    y[::3] = -1  # a third of the nodes carry no label
    g = split_public_private(g.replace(y=y, train_mask=None, val_mask=None, test_mask=None), 0.3, seed=2)
    options = write_generic(g, tmp_path)
    data = copy.deepcopy(BASE)
    p = data["pipelines"]["p"]
    p["dataset"] = {"name": "generic", "root": str(tmp_path), "options": {**options, "train": 0.5, "val": 0.25}}
    p["scores"] = {"gamma": 1.0, "public_nodes": {"rule": "random", "size": 40}}
    p.pop("labels")
    p["budget"].pop("labels")
    cfg = parse_config(data)
    d = disclosure_of(cfg, "p")
    scores = cfg.get("p").scores

    def load():
        return load_dataset("generic", root=tmp_path, **p["dataset"]["options"])

    graph = load()
    public = d.public_feature_rows(graph)
    view = d.public_rows(graph)
    assert public.sum() == 40 and np.array_equal(view.nodes, np.flatnonzero(public))
    assert view.graph.num_nodes == 40 and view.graph.num_edges == 0 and np.array_equal(view.graph.x, graph.x[public])
    assert (graph.y[public] >= 0).all()  # the surrogate trains on labels: no unlabelled public node
    theta = compute_scores(view, scores, seed=0, cache=False).theta
    # a whole graph goes through the same selection
    assert np.array_equal(compute_scores(graph, scores, seed=0, cache=False).theta, theta)

    x = np.load(tmp_path / "features.npy")
    for i in np.flatnonzero(~public)[:: 25]:  # an undeclared row changed on disk moves nothing
        changed = x.copy()
        changed[i] = 1.0 - x[i]
        np.save(tmp_path / "features.npy", changed)
        other = load()
        assert np.array_equal(d.public_feature_rows(other), public)
        assert d.fingerprint(other) == d.fingerprint(graph)
        assert np.array_equal(compute_scores(d.public_rows(other), scores, seed=0, cache=False).theta, theta), i
        assert np.array_equal(compute_scores(other, scores, seed=0, cache=False).theta, theta), i
    np.save(tmp_path / "features.npy", x)
    j = int(np.flatnonzero(public)[0])  # a declared row does move theta (the check can fail)
    changed = x.copy()
    changed[j] = 1.0 - x[j]
    np.save(tmp_path / "features.npy", changed)
    assert not np.array_equal(compute_scores(d.public_rows(load()), scores, seed=0, cache=False).theta, theta)
