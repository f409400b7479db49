"""numpy's index routines on DTensors: ``choose`` (a ``where`` per choice), ``ravel_multi_index``
and ``unravel_index`` (elementwise index arithmetic, so indices keep their layout), ``ix_``,
and the ``*_indices_from`` family (indices from a shape alone: numpy arrays, no DTensor).
"""
from __future__ import annotations

import math

import numpy as np

from .util import agreed, implements, is_dtensor


def _check_bounds(name, index, size):
    if agreed(name, np.any((index < 0) | (index >= size))):
        raise ValueError(f"{name}: invalid entry in index array (outside 0..{size - 1})")


@implements(np.choose)
def choose(a, choices, out=None, mode="raise"):
    n = len(choices)
    if mode == "raise":
        _check_bounds("choose", a, n)
    elif mode == "wrap":
        a = np.mod(a, n)
    elif mode == "clip":
        a = np.clip(a, 0, n - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    result = choices[n - 1]
    for i in range(n - 2, -1, -1):
        result = np.where(a == i, choices[i], result)
    result = np.broadcast_to(result, np.broadcast_shapes(np.shape(a), np.shape(result)))
    if out is not None:
        out[...] = result
        return out
    return result.copy() if is_dtensor(result) else result


@implements(np.ravel_multi_index)
def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    dims = tuple(int(d) for d in dims)
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    strides = [math.prod(dims[i + 1:]) if order == "C" else math.prod(dims[:i])
               for i in range(len(dims))]
    flat = 0
    for index, size, stride, m in zip(multi_index, dims, strides, modes):
        if m == "raise":
            _check_bounds("ravel_multi_index", index, size)
        elif m == "wrap":
            index = np.mod(index, size)
        else:
            index = np.clip(index, 0, size - 1)
        flat = flat + index * stride
    return flat.astype(np.intp) if is_dtensor(flat) else np.intp(flat)


@implements(np.unravel_index)
def unravel_index(indices, shape, order="C"):
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    _check_bounds("unravel_index", indices, math.prod(shape))
    dims = range(len(shape)) if order == "F" else reversed(range(len(shape)))
    out, rest = [None] * len(shape), indices
    for d in dims:
        out[d] = np.mod(rest, shape[d]).astype(np.intp)
        rest = rest // shape[d]
    return tuple(out)


@implements(np.ix_)
def ix_(*args):
    """Each 1-D sequence reshaped to broadcast along its own dim (views of DTensors)."""
    n = len(args)
    out = []
    for k, a in enumerate(args):
        if np.ndim(a) != 1:
            raise ValueError("Cross index must be 1 dimensional")
        if a.dtype == np.bool_:
            a = np.nonzero(a)[0]
        out.append(np.reshape(a, (1,) * k + (-1,) + (1,) * (n - k - 1)))
    return tuple(out)


def _square(name, arr):
    if arr.ndim < 2 or len(set(arr.shape)) != 1:
        raise ValueError(f"{name}: input array must be at least 2-d and square, got {arr.shape}")


@implements(np.diag_indices_from)
def diag_indices_from(arr):
    _square("diag_indices_from", arr)
    return np.diag_indices(arr.shape[0], arr.ndim)


@implements(np.tril_indices_from)
def tril_indices_from(arr, k=0):
    if arr.ndim != 2:
        raise ValueError("input array must be 2-d")
    return np.tril_indices(arr.shape[-2], k=k, m=arr.shape[-1])


@implements(np.triu_indices_from)
def triu_indices_from(arr, k=0):
    if arr.ndim != 2:
        raise ValueError("input array must be 2-d")
    return np.triu_indices(arr.shape[-2], k=k, m=arr.shape[-1])
