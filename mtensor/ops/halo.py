"""Halo exchange along a split axis, for ``np.diff``, ``np.gradient`` and ``np.convolve``.

A difference along a split axis needs a few slices of the neighbouring blocks.  It runs in
two ops around one small gather (:mod:`numpy_scans` drives them)::

    edges = halo_edges(a)          block k's first and last ``width`` slices (2*width rows,
                                   zero-padded), stacked along the axis, sharded like ``a``
    edges = edges.redistribute()   the planner's all-gather of those slices only
    out   = halo_apply(a, edges)   each rank assembles the rows its output block needs
                                   (its block, neighbours' edges, prepended/appended rows)
                                   into a window and runs numpy on it

``halo_width`` finds, from shapes alone, how far any output block reaches past its input
block, so the edges always hold every row a window needs.  When the edges would not be
smaller than the blocks themselves, the axis is gathered whole instead (``whole``).  The
output keeps ``a``'s placements in the array_split layout of its own length.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..device.arrays import like
from ..placement import Partial, Replicate, Shard
from .registry import Choice, OpCall, Strategy, register
from .ufunc_methods import axis_blocks, scan_mesh_dims


def out_length(kind, length, params) -> int:
    """Length of the result along the axis: diff's ``(n, prepend rows, append rows)``
    shortens it by n (convolve's too: n = kernel length - 1, zero rows at the ends),
    gradient keeps it."""
    if kind in ("diff", "convolve"):
        n, before, after = params[:3]
        return max(length + before + after - n, 0)
    return length


def _needs(kind, params, length, block, out_block):
    """The global rows of ``a`` the output block is computed from (empty: (0, 0))."""
    if kind in ("diff", "convolve"):
        n, before = params[:2]
        start, stop = out_block
        if start == stop:
            return 0, 0
        lo, hi = start - before, stop + n - before
    else:
        reach = params[0]          # edge_order: the one-sided stencils at the ends
        lo, hi = block
        if lo == hi:
            return 0, 0
        lo, hi = lo - reach, hi + reach
    lo, hi = max(lo, 0), min(hi, length)
    return (lo, hi) if lo < hi else (0, 0)


@lru_cache(maxsize=1024)
def halo_width(kind, params, length, sizes) -> tuple:
    """(slices each block must lend its neighbours, whether gathering the axis whole is
    cheaper), the same on every rank."""
    blocks = axis_blocks(length, sizes)
    outs = axis_blocks(out_length(kind, length, params), sizes)
    width = 0
    for block, out_block in zip(blocks, outs):
        lo, hi = _needs(kind, params, length, block, out_block)
        if hi > lo:
            width = max(width, block[0] - lo, hi - block[1])
    return width, 2 * width >= max(hi - lo for lo, hi in blocks)


def _index(axis, ndim, rows):
    return (slice(None),) * axis + (rows,) + (slice(None),) * (ndim - axis - 1)


@register("halo_edges")
def halo_edges_rule(call: OpCall) -> Strategy:
    """Each block's first and last ``width`` rows along ``axis``, zero-padded to ``width``
    each: ``2 * width`` rows per block, in the operand's layout (Partial terms reduced)."""
    axis, width = call.params
    operand = call.operands[0]
    sizes = [call.mesh_shape[i] for i in scan_mesh_dims(operand.placements, axis)]
    shape = list(operand.shape)
    shape[axis] = 2 * width * math.prod(sizes)

    def edges(a):
        m = a.shape[axis]
        block_shape = list(a.shape)
        block_shape[axis] = 2 * width
        out = np.zeros_like(a, shape=block_shape)
        head, tail = min(width, m), max(m - width, 0)
        out[_index(axis, a.ndim, slice(0, head))] = a[_index(axis, a.ndim, slice(0, head))]
        out[_index(axis, a.ndim, slice(width, width + m - tail))] = \
            a[_index(axis, a.ndim, slice(tail, m))]
        return out

    keep = [Choice((_whole(p),), _whole(p)) for p in dict.fromkeys(operand.placements)]
    return Strategy(tuple(shape), keep, kernel=edges)


def _whole(p):
    return Replicate() if isinstance(p, Partial) else p


def _lent(p, axis):
    """How the edges, prepended and appended rows are used where ``a`` is placed ``p``:
    whole along the axis, split like ``a`` along the others."""
    return p if isinstance(p, Shard) and p.dim != axis else Replicate()


@register("halo_apply")
def halo_apply_rule(call: OpCall) -> Strategy:
    """numpy's ``kind`` (diff, convolve or gradient) on the window of rows each output block
    needs.
    Operands: ``a``, then the gathered edges (or ``a`` gathered along the axis, ``whole``)
    when ``width`` > 0, then diff's prepend and append rows or gradient's coordinates,
    as ``roles`` names them."""
    kind, axis, width, whole, roles, params = call.params
    a = call.operands[0]
    dims = scan_mesh_dims(a.placements, axis)
    sizes = tuple(call.mesh_shape[i] for i in dims)
    length = a.shape[axis]
    shape = list(a.shape)
    shape[axis] = out_length(kind, length, params)
    dtype = _out_dtype(kind, call, roles, params)
    choices = [Choice((_whole(p), *[Replicate() if r == "coords" else _lent(p, axis)
                                    for r in roles[1:]]), _whole(p))
               for p in dict.fromkeys(a.placements)]

    def kernel_for(in_layouts, out_layout, mesh):
        k = 0
        for i in dims:
            k = k * mesh.shape[i] + mesh.coordinate[i]
        blocks = axis_blocks(length, sizes)
        out_block = axis_blocks(shape[axis], sizes)[k]
        need = _needs(kind, params, length, blocks[k], out_block)
        window = _window(axis, blocks, k, need, width, whole)
        compute = _gradient_kernel if kind == "gradient" else _diff_kernel
        return compute(axis, roles, params, dtype, blocks[k], out_block, need, window, length)

    return Strategy(tuple(shape), choices, kernel_for=kernel_for)


def _out_dtype(kind, call, roles, params):
    """diff: the dtype of [prepend, a, append] joined (subtract keeps it); gradient's."""
    dtypes = [o.dtype for o, r in zip(call.operands, roles) if r in ("a", "prepend", "append")]
    if kind == "diff":
        return np.diff(np.zeros(2, np.result_type(*dtypes))).dtype
    if kind == "convolve":
        return np.convolve(np.zeros(1, dtypes[0]), np.zeros(1, params[3])).dtype
    return np.gradient(np.ones(3, dtypes[0])).dtype


def _window(axis, blocks, k, need, width, whole):
    """Where the rows ``need`` come from: (rows taken from the edges before the block,
    the block's own slice, rows taken from the edges after it)."""
    lo, hi = blocks[k]
    start, stop = need
    before = range(start, min(stop, lo))
    after = range(max(start, hi), stop)
    own = slice(min(max(start, lo), hi) - lo, max(min(stop, hi), lo) - lo)
    return _edge_rows(before, blocks, width, whole), own, _edge_rows(after, blocks, width, whole)


def _edge_rows(rows, blocks, width, whole):
    """Positions of global rows in the gathered edges (or the gathered axis)."""
    if whole:
        return list(rows)
    out = []
    for r in rows:
        j = next(j for j, (lo, hi) in enumerate(blocks) if lo <= r < hi)
        lo, hi = blocks[j]
        out.append(j * 2 * width + (r - lo if r - lo < width else width + r - max(lo, hi - width)))
    return out


def _assemble(axis, window, a, edges):
    before, own, after = window
    parts = [a[_index(axis, a.ndim, own)]]
    if before:
        parts.insert(0, np.take(edges, before, axis=axis))
    if after:
        parts.append(np.take(edges, after, axis=axis))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)


def _empty(a, axis, dtype, rows):
    shape = list(a.shape)
    shape[axis] = rows
    return np.empty_like(a, dtype, shape=shape)


def _diff_kernel(axis, roles, params, dtype, block, out_block, need, window, length):
    """np.diff of the combined rows [prepend, a, append] from ``start`` to ``stop + n``,
    which give this output block's rows ``start .. stop`` (np.convolve's 'valid' with the
    kernel ``params[3:]``: the prepended and appended rows are its zero padding)."""
    n, before = params[:2]
    kernel = np.array(params[4], params[3]) if len(params) > 3 else None
    start, stop = out_block
    end = stop + n

    def diff(a, *rest):
        ops = dict(zip(roles[1:], rest))
        if stop == start:
            return _empty(a, axis, dtype, 0)
        parts = [_assemble(axis, window, a, ops.get("edges"))]
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


def _gradient_kernel(axis, roles, params, dtype, block, out_block, need, window, length):
    """np.gradient of the window, cut to the block (the window's own ends are not)."""
    edge_order, spacing = params
    lo, hi = block
    start, stop = need

    def gradient(a, *rest):
        ops = dict(zip(roles[1:], rest))
        if hi == lo:
            return _empty(a, axis, dtype, 0)
        rows = _assemble(axis, window, a, ops.get("edges"))
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
