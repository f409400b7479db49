"""``np.linalg`` solvers on DTensors: ``pinv``, ``lstsq`` and ``matrix_rank`` from the SVD of
``decompositions``; ``solve`` and ``matrix_power`` on whole matrices, numpy on every rank.
"""
from __future__ import annotations

import operator

import numpy as np

from ...device import arrays as device
from ...ops.plans.tsqr import (
    factor_types,
)
from ...placement import reduced
from ..reductions import sum as _sum
from ..shapes import expand_dims, getitem
from ..util import implements, is_dtensor
from .decompositions import (
    abs2,
    adjoint,
    beside,
    per_matrix,
    refuse_untracked,
    replicated_block,
    svd_factors,
    whole_matrix,
)
from .products import matmul


@implements(np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=np._NoValue):
    """``V diag(1/s) U^H`` from :func:`svd`'s factors: split like ``a^T``."""
    refuse_untracked("np.linalg.pinv", a)
    if a.ndim != 2 or hermitian:
        return per_matrix(lambda b: np.linalg.pinv(b, beside(rcond, b), hermitian,
                                                     rtol=beside(rtol, b)), a,
                           whole=np.ndim(rcond) > 0 or np.ndim(rtol) > 0)
    result = factor_types(a.dtype)[0]
    if rcond is not None and rtol is not np._NoValue:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    if rcond is None:
        rcond = 1e-15 if rtol is np._NoValue else \
            rtol if rtol is not None else max(a.shape) * np.finfo(result).eps
    if a.size == 0:
        return replicated_block(np.zeros(a.shape[::-1], result), a.device_mesh)
    u, s, vh = svd_factors(a)
    return matmul(adjoint(vh) * _inverse(s, rcond * s.max()), adjoint(u)).astype(result)


def _inverse(s, cutoff):
    """``1/s`` where ``s > cutoff``, else 0 (numpy's pinv and lstsq)."""
    large = s > cutoff
    return np.where(large, 1 / np.where(large, s, 1), 0).astype(s.dtype, copy=False)


@implements(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """numpy's ``(x, residuals, rank, s)`` from :func:`svd`'s factors: ``U^H b`` is a
    distributed product, the residuals a distributed sum."""
    refuse_untracked("np.linalg.lstsq", a, b)
    a = a if is_dtensor(a) else replicated_block(np.asarray(a), b.device_mesh)
    b = b if is_dtensor(b) else np.asarray(b)
    is_1d = b.ndim == 1
    if a.ndim != 2 or b.ndim not in (1, 2):
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be "
                                    f"two-dimensional")
    m, n = a.shape
    if b.shape[0] != m:
        raise np.linalg.LinAlgError("Incompatible dimensions")
    result, real = factor_types(np.result_type(a.dtype, b.dtype))
    work = np.promote_types(result, np.float64)
    rcond = np.finfo(work).eps * max(n, m) if rcond is None else rcond
    mesh = a.device_mesh
    cols = expand_dims(b, 1) if is_1d and is_dtensor(b) else b.reshape(m, -1) if is_1d else b
    cols = cols.astype(work)
    u, s, vh = svd_factors(a)
    cutoff = rcond * s.max(initial=0)
    rank = np.intc(int(np.count_nonzero(s > cutoff)))   # numpy's int32
    c = whole_matrix(matmul(adjoint(u), cols))
    x = matmul(adjoint(vh), replicated_block(_inverse(s, cutoff)[:, None] * c, mesh))
    if rank == n and m > n:
        resids = _sum(abs2(cols - matmul(a.astype(work), x)), axis=0).astype(real)
    else:
        resids = replicated_block(np.zeros(0, real), mesh)
    x = getitem(x, (slice(None), 0)) if is_1d else x
    return x.astype(result), resids, rank, replicated_block(s.astype(real), mesh)


@implements(np.linalg.matrix_rank)
def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    if rtol is not None and tol is not None:
        raise ValueError("`tol` and `rtol` can't be both set.")
    if A.ndim < 2:
        return int(np.any(A != 0))
    refuse_untracked("np.linalg.matrix_rank", A)
    if A.ndim > 2 or hermitian or is_dtensor(tol) or is_dtensor(rtol):
        return per_matrix(lambda b: device.as_block(
            np.linalg.matrix_rank(b, beside(whole_matrix(tol), b), hermitian,
                                  rtol=beside(whole_matrix(rtol), b))), A,
            whole=np.ndim(tol) > 0 or np.ndim(rtol) > 0)
    s = svd_factors(A, compute_uv=False)[1].astype(factor_types(A.dtype)[1])
    if tol is None:
        rtol = max(A.shape) * np.finfo(s.dtype).eps if rtol is None else rtol
        tol = s.max(initial=0) * rtol
    return replicated_block(device.as_block(np.count_nonzero(s > tol)), A.device_mesh)


# --- small dense problems: whole matrices, numpy on every rank -------------------------------

def _per_matrix_fn(name, fn):
    def handler(a, *args, **kwargs):
        refuse_untracked(f"np.linalg.{name}", a)
        return per_matrix(lambda b: fn(b, *args, **kwargs), a)
    handler.__name__ = name
    return handler


for _f in (np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.eig, np.linalg.eigh,
           np.linalg.eigvals, np.linalg.eigvalsh, np.linalg.cholesky):
    implements(_f)(_per_matrix_fn(_f.__name__, _f))


@implements(np.linalg.solve)
def solve(a, b):
    """Both operands made whole; ``x`` returned laid out like ``b`` (a local slice)."""
    refuse_untracked("np.linalg.solve", a, b)
    mesh = (a if is_dtensor(a) else b).device_mesh
    x = replicated_block(np.linalg.solve(whole_matrix(a), whole_matrix(b)), mesh)
    if is_dtensor(b) and x.shape == b.shape:
        x = x.redistribute(mesh, reduced(b.placements))
    return x


@implements(np.linalg.matrix_power)
def matrix_power(a, n):
    """numpy's binary powering by ``matmul`` of DTensors; a negative power inverts first."""
    try:
        n = operator.index(n)
    except TypeError as e:
        raise TypeError("exponent must be an integer") from e
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    if n == 0:
        return np.zeros_like(a) + np.eye(a.shape[-1], dtype=a.dtype)
    if n < 0:
        a, n = np.linalg.inv(a), -n
    if n == 1:
        return a.copy()
    z = result = None
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


@implements(np.linalg.cond)
def cond(x, p=None):
    """``s_max / s_min`` from the singular values for ``p`` None, 2, -2; else
    ``norm(x, p) * norm(inv(x), p)`` (numpy's definitions)."""
    if p is None or p in (2, -2):
        s = np.linalg.svd(x, compute_uv=False)
        big, small = np.max(s, axis=-1), np.min(s, axis=-1)
        return big / small if p != -2 else small / big
    return np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(np.linalg.inv(x), p, axis=(-2, -1))


@implements(np.linalg.tensorinv)
def tensorinv(a, ind=2):
    """The inverse of ``a`` read as a matrix (the first ``ind`` dims its rows)."""
    rows = a.shape[:ind]
    n = int(np.prod(rows))
    inverse = np.linalg.inv(np.reshape(a, (n, -1)))
    return np.reshape(inverse, a.shape[ind:] + rows)


@implements(np.linalg.tensorsolve)
def tensorsolve(a, b, axes=None):
    """``x`` with ``tensordot(a, x, x.ndim) == b``: a matrix solve of the reshaped ``a``."""
    if axes is not None:
        order = [d for d in range(a.ndim) if d not in axes] + list(axes)
        a = np.transpose(a, order)
    rest = a.shape[np.ndim(b):]
    n = int(np.prod(rest))
    x = np.linalg.solve(np.reshape(a, (-1, n)), np.reshape(b, (-1,)))
    return np.reshape(x, rest)
