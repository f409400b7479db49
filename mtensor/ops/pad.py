"""``np.pad`` along one axis, modes 'constant', 'edge' and 'wrap': the op ``pad_axis``.

Output row ``j`` of the padded axis (``before`` rows, the ``n`` rows of ``a``, ``after``
rows) is row ``j - before`` of ``a`` where that is a row, else the mode's constant, the
nearest end row ('edge') or row ``(j - before) mod n`` ('wrap').  So each output block reads
a window of ``a``: the block's rows shifted by ``before``, clipped to the array (constant),
clamped to its ends (edge) or wrapped round (wrap).  Along an axis split by one mesh dim a
halo exchange brings the rows past the block's ends and the output stays split (the
array_split layout of its own length); a pad that reaches past a neighbour's block (or an
axis split by two mesh dims) gathers the axis and cuts the output from it.  Either way each
output element is a copy of numpy's.
"""
from __future__ import annotations

import numpy as np

from ..device.arrays import like
from ..placement import Partial, Replicate, Shard, local_bounds
from .registry import Choice, OpCall, Strategy, register
from .windows import Window, halo_plan, is_split_once, window_rows

MODES = ("constant", "edge", "wrap")


def _window(axis, n, before, after, mode, mesh_dim=-1) -> Window:
    return Window(0, mesh_dim, axis, n + before + after, -before, periodic=mode == "wrap",
                  clamp=mode == "edge")


@register("pad_axis")
def pad_axis_rule(call: OpCall) -> Strategy:
    """Params ``(axis, before, after, mode, (value before, value after))``.  Per mesh dim:
    a dim split along the axis reads a window (a halo exchange) or gathers the axis, other
    placements are kept (partial terms reduced: a pad of terms is not the terms of a pad)."""
    axis, before, after, mode, values = call.params
    a = call.operands[0]
    n = a.shape[axis]
    shape = list(a.shape)
    shape[axis] = n + before + after
    choices = {}
    for p in sorted(a.placements, key=lambda p: p == Shard(axis)):   # as halo_apply's
        along = p == Shard(axis)
        whole = Replicate() if along or isinstance(p, Partial) else p
        choices[Choice((whole,), p if along else whole)] = None
    choices = list(choices)
    mesh_dim = is_split_once(a.placements, call.mesh_shape, axis)
    if mesh_dim is not None:
        window = _window(axis, n, before, after, mode, mesh_dim)
        if halo_plan(window, n, call.mesh_shape[mesh_dim]) is not None:
            choices.append(Choice((Shard(axis),), Shard(axis), window))

    def kernel(windowed):
        def bind(in_layouts, out_layout, mesh, *windows):
            block = local_bounds(tuple(shape), mesh.shape, out_layout, mesh.coordinate)[axis]
            first = window_rows(_window(axis, n, before, after, mode), block, n)[0]
            return _pad_kernel(axis, n, before, mode, values, block, first if windowed else None)
        return bind

    return Strategy(tuple(shape), choices, kernel_for=kernel(False),
                    window_kernel_for=kernel(True))


def _pad_kernel(axis, n, before, mode, values, block, first):
    """The output rows ``block`` from rows of ``a`` starting at row ``first`` (a window's
    first row, counted before wrapping round; None: ``a``'s whole axis)."""
    start, stop = block
    rows = np.arange(start, stop) - before            # the rows of ``a`` they copy
    whole = first is None
    first = 0 if whole else first
    if mode == "wrap":
        take = rows % n if whole else rows - first    # a window holds them in order
    elif mode == "edge":
        take = np.clip(rows, 0, n - 1) - first
    else:
        inside = slice(min(max(before - start, 0), stop - start),
                       min(max(before + n - start, 0), stop - start))

    def pad(a):
        index = (slice(None),) * axis
        if mode != "constant":
            return np.take(a, like(take, a), axis=axis)
        shape = list(a.shape)
        shape[axis] = stop - start
        out = np.empty_like(a, shape=shape)
        out[index + (slice(0, inside.start),)] = values[0]
        out[index + (slice(inside.stop, None),)] = values[1]
        lo = start + inside.start - before - first
        out[index + (inside,)] = a[index + (slice(lo, lo + inside.stop - inside.start),)]
        return out
    return pad
