"""Two-operand contractions run as one BLAS GEMM on 2-D views of the blocks.

numpy's ``matmul`` loops a GEMM per matrix of a stack (``x @ w`` with ``x`` of shape
``(b, t, d)`` runs ``b`` small products), and ``einsum(optimize=True)`` goes through
``tensordot``, which copies an operand whose contracted dims are not last.  When the
contracted labels form one block of each operand (first or last, in the same order) and no
label is batched, both operands are 2-D views without copies: ``(M, K) @ (K, N)``, either
side possibly transposed (BLAS takes the transpose as a flag), and the result is its
reshape, transposed as a view to the output's label order.  Where the contracted labels
are interleaved with the free ones (``bhtk,btd->dhk``, a gradient of attention's
projections), the operand is first copied into (free, K) or (K, free) order, the one copy
``tensordot`` makes too, without ``einsum``'s path search (``a_perm``/``b_perm``).
A product of stacked matrices (``abik,abjk->abij``: attention's scores and their
gradients) runs as ``np.matmul`` on (possibly transposed) views, BLAS taking the transposes
as flags.  Otherwise (other batch labels, repeated labels, blocks that do not reshape
without a copy) the numpy function runs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np


@dataclass(frozen=True)
class GemmPlan:
    """How to view the operands: ``a_k_last`` (a is (free, K)) or (K, free); ``b_k_first``
    (b is (K, free)) or (free, K); how many free dims each has; the output's permutation of
    (a's free dims, b's free dims), None when it is that order; ``a_perm``/``b_perm``: the
    transposition an operand is copied in first (into (free, K) / (K, free)), or None."""

    a_k_last: bool
    b_k_first: bool
    a_free: int
    b_free: int
    perm: Optional[tuple]
    a_perm: Optional[tuple] = None
    b_perm: Optional[tuple] = None


def gemm_plan(inputs: Sequence[str], output: str) -> Optional[GemmPlan]:
    """The plan of einsum ``inputs -> output`` as one GEMM, or None."""
    if len(inputs) != 2:
        return None
    a, b = inputs
    if len(set(a)) != len(a) or len(set(b)) != len(b) or len(set(output)) != len(output):
        return None
    k = [c for c in a if c in b]
    a_free, b_free = [c for c in a if c not in k], [c for c in b if c not in k]
    if any(c in output for c in k) or sorted(output) != sorted(a_free + b_free):
        return None
    ka, kb = [c for c in a if c in k], [c for c in b if c in k]
    b_k_first = _layout(b, kb, b_free)
    order_k = kb if b_k_first is not None else ka      # keep an operand as it is if one can
    a_k_last = _layout(a, a_free, order_k)
    a_perm = b_perm = None
    if a_k_last is None:                  # copied into (free, K)
        a_k_last, a_perm = True, tuple(a.index(c) for c in a_free + order_k)
    if b_k_first is None:                 # copied into (K, free), in a's K order
        b_k_first, b_perm = True, tuple(b.index(c) for c in order_k + b_free)
    order = a_free + b_free
    perm = tuple(order.index(c) for c in output)
    if (len(a) == len(b) == len(output) == 2 and a_k_last and b_k_first and perm == (0, 1)
            and a_perm is None and b_perm is None):
        return None              # already a plain 2-D product
    return GemmPlan(a_k_last, b_k_first, len(a_free), len(b_free),
                    None if perm == tuple(range(len(perm))) else perm, a_perm, b_perm)


def _layout(labels, first, second) -> Optional[bool]:
    """True when ``labels`` are ``first`` then ``second``, False when the other way round."""
    if list(labels) == first + second:
        return True
    if list(labels) == second + first:
        return False
    return None


def gemm_kernel(inputs: Sequence[str], output: str, fallback: Callable) -> Callable:
    """A kernel running the contraction as one GEMM where it can, ``fallback`` elsewhere;
    with the operands' roles swapped where that writes the output in its own order
    (``aik,aij->jk`` as ``(aij)^T (aik)``, not the transpose of ``(aik)^T (aij)``)."""
    stacked = _stacked(inputs, output)
    if stacked is not None:
        return stacked
    chosen = _chosen(inputs, output)
    if chosen is None:
        return fallback
    plan, swap = chosen
    if swap:
        def kernel(a, b):
            out = run_gemm(plan, b, a)
            return fallback(a, b) if out is None else out
        return kernel

    def kernel(a, b):
        out = run_gemm(plan, a, b)
        return fallback(a, b) if out is None else out
    return kernel


def _chosen(inputs: Sequence[str], output: str):
    """(the GEMM plan ``gemm_kernel`` runs, whether on the operands swapped), or None: the
    operands swapped where that writes the output in its own order with no more copies."""
    plan = gemm_plan(inputs, output)
    if plan is None:
        return None
    swapped = gemm_plan(inputs[::-1], output) if plan.perm is not None else None
    if swapped is not None and swapped.perm is None and _copies(swapped) <= _copies(plan):
        return swapped, True
    return plan, False


def copies_first(inputs: Sequence[str], output: str) -> bool:
    """Whether ``gemm_kernel``'s product copies its first operand into GEMM order."""
    if _stacked(inputs, output) is not None:
        return False
    chosen = _chosen(inputs, output)
    if chosen is None:
        return False
    plan, swap = chosen
    return (plan.b_perm if swap else plan.a_perm) is not None


def _stacked(inputs: Sequence[str], output: str) -> Optional[Callable]:
    """``np.matmul`` of matrix stacks for ``...ik,...jk->...ij`` and its transposes (the same
    leading labels everywhere, one contracted and one free label per operand), or None."""
    if len(inputs) != 2:
        return None
    a, b = inputs
    n = len(a) - 2
    if (n < 1 or len(b) != len(a) or len(output) != len(a) or a[:n] != b[:n]
            or output[:n] != a[:n] or len(set(a + b)) != n + 3):
        return None
    shared = set(a[n:]) & set(b[n:])
    if len(shared) != 1 or shared & set(output[n:]):
        return None
    k = shared.pop()
    i, j = a[n:].replace(k, ""), b[n:].replace(k, "")
    if sorted(output[n:]) != sorted(i + j):
        return None
    a_t, b_t, swap = a[n:] == k + i, b[n:] == j + k, output[n:] == j + i

    def kernel(x, y):
        x = x.swapaxes(-1, -2) if a_t else x        # (..., i, k)
        y = y.swapaxes(-1, -2) if b_t else y        # (..., k, j)
        if swap:
            return np.matmul(y.swapaxes(-1, -2), x.swapaxes(-1, -2))
        return np.matmul(x, y)
    return kernel


def _copies(plan: GemmPlan) -> int:
    return (plan.a_perm is not None) + (plan.b_perm is not None)


def run_gemm(plan: GemmPlan, a, b):
    """``plan`` on blocks ``a`` and ``b``; None when a block cannot be viewed in 2-D."""
    if plan.a_perm is not None:
        a = a.transpose(plan.a_perm).copy()
    if plan.b_perm is not None:
        b = b.transpose(plan.b_perm).copy()
    a_free = a.shape[:plan.a_free] if plan.a_k_last else a.shape[a.ndim - plan.a_free:]
    b_free = b.shape[b.ndim - plan.b_free:] if plan.b_k_first else b.shape[:plan.b_free]
    k = math.prod(a.shape[plan.a_free:] if plan.a_k_last else a.shape[:a.ndim - plan.a_free])
    m, n = math.prod(a_free), math.prod(b_free)
    try:
        left = a.reshape((m, k), copy=False) if plan.a_k_last else a.reshape(
            (k, m), copy=False).T
        right = b.reshape((k, n), copy=False) if plan.b_k_first else b.reshape(
            (n, k), copy=False).T
    except (ValueError, TypeError):
        return None
    out = np.matmul(left, right).reshape(a_free + b_free)
    return out if plan.perm is None else out.transpose(plan.perm)
