"""numpy's matrix factorisations and solvers on DTensors (``np.linalg``), registered in the
table of :mod:`numpy_api`.  Two kinds, by what the algorithm needs:

* ``qr`` of a matrix by TSQR (its plan and block kernels: :mod:`ops.linalg_rules`), and
  ``svd``, ``pinv``, ``lstsq``, ``matrix_rank`` on top of it: only ``n x n`` factors and
  ``n``-vectors move; ``matrix_power`` by repeated ``matmul``;
* small dense problems (``solve``, ``inv``, ``det``, ``slogdet``, ``eig``, ``eigh``,
  ``eigvals``, ``eigvalsh``, ``cholesky``, and stacked ``qr``/``svd``): the matrices are made
  whole and every rank computes them with numpy; split batch dims stay split.

As numpy does, every factorisation computes in double precision and returns the input's
precision (float32 stays float32).  Gradients and ``mt.compile`` are refused by both kinds
(``matrix_power`` aside).  Norms: :mod:`numpy_norms`; products: :mod:`numpy_products`.
"""
from __future__ import annotations

import operator

import numpy as np

from . import device, modes
from .dtensor import DTensor, guarded
from .numpy_api import _dt, implements, matmul, refuse
from .numpy_api import sum as _sum
from .numpy_shapes import expand_dims, getitem
from .ops.linalg_rules import (
    factor_types, local_qr, row_layout, signed, stacked_rows, work_type,
)
from .placement import Replicate, Shard, local_offset, reduced



def _untracked(name: str, *operands) -> None:
    """The factorisations run numpy on blocks: no gradient, no ``mt.compile`` replay."""
    if any(_dt(x) and modes.is_tracked(x) for x in operands):
        raise TypeError(f"{name}: gradients through it are not supported on DTensors; call "
                        f"it outside value_and_grad (or on values that do not depend on a "
                        f"parameter)")
    modes.refuse_while_tracing(name)


def _whole(x):
    """The whole value on every rank (a collective for a DTensor)."""
    return x.full_tensor() if _dt(x) else x


def _replicated(block, mesh) -> DTensor:
    return DTensor.from_local(device.as_block(block), mesh, (Replicate(),) * mesh.ndim)


def _adjoint(x):
    return (np.conj(x) if x.dtype.kind == "c" else x).T


def _per_matrix(fn, a, whole=False):
    """``fn`` (numpy) on whole matrices, every rank alike; split batch dims stay split (unless
    ``whole``: ``fn`` holds per-matrix parameters for the whole batch), and then one small
    all-gather agrees on errors (any error on any rank raises on all) and on result dtypes
    (``eig``'s real or complex)."""
    mesh, batch = a.device_mesh, a.ndim - 2
    layout = tuple(p if isinstance(p, Shard) and p.dim < batch and not whole else Replicate()
                   for p in a.placements)
    block = a.redistribute(mesh, layout)._block()
    if all(p == Replicate() for p in layout):
        out = fn(block)
    else:
        out, error = None, None
        try:
            out = fn(block)
        except Exception as e:      # numpy's error on one rank's matrices: raised on all
            error = (type(e), str(e))
        dtypes = None if error else [device.as_block(o).dtype.str for o in _parts(out)]
        with guarded("np.linalg", "allgather", a.shape, block.dtype, mesh):  # blocks may differ
            seen = mesh.communicator().allgather_object((error, dtypes))
        errors = [e for e, _ in seen if e is not None]
        if errors:
            kind, message = errors[0]
            raise kind(message)
        common = [np.result_type(*d) for d in zip(*(d for _, d in seen))]
        out = _rebuild(out, [device.as_block(o).astype(t, copy=False)
                             for o, t in zip(_parts(out), common)])
    return _rebuild(out, [DTensor.from_local(device.as_block(o), mesh, layout,
                                             shape=a.shape[:batch] + np.shape(o)[batch:])
                          for o in _parts(out)])


def _beside(value, block):
    """A whole tolerance array on ``block``'s device (scalars and None as they are)."""
    return device.like(value, block) if np.ndim(value) else value


def _parts(out):
    return tuple(out) if isinstance(out, tuple) else (out,)


def _rebuild(out, parts):
    """``parts`` in the container of numpy's result (a named tuple, or one array)."""
    return type(out)(*parts) if isinstance(out, tuple) else parts[0]


# --- TSQR (the plan and block kernels: ops.linalg_rules) -------------------------------------

def _tsqr_blocks(a, mode):
    """(this rank's rows of Q, or None for ``mode='r'``; R; Q's layout), in double."""
    mesh, n = a.device_mesh, a.shape[1]
    layout = row_layout(a.placements)
    block = a.redistribute(mesh, layout)._block().astype(work_type(a.dtype), copy=False)
    rows, nblocks = stacked_rows(a.shape, mesh.shape, layout)
    q, r = local_qr(block, mode)
    if nblocks > 1:
        stacked = DTensor.from_local(device.contiguous(r), mesh, layout, shape=(rows, n))
        q2, r = local_qr(stacked.full_tensor(), mode)
        if q is not None:
            start = local_offset((rows, n), mesh.shape, layout, mesh.coordinate)[0]
            q = q @ q2[start:start + q.shape[1]]
    q, r = signed(q, r)
    return q, r, layout


def _svd_factors(a, compute_uv=True):
    """(U, s, Vh) of a 2-D DTensor in double: TSQR of ``a`` (or of ``a^H`` when wide), then
    numpy's svd of the small R.  U and Vh are DTensors (the tall side split like TSQR's
    rows), s a numpy vector, the same on every rank."""
    tall = a.shape[0] >= a.shape[1]
    t = a if tall else _adjoint(a)
    q, r, layout = _tsqr_blocks(t, "reduced" if compute_uv else "r")
    if not compute_uv:
        return None, np.linalg.svd(r, compute_uv=False), None
    ur, s, vh = np.linalg.svd(r, full_matrices=False)
    mesh = a.device_mesh
    u = DTensor.from_local(q @ ur, mesh, layout, shape=(t.shape[0], s.size))
    vh = _replicated(vh, mesh)
    return (u, s, vh) if tall else (_adjoint(vh), s, _adjoint(u))


def _abs2(x):
    """``|x|^2`` as numpy's norm writes it, real for complex ``x``."""
    return (np.conj(x) * x).real if x.dtype.kind == "c" else x * x


# --- factorisations on TSQR ------------------------------------------------------------------

@implements(np.linalg.qr)
def qr(a, mode="reduced"):
    """Q split like ``a``'s rows, R replicated, ``diag(R)`` real and >= 0 (numpy's LAPACK
    signs may differ: Q and R equal numpy's up to the sign of each column of Q / row of R)."""
    if mode not in ("reduced", "complete", "r"):
        if mode == "raw":
            refuse("np.linalg.qr", mode=mode)
        raise ValueError(f"Unrecognized mode '{mode}'")
    _untracked("np.linalg.qr", a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at "
                                    f"least two-dimensional")
    if a.ndim > 2:
        return _per_matrix(lambda b: _signed_qr(b, mode), a)
    if mode == "complete":   # Q is m x m: made whole, then cut to a's rows (no transfer)
        q, r = _per_matrix(lambda b: _signed_qr(b, mode), a)
        return _QR(q.redistribute(a.device_mesh, row_layout(a.placements)), r)
    result = factor_types(a.dtype)[0]
    q, r, layout = _tsqr_blocks(a, mode)
    r = _replicated(r.astype(result), a.device_mesh)
    if mode == "r":
        return r
    return _QR(DTensor.from_local(q.astype(result), a.device_mesh, layout,
                                  shape=(a.shape[0], r.shape[0])), r)


_QR = type(np.linalg.qr(np.eye(1)))
_SVD = type(np.linalg.svd(np.eye(1)))


def _signed_qr(b, mode):
    """numpy's ``qr`` of whole matrices with ``diag(R)`` made real and non-negative."""
    if mode == "r":
        return signed(None, np.linalg.qr(b, mode="r"))[1]
    return _QR(*signed(*np.linalg.qr(b, mode=mode)))


@implements(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """A 2-D matrix by TSQR (of ``a``, or of ``a^H`` when wide): U split like the tall side's
    rows, s and the small factor replicated; U, Vh equal numpy's up to signs (phases)."""
    _untracked("np.linalg.svd", a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at "
                                    f"least two-dimensional")
    if a.ndim > 2 or hermitian or (full_matrices and compute_uv):
        return _per_matrix(lambda b: np.linalg.svd(b, full_matrices, compute_uv, hermitian), a)
    result, real = factor_types(a.dtype)
    u, s, vh = _svd_factors(a, compute_uv)
    s = _replicated(s.astype(real), a.device_mesh)
    if not compute_uv:
        return s
    return _SVD(u.astype(result), s, vh.astype(result))


@implements(np.linalg.svdvals)
def svdvals(x):
    return svd(x, compute_uv=False)


@implements(np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=np._NoValue):
    """``V diag(1/s) U^H`` from :func:`svd`'s factors: split like ``a^T``."""
    _untracked("np.linalg.pinv", a)
    if a.ndim != 2 or hermitian:
        return _per_matrix(lambda b: np.linalg.pinv(b, _beside(rcond, b), hermitian,
                                                     rtol=_beside(rtol, b)), a,
                           whole=np.ndim(rcond) > 0 or np.ndim(rtol) > 0)
    result = factor_types(a.dtype)[0]
    if rcond is not None and rtol is not np._NoValue:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    if rcond is None:
        rcond = 1e-15 if rtol is np._NoValue else \
            rtol if rtol is not None else max(a.shape) * np.finfo(result).eps
    if a.size == 0:
        return _replicated(np.zeros(a.shape[::-1], result), a.device_mesh)
    u, s, vh = _svd_factors(a)
    return matmul(_adjoint(vh) * _inverse(s, rcond * s.max()), _adjoint(u)).astype(result)


def _inverse(s, cutoff):
    """``1/s`` where ``s > cutoff``, else 0 (numpy's pinv and lstsq)."""
    large = s > cutoff
    return np.where(large, 1 / np.where(large, s, 1), 0).astype(s.dtype, copy=False)


@implements(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """numpy's ``(x, residuals, rank, s)`` from :func:`svd`'s factors: ``U^H b`` is a
    distributed product, the residuals a distributed sum."""
    _untracked("np.linalg.lstsq", a, b)
    a = a if _dt(a) else _replicated(np.asarray(a), b.device_mesh)
    b = b if _dt(b) else np.asarray(b)
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
    cols = expand_dims(b, 1) if is_1d and _dt(b) else b.reshape(m, -1) if is_1d else b
    cols = cols.astype(work)
    u, s, vh = _svd_factors(a)
    cutoff = rcond * s.max(initial=0)
    rank = np.intc(int(np.count_nonzero(s > cutoff)))   # numpy's int32
    c = _whole(matmul(_adjoint(u), cols))
    x = matmul(_adjoint(vh), _replicated(_inverse(s, cutoff)[:, None] * c, mesh))
    if rank == n and m > n:
        resids = _sum(_abs2(cols - matmul(a.astype(work), x)), axis=0).astype(real)
    else:
        resids = _replicated(np.zeros(0, real), mesh)
    x = getitem(x, (slice(None), 0)) if is_1d else x
    return x.astype(result), resids, rank, _replicated(s.astype(real), mesh)


@implements(np.linalg.matrix_rank)
def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    if rtol is not None and tol is not None:
        raise ValueError("`tol` and `rtol` can't be both set.")
    if A.ndim < 2:
        return int(np.any(A != 0))
    _untracked("np.linalg.matrix_rank", A)
    if A.ndim > 2 or hermitian or _dt(tol) or _dt(rtol):
        return _per_matrix(lambda b: device.as_block(
            np.linalg.matrix_rank(b, _beside(_whole(tol), b), hermitian,
                                  rtol=_beside(_whole(rtol), b))), A,
            whole=np.ndim(tol) > 0 or np.ndim(rtol) > 0)
    s = _svd_factors(A, compute_uv=False)[1].astype(factor_types(A.dtype)[1])
    if tol is None:
        rtol = max(A.shape) * np.finfo(s.dtype).eps if rtol is None else rtol
        tol = s.max(initial=0) * rtol
    return _replicated(device.as_block(np.count_nonzero(s > tol)), A.device_mesh)


# --- small dense problems: whole matrices, numpy on every rank -------------------------------

def _per_matrix_fn(name, fn):
    def handler(a, *args, **kwargs):
        _untracked(f"np.linalg.{name}", a)
        return _per_matrix(lambda b: fn(b, *args, **kwargs), a)
    handler.__name__ = name
    return handler


for _f in (np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.eig, np.linalg.eigh,
           np.linalg.eigvals, np.linalg.eigvalsh, np.linalg.cholesky):
    implements(_f)(_per_matrix_fn(_f.__name__, _f))


@implements(np.linalg.solve)
def solve(a, b):
    """Both operands made whole; ``x`` returned laid out like ``b`` (a local slice)."""
    _untracked("np.linalg.solve", a, b)
    mesh = (a if _dt(a) else b).device_mesh
    x = _replicated(np.linalg.solve(_whole(a), _whole(b)), mesh)
    if _dt(b) and x.shape == b.shape:
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


__all__ = ["lstsq", "matrix_power", "matrix_rank", "pinv", "qr", "solve", "svd"]
