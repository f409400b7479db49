"""numpy's tiling and padding on DTensors: ``repeat``, ``tile``, ``pad`` (constant, edge, wrap).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..ops.pad import MODES
from .elementwise import copy as _copy
from .selection import take
from .shapes import broadcast_to, expand_dims, ravel, reshape
from .util import host_value, implements, refuse_dtensor_args, run, unsupported

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
    """One count: a broadcast and a merge (a split dim keeps its split).  One count per
    element (plain values, or a DTensor, which is gathered: the counts decide the shape):
    ``take`` of each index repeated."""
    refuse_dtensor_args("repeat", axis=axis)
    if np.size(repeats) != 1:
        counts = np.asarray(host_value(repeats))
        if axis is None or a.ndim == 0:
            a, axis = ravel(a), 0
        return take(a, np.repeat(np.arange(a.shape[axis]), counts), axis=axis)
    r = _count("repeat", "repeats", host_value(repeats))
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
    refuse_dtensor_args("tile", reps=tup)
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
    """Modes 'constant', 'edge' and 'wrap': one ``pad_axis`` op per padded axis (a split
    axis reads a window of each block's neighbours: ``ops.pad``), so the output keeps the
    array's layout."""
    if callable(mode) or mode not in MODES:
        unsupported("pad", "mode", f"({mode!r}; only {', '.join(map(repr, MODES))} are)")
    unknown = set(kwargs) - ({"constant_values"} if mode == "constant" else set())
    if unknown:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unknown}")
    values = kwargs.get("constant_values", 0)
    refuse_dtensor_args("pad", pad_width=pad_width, constant_values=values)
    if isinstance(pad_width, dict):
        seq = [(0, 0)] * array.ndim
        for ax, w in pad_width.items():
            seq[ax] = (w, w) if isinstance(w, int) else tuple(w)
        pad_width = seq
    widths, values = _pairs(pad_width, array.ndim, True), _pairs(values, array.ndim)
    out = array
    for ax in range(array.ndim):
        before, after = widths[ax]
        if not before and not after:
            continue
        if mode != "constant" and out.shape[ax] == 0:
            raise ValueError(f"can't extend empty axis {ax} using modes other than 'constant' "
                             f"or 'empty'")
        out = run("pad_axis", (out,), (ax, int(before), int(after), mode, tuple(values[ax])))
    return _copy(out) if out is array else out
