"""RetinaFace boxes on real images (one face on the astronaut, none on coffee or the rocket),
clipping, face masks and masked images."""

from __future__ import annotations

import math

import numpy as np
import pytest
import retinaface
import skimage.data

from privgraph.ingest.embed.faces import FaceBox, detect_faces, face_mask, mask_faces
from privgraph.errors import ConfigError


def test_astronaut_has_exactly_one_face_over_her_face():
    faces = detect_faces(skimage.data.astronaut())
    assert len(faces) == 1
    f = faces[0]
    assert isinstance(f, FaceBox) and f.score > 0.9
    assert all(isinstance(v, int) for v in (f.x, f.y, f.width, f.height))
    # her face: roughly columns 150-300, rows 30-200 of the 512x512 image
    assert 150 <= f.x and f.x + f.width <= 300 and 30 <= f.y and f.y + f.height <= 200
    assert f.width >= 60 and f.height >= 60


@pytest.mark.parametrize("name", ["coffee", "rocket"])
def test_images_without_faces_give_none(name):
    assert detect_faces(getattr(skimage.data, name)()) == []


@pytest.mark.parametrize("threshold", [0, 1, -0.1, 1.5, math.nan, True, "0.9"])
def test_bad_threshold_is_refused(threshold):
    with pytest.raises(ConfigError, match="threshold"):
        detect_faces(np.zeros((8, 8, 3), np.uint8), threshold=threshold)


def test_threshold_is_passed_and_boxes_are_clipped(monkeypatch):
    seen = {}

    def fake(image, **kwargs):
        seen.update(kwargs)
        F = retinaface.types.Face
        return [F(0.99, -5, -3, 20, 10, []), F(0.95, 90, 40, 30, 30, []), F(0.93, 200, 0, 5, 5, [])]

    monkeypatch.setattr(retinaface, "detect_faces", fake)
    boxes = detect_faces(np.zeros((50, 100, 3), np.uint8), threshold=0.7)
    assert seen == {"score_threshold": 0.7}
    # clipped to the 100x50 image; the box entirely outside is dropped
    assert boxes == [FaceBox(0, 0, 15, 7, 0.99), FaceBox(90, 40, 10, 10, 0.95)]


def test_bad_image_is_refused():
    with pytest.raises(ValueError, match="HxWx3 uint8"):
        detect_faces(np.zeros((8, 8, 3), np.float32))


def test_face_mask_area_margin_and_clipping():
    box = FaceBox(x=20, y=10, width=40, height=30, score=0.99)
    m0 = face_mask((100, 120), [box], margin=0.0)
    assert m0.shape == (100, 120) and m0.dtype == bool
    assert m0.sum() == 40 * 30 and m0[10:40, 20:60].all()
    m = face_mask((100, 120, 3), [box])  # margin 0.1: 4 px left/right, 3 px top/bottom
    assert m.sum() == 48 * 36 and m[7:43, 16:64].all()
    assert (m0 <= m).all()
    edge = face_mask((50, 50), [FaceBox(0, 0, 20, 20, 0.9)], margin=0.5)  # clipped at the corner
    assert edge.sum() == 30 * 30
    assert not face_mask((5, 5), []).any()
    with pytest.raises(ConfigError, match="margin"):
        face_mask((5, 5), [], margin=-0.1)


def test_mask_faces_zero_and_mean():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(40, 50, 3), dtype=np.uint8)
    keep = image.copy()
    mask = face_mask(image.shape, [FaceBox(10, 5, 20, 15, 0.99)], margin=0.0)

    zero = mask_faces(image, mask, "zero")
    assert np.array_equal(image, keep)  # the input is not modified
    assert np.array_equal(zero[~mask], image[~mask]) and (zero[mask] == 0).all()

    mean = mask_faces(image, mask, "mean")
    expect = np.rint(image[~mask].astype(np.float64).mean(axis=0)).astype(np.uint8)
    assert np.array_equal(mean[~mask], image[~mask])
    assert (mean[mask] == expect).all()

    everything = np.ones(image.shape[:2], bool)
    assert (mask_faces(image, everything, "mean") == 0).all()  # nothing unmasked: black
    with pytest.raises(ConfigError, match="zero"):
        mask_faces(image, mask, "blur")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mask"):
        mask_faces(image, mask[:-1], "zero")


def test_detect_then_mask_astronaut():
    image = skimage.data.astronaut()
    mask = face_mask(image.shape, detect_faces(image))
    assert 0.03 < mask.mean() < 0.1  # the face, not the image
    assert (mask_faces(image, mask)[mask] == 0).all()
