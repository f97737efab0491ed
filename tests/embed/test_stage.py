"""The embed stage: a graph's images to features (cache hits, the manifest's record), the
face-masked embeddings of Eq. 5, beta from them (sums to 1; zero where the embedding ignores
the masked region), the scores' faces path, and the weights refusal before any data is read."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.ingest.datasets import load_dataset
from privgraph.ingest.embed.cache import EmbeddingCache
from privgraph.ingest.embed.stage import build_embedder, embed_graph, face_masked_embeddings
from privgraph.errors import ConfigError
from privgraph.ingest.scoring import compute_scores
from privgraph.ingest.scoring.sensitivity import embedding_sensitivity


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    import os

    old = os.environ.get("PRIVGRAPH_CACHE_DIR")
    os.environ["PRIVGRAPH_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    try:
        yield load_dataset("photos", num_nodes=24, seed=3)
    finally:
        if old is None:
            os.environ.pop("PRIVGRAPH_CACHE_DIR")
        else:
            os.environ["PRIVGRAPH_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def embedder():
    return build_embedder({"weights": "random", "batch_size": 8})


def test_embed_graph_sets_features_records_the_model_and_reads_the_cache(photos, embedder, tmp_path):
    cache = EmbeddingCache(tmp_path / "emb")
    g, record, stats = embed_graph(photos, embedder, cache=cache)
    assert g.x.shape == (photos.num_nodes, 2048) and g.x.dtype == np.float32 and photos.x is None
    assert stats == {"hits": 0, "misses": photos.num_nodes}
    assert record["random_weights"] is True and record["weights"] == "random:0" and record["dim"] == 2048
    assert "seed" not in " ".join(record)  # the manifest refuses keys naming a seed
    again, _, stats2 = embed_graph(photos, embedder, cache=cache)
    assert stats2 == {"hits": photos.num_nodes, "misses": 0}
    np.testing.assert_array_equal(again.x, g.x)
    uncached, _, _ = embed_graph(photos, embedder)
    np.testing.assert_allclose(uncached.x, g.x, rtol=1e-5, atol=1e-5)


def test_face_masked_embeddings_change_only_images_with_a_face(photos, embedder, tmp_path):
    names = photos.meta["classes"]
    astronaut = [i for i in range(photos.num_nodes) if names[int(photos.y[i])] == "astronaut"][:3]
    coffee = [i for i in range(photos.num_nodes) if names[int(photos.y[i])] == "coffee"][:3]
    assert astronaut and coffee
    nodes = np.array(astronaut + coffee)
    z = embedder.embed_paths([photos.meta["image_paths"][i] for i in nodes])
    cache = EmbeddingCache(tmp_path / "emb")
    zhat, stats = face_masked_embeddings(photos, nodes, embedder, cache=cache)
    assert stats["misses"] == len(nodes) and stats["faces"] == len(astronaut)  # a face in every astronaut crop
    k = len(astronaut)
    assert np.abs(z[:k] - zhat[:k]).sum(axis=1).min() > 0  # masking the face moves the embedding
    np.testing.assert_allclose(z[k:], zhat[k:], rtol=1e-5, atol=1e-5)  # no face: nothing masked
    again, stats2 = face_masked_embeddings(photos, nodes, embedder, cache=cache)
    assert stats2["hits"] == len(nodes)
    np.testing.assert_array_equal(again, zhat)


def test_eq5_beta_sums_to_one_and_is_zero_where_the_embedding_ignores_the_masked_region():
    rng = np.random.default_rng(0)
    images = rng.random((10, 8, 8))
    masked = images.copy()
    masked[:, :4, :4] = 0.0  # the "face": the top-left quarter

    def g(x):  # coordinates 0-1 read the top-left quarter, 2-3 only the bottom-right one
        return np.stack([x[:, :4, :4].mean((1, 2)), x[:, :4, :4].max((1, 2)),
                         x[:, 4:, 4:].mean((1, 2)), x[:, 4:, 4:].min((1, 2))], axis=1)

    beta = embedding_sensitivity(g(images), g(masked))
    assert beta.sum() == pytest.approx(1.0) and np.all(beta >= 0)
    assert beta[2] == 0 and beta[3] == 0 and beta[0] > 0 and beta[1] > 0
    with pytest.raises(ValueError, match="0/0"):
        embedding_sensitivity(g(images), g(images))


def test_scores_with_faces_use_the_public_images_only(photos, embedder):
    g, _, _ = embed_graph(photos, embedder)
    cfg = {"gamma": 0.5, "public_nodes": {"rule": "train_mask"}, "sensitivity": {"faces": {"threshold": 0.9}}}
    with pytest.raises(ValueError, match="needs the face-masked embeddings"):
        compute_scores(g, cfg, seed=0, cache=False)
    seen = []

    def masked(view):  # the scores hand over a graph of the public rows only
        seen.append(view.meta["image_paths"])
        return face_masked_embeddings(view, np.arange(view.num_nodes), embedder)[0]

    res = compute_scores(g, cfg, seed=0, cache=False, masked_rows=masked, masked_id="test")
    public = [g.meta["image_paths"][i] for i in np.flatnonzero(g.train_mask)]
    assert len(seen) == 1 and list(seen[0]) == public
    assert res.theta.shape == (2048,) and res.theta.sum() == pytest.approx(1.0)
    assert res.beta.sum() == pytest.approx(1.0)
    assert res.provenance["sensitivity"]["sensitive_input"].startswith("faces")
    with pytest.raises(ValueError, match="exactly one of sensitive_columns"):
        compute_scores(g, {**cfg, "sensitivity": {"faces": {}, "sensitive_columns": [0]}}, seed=0, cache=False)


def test_a_missing_weights_file_is_refused_before_any_data_is_read(tmp_path):
    from privgraph.config.loader import parse_config
    from privgraph.validate.preflight import check_before_reading

    cfg = parse_config({"pipelines": {"p": {
        "dataset": {"name": "photos", "root": str(tmp_path), "options": {"num_nodes": 20}},
        "embed": {"weights": "weights/resnet50.pth"},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "budget": {"features": 1.0, "edges": 1.0}, "edges": {"mechanism": "nonpriv_part"}, "storage": str(tmp_path / "store"),
        "private_records": str(tmp_path / "private")}}}).get("p")
    with pytest.raises(ConfigError, match=r"no ResNet-50 weights file at .*weights/resnet50\.pth.*weights: random"):
        check_before_reading(cfg)
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())
