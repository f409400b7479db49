"""numpy's joins and tiling on DTensors (``vstack``, ``hstack``, ``dstack``, ``column_stack``,
``atleast_*d``, ``append``, ``flip``, ``roll``, ``repeat``, ``tile``, ``meshgrid``, ``pad``),
registered in the table of :mod:`numpy_api`; :mod:`numpy_diag` adds the diagonal family.

Each is written as a composition of ops mtensor already has (views, ``concatenate``,
``broadcast_to``, ``reshape``, ``copy``), so each inherits their sharding rules and never
gathers more than they do: a dim the function leaves alone keeps its split, a dim it joins,
rolls or pads is made whole (the join rule's need), a reversed or sliced split dim goes the
way of ``x[::-1]`` (gathered, or left as partial terms, as the cost model picks).  Arguments
that cannot be honoured raise ``TypeError`` naming the function and the argument.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from .numpy_api import copy as _copy
from .numpy_api import _dt, implements
from .numpy_shapes import broadcast_to, concatenate, expand_dims, getitem, ravel, reshape



def _unsupported(name: str, arg: str, why: str):
    raise TypeError(f"{name}: argument {arg} {why} is not supported on DTensors; call "
                    f"full_tensor() or to_local() and use numpy directly")


def _no_dtensor(name: str, **args) -> None:
    """Counts, widths and shifts steer the computation: they must be plain values."""
    for arg, value in args.items():
        if _dt(value) or (isinstance(value, (list, tuple)) and any(_dt(v) for v in value)):
            _unsupported(name, arg, "given as a DTensor")


# --- atleast_nd --------------------------------------------------------------------------

def _to_1d(a):
    return reshape(a, (1,)) if a.ndim == 0 else a


def _to_2d(a):
    return reshape(a, (1, 1)) if a.ndim == 0 else expand_dims(a, 0) if a.ndim == 1 else a


def _to_3d(a):
    if a.ndim == 0:
        return reshape(a, (1, 1, 1))
    if a.ndim == 1:
        return getitem(a, (None, slice(None), None))
    return expand_dims(a, 2) if a.ndim == 2 else a


def _atleast(numpy_fn, make, arys):
    res = tuple(make(a) if _dt(a) else numpy_fn(a) for a in arys)
    return res[0] if len(res) == 1 else res


@implements(np.atleast_1d)
def atleast_1d(*arys):
    return _atleast(np.atleast_1d, _to_1d, arys)


@implements(np.atleast_2d)
def atleast_2d(*arys):
    return _atleast(np.atleast_2d, _to_2d, arys)


@implements(np.atleast_3d)
def atleast_3d(*arys):
    return _atleast(np.atleast_3d, _to_3d, arys)


# --- stacks ------------------------------------------------------------------------------

def _plain_join(name, dtype, casting):
    if dtype is not None:
        _unsupported(name, "dtype", f"({dtype!r})")
    if casting != "same_kind":
        _unsupported(name, "casting", f"({casting!r})")


def _each(make, numpy_fn, tup):
    return [make(a) if _dt(a) else numpy_fn(a) for a in tup]


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    _plain_join("vstack", dtype, casting)
    return concatenate(_each(_to_2d, np.atleast_2d, tup), axis=0)


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    _plain_join("hstack", dtype, casting)
    arrs = _each(_to_1d, np.atleast_1d, tup)
    return concatenate(arrs, axis=0 if arrs and np.ndim(arrs[0]) == 1 else 1)


@implements(np.dstack)
def dstack(tup):
    return concatenate(_each(_to_3d, np.atleast_3d, tup), axis=2)


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
    _no_dtensor("append", axis=axis)
    arr = arr if _dt(arr) else np.asanyarray(arr)
    if axis is None:
        arr = ravel(arr)
        values = ravel(values)
        axis = 0
    return concatenate((arr, values), axis=axis)


# --- flips and rolls ---------------------------------------------------------------------

def _flipped(m, axes):
    return getitem(m, tuple(slice(None, None, -1) if d in axes else slice(None)
                            for d in range(m.ndim)))


@implements(np.flip)
def flip(m, axis=None):
    _no_dtensor("flip", axis=axis)
    return _flipped(m, range(m.ndim) if axis is None else normalize_axis_tuple(axis, m.ndim))


@implements(np.fliplr)
def fliplr(m):
    if m.ndim < 2:
        raise ValueError("Input must be >= 2-d.")
    return _flipped(m, (1,))


@implements(np.flipud)
def flipud(m):
    if m.ndim < 1:
        raise ValueError("Input must be >= 1-d.")
    return _flipped(m, (0,))


@implements(np.roll)
def roll(a, shift, axis=None):
    """numpy's ``roll``: along each rolled axis, the concatenation of two slices."""
    _no_dtensor("roll", shift=shift, axis=axis)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    axes = normalize_axis_tuple(axis, a.ndim, allow_duplicate=True)
    pairs = np.broadcast(shift, axes)
    if pairs.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    shifts = dict.fromkeys(range(a.ndim), 0)
    for sh, ax in pairs:
        shifts[int(ax)] += int(sh)
    out = a
    for ax, s in shifts.items():
        n = a.shape[ax]
        s %= n or 1
        if s:
            head = tuple(slice(n - s, None) if d == ax else slice(None) for d in range(a.ndim))
            tail = tuple(slice(None, n - s) if d == ax else slice(None) for d in range(a.ndim))
            out = concatenate([getitem(out, head), getitem(out, tail)], axis=ax)
    return _copy(out) if out is a else out


# --- repeat and tile: broadcast a new axis, copy, merge it in ----------------------------

def _count(name, arg, value) -> int:
    v = np.asarray(value)
    if v.dtype.kind not in "iub":
        raise TypeError(f"{name}: argument {arg} must be integers, not {v.dtype}")
    return int(v.reshape(()))


def _merged(b, shape):
    """``b`` (a broadcast) copied into fresh blocks, then reshaped: never a view of the
    read-only broadcast, whatever block each rank holds."""
    return reshape(_copy(b), shape)


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    _no_dtensor("repeat", repeats=repeats, axis=axis)
    if np.size(repeats) != 1:
        _unsupported("repeat", "repeats", "as one count per element")
    r = _count("repeat", "repeats", repeats)
    if r < 0:
        raise ValueError("repeat: negative dimensions are not allowed")
    if axis is None or a.ndim == 0:    # numpy treats a 0-d array as 1-d here
        a, axis = ravel(a), 0 if axis is None else axis
    axis = normalize_axis_index(axis, a.ndim)
    s = a.shape
    b = broadcast_to(expand_dims(a, axis + 1), s[:axis + 1] + (r,) + s[axis + 1:])
    return _merged(b, s[:axis] + (s[axis] * r,) + s[axis + 1:])


@implements(np.tile)
def tile(A, reps):
    try:
        tup = tuple(reps)
    except TypeError:
        tup = (reps,)
    _no_dtensor("tile", reps=tup)
    tup = tuple(_count("tile", "reps", t) for t in tup)
    if any(t < 0 for t in tup):
        raise ValueError("tile: negative dimensions are not allowed")
    c = A
    if c.ndim < len(tup):
        c = reshape(c, (1,) * (len(tup) - c.ndim) + c.shape)
    tup = (1,) * (c.ndim - len(tup)) + tup
    if all(t == 1 for t in tup):
        return _copy(c)
    nd = c.ndim
    wide = expand_dims(c, tuple(range(0, 2 * nd, 2)))
    b = broadcast_to(wide, tuple(x for pair in zip(tup, c.shape) for x in pair))
    return _merged(b, tuple(t * n for t, n in zip(tup, c.shape)))


# --- meshgrid and pad --------------------------------------------------------------------

@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    shapes = [[1] * nd for _ in xi]
    for i, x in enumerate(xi):
        shapes[i][i] = int(np.size(x))
    if indexing == "xy" and nd > 1:
        shapes[0][0], shapes[0][1] = 1, shapes[0][0]
        shapes[1][1], shapes[1][0] = 1, shapes[1][1]
    out = [reshape(x, tuple(s)) if _dt(x) else np.asanyarray(x).reshape(s)
           for x, s in zip(xi, shapes)]
    if not sparse:
        full = np.broadcast_shapes(*(o.shape for o in out))
        out = [broadcast_to(o, full) if _dt(o) else np.broadcast_to(o, full) for o in out]
    if copy:
        out = [_copy(o) if _dt(o) else o.copy() for o in out]
    return tuple(out)


def _pairs(x, ndim, as_index=False):
    x = np.asarray(x)
    if as_index:
        if x.dtype.kind not in "iu":
            raise TypeError("`pad_width` must be of integral type.")
        if x.size and x.min() < 0:
            raise ValueError("index can't contain negative values")
    return np.broadcast_to(x, (ndim, 2)).tolist()


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    """``mode='constant'`` only: along each padded axis, a join with constant slabs (a
    split axis is made whole by the join; the others keep their split)."""
    if callable(mode) or mode != "constant":
        _unsupported("pad", "mode", f"({mode!r}; only mode='constant' is)")
    unknown = set(kwargs) - {"constant_values"}
    if unknown:
        raise ValueError(f"unsupported keyword arguments for mode 'constant': {unknown}")
    values = kwargs.get("constant_values", 0)
    _no_dtensor("pad", pad_width=pad_width, constant_values=values)
    if isinstance(pad_width, dict):
        seq = [(0, 0)] * array.ndim
        for ax, w in pad_width.items():
            seq[ax] = (w, w) if isinstance(w, int) else tuple(w)
        pad_width = seq
    widths, values = _pairs(pad_width, array.ndim, True), _pairs(values, array.ndim)
    out = array
    for ax in range(array.ndim):
        parts = [out]
        for end, (width, value) in enumerate(zip(widths[ax], values[ax])):
            if width:
                shape = out.shape[:ax] + (width,) + out.shape[ax + 1:]
                slab = np.full(shape, value, dtype=array.dtype)
                parts.insert(0 if end == 0 else len(parts), slab)
        if len(parts) > 1:
            out = concatenate(parts, axis=ax)
    return _copy(out) if out is array else out


from . import numpy_diag as _numpy_diag  # noqa: E402,F401  (registers diagonal, diag, ...)
