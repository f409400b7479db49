"""numpy's rearranging functions on DTensors: ``flip``, ``fliplr``, ``flipud``, ``roll``.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..dispatch import dispatch
from .elementwise import copy as _copy
from .shapes import getitem, ravel, reshape
from .util import implements, refuse_dtensor_args

# --- flips and rolls ---------------------------------------------------------------------

def _flipped(m, axes):
    return getitem(m, tuple(slice(None, None, -1) if d in axes else slice(None)
                            for d in range(m.ndim)))


@implements(np.flip)
def flip(m, axis=None):
    refuse_dtensor_args("flip", axis=axis)
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
    """numpy's ``roll``: one ``roll`` op per rolled axis (a split axis exchanges halos with
    its neighbours when the shift is within a block, as a periodic stencil's; else it is
    gathered); ``axis=None`` rolls the flattened array."""
    refuse_dtensor_args("roll", shift=shift, axis=axis)
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
        s = s - n if 2 * s > n else s      # the shorter way round: a window of fewer rows
        if s:
            out = dispatch("roll", (out,), (ax, s))
    return _copy(out) if out is a else out


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    """numpy's rotation: flips and a transpose of the two axes (views of their rules)."""
    refuse_dtensor_args("rot90", k=k)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    a0, a1 = normalize_axis_tuple(axes, m.ndim)
    if a0 == a1:
        raise ValueError("Axes must be different.")
    k = int(k) % 4
    if k == 0:
        return getitem(m, ())
    if k == 2:
        return flip(flip(m, a0), a1)
    order = list(range(m.ndim))
    order[a0], order[a1] = order[a1], order[a0]
    return np.transpose(flip(m, a1), order) if k == 1 else flip(np.transpose(m, order), a1)
