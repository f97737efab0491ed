"""Sparse operators shared by the models: CSR helpers, a fixed sparse product with its transpose
for the backward pass, and a linear layer that keeps sparse features sparse."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import numba
import numpy as np
import torch
from torch import Tensor
from torch.nn import Module

__all__ = ["FactoredInput", "FixedSpMM", "PropagatedInput", "StructuredInput", "cached_pair", "propagation_pair", "quiet_sparse_beta", "sparse_csr_transpose",
           "sparse_aware_linear"]


@contextlib.contextmanager
def quiet_sparse_beta() -> Iterator[None]:
    """Silence torch's one-time "Sparse CSR tensor support is in beta state" warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        yield


def sparse_csr_transpose(
    x: Tensor, cache: tuple[Tensor, Tensor, Tensor, Tensor] | None
) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor, Tensor]]:
    """``x.t()`` as CSR and the structure cache to reuse next time: when ``cache`` holds the same
    sparsity structure, only the values are permuted (no new transpose)."""
    crow, col = x.crow_indices(), x.col_indices()
    c = cache
    if not (
        c is not None
        and c[0].shape == crow.shape
        and c[1].shape == col.shape
        and c[2].shape == (x.shape[1], x.shape[0])
        and torch.equal(c[0], crow)
        and torch.equal(c[1], col)
    ):
        # transpose the positions 0..nnz-1 (exact in float64) to learn where each value goes
        pos = torch.arange(col.numel(), dtype=torch.float64, device=x.device)
        with quiet_sparse_beta():
            t = torch.sparse_csr_tensor(crow, col, pos, x.shape, check_invariants=False)
            t = t.t().to_sparse_csr()
        c = (crow, col, t, t.values().long())
    t, perm = c[2], c[3]
    return torch.sparse_csr_tensor(
        t.crow_indices(), t.col_indices(), x.values()[perm], t.shape, check_invariants=False
    ), c


@numba.njit(cache=True)
def _csr_kernel(rows, cols, vals, n_rows, cols_out, vals_out):  # pragma: no cover - compiled
    """Counting sort of the entries by row into ``cols_out`` / ``vals_out``, then each row's
    columns sorted (stable) and equal ones summed, compacted in place; returns the row pointers
    and the number of entries kept."""
    ptr = np.zeros(n_rows + 1, np.int64)
    for k in range(rows.size):
        ptr[rows[k] + 1] += 1
    for r in range(n_rows):
        ptr[r + 1] += ptr[r]
    fill = ptr[:-1].copy()
    for k in range(rows.size):
        r = rows[k]
        q = fill[r]
        cols_out[q] = cols[k]
        vals_out[q] = vals[k]
        fill[r] = q + 1
    kept = 0
    for r in range(n_rows):
        a, b = ptr[r], ptr[r + 1]
        ptr[r] = kept
        if b > a:
            order = np.argsort(cols_out[a:b], kind="mergesort")
            seg_c = cols_out[a:b][order]
            seg_v = vals_out[a:b][order]
            last = -1
            for i in range(seg_c.size):
                if seg_c[i] == last:
                    vals_out[kept - 1] += seg_v[i]
                else:
                    last = seg_c[i]
                    cols_out[kept] = last
                    vals_out[kept] = seg_v[i]
                    kept += 1
    ptr[n_rows] = kept
    return ptr, kept


def _index_dtype(entries: int, nr: int, nc: int) -> torch.dtype:
    return torch.int32 if max(entries, nr, nc) < 2**31 - 1 else torch.int64


def _csr_from(rows: Tensor, cols: Tensor, value: Tensor, shape: tuple[int, int]) -> Tensor:
    """The CSR matrix with ``value[k]`` at ``(rows[k], cols[k])``, duplicates summed: what
    ``sparse_coo_tensor(...).coalesce().to_sparse_csr()`` gives, in less time and memory.

    On the CPU a compiled counting sort by row, then a sort of each row's columns: about 8 bytes
    per entry beyond the output (int32 columns while they fit, the values' dtype). On a GPU one
    sort of the int64 keys ``row * ncols + col`` (row pointers by binary search), about 28.
    """
    for name, idx, size in (("row", rows, shape[0]), ("column", cols, shape[1])):
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= size):  # the kernel checks no bounds
            raise ValueError(f"sparse operator: a {name} index is outside [0, {size})")
    if rows.device.type == "cpu":
        return _csr_counting_sort(rows, cols, value, shape)
    return _csr_key_sort(rows, cols, value, shape)


def _csr_counting_sort(rows: Tensor, cols: Tensor, value: Tensor, shape: tuple[int, int]) -> Tensor:
    nr, nc = shape
    dt = _index_dtype(rows.numel(), nr, nc)
    m = rows.numel()
    cols_out = torch.empty(m, dtype=dt)
    vals_out = torch.empty(m, dtype=value.dtype)
    ptr, kept = _csr_kernel(rows.numpy(), cols.numpy(), value.detach().numpy(), nr, cols_out.numpy(),
                            vals_out.numpy())
    if kept < m:  # duplicates were summed: keep only the entries in use
        cols_out, vals_out = cols_out[:kept].clone(), vals_out[:kept].clone()
    return torch.sparse_csr_tensor(torch.from_numpy(ptr).to(dt), cols_out, vals_out, shape, check_invariants=False)


def _csr_key_sort(rows: Tensor, cols: Tensor, value: Tensor, shape: tuple[int, int]) -> Tensor:
    nr, nc = shape
    dt = _index_dtype(rows.numel(), nr, nc)
    key = rows.to(torch.int64) * nc
    key += cols
    key, perm = torch.sort(key)
    value = value[perm]
    del perm
    if key.numel() > 1:
        first = torch.ones(key.numel(), dtype=torch.bool, device=key.device)
        torch.ne(key[1:], key[:-1], out=first[1:])
        if not bool(first.all()):  # duplicate entries: summed, as coalesce does
            seg = torch.cumsum(first, 0) - 1
            value = torch.zeros(int(seg[-1]) + 1, dtype=value.dtype, device=value.device).index_add_(0, seg, value)
            del seg
            key = key[first]
        del first
    bounds = torch.arange(nr + 1, dtype=torch.int64, device=key.device) * nc
    crow = torch.searchsorted(key, bounds).to(dt)
    col = torch.remainder(key, nc).to(dt)
    del key
    return torch.sparse_csr_tensor(crow, col, value, shape, check_invariants=False)


def propagation_pair(
    edge_index: Tensor, value: Tensor, num_nodes: int, *, transpose: bool | None = None
) -> tuple[Tensor, Tensor | None]:
    """``(P, P^T)`` as CSR ``[n, n]`` with ``P[v, u] = value[k]`` for each edge ``k = (u, v)`` of
    ``edge_index`` (row = target: ``(P h)_v = sum_u P[v, u] h_u``), duplicates summed. Built one
    after the other, without a flipped copy of ``edge_index``.

    ``P^T`` serves only the backward of ``P @ h``: it is built when ``transpose`` (default: when
    autograd is on), else ``None`` (a query under ``torch.no_grad()`` holds half the operator)."""
    shape = (num_nodes, num_nodes)
    if transpose is None:
        transpose = torch.is_grad_enabled()
    with quiet_sparse_beta():
        op = _csr_from(edge_index[1], edge_index[0], value, shape)
        op_t = _csr_from(edge_index[0], edge_index[1], value, shape) if transpose else None
    return op, op_t


def cached_pair(
    cache: tuple[Tensor, Tensor, Tensor | None] | None, edge_index: Tensor, num_nodes: int, dtype: torch.dtype | None = None
) -> tuple[Tensor, Tensor | None] | None:
    """``(P, P^T)`` from a layer's ``cache`` ``(edge_index, P, P^T)`` when it serves this call:
    the same ``edge_index`` object, ``num_nodes`` rows, ``dtype`` (when given), and ``P^T`` built
    if autograd is on (see :func:`propagation_pair`); else ``None`` (build it again)."""
    if cache is None or cache[0] is not edge_index or cache[1].shape[0] != num_nodes:
        return None
    if dtype is not None and cache[1].dtype != dtype:
        return None
    if cache[2] is None and torch.is_grad_enabled():
        return None
    return cache[1], cache[2]


class FixedSpMM(torch.autograd.Function):
    """``op @ h`` for a constant sparse ``op``; the backward uses the precomputed ``op_t``.

    torch's own backward of a sparse-dense product transposes the sparse matrix on every call.
    """

    @staticmethod
    def forward(ctx: Any, h: Tensor, op: Tensor, op_t: Tensor) -> Tensor:
        ctx.op_t = op_t
        return op @ h

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, None, None]:
        return (ctx.op_t @ grad if ctx.needs_input_grad[0] else None), None, None


class StructuredInput:
    """A dense feature matrix ``[n, d]`` held in a form whose product with a weight is cheaper than
    the matrix's (:class:`FactoredInput`, :class:`PropagatedInput`): what :func:`sparse_aware_linear`
    and the first layers accept in place of a dense tensor. Input dropout never applies to it."""

    layout = torch.strided  # what it stands for: a dense matrix
    shape: torch.Size

    @property
    def device(self) -> torch.device:
        raise NotImplementedError

    @property
    def dtype(self) -> torch.dtype:
        raise NotImplementedError

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def linear(self, weight: Tensor) -> Tensor:
        """``X @ weight.T`` (``weight`` ``[o, d]``), differentiable in ``weight``."""
        raise NotImplementedError

    def dense(self) -> Tensor:
        """The matrix it stands for."""
        raise NotImplementedError


class FactoredInput(StructuredInput):
    r"""A dense feature matrix :math:`\mathbf{X}` ``[n, d]`` held as
    :math:`\mathbf{X} = \mathbf{L} \mathbf{R} - \mathbf{1} \mathbf{s}^\top`, with
    ``left`` :math:`\mathbf{L}` dense ``[n, k]`` or CSR ``[n, d]``, ``right`` :math:`\mathbf{R}`
    ``[k, d]`` or None (the identity) and ``shift`` :math:`\mathbf{s}` ``[d]`` or None.

    Two forms serve the evaluation: a released matrix that is one value almost everywhere (the
    Piecewise Mechanism's: each row is constant but for its sampled coordinate), centred, is
    CSR minus a shift, exactly; a smooth (propagated) matrix is its rank-``k`` factorisation
    within a stated relative error. The first layer's product :meth:`linear` then costs
    :math:`O(\mathrm{nnz} \cdot o)` or :math:`O((n + d) k o)` instead of :math:`O(n d o)`, and
    autograd differentiates it as the product it stands for.
    """

    def __init__(self, left: Tensor, right: Tensor | None = None, shift: Tensor | None = None) -> None:
        self.left, self.right, self.shift = left, right, shift
        self.left_t = None
        if left.layout == torch.sparse_csr:
            self.left_t, _ = sparse_csr_transpose(left, None)
        self.shape = torch.Size((left.shape[0], left.shape[1] if right is None else right.shape[1]))

    @property
    def device(self) -> torch.device:
        return self.left.device

    @property
    def dtype(self) -> torch.dtype:
        return self.left.dtype

    def linear(self, weight: Tensor) -> Tensor:
        w = weight if self.right is None else weight @ self.right.t()  # [o, k]
        if self.left_t is not None:
            h = FixedSpMM.apply(w.t(), self.left, self.left_t) if torch.is_grad_enabled() else self.left @ w.t()
        else:
            h = self.left @ w.t()
        return h if self.shift is None else h - self.shift @ weight.t()

    def column_sums(self, weights: Tensor) -> Tensor:
        r""":math:`\mathbf{w}^\top \mathbf{X}` ``[d]`` for node weights ``weights`` ``[n]``."""
        w = weights.to(self.dtype)
        if self.left_t is not None:
            total = self.left_t @ w
        else:
            total = w @ self.left
            total = total if self.right is None else total @ self.right
        return total if self.shift is None else total - w.sum() * self.shift

    def dense(self) -> Tensor:
        left = self.left.to_dense() if self.left_t is not None else self.left
        x = left if self.right is None else left @ self.right
        return x if self.shift is None else x - self.shift


class PropagatedInput(StructuredInput):
    r""":math:`\mathbf{X} = \mathbf{P}^K \mathbf{B} - \mathbf{1} \mathbf{c}^\top`: ``steps``
    :math:`K` products with a sparse operator ``op`` :math:`\mathbf{P}` ``[n, n]`` (``op_t`` its
    transpose, for the backward) over a ``base`` :math:`\mathbf{B}` (:class:`FactoredInput`),
    centred by ``center`` :math:`\mathbf{c}` ``[d]``: LPGNN's KProp over released features, whose
    ``n x d`` result is never formed. The product is linear, so
    :math:`\mathbf{X}\mathbf{W}^\top = \mathbf{P}^K (\mathbf{B}\mathbf{W}^\top) -
    \mathbf{1} (\mathbf{c}^\top \mathbf{W}^\top)`: exact up to float summation order, in
    :math:`O((\mathrm{cost}(\mathbf{B}) + K\,\mathrm{nnz}(\mathbf{P}))\,o)` instead of
    :math:`O(n d o)` (propagation in the hidden width).
    """

    def __init__(self, base: FactoredInput, op: Tensor, op_t: Tensor | None, steps: int, center: Tensor) -> None:
        self.base, self.op, self.op_t, self.steps, self.center = base, op, op_t, int(steps), center
        self.shape = base.shape

    @property
    def device(self) -> torch.device:
        return self.base.device

    @property
    def dtype(self) -> torch.dtype:
        return self.base.dtype

    def linear(self, weight: Tensor) -> Tensor:
        h = self.base.linear(weight)
        track = torch.is_grad_enabled() and h.requires_grad
        if track and self.op_t is None:
            raise ValueError("PropagatedInput: a differentiable product needs the operator's transpose op_t")
        for _ in range(self.steps):
            h = FixedSpMM.apply(h, self.op, self.op_t) if track else self.op @ h
        return h - self.center @ weight.t()

    def dense(self) -> Tensor:
        x = self.base.dense()
        for _ in range(self.steps):
            x = self.op @ x
        return x - self.center


def sparse_aware_linear(owner: Module, x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T`` for dense or sparse (CSR/COO) ``x``, or a :class:`StructuredInput`.

    With a CSR ``x`` in a differentiable forward, the product's backward uses ``x``'s transpose,
    computed once and kept in ``owner._x_cache`` while ``owner.cached`` (torch's own backward of a
    CSR product transposes ``x`` on every call).
    """
    if isinstance(x, StructuredInput):
        return x.linear(weight)
    if x.layout == torch.sparse_coo:
        with quiet_sparse_beta():
            x = x.coalesce().to_sparse_csr()
    if x.layout == torch.sparse_csr and torch.is_grad_enabled() and not x.requires_grad:
        t, c = sparse_csr_transpose(x, owner._x_cache)
        if owner.cached:
            owner._x_cache = c
        return FixedSpMM.apply(weight.t(), x, t)
    return x @ weight.t()


