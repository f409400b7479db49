"""``np.linalg.norm`` on DTensors: every ``ord``/``axis`` form from elementwise ops and
(distributed) reductions, so a split reduced dim gives ``P(sum)``/``P(max)`` terms and the
norms differentiate and trace like any op; the orders 2, -2 and ``'nuc'`` take the singular
values from :func:`numpy_linalg.svd`.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..reductions import max as _max
from ..reductions import min as _min
from ..reductions import sum as _sum
from ..shapes import expand_dims, moveaxis, ravel, reshape
from ..util import implements
from .decompositions import abs2, svd


def _top(x, axis, keepdims=False, largest=True):
    """``max`` (``largest``) of non-negative values with numpy's ``initial=0`` (an empty axis
    gives the zero sum), or ``min``."""
    if not largest:
        return _min(x, axis=axis, keepdims=keepdims)
    axes = range(x.ndim) if axis is None else np.atleast_1d(axis)
    if any(x.shape[d] == 0 for d in axes):
        return _sum(x, axis=axis, keepdims=keepdims)
    return _max(x, axis=axis, keepdims=keepdims)


def _vector_norm(x, ord, axis, keepdims):
    if ord == np.inf:
        return _top(np.abs(x), axis, keepdims)
    if ord == -np.inf:
        return _min(np.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return _sum((x != 0).astype(np.real(np.zeros((), x.dtype)).dtype), axis=axis,
                    keepdims=keepdims)
    if ord == 1:
        return _sum(np.abs(x), axis=axis, keepdims=keepdims)
    if ord is None or ord == 2:
        return np.sqrt(_sum(abs2(x), axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    total = _sum(np.abs(x) ** float(ord), axis=axis, keepdims=keepdims)
    return total ** np.reciprocal(ord, dtype=total.dtype)


def _svd_norm(x, row, col, largest=None):
    """``max``, ``min`` (``largest`` True, False) or sum (None) of the singular values."""
    s = svd(moveaxis(x, (row, col), (-2, -1)), compute_uv=False)
    return _sum(s, axis=-1) if largest is None else _top(s, -1, largest=largest)


def _matrix_norm(x, ord, row, col):
    if ord in (2, -2):
        return _svd_norm(x, row, col, largest=ord == 2)
    if ord == "nuc":
        return _svd_norm(x, row, col)
    if ord in (1, -1):
        return _top(_sum(np.abs(x), axis=row), col - (col > row), largest=ord == 1)
    if ord in (np.inf, -np.inf):
        return _top(_sum(np.abs(x), axis=col), row - (row > col), largest=ord == np.inf)
    if ord in (None, "fro", "f"):
        return np.sqrt(_sum(abs2(x), axis=(row, col)))
    raise ValueError("Invalid norm order for matrices.")


@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """numpy's ``norm``: elementwise ops and (distributed) reductions; the singular-value
    orders through :func:`svd`."""
    if x.dtype.kind not in "fc":
        x = x.astype(float)
    nd = x.ndim
    if axis is None:
        if ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1):
            ret = np.sqrt(_sum(abs2(ravel(x))))
            return reshape(ret, (1,) * nd) if keepdims else ret
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        try:
            axis = (int(axis),)
        except Exception as e:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from e
    if len(axis) == 1:
        return _vector_norm(x, ord, normalize_axis_index(axis[0], nd), keepdims)
    if len(axis) != 2:
        raise ValueError("Improper number of dimensions to norm.")
    row, col = (normalize_axis_index(a, nd) for a in axis)
    if row == col:
        raise ValueError("Duplicate axes given.")
    ret = _matrix_norm(x, ord, row, col)
    if keepdims:
        ret = expand_dims(ret, tuple(sorted((row, col))))
    return ret


@implements(np.linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The array API's ``vector_norm``: ``axis=None`` flattens, a tuple of axes is one
    vector per remaining index."""
    if x.dtype.kind not in "fc":
        x = x.astype(float)
    nd = x.ndim
    axes = tuple(range(nd)) if axis is None else (axis,) if np.ndim(axis) == 0 else tuple(axis)
    axes = tuple(sorted(normalize_axis_index(a, nd) for a in axes))
    rest = [d for d in range(nd) if d not in axes]
    flat = reshape(moveaxis(x, axes, range(nd - len(axes), nd)),
                   tuple(x.shape[d] for d in rest) + (-1,))
    ret = _vector_norm(flat, ord, flat.ndim - 1, False)
    return expand_dims(ret, axes) if keepdims else ret


@implements(np.linalg.matrix_norm)
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The array API's ``matrix_norm``: ``norm`` over the last two axes."""
    return norm(x, ord, (-2, -1), keepdims)
