"""``np.linalg`` factorisations on DTensors: ``qr`` by TSQR (its plan and block kernels:
``ops.plans.tsqr``), ``svd`` and ``svdvals`` on top of it, and the helpers the solvers share
(whole matrices per rank, adjoints, the SVD factors).
"""
from __future__ import annotations

import numpy as np

from ... import modes
from ...device import arrays as device
from ...dtensor import DTensor, guarded
from ...ops.plans.tsqr import (
    factor_types,
    local_qr,
    row_layout,
    signed,
    stacked_rows,
    work_type,
)
from ...placement import Replicate, Shard, local_offset
from ..util import implements, is_dtensor, refuse


def refuse_untracked(name: str, *operands) -> None:
    """The factorisations run numpy on blocks: no gradient, no ``mt.compile`` replay."""
    if any(is_dtensor(x) and modes.is_tracked(x) for x in operands):
        raise TypeError(f"{name}: gradients through it are not supported on DTensors; call "
                        f"it outside value_and_grad (or on values that do not depend on a "
                        f"parameter)")
    modes.refuse_while_tracing(name)


def whole_matrix(x):
    """The whole value on every rank (a collective for a DTensor)."""
    return x.full_tensor() if is_dtensor(x) else x


def replicated_block(block, mesh) -> DTensor:
    return DTensor.from_local(device.as_block(block), mesh, (Replicate(),) * mesh.ndim)


def adjoint(x):
    return (np.conj(x) if x.dtype.kind == "c" else x).T


def per_matrix(fn, a, whole=False):
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


def beside(value, block):
    """A whole tolerance array on ``block``'s device (scalars and None as they are)."""
    return device.like(value, block) if np.ndim(value) else value


def _parts(out):
    return tuple(out) if isinstance(out, tuple) else (out,)


def _rebuild(out, parts):
    """``parts`` in the container of numpy's result (a named tuple, or one array)."""
    return type(out)(*parts) if isinstance(out, tuple) else parts[0]


# --- TSQR (the plan and block kernels: ops.plans.tsqr) -------------------------------------

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


def svd_factors(a, compute_uv=True):
    """(U, s, Vh) of a 2-D DTensor in double: TSQR of ``a`` (or of ``a^H`` when wide), then
    numpy's svd of the small R.  U and Vh are DTensors (the tall side split like TSQR's
    rows), s a numpy vector, the same on every rank."""
    tall = a.shape[0] >= a.shape[1]
    t = a if tall else adjoint(a)
    q, r, layout = _tsqr_blocks(t, "reduced" if compute_uv else "r")
    if not compute_uv:
        return None, np.linalg.svd(r, compute_uv=False), None
    ur, s, vh = np.linalg.svd(r, full_matrices=False)
    mesh = a.device_mesh
    u = DTensor.from_local(q @ ur, mesh, layout, shape=(t.shape[0], s.size))
    vh = replicated_block(vh, mesh)
    return (u, s, vh) if tall else (adjoint(vh), s, adjoint(u))


def abs2(x):
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
    refuse_untracked("np.linalg.qr", a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at "
                                    f"least two-dimensional")
    if a.ndim > 2:
        return per_matrix(lambda b: _signed_qr(b, mode), a)
    if mode == "complete":   # Q is m x m: made whole, then cut to a's rows (no transfer)
        q, r = per_matrix(lambda b: _signed_qr(b, mode), a)
        return _QR(q.redistribute(a.device_mesh, row_layout(a.placements)), r)
    result = factor_types(a.dtype)[0]
    q, r, layout = _tsqr_blocks(a, mode)
    r = replicated_block(r.astype(result), a.device_mesh)
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
    refuse_untracked("np.linalg.svd", a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at "
                                    f"least two-dimensional")
    if a.ndim > 2 or hermitian or (full_matrices and compute_uv):
        return per_matrix(lambda b: np.linalg.svd(b, full_matrices, compute_uv, hermitian), a)
    result, real = factor_types(a.dtype)
    u, s, vh = svd_factors(a, compute_uv)
    s = replicated_block(s.astype(real), a.device_mesh)
    if not compute_uv:
        return s
    return _SVD(u.astype(result), s, vh.astype(result))


@implements(np.linalg.svdvals)
def svdvals(x):
    return svd(x, compute_uv=False)
