"""The array API's functions on DTensors, where the standard's signature or semantics differ
from numpy 2's (the rest of the namespace is numpy's own functions, which reach DTensors
through ``__array_ufunc__``/``__array_function__``).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..numpy import elementwise, shapes

__all__ = ["argsort", "astype", "broadcast_arrays", "clip", "concat", "expand_dims", "isin",
           "nonzero", "reshape", "searchsorted", "sort", "take", "where"]


def astype(x, dtype, /, *, copy=True, device=None):
    return elementwise.astype(x, dtype, copy=copy, device=device)


def reshape(x, /, shape, *, copy=None):
    """A view where the layout allows (numpy's rule); ``copy=True`` a copy; ``copy=False``
    is refused, since a DTensor cannot promise that no block moves."""
    if copy is False:
        raise ValueError("reshape: copy=False is not supported on DTensors (a reshape may "
                         "move values between ranks)")
    out = shapes.reshape(x, tuple(shape))
    return out.copy() if copy else out


def clip(x, /, min=None, max=None):
    """Either bound may be None (both None: a copy); the result keeps ``x``'s dtype."""
    if min is None and max is None:
        return x.copy()
    out = elementwise.clip(x, min, max)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


def concat(arrays, /, *, axis=0):
    return np.concat(list(arrays), axis=axis)


def expand_dims(x, /, axis=0):
    return shapes.expand_dims(x, axis)


def broadcast_arrays(*arrays):
    """A list, as the 2024.12 standard asks."""
    return list(shapes.broadcast_arrays(*arrays))


def where(condition, x1, x2, /):
    return np.where(condition, x1, x2)


def nonzero(x, /):
    if x.ndim == 0:
        raise ValueError("nonzero: a 0-d array has no indices (the standard refuses it)")
    return np.nonzero(x)


def take(x, indices, /, *, axis=None):
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis is required for a {x.ndim}-D array")
        axis = 0
    return np.take(x, indices, axis=axis)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    return np.searchsorted(x1, x2, side=side, sorter=sorter)


def isin(x1, x2, /, *, invert=False):
    return np.isin(x1, x2, invert=invert)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """Descending: the reversed order of the reversed array, which keeps equal elements in
    their first order (a stable descending sort)."""
    if not descending:
        return np.sort(x, axis=axis, stable=stable)
    return np.flip(np.sort(np.flip(x, axis=axis), axis=axis, stable=stable), axis=axis)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    if not descending:
        return np.argsort(x, axis=axis, stable=stable)
    axis = normalize_axis_index(axis, x.ndim)
    last = x.shape[axis] - 1
    order = np.argsort(np.flip(x, axis=axis), axis=axis, stable=stable)
    return np.flip(last - order, axis=axis)

