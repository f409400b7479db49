"""numpy's products on DTensors: ``matmul``, ``dot``, ``tensordot``, ``einsum`` (contraction
rules), and ``outer``, ``inner``, ``vdot``, ``kron``, ``cross`` written with pointwise ops and
contractions, so they shard, differentiate and trace as those do.
"""
from __future__ import annotations

import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..joins import stack
from ..shapes import expand_dims, getitem, moveaxis, ravel, reshape
from ..util import as_array, implements, into_out, is_dtensor, refuse, run


def _column(v, row=False):
    flat = ravel(v)
    key = (None, slice(None)) if row else (slice(None), None)
    return getitem(flat, key) if is_dtensor(flat) else flat[key]


@implements(np.outer)
def outer(a, b, out=None):
    return into_out(np.multiply(_column(a), _column(b, row=True)), out, "same_kind")


@implements(np.linalg.outer)
def linalg_outer(x1, x2, /):
    if np.ndim(x1) != 1 or np.ndim(x2) != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={np.ndim(x1)} and x2.ndim={np.ndim(x2)}.")
    return outer(x1, x2)


@implements(np.inner)
def inner(a, b):
    a, b = as_array(a), as_array(b)
    if a.ndim == 0 or b.ndim == 0:
        return np.multiply(a, b)
    return tensordot(a, b, axes=((a.ndim - 1,), (b.ndim - 1,)))


@implements(np.vdot)
def vdot(a, b):
    a, b = as_array(a), as_array(b)
    a = np.conj(a) if a.dtype.kind == "c" else a
    return dot(ravel(a), ravel(b))


def _expand(x, axes):
    return expand_dims(x, axes) if is_dtensor(x) else np.expand_dims(x, axes)


@implements(np.kron)
def kron(a, b):
    """``a[:, None, :, None, ...] * b[None, :, None, :, ...]`` merged pairwise (numpy's)."""
    b = as_array(b)
    a = as_array(a)
    if a.ndim < b.ndim:
        a = _expand(a, tuple(range(b.ndim - a.ndim)))
    nda, ndb = a.ndim, b.ndim
    if nda == 0 or ndb == 0:
        return np.multiply(a, b)
    nd = max(nda, ndb)
    shape = tuple(x * y for x, y in zip((1,) * (ndb - nda) + a.shape,
                                        (1,) * (nda - ndb) + b.shape))
    a = _expand(_expand(a, tuple(range(ndb - nda))), tuple(range(1, 2 * nd, 2)))
    b = _expand(_expand(b, tuple(range(nda - ndb))), tuple(range(0, 2 * nd, 2)))
    prod = np.multiply(a, b)
    return reshape(prod, shape) if is_dtensor(prod) else prod.reshape(shape)


def _components(x, axis, dtype):
    x = moveaxis(x, axis, -1) if is_dtensor(x) else np.moveaxis(x, axis, -1)
    return [x[..., i].astype(dtype) for i in range(x.shape[-1])]


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """numpy's cross from the components' products (each a pointwise op)."""
    if axis is not None:
        axisa, axisb, axisc = (axis,) * 3
    a, b = as_array(a), as_array(b)
    if a.ndim < 1 or b.ndim < 1:
        raise ValueError("At least one array has zero dimension")
    dtype = np.promote_types(a.dtype, b.dtype)
    ua = _components(a, normalize_axis_index(axisa, a.ndim, msg_prefix="axisa"), dtype)
    ub = _components(b, normalize_axis_index(axisb, b.ndim, msg_prefix="axisb"), dtype)
    if len(ua) not in (2, 3) or len(ub) not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    if len(ua) == 2 or len(ub) == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of "
                      "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
                      DeprecationWarning, stacklevel=3)
    z = ua[0] * ub[1] - ua[1] * ub[0]
    if len(ua) == 2 and len(ub) == 2:
        return z
    if len(ua) == 2:
        x, y = ua[1] * ub[2], -(ua[0] * ub[2])
    elif len(ub) == 2:
        x, y = -(ua[2] * ub[1]), ua[2] * ub[0]
    else:
        x, y = ua[1] * ub[2] - ua[2] * ub[1], ua[2] * ub[0] - ua[0] * ub[2]
    parts = [p if is_dtensor(p) else np.asarray(p) for p in (x, y, z)]
    cp = stack(parts, axis=-1) if any(is_dtensor(p) for p in parts) else np.stack(parts, -1)
    axisc = normalize_axis_index(axisc, cp.ndim, msg_prefix="axisc")
    return moveaxis(cp, -1, axisc) if is_dtensor(cp) else np.moveaxis(cp, -1, axisc)


@implements(np.linalg.cross)
def linalg_cross(x1, x2, /, *, axis=-1):
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they are {x1.shape[axis]} and {x2.shape[axis]} dimensional instead.")
    return cross(x1, x2, axis=axis)


__all__ = ["cross", "inner", "kron", "linalg_cross", "linalg_outer", "outer", "vdot"]


# --- contractions ------------------------------------------------------------------------

def matmul(a, b):
    return run("matmul", (a, b))


@implements(np.dot)
def dot(a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return into_out(run("multiply", (a, b)), out, "same_kind")
    return into_out(run("dot", (a, b)), out, "same_kind")


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    if isinstance(axes, (int, np.integer)):
        pairs = (tuple(range(np.ndim(a) - axes, np.ndim(a))), tuple(range(axes)))
    else:
        pairs = tuple(tuple(np.atleast_1d(x).tolist()) for x in axes)
    pairs = tuple(tuple(int(i) % n for i in p) for p, n in zip(pairs, (np.ndim(a), np.ndim(b))))
    return run("tensordot", (a, b), pairs)


@implements(np.einsum)
def einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    refuse("einsum", **kwargs)
    if not isinstance(subscripts, str):
        raise TypeError("einsum: give the subscripts as a string ('ij,jk->ik')")
    return into_out(run("einsum", operands, (subscripts,)), out, "same_kind")


@implements(np.linalg.matmul)
def linalg_matmul(x1, x2, /):
    return matmul(x1, x2)


@implements(np.linalg.tensordot)
def linalg_tensordot(x1, x2, /, *, axes=2):
    return tensordot(x1, x2, axes)


@implements(np.einsum_path)
def einsum_path(subscripts, *operands, optimize="greedy", einsum_call=False):
    """numpy's contraction order, from the operands' shapes alone (no values move)."""
    stand_ins = [np.broadcast_to(np.zeros((), o.dtype), o.shape) if is_dtensor(o) else o
                 for o in operands]
    return np.einsum_path(subscripts, *stand_ins, optimize=optimize, einsum_call=einsum_call)


@implements(np.linalg.vecdot)
def vecdot(x1, x2, /, *, axis=-1):
    """``sum(conj(x1) * x2, axis)`` after broadcasting (numpy's ``vecdot``), so a split
    contracted dim gives ``P(sum)``."""
    a, b = as_array(x1), as_array(x2)
    if a.shape[axis] != b.shape[axis]:
        raise ValueError(f"vecdot: x1 and x2 must have the same size along axis {axis}, "
                         f"got shapes {a.shape} and {b.shape}")
    if a.dtype.kind == "c":
        a = np.conj(a)
    return np.sum(np.multiply(a, b), axis=axis, dtype=np.result_type(a.dtype, b.dtype))


@implements(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    """The chain in the cheapest order by the flop count numpy's ``multi_dot`` minimises
    (its dynamic programme on the shapes), each product a distributed ``dot``."""
    arrays = [as_array(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    first, last = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first:
        arrays[0] = _column(arrays[0], row=True)
    if last:
        arrays[-1] = _column(arrays[-1])
    dims = [a.shape[0] for a in arrays] + [arrays[-1].shape[1]]
    order = _chain_order(dims)
    result = _chain(arrays, order, 0, len(arrays) - 1)
    if first or last:
        result = reshape(result, tuple(d for d, keep in zip(result.shape, (not first, not last))
                                       if keep))
    return into_out(result, out, "same_kind")


def _chain_order(dims):
    """``split[i][j]``: where the cheapest product of arrays i..j splits (matrix chain)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min(
                (cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                for k in range(i, j))
    return split


def _chain(arrays, split, i, j):
    if i == j:
        return arrays[i]
    k = split[i][j]
    left, right = _chain(arrays, split, i, k), _chain(arrays, split, k + 1, j)
    return dot(left, right) if is_dtensor(left) or is_dtensor(right) else np.dot(left, right)
