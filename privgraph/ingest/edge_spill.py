"""An ingest's edge list routed by range to spill fragments on disk (:class:`EdgeSpill`), so that
each range's edges are read back alone: every edge goes to the fragment of its smaller end's range,
with its source row (CSV line or Parquet row) for the messages; edges out of range and self-loops go
to one fragment of their own, checked once the node count is known. Fragments are owner-only files
appended batch by batch (:mod:`privgraph.ingest.partitioned_writer` fills and reads them).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from privgraph.graph import MAX_NODES, check_edge_list
from privgraph.ingest.input_batches import EdgeBatch

__all__ = ["INVALID", "SPILL", "EdgeSpill"]

#: one spilled edge: both ends as the file gives them, its source row (CSV line or Parquet row), the flag
SPILL = np.dtype([("u", "<i8"), ("v", "<i8"), ("row", "<i8"), ("p", "?")])
INVALID = "invalid"  # the fragment of edges out of range or self-loops, checked once n is known


@dataclasses.dataclass
class EdgeSpill:
    """Edges routed to per-range fragment files under ``root``, and what the pass learnt."""

    root: Path
    range_size: int
    known_n: int | None
    max_id: tuple[int, int, int] | None = None  # (largest id, column 0 src / 1 dst, its first source row)
    invalid: int = 0

    def fragment(self, r: int | str) -> Path:
        return self.root / f"{r}.bin"

    def _append(self, r: int | str, rec: np.ndarray) -> None:
        fd = os.open(self.fragment(r), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "wb") as f:  # not ndarray.tofile: its short write on a full disk loses the errno
            f.write(np.ascontiguousarray(rec).view(np.uint8))

    def add(self, batch: EdgeBatch) -> None:
        """Route one batch: invalid edges (negative ids, ids beyond the node count or
        :data:`MAX_NODES`, self-loops) to one fragment, the others to their smaller end's range."""
        u, v = batch.edges
        rec = np.empty(u.size, SPILL)
        rec["u"], rec["v"], rec["row"] = u, v, batch.rows
        rec["p"] = False if batch.private is None else batch.private
        if not u.size:
            return
        self._track_max(u, v, batch.rows)
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        bad = (lo < 0) | (u == v) | (hi >= (MAX_NODES if self.known_n is None else self.known_n))
        if bad.any():
            self.invalid += int(bad.sum())
            self._append(INVALID, rec[bad])
            rec, lo = rec[~bad], lo[~bad]
            if not rec.size:
                return
        r = lo // self.range_size
        order = np.argsort(r, kind="stable")
        rec, r = rec[order], r[order]
        cuts = np.flatnonzero(np.diff(r)) + 1
        for part, key in zip(np.split(rec, cuts), r[np.concatenate([[0], cuts])], strict=True):
            self._append(int(key), part)

    def _track_max(self, u: np.ndarray, v: np.ndarray, rows: np.ndarray) -> None:
        """The largest id and its first place, as ``np.argmax`` over ``[src; dst]`` finds it."""
        for col, a in ((0, u), (1, v)):
            j = int(np.argmax(a))
            cand = (int(a[j]), col, int(rows[j]))
            best = self.max_id
            if best is None or cand[0] > best[0] or (cand[0] == best[0] and col < best[1]):
                self.max_id = cand

    def read(self, r: int | str) -> np.ndarray:
        """Fragment ``r`` (its edges in source order); empty when no edge went there."""
        path = self.fragment(r)
        return np.fromfile(path, SPILL) if path.exists() else np.empty(0, SPILL)

    def distinct_ids(self, n: int) -> int:
        """How many distinct ids the edges use (a bitmap of ``n`` bits, one fragment at a time)."""
        bits = np.zeros((n + 7) // 8, np.uint8)
        negative: set[int] = set()
        for path in self.root.iterdir():
            rec = np.fromfile(path, SPILL)
            ids = np.concatenate([rec["u"], rec["v"]])
            negative.update(ids[ids < 0].tolist())
            ids = ids[(ids >= 0) & (ids < n)]
            np.bitwise_or.at(bits, ids >> 3, (1 << (ids & 7)).astype(np.uint8))
        return int(np.bitwise_count(bits).sum(dtype=np.int64)) + len(negative)

    def range_ends(self, i: int) -> np.ndarray:
        """Range ``i``'s spilled edges as ``[2, k]`` (either order: for counts and the cut rule)."""
        rec = self.read(i)
        return np.stack([rec["u"], rec["v"]])

    def check_invalid(self, n: int, where: Callable[[np.ndarray], str]) -> None:
        """Ids out of ``[0, n)`` and self-loops, over the whole edge list, with the loader's message."""
        if not self.invalid:
            return
        rec = self.read(INVALID)
        check_edge_list(np.stack([rec["u"], rec["v"]]), n, prefix="", where=lambda idx: where(rec["row"][idx]))
        raise AssertionError("an invalid edge passed the check")  # pragma: no cover
