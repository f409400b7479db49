"""numpy's shape functions on DTensors (reshape, transpose, joins, indexing, ``*_like``),
registered in the same table as :mod:`numpy_api`.

Where numpy returns a view (basic indexing, transpose, reshape, ...), so does mtensor: the
result is linked to its base (:mod:`views`), and writes to either show in both."""
from __future__ import annotations

import numpy as np

from . import dispatch as _dispatch
from . import views
from .numpy_api import _out, _run, implements, refuse
from .ops.index_plan import is_advanced
from .placement import Partial
from .writes import WHOLE, assign, entries_for


def _as_view(out, a, name, params, put_back, key=None):
    """Link ``out`` (op ``name`` of ``a``) to ``a`` as a view.  Attached (its block a numpy
    view of ``a``'s) when the op ran on ``a``'s block as it was and made no partial terms of
    a split dim: decided from the layouts alone, so alike on every rank."""
    decision = _dispatch.decision_for(name, (a,), params)
    made_terms = any(isinstance(q, Partial) and not isinstance(p, Partial)
                     for p, q in zip(a.placements, out.placements))
    attached = decision.prepare[0] is None and not made_terms
    views.link(out, a, lambda parent: _run(name, (parent,), params), put_back, attached, key)
    return out


def _reshaped_back(parent, view):
    assign(parent, WHOLE, _run("reshape", (view,), (parent.shape,)))


def _shape_arg(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    shape = newshape if shape is None else shape
    if order != "C":
        raise TypeError(f"reshape: order={order!r} is not supported on DTensors; use 'C'")
    params = (_shape_arg(shape),)
    return _as_view(_run("reshape", (a,), params), a, "reshape", params, _reshaped_back)


@implements(np.ravel)
def ravel(a, order="C"):
    return reshape(a, (-1,), order=order)


@implements(np.transpose)
def transpose(a, axes=None):
    params = (None if axes is None else _shape_arg(axes),)
    return _as_view(_run("transpose", (a,), params), a, "transpose", params,
                    lambda parent, view: assign(parent, WHOLE, _transposed_back(view, axes)))


def _transposed_back(view, axes):
    order = range(view.ndim)[::-1] if axes is None else [int(i) % view.ndim for i in axes]
    return _run("transpose", (view,), (tuple(int(i) for i in np.argsort(order)),))


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
    params = (_shape_arg(axis) if np.ndim(axis) else int(axis),)
    return _as_view(_run("expand_dims", (a,), params), a, "expand_dims", params, _reshaped_back)


@implements(np.squeeze)
def squeeze(a, axis=None):
    params = (None if axis is None else _shape_arg(axis),)
    return _as_view(_run("squeeze", (a,), params), a, "squeeze", params, _reshaped_back)


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    return _run("broadcast_to", (array,), (_shape_arg(shape),))


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting=None):
    refuse("concatenate", dtype=dtype, casting=casting)
    if axis is None:
        return concatenate([ravel(a) if hasattr(a, "placements") else np.ravel(a)
                            for a in arrays], out=out)
    return _out(_run("concatenate", tuple(arrays), (int(axis),)), out, "same_kind")


@implements(np.stack)
def stack(arrays, axis=0, out=None, dtype=None, casting=None):
    refuse("stack", dtype=dtype, casting=casting)
    return _out(_run("stack", tuple(arrays), (int(axis),)), out, "same_kind")


def getitem(a, key):
    """``a[key]``: a view for basic keys (ints, slices, None, ...), a copy for array keys,
    as in numpy.  DTensors in the key are gathered (every rank needs the whole index)."""
    entries = entries_for(key, a.shape, "getitem")
    if is_advanced(entries):
        return _dispatch.dispatch("getitem_advanced", (a,), (entries,), cache=False)
    params = (entries,)
    return _as_view(_run("getitem", (a,), params), a, "getitem", params,
                    lambda parent, view: assign(parent, entries, view), entries)


@implements(np.shape)
def shape(a):
    return a.shape


@implements(np.ndim)
def ndim(a):
    return a.ndim


@implements(np.size)
def size(a, axis=None):
    return a.size if axis is None else a.shape[axis]
