"""Split the nodes of a graph into P disjoint parts (METIS via pymetis, streaming LDG, or a hash).

The partition is computed from the PUBLIC edges only, so it never depends on private data; the
ledger may then compose mechanisms applied per part in parallel (disjoint node sets). For per-node
mechanisms the output distribution does not depend on the partition at all; a seeded run's output
depends only on the seed and the partition (see :mod:`privgraph.seeding`).

METIS runs in a process of its own (:func:`metis_membership`): pymetis's METIS draws its
randomness from the C library's process-wide ``rand()`` after ``srand(seed)``, and any other
thread that calls ``rand()`` meanwhile (onnxruntime's telemetry thread does, on a back-off
schedule) changes the partition, and with it every per-partition noise stream of a seeded run.
In its own process nothing else draws from that state: the partition is a function of the public
edges alone (docs/architecture.md, "Determinism").

LDG (:func:`ldg_parts`, Stanton and Kliot 2012) streams the nodes once, from the last id to the
first, each with its public edges to larger ids (the partitioned graph's edge ranges hold exactly
those, by the smaller end): memory O(n) and one range's edges, where METIS holds the whole public
adjacency. Where each stops: docs/partitioned-input.md, "Partitioning at scale".
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from typing import IO, Any, Literal

import numba
import numpy as np

from privgraph.graph import GraphData

__all__ = [
    "METHODS", "Partitioning", "check_partition_arguments", "ldg_parts", "metis_membership", "partition_assignment",
    "partition_graph", "parts_cap_note", "public_csr", "upper_csr",
]

#: the partitioning methods, all functions of the public edges alone (hash: of the node ids)
METHODS = ("metis", "hash", "ldg")


@dataclasses.dataclass(frozen=True)
class Partitioning:
    """``assignment[v]`` is the part of node ``v``; ``parts[i]`` the sorted node ids of part ``i``."""

    assignment: np.ndarray
    method: str

    @property
    def num_parts(self) -> int:
        return int(self.assignment.max()) + 1 if self.assignment.size else 0

    @property
    def parts(self) -> list[np.ndarray]:
        order = np.argsort(self.assignment, kind="stable")
        bounds = np.searchsorted(self.assignment[order], np.arange(self.num_parts + 1))
        return [order[bounds[i] : bounds[i + 1]] for i in range(self.num_parts)]

    def sizes(self) -> list[int]:
        return np.bincount(self.assignment, minlength=self.num_parts).tolist()


def _hash_parts(num_nodes: int, num_parts: int) -> np.ndarray:
    # a fixed multiplicative hash (Knuth) spreads consecutive ids; deterministic, no randomness
    ids = np.arange(num_nodes, dtype=np.uint64)
    h = (ids * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    return (h % np.uint64(num_parts)).astype(np.int64)


# -- METIS in its own process ----------------------------------------------------------------------
#: The METIS process's program: requests ``[parts, n, m]`` (int64) + xadj (int32 [n + 1]) + adjncy
#: (int32 [m]) on stdin; answers ``[0]`` + membership (int64 [n]), or ``[k]`` + k bytes of error.
_METIS_CHILD = r"""
import signal, sys, traceback
import numpy as np, pymetis
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's Ctrl-C is the parent's; EOF ends this
inp, out = sys.stdin.buffer, sys.stdout.buffer
def read(n):
    buf = bytearray(n); view = memoryview(buf); got = 0
    while got < n:
        k = inp.readinto(view[got:])
        if not k:
            sys.exit(0)
        got += k
    return buf
while True:
    parts, n, m = (int(v) for v in np.frombuffer(read(24), np.int64))
    xadj = np.frombuffer(read(4 * (n + 1)), np.int32)
    adjncy = np.frombuffer(read(4 * m), np.int32)
    try:
        _, membership = pymetis.part_graph(parts, adjacency=pymetis.CSRAdjacency(xadj, adjncy))
        body = np.asarray(membership, np.int64).tobytes()
        out.write(np.array([0], np.int64).tobytes() + body)
    except Exception:
        msg = traceback.format_exc(limit=3).encode()
        out.write(np.array([len(msg)], np.int64).tobytes() + msg)
    out.flush()
"""


class _MetisProcess:
    """One METIS process per privgraph process (started on first use, again after a fork or a
    crash); requests are serialized by a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.owner = 0

    def _started(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.owner != os.getpid() or self.proc.poll() is not None:
            if not sys.executable:
                raise RuntimeError("METIS runs in a Python subprocess, but sys.executable is unknown")
            self.proc = subprocess.Popen([sys.executable, "-I", "-c", _METIS_CHILD], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, close_fds=True)
            self.owner = os.getpid()
        return self.proc

    def part_graph(self, xadj: np.ndarray, adjncy: np.ndarray, num_parts: int) -> np.ndarray:
        n, m = xadj.size - 1, adjncy.size
        with self.lock:
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(np.array([num_parts, n, m], np.int64).tobytes())
                proc.stdin.write(np.ascontiguousarray(xadj, np.int32).tobytes())
                proc.stdin.write(np.ascontiguousarray(adjncy, np.int32).tobytes())
                proc.stdin.flush()
                status = int(np.frombuffer(_read_exactly(proc.stdout, 8), np.int64)[0])
                body = _read_exactly(proc.stdout, 8 * n if status == 0 else status)
            except (BrokenPipeError, EOFError) as err:
                self.proc = None
                raise RuntimeError(f"the METIS process ended unexpectedly (exit code {proc.poll()})") from err
        if status:
            raise RuntimeError(f"METIS failed: {body.decode(errors='replace').strip().splitlines()[-1]}")
        return np.frombuffer(body, np.int64).copy()

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and self.owner == os.getpid():
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        k = stream.readinto(view[got:])  # type: ignore[attr-defined]
        if not k:
            raise EOFError(f"{got} of {size} bytes")
        got += k
    return bytes(buf)


def _after_fork_in_child() -> None:
    """A forked child starts its own METIS process when it needs one: a fresh lock, and its copies
    of the parent's pipes closed (so the parent's METIS process still ends when the parent does)."""
    _METIS.lock = threading.Lock()
    proc, _METIS.proc = _METIS.proc, None
    for stream in () if proc is None else (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


_METIS = _MetisProcess()
atexit.register(_METIS.close)
os.register_at_fork(after_in_child=_after_fork_in_child)


def metis_membership(xadj: np.ndarray, adjncy: np.ndarray, num_parts: int) -> np.ndarray:
    """METIS k-way parts (int64 ``[n]``, values in ``[0, num_parts)``) of the symmetric CSR graph
    ``xadj`` ``[n + 1]``, ``adjncy`` (int32-representable), computed by pymetis in privgraph's
    METIS process (see the module): a deterministic function of the graph, whatever other threads
    of this process do. ``O(n + m)`` to send, near-linear METIS."""
    if num_parts < 1 or xadj.ndim != 1 or xadj.size < 1 or adjncy.ndim != 1:
        raise ValueError("metis_membership: xadj [n + 1], adjncy [m] and num_parts >= 1")
    return _METIS.part_graph(xadj, adjncy, int(num_parts))


def public_csr(edges_public: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The CSR METIS is given (int32 ``xadj`` ``[n + 1]``, ``adjncy`` ``[2 m]``): both directions of
    each public edge, rows in node order, within a row the edges' order (first as ``u``, then as
    ``v``): the same edges in another order may give another partition."""
    e = edges_public
    src = np.concatenate([e[0], e[1]])
    dst = np.concatenate([e[1], e[0]])
    order = np.argsort(src, kind="stable")
    adjncy = dst[order].astype(np.int32)
    xadj = np.zeros(num_nodes + 1, dtype=np.int32)
    np.cumsum(np.bincount(src, minlength=num_nodes), out=xadj[1:])
    return xadj, adjncy


def _dense(assignment: np.ndarray) -> np.ndarray:
    """The parts relabelled to ``0..P'-1`` in order (an empty part's label dropped), int64."""
    _, dense = np.unique(assignment, return_inverse=True)
    return dense.astype(np.int64)


def check_partition_arguments(num_parts: Any, method: Any) -> None:
    """Refuse a ``num_parts`` that is not an int >= 1 and a method not in :data:`METHODS`."""
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)) or num_parts < 1:
        raise ValueError(f"num_parts must be an int >= 1, got {num_parts!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")


def parts_cap_note(num_parts: int, num_nodes: int) -> str | None:
    """The line a run logs when ``num_parts`` exceeds the node count (public: always declared), at
    which every partitioning caps it (a part holds at least one node); ``None`` when it does not."""
    cap = max(int(num_nodes), 1)
    if num_parts <= cap:
        return None
    return (f"partitions.num_parts is {num_parts} but the graph has {num_nodes} node(s): capped at {cap} "
            f"part(s), at most one per node (set num_parts to at most {cap} to silence this)")


# -- LDG, streaming --------------------------------------------------------------------------------
@numba.njit(cache=True)
def _ldg_block(indptr: np.ndarray, indices: np.ndarray, start: int, stop: int, assignment: np.ndarray,
               sizes: np.ndarray, capacity: int) -> None:  # pragma: no cover (compiled)
    counts = np.zeros(sizes.size, dtype=np.int64)
    for v in range(stop - 1, start - 1, -1):
        row = v - start
        for e in range(indptr[row], indptr[row + 1]):
            counts[assignment[indices[e]]] += 1
        best, best_score = -1, -1.0
        for i in range(sizes.size):
            if sizes[i] >= capacity:
                continue
            score = counts[i] * (1.0 - sizes[i] / capacity)
            if best < 0 or score > best_score or (score == best_score and sizes[i] < sizes[best]):
                best, best_score = i, score
        assignment[v] = best
        sizes[best] += 1
        for e in range(indptr[row], indptr[row + 1]):
            counts[assignment[indices[e]]] -= 1


def ldg_parts(num_nodes: int, num_parts: int,
              blocks: Iterable[tuple[int, int, np.ndarray, np.ndarray]]) -> np.ndarray:
    r"""Linear Deterministic Greedy (Stanton and Kliot, KDD 2012): int64 ``[n]`` parts, each at
    most :math:`C = \lceil n / P \rceil` nodes, labelled ``0..P'-1`` in order (a part left empty,
    as when :math:`(P - 1) C \ge n`, is dropped).

    The nodes arrive from ``n - 1`` down to 0; node ``v`` goes to the part :math:`i` with
    :math:`|P_i| < C` that maximises :math:`|N(v) \cap P_i| \, (1 - |P_i| / C)` over its neighbours
    already placed (those with larger ids), ties to the smaller part, then the lower index.
    ``blocks`` yields ``(start, stop, indptr, indices)`` from the last node range to the first
    (contiguous, covering ``0..n-1``): ``indices[indptr[v - start]:indptr[v - start + 1]]`` are
    the neighbours ``w > v`` of node ``v`` (:func:`upper_csr`). Deterministic; one pass; memory
    O(n + P) beside a block. Only the multiset of each node's larger neighbours matters, so a graph
    streamed in blocks gets the parts it gets whole.

    Raises:
        ValueError: the blocks do not cover ``0..n-1`` from the last to the first, or a neighbour
            is not larger than its node.
    """
    n, p = int(num_nodes), int(num_parts)
    assignment = np.full(n, -1, dtype=np.int64)
    sizes = np.zeros(p, dtype=np.int64)
    capacity = -(-n // p) if p else 0
    expected = n
    for start, stop, indptr, indices in blocks:
        if stop != expected or not 0 <= start <= stop or indptr.shape != (stop - start + 1,):
            raise ValueError(f"ldg_parts: block [{start}, {stop}) does not end where the next node range starts ({expected})")
        owners = np.repeat(np.arange(start, stop, dtype=np.int64), np.diff(indptr))
        if owners.size != indices.size or np.any(indices <= owners) or (indices.size and indices.max() >= n):
            raise ValueError(f"ldg_parts: block [{start}, {stop}) lists a neighbour w of a node v with w <= v or w >= {n}")
        _ldg_block(indptr.astype(np.int64), indices.astype(np.int64), int(start), int(stop), assignment, sizes, capacity)
        expected = start
    if expected != 0:
        raise ValueError(f"ldg_parts: the blocks end at node {expected}, not 0")
    return _dense(assignment)


def upper_csr(edges: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Each node's neighbours with larger ids, as CSR (int64 ``indptr`` ``[n + 1]``, ``indices``)
    from undirected edges ``[2, m]`` in either orientation (self-loops dropped): LDG's input."""
    lo, hi = np.minimum(edges[0], edges[1]), np.maximum(edges[0], edges[1])
    keep = lo < hi
    lo, hi = lo[keep], hi[keep]
    order = np.argsort(lo, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(lo, minlength=num_nodes), out=indptr[1:])
    return indptr, hi[order].astype(np.int64)


def partition_assignment(
    num_nodes: int, num_parts: int, method: str, public_edges: Callable[[], np.ndarray]
) -> tuple[np.ndarray, str]:
    """The assignment (int64 ``[n]``) and the method used, as :func:`partition_graph` computes
    them; ``public_edges()`` (the public edges ``[2, m]``) is called only when METIS or LDG may
    run (more than one part). Arguments are checked by the caller."""
    n = num_nodes
    p = int(min(num_parts, max(n, 1)))
    if p == 1 or n == 0:
        return np.zeros(n, dtype=np.int64), method
    if method == "hash":
        return _dense(_hash_parts(n, p)), method
    edges = public_edges()
    if edges.shape[1] == 0:
        # METIS and LDG need edges to be meaningful; with none, a hash split is as good and defined
        return _hash_parts(n, p), "hash"
    if method == "ldg":
        indptr, indices = upper_csr(edges, n)
        return ldg_parts(n, p, [(0, n, indptr, indices)]), method
    xadj, adjncy = public_csr(edges, n)
    del edges
    # METIS may leave a part empty on tiny or edgeless graphs: relabel to 0..P'-1 densely
    return _dense(metis_membership(xadj, adjncy, p)), method


def partition_graph(
    graph: GraphData, num_parts: int, method: Literal["metis", "hash", "ldg"] = "metis"
) -> Partitioning:
    """Partition the nodes of ``graph`` into at most ``num_parts`` non-empty parts.

    Args:
        graph: the input graph; only its public edges are read.
        num_parts: the number of parts P (>= 1); capped at ``num_nodes``.
        method: ``"metis"`` (pymetis on the public edges, few cut edges), ``"ldg"`` (one
            streaming pass over the public edges, :func:`ldg_parts`) or ``"hash"`` (a fixed hash
            of the node id; no dependency on edges at all).

    Runtime: O(n + m_pub) for hash and METIS (near-linear); O(n P + m_pub) for LDG.

    >>> path = GraphData(num_nodes=6, edges_public=[[0, 1, 3, 4], [1, 2, 4, 5]])
    >>> p = partition_graph(path, 2, "ldg")
    >>> p.sizes(), sorted(sorted(part.tolist()) for part in p.parts)
    ([3, 3], [[0, 1, 2], [3, 4, 5]])
    """
    check_partition_arguments(num_parts, method)
    return Partitioning(*partition_assignment(graph.num_nodes, num_parts, method, lambda: graph.edges_public))
