"""The per-part files format (``privgraph-partitioned-input/1``): how a partitioned input and a
partitioned release lay their arrays out on disk, one directory per partition.

Written by :func:`~privgraph.privatize.partitioned.write_partitioned_input` (a graph in this
process) and :func:`~privgraph.privatize.partitioned_input.partitioned_input_from_graph` (by tasks),
read by the privatize stage's tasks (:mod:`privgraph.privatize.partitioned`) and by the store's
commit (:mod:`privgraph.publish.release_parts`). Every file is a private ``.npy`` (0600, written
atomically; directories 0700); the layout is in :mod:`privgraph.privatize.partitioned`.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.guarantee.private_files import write_private_file

__all__ = ["FORMAT", "ROW_FIELDS", "load_part_array", "part_dir", "read_layout", "save_part_array"]

#: the format named in a partitioned input's ``layout.json``
FORMAT = "privgraph-partitioned-input/1"
#: the per-node row fields a part may hold, in the order the files are written
ROW_FIELDS = ("x", "y", "train_mask", "val_mask", "test_mask")


def part_dir(root: Path, i: int) -> Path:
    """The directory of partition ``i`` under ``root`` (an input's or a release's).

    >>> part_dir(Path("input"), 3).as_posix()
    'input/part-00003'
    """
    return root / f"part-{i:05d}"


def save_part_array(path: Path, array: np.ndarray, *, hashed: bool = False) -> str | None:
    """Write ``array`` as ``.npy`` at ``path`` (private, atomic, no fsync: a staging file); with
    ``hashed`` (the release's parts) return the file's sha256. The array's bytes are written and
    hashed in place, not copied."""
    array = np.ascontiguousarray(array)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    body = memoryview(array.reshape(-1)).cast("B")
    write_private_file(path, [header.getvalue(), body], durable=False)
    if not hashed:
        return None
    digest = hashlib.sha256(header.getvalue())
    digest.update(body)
    return digest.hexdigest()


def load_part_array(path: Path, mmap: bool = False) -> np.ndarray:
    """The array at ``path`` (no pickles); ``mmap``: memory-mapped read-only, so a task touches
    only the pages it reads."""
    return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)


def read_layout(source: Path) -> dict[str, Any]:
    """The ``layout.json`` of the partitioned input ``source``.

    Raises:
        FileNotFoundError: ``source`` holds no ``layout.json``.
        ValueError: its format is not :data:`FORMAT`.
    """
    path = source / "layout.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not a partitioned input (write one with write_partitioned_input)")
    layout = json.loads(path.read_text())
    if layout.get("format") != FORMAT:
        raise ValueError(f"{path}: format {layout.get('format')!r}, expected {FORMAT!r}")
    return layout
