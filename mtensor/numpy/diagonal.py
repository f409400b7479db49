"""numpy's diagonal family on DTensors (``diagonal``, ``trace``, ``diag``, ``tril``,
``triu``), composed from ops mtensor already has, so each inherits their sharding rules:

* ``diagonal``: the two axes moved last, then ``b[..., rows, cols]`` with constant index
  arrays (the other axes keep their split; split diagonal axes are gathered or left as
  partial terms, as the cost model picks); ``trace`` sums it (a split diagonal: ``P(sum)``).
* ``diag`` of a matrix is ``diagonal``; of a vector, ``where`` of a constant mask and the
  vector as a column (k >= 0) or row (k < 0), padded with ``|k|`` zeros: for ``k == 0`` a
  split vector gives a matrix split the same way, with no communication.
* ``tril``/``triu``: ``where`` with numpy's constant ``tri`` mask, as numpy writes them;
  every layout of the operand is kept (a Partial is reduced first: ``where`` needs values).

Registered by importing :mod:`numpy_joins`.
"""
from __future__ import annotations

import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..dtensor import DTensor
from .joins import concatenate
from .reductions import sum as _sum
from .shapes import expand_dims, getitem, moveaxis, ravel
from .util import implements, run


def _int(name: str, arg: str, value) -> int:
    if type(value) is DTensor:
        raise TypeError(f"{name}: argument {arg} given as a DTensor is not supported on "
                        f"DTensors; pass a Python int")
    return operator.index(value)


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    offset = _int("diagonal", "offset", offset)
    if a.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    ax1, ax2 = normalize_axis_index(axis1, a.ndim), normalize_axis_index(axis2, a.ndim)
    if ax1 == ax2:
        raise ValueError("axis1 and axis2 cannot be the same")
    b = moveaxis(a, (ax1, ax2), (-2, -1))
    n1, n2 = b.shape[-2:]
    k = max(0, min(n1 - max(-offset, 0), n2 - max(offset, 0)))
    rows, cols = np.arange(k) + max(-offset, 0), np.arange(k) + max(offset, 0)
    return getitem(b, (Ellipsis, rows, cols))


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype, out=out)


@implements(np.linalg.diagonal)
def linalg_diagonal(x, /, *, offset=0):
    return diagonal(x, offset, -2, -1)


@implements(np.linalg.trace)
def linalg_trace(x, /, *, offset=0, dtype=None):
    return trace(x, offset, -2, -1, dtype)


@implements(np.diagflat)
def diagflat(v, k=0):
    """``diag`` of the flattened input (a split vector moves nothing, as ``diag``)."""
    return diag(ravel(v), k)


@implements(np.diag)
def diag(v, k=0):
    k = _int("diag", "k", k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = v.shape[0] + abs(k)
    if k:
        v = concatenate([v, np.zeros(abs(k), v.dtype)])
    r = np.arange(n)
    if k >= 0:
        mask, values = (r[None, :] - r[:, None]) == k, expand_dims(v, 1)
    else:
        mask, values = (r[:, None] - r[None, :]) == -k, expand_dims(v, 0)
    return run("where", (mask, values, np.zeros((), v.dtype)))


@implements(np.tril)
def tril(m, k=0):
    k = _int("tril", "k", k)
    mask = np.tri(*m.shape[-2:], k=k, dtype=bool)
    return run("where", (mask, m, np.zeros(1, m.dtype)))


@implements(np.triu)
def triu(m, k=0):
    k = _int("triu", "k", k)
    mask = np.tri(*m.shape[-2:], k=k - 1, dtype=bool)
    return run("where", (mask, np.zeros(1, m.dtype), m))
