"""The plan and the block kernels of TSQR (pure: placements, shapes and numpy blocks).

TSQR of an ``m x n`` matrix ``A`` whose rows are split into blocks ``A_i``::

    A_i = Q_i R_i          each rank factors its own block (numpy's qr)
    S   = [R_0; R_1; ...]  the R factors stacked: the only thing gathered
    S   = Q2 R             every rank runs the same small qr
    Q   = diag(Q_i) Q2     block i: Q_i times its own rows of Q2

A block shorter than ``n`` rows gives an ``R_i`` of its own row count.  Blocks of an
``array_split`` differ by at most one row, so either every block has ``n`` rows or more (S
has ``n`` rows per block) or none has more than ``n`` (S has each block's rows, ``m`` in
all): S is itself laid out as an ``array_split`` of its rows in the layout of ``A``, and a
rank's rows of ``Q2`` start at its block's offset in that layout.

Signs: ``R`` is made to have a real, non-negative diagonal (``signed``), which makes the
factors unique for a full-rank ``A`` whatever the layout; LAPACK's signs (numpy's) may differ.
"""
from __future__ import annotations

import math

import numpy as np

from ...placement import Replicate, Shard
from ..ufunc_methods import axis_blocks


def row_layout(placements):
    """TSQR's layout: rows split on every mesh dim that splits or sums ``A`` (a Partial is
    reduce-scattered, a column split exchanged), whole where ``A`` is replicated."""
    return tuple(Replicate() if isinstance(p, Replicate) else Shard(0) for p in placements)


def stacked_rows(shape, mesh_shape, layout):
    """(rows of the stacked R factors, number of row blocks)."""
    m, n = shape
    sizes = [s for s, p in zip(mesh_shape, layout) if isinstance(p, Shard)]
    shortest = min(hi - lo for lo, hi in axis_blocks(m, sizes))
    nblocks = math.prod(sizes)
    return (n * nblocks if shortest >= n else m), nblocks


def factor_types(dtype):
    """(numpy's result dtype of a factorisation of ``dtype``, its real dtype); numpy's error
    for a dtype linalg does not take."""
    r = np.linalg.qr(np.ones((1, 1), dtype), mode="r")
    return r.dtype, np.real(r).dtype


def work_type(dtype):
    """The dtype numpy's LAPACK calls compute in: double (or complex double)."""
    return np.promote_types(factor_types(dtype)[0], np.float64)


def local_qr(block, mode):
    """(Q or None for ``mode='r'``, R) of a block, reduced."""
    if mode == "r":
        return None, np.linalg.qr(block, mode="r")
    return tuple(np.linalg.qr(block))


def signed(q, r):
    """``q``'s columns and ``r``'s rows scaled by unit phases so that ``diag(r)`` is real and
    non-negative (stacks of matrices too; ``q`` may be None)."""
    d = np.diagonal(r, axis1=-2, axis2=-1)
    mag = np.abs(d)
    phase = np.where(mag == 0, 1, d / np.where(mag == 0, 1, mag)).astype(r.dtype)
    k = phase.shape[-1]
    r = r.copy()
    r[..., :k, :] *= np.conj(phase)[..., :, None]
    if q is not None:
        q = q.copy()
        q[..., :, :k] *= phase[..., None, :]
    return q, r
