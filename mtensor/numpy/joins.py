"""numpy's joins on DTensors: ``concatenate``, ``stack``, ``vstack``, ``hstack``, ``dstack``,
``column_stack``, ``append`` and ``block``.
"""
from __future__ import annotations

import numpy as np

from ..dtensor import DTensor
from .shapes import getitem, ravel, reshape, to_1d, to_2d, to_3d
from .util import implements, into_out, is_dtensor, refuse, refuse_dtensor_args, run, unsupported


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting=None):
    refuse("concatenate", dtype=dtype, casting=casting)
    if axis is None:
        return concatenate([ravel(a) for a in arrays], out=out)
    return into_out(run("concatenate", tuple(arrays), (int(axis),)), out, "same_kind")


@implements(np.stack)
def stack(arrays, axis=0, out=None, dtype=None, casting=None):
    refuse("stack", dtype=dtype, casting=casting)
    return into_out(run("stack", tuple(arrays), (int(axis),)), out, "same_kind")


def _depth(arrays, where="arrays") -> int:
    """The nesting depth of the lists (numpy's errors for empty or ragged nesting)."""
    if type(arrays) is tuple:
        raise TypeError(f"{where} is a tuple. Only lists can be used to arrange blocks, and "
                        f"np.block does not allow implicit conversion from tuple to ndarray.")
    if type(arrays) is not list:
        return 0
    if not arrays:
        raise ValueError(f"List at {where} cannot be empty")
    depths = {_depth(a, f"{where}[{i}]") for i, a in enumerate(arrays)}
    if len(depths) != 1:
        raise ValueError(f"List depths are mismatched at {where}")
    return 1 + depths.pop()


def _leaves(arrays):
    if type(arrays) is list:
        for a in arrays:
            yield from _leaves(a)
    else:
        yield arrays


def _grown(a, ndim):
    if type(a) is DTensor:
        return reshape(a, (1,) * (ndim - a.ndim) + a.shape) if a.ndim < ndim else a
    a = np.asarray(a)
    return a.reshape((1,) * (ndim - a.ndim) + a.shape)


def _join(arrays, level, depth, ndim):
    if type(arrays) is not list:
        return _grown(arrays, ndim)
    parts = [_join(a, level + 1, depth, ndim) for a in arrays]
    if not any(type(p) is DTensor for p in parts):
        return np.concatenate(parts, axis=level - depth)
    return concatenate(parts, axis=level - depth)


@implements(np.block)
def block(arrays):
    depth = _depth(arrays)
    ndim = max(depth, max(np.ndim(a) for a in _leaves(arrays)))
    return _join(arrays, 0, depth, ndim)







# --- stacks ------------------------------------------------------------------------------

def _plain_join(name, dtype, casting):
    if dtype is not None:
        unsupported(name, "dtype", f"({dtype!r})")
    if casting != "same_kind":
        unsupported(name, "casting", f"({casting!r})")


def _each(make, numpy_fn, tup):
    return [make(a) if is_dtensor(a) else numpy_fn(a) for a in tup]


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    _plain_join("vstack", dtype, casting)
    return concatenate(_each(to_2d, np.atleast_2d, tup), axis=0)


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    _plain_join("hstack", dtype, casting)
    arrs = _each(to_1d, np.atleast_1d, tup)
    return concatenate(arrs, axis=0 if arrs and np.ndim(arrs[0]) == 1 else 1)


@implements(np.dstack)
def dstack(tup):
    return concatenate(_each(to_3d, np.atleast_3d, tup), axis=2)


def _column(v):
    if v.ndim == 0:
        return reshape(v, (1, 1))
    return getitem(v, (slice(None), None)) if v.ndim == 1 else v


@implements(np.column_stack)
def column_stack(tup):
    return concatenate(_each(_column, lambda v: np.array(v, copy=None, subok=True, ndmin=2).T
                             if np.ndim(v) < 2 else np.asanyarray(v), tup), axis=1)


@implements(np.append)
def append(arr, values, axis=None):
    refuse_dtensor_args("append", axis=axis)
    arr = arr if is_dtensor(arr) else np.asanyarray(arr)
    if axis is None:
        arr = ravel(arr)
        values = ravel(values)
        axis = 0
    return concatenate((arr, values), axis=axis)
