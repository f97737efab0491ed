"""Sparse operators shared by the models: CSR helpers, a fixed sparse product with its transpose
for the backward pass, and a linear layer that keeps sparse features sparse."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor
from torch.nn import Module

__all__ = ["quiet_sparse_beta", "sparse_csr_transpose", "sparse_aware_linear"]


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


def _csr(index: Tensor, value: Tensor, shape: tuple[int, int]) -> Tensor:
    coo = torch.sparse_coo_tensor(index, value, shape, check_invariants=False)
    return coo.coalesce().to_sparse_csr()


class _FixedSpMM(torch.autograd.Function):
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


def sparse_aware_linear(owner: Module, x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T`` for dense or sparse (CSR/COO) ``x``.

    With a CSR ``x`` in a differentiable forward, the product's backward uses ``x``'s transpose,
    computed once and kept in ``owner._x_cache`` while ``owner.cached`` (torch's own backward of a
    CSR product transposes ``x`` on every call).
    """
    if x.layout == torch.sparse_coo:
        with quiet_sparse_beta():
            x = x.coalesce().to_sparse_csr()
    if x.layout == torch.sparse_csr and torch.is_grad_enabled() and not x.requires_grad:
        t, c = sparse_csr_transpose(x, owner._x_cache)
        if owner.cached:
            owner._x_cache = c
        return _FixedSpMM.apply(weight.t(), x, t)
    return x @ weight.t()


