"""``np.block`` on DTensors: nested lists joined with ``concatenate``, the innermost lists
along the last axis, each enclosing level one axis further out (numpy's rule), after every
array is given the result's number of dims with leading ones.  A dim that no join touches
keeps its split."""
from __future__ import annotations

import numpy as np

from .dtensor import DTensor
from .numpy_api import implements
from .numpy_shapes import concatenate, reshape


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


__all__ = ["block"]
