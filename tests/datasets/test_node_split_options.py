"""Node splits as options of every dataset: ``train`` / ``val`` fractions of a seeded random split
(LPGNN's 50/25/25), seeded by ``dataset.node_split_seed``, which is configuration: accepted,
used, kept out of the manifest, refused as an option at load time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from privgraph.config.pipeline import ConfigError
from privgraph.config.loader import load_config
from privgraph.ingest.datasets import check_dataset_options, load_dataset, load_musae_facebook, random_node_split

ROOT = Path(os.environ.get("PRIVGRAPH_DATA_ROOT", "../shared/datasets"))
HAS_CORA = (ROOT / "planetoid" / "Cora" / "raw").is_dir()
HAS_FACEBOOK = (ROOT / "musae" / "facebook").is_dir()


def _sizes(g) -> tuple[int, int, int]:
    return int(g.train_mask.sum()), int(g.val_mask.sum()), int(g.test_mask.sum())


def test_sbm_takes_a_seeded_random_split():
    opts = {"num_nodes": 400, "num_features": 4}
    default = load_dataset("sbm", **opts)
    a = load_dataset("sbm", node_split_seed=3, train=0.5, val=0.25, **opts)
    assert _sizes(a) == (200, 100, 100)
    assert not (a.train_mask & a.val_mask).any() and (a.train_mask | a.val_mask | a.test_mask).all()
    expected = random_node_split(400, train=0.5, val=0.25, seed=3)
    assert all(np.array_equal(m, e) for m, e in zip((a.train_mask, a.val_mask, a.test_mask), expected))
    assert np.array_equal(a.x, default.x) and np.array_equal(a.y, default.y)  # only the split moves
    assert "random node split 0.5/0.25/0.25" in a.meta["split"] and "seed" not in a.meta["split"].replace("(seeded)", "")
    b = load_dataset("sbm", node_split_seed=4, train=0.5, val=0.25, **opts)
    assert not np.array_equal(a.train_mask, b.train_mask)
    # one fraction given: the other is LPGNN's
    assert _sizes(load_dataset("sbm", train=0.6, **opts)) == (240, 100, 60)
    assert _sizes(load_dataset("sbm", val=0.1, **opts)) == (200, 40, 160)


@pytest.mark.dataset
@pytest.mark.skipif(not HAS_CORA, reason="needs Cora under PRIVGRAPH_DATA_ROOT")
def test_cora_takes_lpgnns_split_instead_of_planetoids():
    planetoid = load_dataset("cora", root=ROOT)
    assert _sizes(planetoid) == (140, 500, 1000)
    g = load_dataset("cora", root=ROOT, rho=0.2, train=0.5, val=0.25, node_split_seed=1)
    assert _sizes(g) == (1354, 677, 677)
    # the private edges do not depend on the node split
    assert np.array_equal(g.edges_private, load_dataset("cora", root=ROOT, rho=0.2).edges_private)


@pytest.mark.dataset
@pytest.mark.skipif(not HAS_FACEBOOK, reason="needs MUSAE Facebook under PRIVGRAPH_DATA_ROOT")
def test_facebook_same_options_same_split_as_its_loader():
    g = load_dataset("facebook", root=ROOT, train=0.6, node_split_seed=2)
    ref = load_musae_facebook(ROOT, train=0.6, val=0.25, node_split_seed=2)
    assert np.array_equal(g.train_mask, ref.train_mask) and np.array_equal(g.test_mask, ref.test_mask)
    assert np.array_equal(load_dataset("facebook", root=ROOT).val_mask, load_musae_facebook(ROOT).val_mask)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"node_split_seed": 1}, "options.node_split_seed: a split seed is configuration"),
        ({"train": 1.5}, "options.train: a node fraction in (0, 1), got 1.5"),
        ({"train": True}, "options.train: a node fraction in (0, 1), got True"),
        ({"val": "0.2"}, "options.val: a node fraction in (0, 1)"),
        ({"train": 0.8, "val": 0.2}, "options.val: train + val must leave test nodes"),
    ],
)
@pytest.mark.parametrize("name", ["cora", "facebook", "sbm", "generic"])
def test_bad_split_options_are_refused_before_anything_is_read(name, options, says):
    base = {"num_nodes": 10} if name == "sbm" else {"edges": "e.csv"} if name == "generic" else {}
    with pytest.raises(ValueError) as exc:
        check_dataset_options(name, {**base, **options})
    assert str(exc.value).startswith(says[: says.index(":") + 1]) and says in str(exc.value)
    assert "\n" not in str(exc.value)


def _pipeline(tmp_path: Path, dataset: dict) -> Path:
    p = {
        "dataset": dataset,
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "executor": "serial",
        "storage": str(tmp_path / "store"),
        "private_records": str(tmp_path / "private"),
    }
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {"p": p}}))
    return path


def test_config_accepts_the_seed_beside_split_seed_and_refuses_it_as_an_option(tmp_path):
    sbm = {"name": "sbm", "rho": 0.2, "options": {"num_nodes": 300, "train": 0.5, "val": 0.25}}
    cfg = load_config(_pipeline(tmp_path, {**sbm, "node_split_seed": 7}))
    assert cfg.pipelines["p"].dataset.node_split_seed == 7
    with pytest.raises(ConfigError, match=r"^pipelines\.p\.dataset\.options\.node_split_seed: .*dataset\.node_split_seed"):
        load_config(_pipeline(tmp_path, {**sbm, "options": {**sbm["options"], "node_split_seed": 7}}))
    with pytest.raises(ConfigError, match=r"^pipelines\.p\.dataset\.options\.train: a node fraction"):
        load_config(_pipeline(tmp_path, {**sbm, "options": {"num_nodes": 300, "train": 0}}))


@pytest.mark.flow
@pytest.mark.usefixtures("shared_prefect_server")
def test_a_run_with_a_node_split_seed_publishes_and_its_manifest_holds_no_seed(tmp_path):
    """The seed is used (two seeds, two splits) and never published: the run stores a version
    whose manifest records the fractions, not the seed."""
    sbm = {"name": "sbm", "rho": 0.2, "node_split_seed": 5,
           "options": {"num_nodes": 300, "num_features": 4, "train": 0.5, "val": 0.25}}
    cfg = _pipeline(tmp_path, sbm)
    env = {**os.environ, "PRIVGRAPH_HOME": str(tmp_path / "home")}
    env.pop("PRIVGRAPH_DEBUG", None)
    r = subprocess.run([sys.executable, "-m", "privgraph.cli", "run", "p", "--config", str(cfg), "--no-evaluate", "--json"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    (manifest_path,) = (tmp_path / "store").rglob("manifest.json")
    text = manifest_path.read_text()
    manifest = json.loads(text)
    assert manifest["dataset"]["options"]["train"] == 0.5
    assert "seed" not in text.lower()
    splits = np.load(manifest_path.parent / "splits.npz")
    expected = random_node_split(300, train=0.5, val=0.25, seed=5)
    assert np.array_equal(splits["train_mask"], expected[0])
