"""numpy's selection functions on DTensors: ``take``, ``take_along_axis``, ``put_along_axis``,
``compress``, ``extract``, ``insert``, ``delete``; :mod:`numpy_nonzero` adds ``nonzero``,
``flatnonzero``, ``argwhere`` and one-argument ``where``.

* ``take`` and ``take_along_axis`` are sharding rules (:mod:`ops.indexing`): dims the index
  leaves alone keep their split, split indices split the result (no gather of the index), a
  split picked axis is gathered or left as ``P(sum)`` terms filled with the sum's identity
  (``-0.0`` for floats, so values come back bit for bit), as the cost model picks.
  Indices may be numpy arrays (constants: sliced, never sent) or DTensors.
* ``extract`` (and ``compress`` of a whole array) is :mod:`numpy_nonzero`'s compaction: the
  picked values end in balanced ``Shard(0)`` blocks without gathering the mask or the array.
* ``compress`` along an axis, ``insert`` and ``delete`` let numpy work out the index array
  on an ``arange`` of the axis and ``take`` it (``insert`` from the array joined with its new
  slabs); ``put_along_axis`` is an item assignment (:mod:`writes`).
"""
from __future__ import annotations

import math
import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from .. import modes
from ..dtensor import DTensor
from .joins import concatenate
from .nonzero import hits
from .shapes import ravel, reshape
from .util import host_value, implements, into_out, is_dtensor, run
from .writes.setitem import setitem

_MODES = ("raise", "wrap", "clip")



def _index(name: str, indices):
    """Indices as a DTensor or numpy array of integers (bools count as 0 and 1, and an empty
    list is empty integers, as in numpy)."""
    if type(indices) is not DTensor:
        given, indices = indices, np.asarray(indices)
        if not indices.size and not isinstance(given, np.ndarray):
            indices = indices.astype(np.intp)
    if indices.dtype.kind not in "biu":
        raise TypeError(f"{name}: indices must be integers, got dtype {indices.dtype}")
    if indices.dtype.kind == "b":
        return indices.astype(np.intp)
    return indices


def _check_bounds(name: str, indices, n: int, axis: int, instead: str = "") -> None:
    """numpy's IndexError for an index outside ``[-n, n)``; for DTensor indices one small
    reduction of the values, with the same answer on every rank (``instead``: what a
    compiled step can call, which checks nothing)."""
    if type(indices) is DTensor:
        modes.refuse_while_tracing(f"{name} of DTensor indices (it checks their bounds{instead})")
        if not bool(np.any((indices < -n) | (indices >= n))):
            return
        low, high = int(np.min(indices)), int(np.max(indices))
    else:
        if not indices.size or (indices.min() >= -n and indices.max() < n):
            return
        low, high = int(indices.min()), int(indices.max())
    bad = low if low < -n else high
    raise IndexError(f"{name}: index {bad} is out of bounds for axis {axis} with size {n}")


@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    if mode not in _MODES:
        raise ValueError(f"take: mode must be one of {_MODES}, not {mode!r}")
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis_index(axis, np.ndim(a))
    indices = _index("take", indices)
    n = a.shape[axis]
    if n == 0 and math.prod(indices.shape):
        raise IndexError("take: cannot do a non-empty take from an empty axis")
    if mode == "raise":
        _check_bounds("take", indices, n, axis, "; mode='wrap' or 'clip' does not")
    return into_out(run("take", (a, indices), (axis, mode)), out)


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    if axis is None:
        if np.ndim(indices) != 1:
            raise ValueError("take_along_axis: when axis=None, `indices` must have a single "
                             "dimension")
        arr, axis = ravel(arr), 0
    axis = normalize_axis_index(axis, np.ndim(arr))
    indices = _index("take_along_axis", indices)
    if indices.ndim != np.ndim(arr):
        raise ValueError(f"take_along_axis: `indices` ({indices.ndim} dims) and `arr` "
                         f"({np.ndim(arr)} dims) must have the same number of dimensions")
    others = [s for d, s in enumerate(arr.shape) if d != axis]
    try:
        np.broadcast_shapes(tuple(others), tuple(s for d, s in enumerate(indices.shape)
                                                 if d != axis))
    except ValueError:
        raise IndexError(f"take_along_axis: shape mismatch: `arr` {arr.shape} and `indices` "
                         f"{indices.shape} do not broadcast outside axis {axis}") from None
    _check_bounds("take_along_axis", indices, arr.shape[axis], axis)
    return run("take_along_axis", (arr, indices), (axis,))


@implements(np.put_along_axis)
def put_along_axis(arr, indices, values, axis):
    """``arr[key] = values`` with the key numpy builds (written in ``arr``'s layout)."""
    indices = np.asarray(_index("put_along_axis", host_value(indices)))
    if type(arr) is not DTensor:
        np.put_along_axis(arr, indices, host_value(values), axis)
        return
    if axis is None:
        if indices.ndim != 1:
            raise ValueError("put_along_axis: when axis=None, `indices` must have a single "
                             "dimension")
        _check_bounds("put_along_axis", indices, arr.size, 0)
        setitem(arr, np.unravel_index(indices % max(arr.size, 1), arr.shape), values)
        return
    axis = normalize_axis_index(axis, arr.ndim)
    if indices.ndim != arr.ndim:
        raise ValueError(f"put_along_axis: `indices` ({indices.ndim} dims) and `arr` "
                         f"({arr.ndim} dims) must have the same number of dimensions")
    key = tuple(indices if d == axis else
                np.arange(s).reshape((1,) * d + (s,) + (1,) * (arr.ndim - d - 1))
                for d, s in enumerate(arr.shape))
    setitem(arr, key, values)


@implements(np.extract)
def extract(condition, arr):
    if type(arr) is not DTensor:
        return np.extract(host_value(condition), arr)
    if np.size(condition) == arr.size:
        if np.shape(condition) != arr.shape:
            condition = (reshape(condition, arr.shape) if type(condition) is DTensor
                         else np.reshape(condition, arr.shape))
        return hits("np.extract", condition, arr)[1]
    return take(ravel(arr), np.flatnonzero(host_value(condition)))


@implements(np.compress)
def compress(condition, a, axis=None, out=None):
    if type(a) is not DTensor:
        return np.compress(host_value(condition), a, axis, out)
    if np.ndim(condition) != 1:
        raise ValueError("compress: condition must be a 1-d array")
    if axis is None and np.size(condition) == a.size:
        return into_out(extract(condition, a), out)
    picked = np.flatnonzero(host_value(condition))
    return take(a, picked, axis=axis, out=out)


# --- insert and delete -------------------------------------------------------------------

def _along_axis(arr, axis):
    if axis is None:
        return ravel(arr), 0
    return arr, normalize_axis_index(operator.index(axis), arr.ndim)


@implements(np.delete)
def delete(arr, obj, axis=None):
    """``take`` of the positions numpy's own ``delete`` keeps along the axis."""
    if type(arr) is not DTensor:
        return np.delete(arr, host_value(obj), axis)
    arr, axis = _along_axis(arr, axis)
    keep = np.delete(np.arange(arr.shape[axis]), host_value(obj))
    return run("take", (arr, keep), (axis, "raise"))


@implements(np.insert)
def insert(arr, obj, values, axis=None):
    """``arr`` joined with the new slabs along the axis, then ``take`` in the order numpy's
    own ``insert`` gives an ``arange`` of the axis (the slabs numbered after it)."""
    if type(arr) is not DTensor:
        return np.insert(arr, host_value(obj), host_value(values), axis)
    arr, axis = _along_axis(arr, axis)
    obj = host_value(obj)
    n = arr.shape[axis]
    positions = np.arange(*obj.indices(n)) if isinstance(obj, slice) else np.asarray(obj)
    if positions.dtype == bool:
        positions = np.flatnonzero(positions)
    if positions.size == 1:
        values = _cast(values, arr.dtype)
        values = reshape(values, (1,) * (arr.ndim - values.ndim) + values.shape) \
            if type(values) is DTensor else np.array(values, ndmin=arr.ndim)
        if positions.ndim == 0:
            values = np.moveaxis(values, 0, axis)
        count = values.shape[axis]
    else:
        values, count = _cast(values, arr.dtype), positions.size
    slabs = arr.shape[:axis] + (count,) + arr.shape[axis + 1:]
    order = np.insert(np.arange(n), obj, n + np.arange(count))
    joined = concatenate([arr, _broadcast(values, slabs)], axis=axis)
    return run("take", (joined, order), (axis, "raise"))


def _cast(values, dtype):
    if type(values) is DTensor:
        return values if values.dtype == dtype else values.astype(dtype)
    return np.asarray(values).astype(dtype)


def _broadcast(values, shape):
    """``values`` as numpy's item assignment broadcasts them into ``shape``."""
    vshape = np.shape(values)
    while len(vshape) > len(shape) and vshape[0] == 1:
        vshape = vshape[1:]
    values = reshape(values, vshape) if type(values) is DTensor else np.reshape(values, vshape)
    return np.broadcast_to(values, shape)


@implements(np.select)
def select(condlist, choicelist, default=0):
    """numpy's ``select``: ``where`` folded from the last condition to the first (the first
    true one wins), in the layout the conditions and choices broadcast to."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    for i, c in enumerate(condlist):
        if np.result_type(c) != np.bool_:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    dtype = np.result_type(*choicelist, default)
    out = np.asarray(default, dtype)
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):
        out = np.where(cond, choice, out)
    return out.astype(dtype, copy=False) if is_dtensor(out) else out


@implements(np.resize)
def resize(a, new_shape):
    """numpy's ``resize``: the flat values repeated to fill ``new_shape``."""
    shape = (int(new_shape),) if np.ndim(new_shape) == 0 else tuple(int(s) for s in new_shape)
    size, flat = math.prod(shape), ravel(a)
    if flat.shape[0] == 0 or size == 0:
        return np.zeros_like(flat, shape=shape)
    copies = -(-size // flat.shape[0])
    return reshape(concatenate([flat] * copies)[:size], shape)


@implements(np.trim_zeros)
def trim_zeros(filt, trim="fb", axis=None):
    """The leading (``f``) and trailing (``b``) zeros cut off a 1-D DTensor: two agreed
    reads of where the first and last nonzero lie, then a slice (a view)."""
    if filt.ndim != 1 or axis not in (None, 0):
        raise TypeError(f"np.trim_zeros: only 1-D DTensors are supported, got shape {filt.shape}")
    nonzero = filt != 0
    n = filt.shape[0]
    if n == 0 or not bool(np.any(nonzero)):
        return filt[0:0]
    first = int(np.argmax(nonzero)) if "f" in trim.lower() else 0
    last = n - int(np.argmax(np.flip(nonzero))) if "b" in trim.lower() else n
    return filt[first:last]


@implements(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """numpy's ``piecewise``: each piece a ``where`` in order (a later condition wins), an
    extra function for where no condition holds; each function sees the whole of ``x``
    (numpy's sees ``x[cond]``: the values taken are the same)."""
    conds = list(condlist) if isinstance(condlist, (list, tuple)) else [condlist]
    if len(funclist) == len(conds) + 1:
        rest = conds[0]
        for c in conds[1:]:
            rest = rest | c
        conds.append(~rest)
    elif len(funclist) != len(conds):
        raise ValueError(f"with {len(conds)} condition(s), either {len(conds)} or "
                         f"{len(conds) + 1} functions are expected")
    out = np.zeros_like(x)
    for cond, f in zip(conds, funclist):
        out = np.where(cond, f(x, *args, **kw) if callable(f) else f, out)
    return out.astype(x.dtype, copy=False)
