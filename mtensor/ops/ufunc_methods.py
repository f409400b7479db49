"""ufunc methods: ``reduce`` of any binary ufunc, and the three steps of a distributed
``accumulate`` (local scans, their block totals, the prefix of the totals applied).

``ufunc_reduce`` keeps the reduced dims whole (a split one is gathered, or the mesh dim
splits a kept dim instead) and runs ``ufunc.reduce`` on the block: no partial terms, since a
general ufunc has no reduce op to combine them with.

``ufunc_accumulate`` scans each block along ``axis``.  For an associative ufunc
(``SCANNABLE``) the axis may stay split: each block then holds the scan of its own
elements only, and :mod:`numpy_scans` finishes it with ``scan_totals`` (each block's last
slice, one per block along a dim of length ``nblocks``, sharded so every rank holds its own)
and, after the planner gathers those small totals, ``scan_apply`` (each rank folds the
totals of the blocks before it and applies that prefix to its block).  Other ufuncs get the
axis whole.  Numpy's own argument checks (axis, dtype, identity) run on a tiny stand-in
block, so errors and result dtypes are numpy's.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..device.arrays import through_host
from ..placement import Replicate, Shard, shard_bounds
from .registry import Choice, OpCall, Strategy, register, replicated, shard_along

# the ufuncs whose reduce and accumulate CuPy runs on the device; the others go through_host
ON_DEVICE = frozenset({"add", "multiply"})

# associative ufuncs: a scan of blocks plus the prefix of the block totals is the scan
SCANNABLE = frozenset({"add", "multiply", "maximum", "minimum", "fmax", "fmin", "logical_and",
                       "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor"})


def stand_in(shape, dtype):
    """A tiny array with ``shape``'s rank and empty dims (ones: no division by zero)."""
    return np.ones(tuple(min(int(s), 1) for s in shape), dtype)


def reduced_axes(axis, ndim):
    """``ufunc.reduce``'s axis (already checked by numpy) as sorted non-negative dims."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted(int(a) % ndim for a in axes))


@register("ufunc_reduce")
def ufunc_reduce_rule(call: OpCall) -> Strategy:
    name, axis, keepdims, dtype = call.params
    ufunc = getattr(np, name)
    operand = call.operands[0]
    with np.errstate(all="ignore"):
        ufunc.reduce(stand_in(operand.shape, operand.dtype), axis=axis, dtype=dtype,
                     keepdims=keepdims)
    axes = reduced_axes(axis, operand.ndim)
    kept = [d for d in range(operand.ndim) if d not in axes]
    choices = [replicated(1)] + [shard_along([d], d if keepdims else kept.index(d))
                                 for d in kept]
    out_shape = tuple(1 if d in axes else s for d, s in enumerate(operand.shape)) if keepdims \
        else tuple(operand.shape[d] for d in kept)
    kernel = partial(ufunc.reduce, axis=axis, dtype=dtype, keepdims=keepdims)
    return Strategy(out_shape, choices,
                    kernel=kernel if name in ON_DEVICE else through_host(kernel))


def scan_dtype(name, shape, in_dtype, axis, dtype) -> np.dtype:
    """numpy's result dtype of ``ufunc.accumulate`` (raising numpy's errors)."""
    return getattr(np, name).accumulate(stand_in(shape, in_dtype), axis=axis, dtype=dtype).dtype


def can_split_scan(name, out_dtype) -> bool:
    """The prefix may be applied blockwise: the ufunc is associative and keeps the dtype."""
    if name not in SCANNABLE or out_dtype.kind not in ("b", "i", "u", "f", "c"):
        return False
    one = np.ones(1, out_dtype)  # pragma: no mutate
    return getattr(np, name)(one, one).dtype == out_dtype


@register("ufunc_accumulate")
def ufunc_accumulate_rule(call: OpCall) -> Strategy:
    name, axis, dtype = call.params
    ufunc = getattr(np, name)
    operand = call.operands[0]
    out_dtype = scan_dtype(name, operand.shape, operand.dtype, axis, dtype)
    axis = axis % operand.ndim
    split_ok = can_split_scan(name, out_dtype)
    choices = [replicated(1)] + [shard_along([d], d) for d in range(operand.ndim)
                                 if d != axis or split_ok]
    kernel = partial(ufunc.accumulate, axis=axis, dtype=dtype)
    return Strategy(operand.shape, choices,
                    kernel=kernel if name in ON_DEVICE else through_host(kernel))


def scan_mesh_dims(placements, axis):
    """The mesh dims that split ``axis``, in the order they split it."""
    return [i for i, p in enumerate(placements) if isinstance(p, Shard) and p.dim == axis]


def axis_blocks(length, sizes):
    """(start, stop) of each block along a dim split by mesh dims of ``sizes`` in turn, in
    the order of the linear index over those mesh dims (row-major)."""
    blocks = [(0, length)]
    for n in sizes:
        blocks = [(lo + a, lo + b) for lo, hi in blocks
                  for a, b in (shard_bounds(hi - lo, n, k) for k in range(n))]
    return blocks


def _keep_layout(call: OpCall):
    """Choices that keep each operand's placements as they are on every mesh dim."""
    layouts = list(zip(*[o.placements for o in call.operands]))
    seen = []
    for pair in layouts:
        if pair not in seen:
            seen.append(pair)
    return [Choice(pair, pair[0]) for pair in seen]


@register("scan_totals")
def scan_totals_rule(call: OpCall) -> Strategy:
    """Each block's last slice along ``axis`` (the block's total), stacked along ``axis``:
    shape ``nblocks`` there, in the operand's layout, so each rank holds its own total."""
    (axis,) = call.params
    operand = call.operands[0]
    sizes = [call.mesh_shape[i] for i in scan_mesh_dims(operand.placements, axis)]
    nblocks = math.prod(sizes)
    out_shape = tuple(nblocks if d == axis else s for d, s in enumerate(operand.shape))

    def totals(a):
        if a.shape[axis] == 0:   # an empty block: its total is never used
            shape = tuple(1 if d == axis else s for d, s in enumerate(a.shape))
            return np.zeros_like(a, shape=shape)
        return np.take(a, [a.shape[axis] - 1], axis=axis)

    return Strategy(out_shape, _keep_layout(call), kernel=totals)


@register("scan_apply")
def scan_apply_rule(call: OpCall) -> Strategy:
    """Block ``k``'s local scan combined with the fold of the totals of the non-empty blocks
    before it (the totals operand is whole along ``axis``)."""
    name, axis = call.params
    ufunc = getattr(np, name)
    scanned = call.operands[0]
    dims = scan_mesh_dims(scanned.placements, axis)
    sizes = [call.mesh_shape[i] for i in dims]
    blocks = axis_blocks(scanned.shape[axis], sizes)

    def kernel_for(in_layouts, out_layout, mesh):
        k = 0
        for i in dims:
            k = k * mesh.shape[i] + mesh.coordinate[i]
        before = [j for j in range(k) if blocks[j][1] > blocks[j][0]]
        if not before or blocks[k][1] == blocks[k][0]:
            return lambda local, totals: local

        def apply(local, totals):
            take = lambda j: totals[(slice(None),) * axis + (slice(j, j + 1),)]
            prefix = take(before[0])
            for j in before[1:]:
                prefix = ufunc(prefix, take(j))
            return ufunc(prefix, local).astype(local.dtype, copy=False)
        return apply

    return Strategy(scanned.shape, _keep_layout(call), kernel_for=kernel_for)


def gathered(placements, axis):
    """The totals' layout once gathered along ``axis``: its splits replicated."""
    return tuple(Replicate() if isinstance(p, Shard) and p.dim == axis else p
                 for p in placements)


@register("ufunc_reduceat")
def ufunc_reduceat_rule(call: OpCall) -> Strategy:
    """``ufunc.reduceat(a, indices, axis)``: the axis whole, other dims keep their split."""
    name, indices, axis, dtype = call.params
    ufunc = getattr(np, name)
    operand = call.operands[0]
    probe = [min(int(s), 1) for s in operand.shape]
    if operand.ndim:
        probe[axis % operand.ndim] = operand.shape[axis % operand.ndim]
    with np.errstate(all="ignore"):   # numpy's checks of the indices, axis and dtype
        out = ufunc.reduceat(np.ones(tuple(probe), operand.dtype), list(indices), axis=axis,
                             dtype=dtype)
    axis %= operand.ndim
    choices = [replicated(1)] + [shard_along([d], d) for d in range(operand.ndim) if d != axis]
    out_shape = tuple(out.shape[axis] if d == axis else s for d, s in enumerate(operand.shape))
    return Strategy(out_shape, choices, kernel=through_host(
        lambda a: ufunc.reduceat(a, list(indices), axis=axis, dtype=dtype)))
