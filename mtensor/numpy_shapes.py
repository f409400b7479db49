"""numpy's shape functions on DTensors (reshape, transpose, joins, indexing, ``*_like``),
registered in the same table as :mod:`numpy_api`."""
from __future__ import annotations

import numpy as np

from .numpy_api import _run, implements, refuse
from .ops.indexing import normalize_key


def _shape_arg(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    shape = newshape if shape is None else shape
    if order != "C":
        raise TypeError(f"reshape: order={order!r} is not supported on DTensors; use 'C'")
    return _run("reshape", (a,), (_shape_arg(shape),))


@implements(np.ravel)
def ravel(a, order="C"):
    return reshape(a, (-1,), order=order)


@implements(np.transpose)
def transpose(a, axes=None):
    return _run("transpose", (a,), (None if axes is None else _shape_arg(axes),))


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    axes = list(range(a.ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(a, axes)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    source, destination = np.atleast_1d(source), np.atleast_1d(destination)
    for axis in (*source, *destination):
        if not -a.ndim <= axis < a.ndim:
            raise np.exceptions.AxisError(int(axis), a.ndim)
    source = [int(s) % a.ndim for s in source]
    destination = [int(d) % a.ndim for d in destination]
    if len(source) != len(destination):
        raise ValueError("moveaxis: source and destination must name as many axes")
    order = [d for d in range(a.ndim) if d not in source]
    for dst, src in sorted(zip(destination, source)):
        order.insert(dst, src)
    return transpose(a, order)


@implements(np.expand_dims)
def expand_dims(a, axis):
    return _run("expand_dims", (a,), (_shape_arg(axis) if np.ndim(axis) else int(axis),))


@implements(np.squeeze)
def squeeze(a, axis=None):
    return _run("squeeze", (a,), (None if axis is None else _shape_arg(axis),))


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    return _run("broadcast_to", (array,), (_shape_arg(shape),))


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting=None):
    refuse("concatenate", out=out, dtype=dtype, casting=casting)
    if axis is None:
        return concatenate([ravel(a) if hasattr(a, "placements") else np.ravel(a)
                            for a in arrays])
    return _run("concatenate", tuple(arrays), (int(axis),))


@implements(np.stack)
def stack(arrays, axis=0, out=None, dtype=None, casting=None):
    refuse("stack", out=out, dtype=dtype, casting=casting)
    return _run("stack", tuple(arrays), (int(axis),))


def getitem(a, key):
    return _run("getitem", (a,), (normalize_key(key, a.shape),))


@implements(np.shape)
def shape(a):
    return a.shape


@implements(np.ndim)
def ndim(a):
    return a.ndim


@implements(np.size)
def size(a, axis=None):
    return a.size if axis is None else a.shape[axis]
