"""numpy's shape functions on DTensors: ``reshape``, ``ravel``, ``transpose``, ``swapaxes``,
``moveaxis``, ``expand_dims``, ``squeeze``, ``broadcast_to``, ``atleast_*d``, basic indexing
(``getitem``) and ``shape``/``ndim``/``size``.  Where numpy returns a view, so does mtensor:
the result is linked to its base (``views``) and writes to either show in both.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from .. import dispatch as _dispatch
from .. import modes, views
from ..dtensor import DTensor
from ..ops.plans.indexing import plain_key
from ..placement import Partial
from .util import HANDLED, implements, is_dtensor, run
from .writes.setitem import WHOLE, assign, entries_for, scalar_mask


def _view(a, name, params, numpy_view=True, key=None):
    """Op ``name`` of ``a``, linked to ``a`` as a view.  Attached (its block a numpy view of
    ``a``'s) when the op ran on ``a``'s block as it was, made no partial terms of a split dim
    and its kernel always returns a numpy view (``numpy_view``; a reshape copies a block
    that is not contiguous): decided from the layouts alone, so alike on every rank."""
    if views.state.detached and a._view is not None:
        views.sync(a)
    decision = _dispatch.decision_for(name, (a,), params)
    out = _dispatch.run_decision(name, (a,), params, decision)
    if decision.attached is None:
        made_terms = any(isinstance(q, Partial) and not isinstance(p, Partial)
                         for p, q in zip(a.placements, out.placements))
        decision.attached = numpy_view and decision.prepare[0] is None and not made_terms
    views.link(out, a, (name, params), decision.attached, key)
    return out


def _numpy_would_view(a, shape) -> bool:
    """Whether numpy's ``reshape`` of ``a`` to ``shape`` is a view: ``a``'s chain of views is
    replayed on a stand-in array with the strides a C-ordered base would give (no memory
    is read), then numpy is asked to reshape it without copying."""
    if a._view is None:
        return True             # a base is C-ordered: numpy reshapes it in place
    chain = []
    while a._view is not None:
        chain.append(a._view.op)
        a = a._view.parent
    return _views_after(tuple(reversed(chain)), a.shape, shape)


@lru_cache(maxsize=1024)
def _views_after(chain, base_shape, shape) -> bool:
    fake = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), base_shape,
                                           _c_strides(base_shape))
    for name, params in chain:
        fake = _FAKE_VIEW[name](fake, params)
    try:
        fake.view().shape = shape
    except AttributeError:
        return False
    return True


def _c_strides(shape):
    return tuple(int(np.prod(shape[d + 1:])) for d in range(len(shape)))


_FAKE_VIEW = {
    "getitem": lambda f, p: f[plain_key(p[0])],
    "transpose": lambda f, p: f.transpose(p[0]),
    "expand_dims": lambda f, p: np.expand_dims(f, p[0]),
    "squeeze": lambda f, p: np.squeeze(f, p[0]),
    "reshape": lambda f, p: f.reshape(p[0]),
}


def _reshaped_back(parent, view, params):
    assign(parent, WHOLE, run("reshape", (view,), (parent.shape,)))


def _transposed_back(parent, view, params):
    (axes,) = params
    order = range(view.ndim)[::-1] if axes is None else [int(i) % view.ndim for i in axes]
    back = (tuple(int(i) for i in np.argsort(order)),)
    assign(parent, WHOLE, run("transpose", (view,), back))


views.recompute = lambda parent, op: run(op[0], (parent,), op[1])
views.PUT_BACK.update({
    "getitem": lambda parent, view, params: assign(parent, params[0], view),
    "transpose": _transposed_back,
    "expand_dims": _reshaped_back,
    "squeeze": _reshaped_back,
    "reshape": _reshaped_back,
})


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
    if not _numpy_would_view(a, params[0]):
        return run("copy", (run("reshape", (a,), params),))     # numpy copies: so do we
    return _view(a, "reshape", params, numpy_view=False)


@implements(np.ravel)
def ravel(a, order="C"):
    """A DTensor's view; a plain array (a constant beside DTensors) raveled by numpy."""
    if type(a) is not DTensor:
        return np.ravel(a, order)
    return reshape(a, (-1,), order=order)


@implements(np.transpose)
def transpose(a, axes=None):
    params = (None if axes is None else _shape_arg(axes),)
    return _view(a, "transpose", params)


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
    return _view(a, "expand_dims", params)


@implements(np.squeeze)
def squeeze(a, axis=None):
    params = (None if axis is None else _shape_arg(axis),)
    return _view(a, "squeeze", params)


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    return run("broadcast_to", (array,), (_shape_arg(shape),))


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    """Each operand broadcast to the common shape (a tuple, numpy 2's), DTensors through the
    broadcast rule (a split dim keeps its split), the rest as numpy arrays."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    return tuple(broadcast_to(a, shape) if is_dtensor(a) else np.broadcast_to(a, shape)
                 for a in args)


@implements(np.rollaxis)
def rollaxis(a, axis, start=0):
    """numpy's older ``moveaxis``: ``axis`` rolled back until it lies before ``start``."""
    n = a.ndim
    axis = normalize_axis_index(axis, n)
    if not -n <= start <= n:
        raise np.exceptions.AxisError(f"rollaxis: start {start} out of range for {n} dims")
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start) if axis != start else getitem(a, ())


@implements(np.matrix_transpose, np.linalg.matrix_transpose)
def matrix_transpose(x, /):
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: input must be at least 2-D, got shape {x.shape}")
    return swapaxes(x, -1, -2)


@implements(np.unstack)
def unstack(x, /, *, axis=0):
    """The slices along ``axis``, each a view (``x[..., i, ...]``)."""
    axis = normalize_axis_index(axis, x.ndim)
    return tuple(getitem(x, (slice(None),) * axis + (i,)) for i in range(x.shape[axis]))


def getitem(a, key):
    """``a[key]``: a view for basic keys (ints, slices, None, ...), a copy for array keys,
    as in numpy.  A DTensor mask of ``a``'s shape is ``np.extract`` (the hits laid out
    balanced, the mask never gathered) and an integer DTensor ``np.take`` along dim 0 (the
    result split like the index); outside gradients and ``mt.compile``, which record the
    general path: other DTensors in the key are gathered (every rank needs the whole index)."""
    flag = scalar_mask(key)
    if flag is not None:            # a 0-d mask: a new axis of length 1 (True) or 0 (False)
        out = getitem(a, None)
        return out if flag else getitem(out, slice(0, 0))
    if type(key) is DTensor and key.ndim and modes.active.tracer is None and not (
            modes.is_tracked(a) or modes.is_tracked(key)):
        if key.dtype == np.bool_ and key.shape == a.shape:
            return HANDLED[np.extract](key, a)
        if key.dtype.kind in "iu":
            return HANDLED[np.take](a, key, axis=0)
    entries, advanced = entries_for(key, a.shape, "getitem")
    if advanced:
        return _dispatch.dispatch("getitem_advanced", (a,), (entries,), cache=False)
    return _view(a, "getitem", (entries,), key=key)


@implements(np.shape)
def shape(a):
    return a.shape


@implements(np.ndim)
def ndim(a):
    return a.ndim


@implements(np.size)
def size(a, axis=None):
    return a.size if axis is None else a.shape[axis]


# --- atleast_nd --------------------------------------------------------------------------

def to_1d(a):
    return reshape(a, (1,)) if a.ndim == 0 else a


def to_2d(a):
    return reshape(a, (1, 1)) if a.ndim == 0 else expand_dims(a, 0) if a.ndim == 1 else a


def to_3d(a):
    if a.ndim == 0:
        return reshape(a, (1, 1, 1))
    if a.ndim == 1:
        return getitem(a, (None, slice(None), None))
    return expand_dims(a, 2) if a.ndim == 2 else a


def _atleast(numpy_fn, make, arys):
    res = tuple(make(a) if is_dtensor(a) else numpy_fn(a) for a in arys)
    return res[0] if len(res) == 1 else res


@implements(np.atleast_1d)
def atleast_1d(*arys):
    return _atleast(np.atleast_1d, to_1d, arys)


@implements(np.atleast_2d)
def atleast_2d(*arys):
    return _atleast(np.atleast_2d, to_2d, arys)


@implements(np.atleast_3d)
def atleast_3d(*arys):
    return _atleast(np.atleast_3d, to_3d, arys)
