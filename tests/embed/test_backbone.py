"""ResNetEmbedder: shapes, determinism from the seed, files == arrays, batching, the weights file
round trip and weights_id, the refusal without weights, global RNG untouched, CUDA + AMP."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import numpy as np
import pytest
import skimage.data
import torch
from PIL import Image

from privgraph.ingest.embed.backbone import (
    TORCH_HOME_FILES,
    ResNetEmbedder,
    preprocess,
    torch_home_weights,
)
from privgraph.errors import ConfigError, DatasetNotFoundError


def _images() -> list[np.ndarray]:
    astro, coffee = skimage.data.astronaut(), skimage.data.coffee()
    return [astro[40:136, 160:256], coffee[100:180, 200:312], astro[300:364, 20:132]]


@pytest.fixture(scope="module")
def images() -> list[np.ndarray]:
    return _images()


@pytest.fixture(scope="module")
def png_paths(tmp_path_factory, images) -> list[Path]:
    d = tmp_path_factory.mktemp("png")
    paths = []
    for i, im in enumerate(images):
        p = d / f"img{i}.png"
        Image.fromarray(im).save(p)
        paths.append(p)
    return paths


@pytest.fixture(scope="module")
def emb0() -> ResNetEmbedder:
    return ResNetEmbedder("random", seed=0, device="cpu", batch_size=3)


@pytest.fixture(scope="module")
def base(emb0, images) -> np.ndarray:
    return emb0.embed_arrays(images)


def test_avgpool_shape_and_dtype(base, images):
    assert base.shape == (len(images), 2048)
    assert base.dtype == np.float32
    assert np.isfinite(base).all() and np.abs(base).sum(axis=1).min() > 0


def test_layer3_is_1024_d(images):
    e = ResNetEmbedder("random", seed=0, layer="layer3", device="cpu")
    out = e.embed_arrays(images[:1])
    assert out.shape == (1, 1024) and out.dtype == np.float32
    assert e.model_id == "resnet50/layer3/random:0/preprocess-v1"


def test_same_seed_same_embeddings(base, images):
    again = ResNetEmbedder("random", seed=0, device="cpu", batch_size=3)
    np.testing.assert_array_equal(again.embed_arrays(images), base)
    assert again.weights_id == "random:0"


def test_other_seed_differs_and_global_rng_untouched(base, images):
    state, np_state = torch.get_rng_state(), np.random.get_state()
    e1 = ResNetEmbedder("random", seed=1, device="cpu")
    out = e1.embed_arrays(images[:1])
    assert torch.equal(torch.get_rng_state(), state)
    assert np.array_equal(np.random.get_state()[1], np_state[1])
    assert e1.weights_id == "random:1"
    assert not np.allclose(out[0], base[0])


def test_embed_paths_equals_embed_arrays(emb0, base, png_paths):
    state = torch.get_rng_state()
    np.testing.assert_array_equal(emb0.embed_paths(png_paths), base)
    assert torch.equal(torch.get_rng_state(), state)  # the DataLoader draws from its own generator


def test_batch_size_does_not_change_the_result(emb0, base, images):
    one = copy.copy(emb0)  # shares the model
    one.batch_size = 1
    np.testing.assert_allclose(one.embed_arrays(images), base, rtol=1e-5, atol=1e-5)


def test_weights_file_round_trip(emb0, base, png_paths, tmp_path):
    path = tmp_path / "resnet50.pth"
    torch.save(emb0.model.state_dict(), path)
    loaded = ResNetEmbedder(path, device="cpu", batch_size=3, num_workers=1)  # a worker process decodes
    np.testing.assert_array_equal(loaded.embed_paths(png_paths), base)
    assert loaded.weights_id == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.model_id == f"resnet50/avgpool/{loaded.weights_id}/preprocess-v1"


def test_refusal_without_weights_names_the_expected_path(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    expected = tmp_path / "hub" / "checkpoints" / TORCH_HOME_FILES[0]
    with pytest.raises(ConfigError) as info:
        ResNetEmbedder("torch_home", device="cpu")
    msg = str(info.value)
    assert "\n" not in msg
    assert str(expected) in msg and "cannot download" in msg and "weights: random" in msg
    with pytest.raises(ConfigError, match="nowhere.pth"):
        ResNetEmbedder(tmp_path / "nowhere.pth", device="cpu")


def test_torch_home_finds_v1_or_v2(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    ck = tmp_path / "hub" / "checkpoints"
    assert torch_home_weights() == ck / TORCH_HOME_FILES[0]
    ck.mkdir(parents=True)
    (ck / TORCH_HOME_FILES[1]).write_bytes(b"v2")
    assert torch_home_weights() == ck / TORCH_HOME_FILES[1]
    (ck / TORCH_HOME_FILES[0]).write_bytes(b"v1")
    assert torch_home_weights() == ck / TORCH_HOME_FILES[0]


def test_bad_weights_file_and_options_are_refused(tmp_path):
    bad = tmp_path / "bad.pth"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="bad.pth") as info:
        ResNetEmbedder(bad, device="cpu")
    assert "\n" not in str(info.value)
    wrong = tmp_path / "wrong.pth"
    torch.save({"fc.weight": torch.zeros(2, 2)}, wrong)
    with pytest.raises(ConfigError, match="not a torchvision ResNet-50 state dict") as info:
        ResNetEmbedder(wrong, device="cpu")
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="embed.layer"):
        ResNetEmbedder("random", layer="fc")
    with pytest.raises(ConfigError, match="embed.batch_size"):
        ResNetEmbedder("random", batch_size=0)


def test_missing_image_file_is_one_line(emb0, tmp_path):
    with pytest.raises(DatasetNotFoundError, match="absent.png"):
        emb0.embed_paths([tmp_path / "absent.png"])
    assert emb0.embed_paths([]).shape == (0, 2048)


def test_preprocess_pil_and_array_agree(images):
    im = images[1]
    x = preprocess(im)
    assert x.shape == (3, 224, 224) and x.dtype == torch.float32
    assert torch.equal(x, preprocess(Image.fromarray(im)))
    # a grayscale PIL image becomes RGB (three equal channels)
    g = preprocess(Image.fromarray(im).convert("L"))
    raw = g * torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1) + torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    assert torch.allclose(raw[0], raw[1], atol=1e-6) and torch.allclose(raw[1], raw[2], atol=1e-6)
    with pytest.raises(ValueError, match="uint8"):
        preprocess(im.astype(np.float32))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_amp_matches_cpu(emb0, base, images, png_paths):
    gpu = ResNetEmbedder("random", seed=0, device="cuda", batch_size=3)
    assert gpu.amp is True
    out = gpu.embed_arrays(images)
    assert out.dtype == np.float32 and out.shape == base.shape
    cos = (out * base).sum(1) / (np.linalg.norm(out, axis=1) * np.linalg.norm(base, axis=1))
    assert cos.min() > 0.999, cos
    np.testing.assert_allclose(out, base, rtol=0.05, atol=0.05 * np.abs(base).max())
    np.testing.assert_allclose(gpu.embed_paths(png_paths), out, rtol=1e-3, atol=1e-3)
    fp32 = ResNetEmbedder("random", seed=0, device="cuda", amp=False)
    # cuDNN convolutions may run in TF32: close to the CPU, not bit-equal
    np.testing.assert_allclose(fp32.embed_arrays(images), base, rtol=1e-2, atol=1e-2 * np.abs(base).max())
