"""``np.diff``, ``np.convolve`` and ``np.gradient`` along an axis, as one op: ``halo_apply``.

Each rank computes its output block from the rows of ``a`` that block reads: output rows
``[s, e)`` of a difference of order ``n`` read the rows ``[s, e + n)`` of ``[prepend, a,
append]`` (a 'valid' convolution with a kernel of ``n + 1`` taps likewise; the mode's zero
padding is its prepended and appended rows), and a gradient's block reads ``edge_order``
rows past either end (the one-sided stencils at the axis' ends read the first or last
``edge_order + 1`` rows; the window's own ends are cut off).  Those rows are a
:class:`~mtensor.ops.windows.Window` of ``a``: along an axis split by one mesh dim a halo
exchange with the neighbours brings them, and the output keeps ``a``'s split (the
array_split layout of its own length).  Where no window fits (a block narrower than the
rows it must lend, or the axis split by two mesh dims) the axis is gathered whole and each
rank cuts the same rows from it, so the values are the same either way.
"""
from __future__ import annotations

import numpy as np

from ..device.arrays import like
from ..placement import Partial, Replicate, Shard, local_bounds
from .registry import Choice, OpCall, Strategy, register
from .windows import Window, halo_plan, is_split_once, window_rows


def out_length(kind, length, params) -> int:
    """Length of the result along the axis: diff's ``(n, prepend rows, append rows)``
    shortens it by n (convolve's too: n = kernel length - 1, zero rows at the ends),
    gradient keeps it."""
    if kind in ("diff", "convolve"):
        n, before, after = params[:3]
        return max(length + before + after - n, 0)
    return length


def window_of(kind, params, length, mesh_dim=-1, axis=0) -> Window:
    """The rows of ``a`` each output block reads (see the module docstring)."""
    if kind == "gradient":
        return Window(0, mesh_dim, axis, length, 0, widen=params[0])
    n, before = params[:2]
    return Window(0, mesh_dim, axis, out_length(kind, length, params), -before, grow=n)


def _index(axis, ndim, rows):
    return (slice(None),) * axis + (rows,) + (slice(None),) * (ndim - axis - 1)


def _lent(p, axis):
    """How the prepended and appended rows are used where ``a`` is placed ``p``: whole
    along the axis, split like ``a`` along the others."""
    return p if isinstance(p, Shard) and p.dim != axis else Replicate()


@register("halo_apply")
def halo_apply_rule(call: OpCall) -> Strategy:
    """numpy's ``kind`` (diff, convolve or gradient) on the rows each output block reads.
    Operands: ``a``, then diff's prepend and append rows or gradient's coordinates, as
    ``roles`` names them.  Per mesh dim: a dim split along the axis reads a window (a halo
    exchange) or gathers the axis; any other placement is kept (partial terms reduced)."""
    kind, axis, roles, params = call.params
    a = call.operands[0]
    length = a.shape[axis]
    shape = list(a.shape)
    shape[axis] = out_length(kind, length, params)
    dtype = _out_dtype(kind, call, roles, params)

    def lent(p):
        return tuple(Replicate() if r == "coords" else _lent(p, axis) for r in roles[1:])

    # the axis gathered, the output still split along it, comes after the others: on a
    # mesh dim where ``a`` is not split along the axis it ties with keeping ``a``'s
    # placement, which the chooser then prefers (an output split there would nest under a
    # window's split, whose rows are planned for that mesh dim alone)
    choices = {}
    for p in sorted(a.placements, key=lambda p: p == Shard(axis)):
        along = p == Shard(axis)
        whole = Replicate() if along or isinstance(p, Partial) else p
        choices[Choice((whole, *lent(p)), p if along else whole)] = None
    choices = list(choices)
    mesh_dim = is_split_once(a.placements, call.mesh_shape, axis)
    if mesh_dim is not None:
        window = window_of(kind, params, length, mesh_dim, axis)
        if halo_plan(window, length, call.mesh_shape[mesh_dim]) is not None:
            choices.append(Choice((Shard(axis), *lent(Shard(axis))), Shard(axis), window))

    def kernel(windowed):
        def bind(in_layouts, out_layout, mesh, *windows):
            out_block = local_bounds(tuple(shape), mesh.shape, out_layout, mesh.coordinate)[axis]
            need = window_rows(window_of(kind, params, length), out_block, length)
            rows = (lambda a: a) if windowed else (
                lambda a: a[_index(axis, a.ndim, slice(*need))])
            compute = _gradient_kernel if kind == "gradient" else _diff_kernel
            return compute(axis, roles, params, dtype, out_block, need, rows, length)
        return bind

    return Strategy(tuple(shape), choices, kernel_for=kernel(False),
                    window_kernel_for=kernel(True))


def _out_dtype(kind, call, roles, params):
    """diff: the dtype of [prepend, a, append] joined (subtract keeps it); gradient's."""
    dtypes = [o.dtype for o, r in zip(call.operands, roles) if r in ("a", "prepend", "append")]
    if kind == "diff":
        return np.diff(np.zeros(2, np.result_type(*dtypes))).dtype
    if kind == "convolve":
        return np.convolve(np.zeros(1, dtypes[0]), np.zeros(1, params[3])).dtype
    return np.gradient(np.ones(3, dtypes[0])).dtype


def _empty(a, axis, dtype, rows):
    shape = list(a.shape)
    shape[axis] = rows
    return np.empty_like(a, dtype, shape=shape)


def _diff_kernel(axis, roles, params, dtype, out_block, need, rows_of, length):
    """np.diff of the combined rows [prepend, a, append] from ``start`` to ``stop + n``,
    which give this output block's rows ``start .. stop`` (np.convolve's 'valid' with the
    kernel ``params[3:]``: the prepended and appended rows are its zero padding).
    ``rows_of(a)``: the rows ``need`` of ``a``."""
    n, before = params[:2]
    kernel = np.array(params[4], params[3]) if len(params) > 3 else None
    start, stop = out_block
    end = stop + n

    def diff(a, *rest):
        ops = dict(zip(roles[1:], rest))
        if stop == start:
            return _empty(a, axis, dtype, 0)
        parts = [rows_of(a)]
        if start < before:
            parts.insert(0, ops["prepend"][_index(axis, a.ndim, slice(start, min(before, end)))])
        if end > before + length:
            tail = slice(max(start - before - length, 0), end - before - length)
            parts.append(ops["append"][_index(axis, a.ndim, tail)])
        rows = np.concatenate(parts, axis=axis) if len(parts) > 1 else parts[0]
        if kernel is not None:
            return np.convolve(rows, like(kernel, rows), "valid").astype(dtype, copy=False)
        return np.diff(rows.astype(dtype, copy=False), n, axis)   # numpy's join promotes
    return diff


def _gradient_kernel(axis, roles, params, dtype, out_block, need, rows_of, length):
    """np.gradient of the rows ``need``, cut to the block (the window's own ends are not)."""
    edge_order, spacing = params
    lo, hi = out_block
    start, stop = need

    def gradient(a, *rest):
        ops = dict(zip(roles[1:], rest))
        if hi == lo:
            return _empty(a, axis, dtype, 0)
        rows = rows_of(a)
        step, first = spacing, start
        if "coords" in ops:
            rows, step, first = _coordinates(axis, rows, ops["coords"], start, stop, length)
        out = np.gradient(rows, step, axis=axis, edge_order=edge_order)
        return out[_index(axis, a.ndim, slice(lo - first, hi - first))]
    return gradient


def _coordinates(axis, rows, coords, start, stop, length):
    """(rows, the spacing numpy would use for them, the global index of the first row):
    numpy's scalar when the whole axis is evenly spaced, else the window's coordinates.
    A window that happens to be evenly spaced gets one extra row at a NaN coordinate (on a
    side that is cut off), which keeps numpy on its uneven-spacing formula, as for the
    whole axis."""
    x = coords.astype(np.float64) if coords.dtype.kind in "iu" else coords
    steps = np.diff(x)
    if (steps == steps[0]).all():
        return rows, steps[0], start
    xs = x[start:stop]
    part = np.diff(xs)
    if not (part == part[0]).all():
        return rows, xs, start
    pad = np.zeros_like(rows[_index(axis, rows.ndim, slice(0, 1))])
    nan = like(np.array([np.nan], x.dtype), x)
    if stop < length:
        return np.concatenate([rows, pad], axis=axis), np.concatenate([xs, nan]), start
    return np.concatenate([pad, rows], axis=axis), np.concatenate([nan, xs]), start - 1
