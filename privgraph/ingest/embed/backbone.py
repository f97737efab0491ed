"""ResNet-50 image embeddings (torchvision's architecture, weights from a local file only).

:class:`ResNetEmbedder` maps images to float32 vectors: the 2048-d global average pool of
ResNet-50 (``layer="avgpool"``, the default), or ``layer4`` / ``layer3`` globally average-pooled
(2048-d / 1024-d). Weights are never downloaded: they come from a torchvision-format state dict
on disk (``$TORCH_HOME/hub/checkpoints/resnet50-0676ba61.pth`` for ``weights="torch_home"``), or,
for tests only, ``weights="random"``: every parameter drawn from a :class:`torch.Generator`
seeded by ``seed`` (torch's global random state is never read or advanced).

Preprocessing is one deterministic function, :func:`preprocess` (torchvision's ImageNet
evaluation transform): RGB, shorter side resized to 256 (bilinear, antialiased), center crop
224, ImageNet mean/std. Files (:meth:`ResNetEmbedder.embed_paths`) and in-memory arrays
(:meth:`ResNetEmbedder.embed_arrays`, e.g. face-masked images) both go through it.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

from privgraph.errors import ConfigError, DatasetNotFoundError, PrivgraphError, one_line

__all__ = [
    "ResNetEmbedder",
    "preprocess",
    "file_sha256",
    "torch_home_weights",
    "weights_file",
    "LAYERS",
    "PREPROCESS_ID",
    "TORCH_HOME_FILES",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
]

#: output dimension of each supported layer
LAYERS: dict[str, int] = {"avgpool": 2048, "layer4": 2048, "layer3": 1024}
#: names a change of :func:`preprocess`; part of :attr:`ResNetEmbedder.model_id` (cache keys)
PREPROCESS_ID = "preprocess-v1"
#: torchvision's file names for ResNet-50 IMAGENET1K_V1 and IMAGENET1K_V2, in order of preference
TORCH_HOME_FILES = ("resnet50-0676ba61.pth", "resnet50-11ad3fa6.pth")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RESIZE = 256
CROP = 224

_MEAN = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
_STD = torch.tensor(IMAGENET_STD).view(3, 1, 1)
_HASH_CHUNK = 1 << 20
_hash_cache: dict[tuple[str, int, int], str] = {}
_hash_lock = threading.Lock()


# -- preprocessing ---------------------------------------------------------------------------------
def preprocess(image: Image.Image | np.ndarray) -> torch.Tensor:
    """The ImageNet evaluation transform of one image: float32 ``[3, 224, 224]``.

    RGB (a PIL image in any mode is converted; an array is ``HxWx3`` or ``HxW`` uint8), shorter
    side resized to 256 with PIL's antialiased bilinear filter, center crop 224, then
    ``(x / 255 - mean) / std`` with ImageNet's mean and std. Deterministic.
    """
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or not (
            image.ndim == 2 or (image.ndim == 3 and image.shape[2] == 3)
        ):
            raise ValueError(
                f"preprocess: an image array must be HxWx3 (or HxW) uint8, got shape "
                f"{image.shape} dtype {image.dtype}"
            )
        if min(image.shape[:2]) < 1:
            raise ValueError(f"preprocess: an image array must not be empty, got shape {image.shape}")
        image = Image.fromarray(np.ascontiguousarray(image))
    elif not isinstance(image, Image.Image):
        raise TypeError(f"preprocess: expected a PIL image or an ndarray, got {type(image).__name__}")
    if image.mode != "RGB":
        image = image.convert("RGB")
    w, h = image.size
    # shorter side -> 256, the longer one scaled as torchvision does (int truncation)
    if w <= h:
        size = (RESIZE, int(RESIZE * h / w))
    else:
        size = (int(RESIZE * w / h), RESIZE)
    if size != (w, h):
        image = image.resize(size, resample=Image.Resampling.BILINEAR)
    w, h = image.size
    left = int(round((w - CROP) / 2.0))
    top = int(round((h - CROP) / 2.0))
    image = image.crop((left, top, left + CROP, top + CROP))
    x = torch.from_numpy(np.array(image, dtype=np.uint8, copy=True)).permute(2, 0, 1)
    return (x.to(torch.float32).div_(255.0) - _MEAN).div_(_STD).contiguous()


# -- weights ---------------------------------------------------------------------------------------
def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex of the file at ``path``, read in 1 MiB chunks; memoised per path, mtime, size."""
    p = Path(path).resolve()
    st = p.stat()
    memo = (str(p), st.st_mtime_ns, st.st_size)
    with _hash_lock:
        hit = _hash_cache.get(memo)
    if hit is not None:
        return hit
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(_HASH_CHUNK), b""):
            h.update(chunk)
    digest = h.hexdigest()
    with _hash_lock:
        _hash_cache[memo] = digest
    return digest


def torch_home_weights() -> Path:
    """Where ``weights="torch_home"`` looks: the first of :data:`TORCH_HOME_FILES` present in
    ``$TORCH_HOME/hub/checkpoints`` (torch.hub's directory), else the V1 file's path."""
    checkpoints = Path(torch.hub.get_dir()) / "checkpoints"
    for name in TORCH_HOME_FILES:
        if (checkpoints / name).is_file():
            return checkpoints / name
    return checkpoints / TORCH_HOME_FILES[0]


def weights_file(weights: str | os.PathLike[str]) -> Path | None:
    """The weights file ``weights`` names (``None`` for ``"random"``), checked to exist; reads
    nothing else, so a pipeline is refused before any data is read.

    Raises:
        ConfigError: the file is missing (one line: where to put it), or ``weights`` is not a
            path, ``"torch_home"`` or ``"random"``."""
    if isinstance(weights, str) and weights == "random":
        return None
    if isinstance(weights, str) and weights == "torch_home":
        path = torch_home_weights()
    elif isinstance(weights, (str, os.PathLike)):
        path = Path(weights).expanduser()
    else:
        raise ConfigError(f"embed.weights: must be a file path, 'torch_home' or 'random', got {weights!r}")
    if not path.is_file():
        raise _missing_weights(path)
    return path


def _missing_weights(path: Path) -> ConfigError:
    return ConfigError(
        f"embed.weights: no ResNet-50 weights file at {path}, and this machine cannot download "
        f"weights: put torchvision's {TORCH_HOME_FILES[0]} (IMAGENET1K_V1; or {TORCH_HOME_FILES[1]}, "
        "V2) there, or set embed.weights to the path of a torchvision ResNet-50 state dict; "
        "`weights: random` is the explicit test-only alternative (random parameters, "
        "meaningless embeddings)"
    )


def _skeleton() -> nn.Module:
    """torchvision's ResNet-50 with real but unset CPU tensors (built on the meta device, so
    torchvision's own initialisation never touches the global random state)."""
    from torchvision.models import resnet50  # lazy: torchvision, only where the ResNet is built

    with torch.device("meta"):
        model = resnet50(weights=None)
    return model.to_empty(device="cpu")


@torch.no_grad()
def _init_from_generator(model: nn.Module, generator: torch.Generator) -> None:
    """Draw every parameter as torchvision does (kaiming-normal fan_out convs, BN 1/0, Linear's
    default uniform), from ``generator``; BN running statistics 0/1."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu", generator=generator)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, nn.BatchNorm2d):
            m.weight.fill_(1.0)
            m.bias.zero_()
            m.reset_running_stats()
        elif isinstance(m, nn.Linear):
            nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(m.in_features)
            nn.init.uniform_(m.bias, -bound, bound, generator=generator)


def _load_weights(model: nn.Module, path: Path) -> None:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling refused, truncated file, not a torch file
        raise ConfigError(
            f"embed.weights: cannot read {path} as a torch state dict: {one_line(exc)}"
        ) from exc
    if not isinstance(state, dict):
        raise ConfigError(
            f"embed.weights: {path} holds a {type(state).__name__}, not a torchvision ResNet-50 "
            "state dict"
        )
    for m in model.modules():  # buffers an old checkpoint may lack (num_batches_tracked) get values
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
    try:
        model.load_state_dict(state, strict=True)
    except Exception as exc:  # missing/unexpected keys, shape mismatch
        raise ConfigError(
            f"embed.weights: {path} is not a torchvision ResNet-50 state dict: {one_line(exc)}"
        ) from exc


# -- the data loader -------------------------------------------------------------------------------
class _PathDataset(torch.utils.data.Dataset):
    """Opens and preprocesses one image file per item (runs in DataLoader workers)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> torch.Tensor:
        with Image.open(self.paths[i]) as img:
            return preprocess(img)


class _ArrayDataset(torch.utils.data.Dataset):
    def __init__(self, images: Sequence[np.ndarray]) -> None:
        self.images = list(images)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> torch.Tensor:
        return preprocess(self.images[i])


def _check_int(value: Any, name: str, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < lo or (
        hi is not None and int(value) > hi
    ):
        bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ConfigError(f"embed.{name}: must be an int {bound}, got {value!r}")
    return int(value)


class ResNetEmbedder:
    """ResNet-50 embeddings of images as float32 ``[n, d]`` arrays.

    Args:
        weights: a path to a torchvision ResNet-50 state dict (``.pth``); ``"torch_home"``:
            ``$TORCH_HOME/hub/checkpoints/resnet50-0676ba61.pth`` (or ``resnet50-11ad3fa6.pth``);
            or ``"random"``: parameters drawn from a generator seeded by ``seed`` (tests only).
        layer: ``"avgpool"`` (2048-d), ``"layer4"`` (2048-d, the same pooled features) or
            ``"layer3"`` (1024-d), each globally average-pooled.
        device: ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``...
        batch_size: images per forward pass.
        num_workers: DataLoader worker processes decoding files (0: in this process).
        amp: float16 autocast on CUDA (``None``: on when the device is CUDA). Never on the CPU.
        seed: the generator's seed for ``weights="random"``.

    Raises:
        ConfigError: a missing or unreadable weights file, an unknown layer or device.
    """

    def __init__(
        self,
        weights: str | os.PathLike[str],
        *,
        layer: str = "avgpool",
        device: str = "auto",
        batch_size: int = 32,
        num_workers: int = 0,
        amp: bool | None = None,
        seed: int = 0,
    ) -> None:
        if layer not in LAYERS:
            raise ConfigError(f"embed.layer: must be one of {sorted(LAYERS)}, got {layer!r}")
        self.layer = layer
        self.dim = LAYERS[layer]
        self.batch_size = _check_int(batch_size, "batch_size", 1)
        self.num_workers = _check_int(num_workers, "num_workers", 0)
        self.seed = _check_int(seed, "seed", 0, 2**64 - 1)
        self.device = self._resolve_device(device)
        if amp is not None and not isinstance(amp, bool):
            raise ConfigError(f"embed.amp: must be true, false or null, got {amp!r}")
        self.amp = self.device.type == "cuda" and (amp is None or amp)

        model = _skeleton()
        path = weights_file(weights)
        if path is None:
            g = torch.Generator(device="cpu")
            g.manual_seed(self.seed)
            _init_from_generator(model, g)
            self.weights_path: Path | None = None
            self._weights_id = f"random:{self.seed}"
        else:
            # hashed before loading, so that the id names the weights loaded even if the file
            # is replaced later (memoised per path, mtime and size)
            self._weights_id = f"sha256:{file_sha256(path)}"
            _load_weights(model, path)
            self.weights_path = path
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        if self.device.type == "cuda":
            model = model.to(self.device, memory_format=torch.channels_last)
        self.model = model

    @staticmethod
    def _resolve_device(device: str) -> torch.device:
        if device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ConfigError(f"embed.device: not a device: {device!r}") from exc
        if dev.type not in ("cpu", "cuda"):
            raise ConfigError(f"embed.device: must be 'auto', 'cpu' or 'cuda[:i]', got {device!r}")
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"embed.device: {device!r} asked for but CUDA is not available here")
        return dev

    def __repr__(self) -> str:
        return (
            f"ResNetEmbedder(layer={self.layer!r}, weights={self.weights_id!r}, "
            f"device={str(self.device)!r}, amp={self.amp})"
        )

    @property
    def weights_id(self) -> str:
        """``"random:<seed>"`` or ``"sha256:<hex of the weights file>"`` (as loaded)."""
        return self._weights_id

    @property
    def model_id(self) -> str:
        """What determines an embedding besides the image: ``resnet50/<layer>/<weights_id>/preprocess-v1``."""
        return f"resnet50/{self.layer}/{self.weights_id}/{PREPROCESS_ID}"

    # -- forward -----------------------------------------------------------------------------------
    def _features(self, x: torch.Tensor) -> torch.Tensor:
        m = self.model
        x = m.maxpool(m.relu(m.bn1(m.conv1(x))))
        x = m.layer3(m.layer2(m.layer1(x)))
        if self.layer != "layer3":
            x = m.layer4(x)
        return x.mean(dim=(2, 3))  # == avgpool + flatten

    def _run(self, batches: Iterator[torch.Tensor], n: int) -> np.ndarray:
        out = np.empty((n, self.dim), dtype=np.float32)
        row = 0
        cuda = self.device.type == "cuda"
        with torch.inference_mode():
            for x in batches:
                x = x.to(self.device, non_blocking=cuda)
                if cuda:
                    x = x.contiguous(memory_format=torch.channels_last)
                    with torch.autocast("cuda", dtype=torch.float16, enabled=self.amp):
                        f = self._features(x)
                else:
                    f = self._features(x)
                k = f.shape[0]
                out[row : row + k] = f.float().cpu().numpy()
                row += k
        assert row == n
        return out

    def _loader(self, dataset: torch.utils.data.Dataset, workers: int) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(
            dataset,
            batch_size=self.batch_size,
            shuffle=False,
            num_workers=workers,
            pin_memory=self.device.type == "cuda",
            persistent_workers=False,
            # decoding workers come from a forkserver: a fork of this process (Prefect's task threads,
            # the Dask client's, the API log worker's) copied their locks mid-use, and a worker died
            # at start in one of ~3,000 test runs; the forkserver forks from a clean process
            multiprocessing_context="forkserver" if workers > 0 else None,
            # the iterator draws its workers' base seed from this generator, not the global RNG
            # (preprocessing draws nothing, so the seed changes no result)
            generator=torch.Generator().manual_seed(0),
        )

    def embed_paths(self, paths: Sequence[str | os.PathLike[str]]) -> np.ndarray:
        """Embeddings of the image files ``paths``, in order: float32 ``[n, dim]``.

        Raises:
            DatasetNotFoundError: a file is missing.
            PrivgraphError: a file is not an image PIL can read.
        """
        ps = [Path(p) for p in paths]
        for p in ps:  # fail before any work, one line naming the file
            if not p.is_file():
                raise DatasetNotFoundError(f"embed: image file not found: {p}")
            try:
                with Image.open(p):
                    pass
            except Exception as exc:
                raise PrivgraphError(f"embed: cannot read {p} as an image: {one_line(exc)}") from exc
        if not ps:
            return np.empty((0, self.dim), dtype=np.float32)
        workers = min(self.num_workers, math.ceil(len(ps) / self.batch_size))
        return self._run(iter(self._loader(_PathDataset(ps), workers)), len(ps))

    def embed_arrays(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Embeddings of in-memory ``HxWx3`` uint8 RGB images (e.g. face-masked), in order."""
        images = list(images)
        for i, im in enumerate(images):
            if not isinstance(im, np.ndarray) or im.dtype != np.uint8 or im.ndim != 3 or im.shape[2] != 3:
                what = f"shape {im.shape} dtype {im.dtype}" if isinstance(im, np.ndarray) else type(im).__name__
                raise ValueError(f"embed_arrays: image {i} must be an HxWx3 uint8 array, got {what}")
        if not images:
            return np.empty((0, self.dim), dtype=np.float32)
        # arrays are already in memory: preprocessing in this process (no pickling to workers)
        return self._run(iter(self._loader(_ArrayDataset(images), 0)), len(images))
