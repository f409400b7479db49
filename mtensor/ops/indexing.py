"""Indexing: ints, slices (any step), None, ``...`` and integer arrays on any dim; and
``take``/``take_along_axis``, whose index is an operand (a DTensor or a constant) rather
than a param, so a split index splits the result without being gathered.

A dim taken whole keeps its split.  A dim that is sliced or indexed is either gathered first
(Replicate) or, for numeric dtypes, left split: each rank writes the part of the result that
falls in its block into the sum's identity (``-0.0`` for floats: a read comes back bit for
bit, signed zeros, infinities and NaN included), which makes ``P(sum)`` terms.  The cost
model picks between them (gathering the input versus reducing the result), and the result
then goes wherever the next op needs it: a later redistribution rebalances it into the
array_split layout.  A slice of step 1 along a split dim (``U[2:]``, ``U[1:-1]``) is read
through a window instead (``ops.windows``): its blocks are the input's shifted by a few rows,
so a halo exchange of those rows with the neighbours gives the result split like the input,
the stencil's pattern; a slice wider than that (a neighbour's block is not enough) gathers.
"""
from __future__ import annotations

import numpy as np

from ..placement import REDUCE_OPS, Partial, Replicate, Shard, local_bounds, local_shape
from .plans.indexing import (
    block_plan,
    indexed_dims,
    is_advanced,
    is_whole,
    plain_key,
    region_index,
    region_layout,
)
from .registry import Choice, OpCall, Operand, Strategy, register, replicated, shard_along
from .views import dim_map_choices
from .windows import Window, halo_plan, is_split_once


def _plain(entry):
    return plain_key((entry,))[0]


@register("getitem", "getitem_advanced")
def getitem_rule(call: OpCall) -> Strategy:
    """``x[key]`` (basic keys are cached as ``getitem``; array keys, not hashable, run as
    ``getitem_advanced`` and are decided per call)."""
    (key,) = call.params
    operand = call.operands[0]
    region, whole_to, _ = region_layout(key, operand.shape)
    picked = [d for d, r in enumerate(whole_to) if r is None]
    choices = dim_map_choices(whole_to)
    windows = _window_choices(call, key, picked)
    if operand.dtype.kind in "iufc" and not windows:
        choices += [Choice((Shard(p),), Partial("sum")) for p in picked]
    choices += windows

    def kernel_for(in_layouts, out_layout, mesh):
        bounds = local_bounds(operand.shape, mesh.shape, in_layouts[0], mesh.coordinate)
        if all(bounds[p] == (0, operand.shape[p]) for p in picked):
            plain = plain_key(key) + (Ellipsis,)   # an array, a 0-d view for ints alone
            return lambda a: a[plain]
        mine = local_bounds(region, mesh.shape, out_layout, mesh.coordinate)
        return _fill_kernel(block_plan(key, operand.shape, bounds), mine)

    def window_kernel_for(in_layouts, out_layout, mesh, chosen):
        plain = list(plain_key(key)) + [Ellipsis]
        for w in chosen:        # the window holds exactly the rows the slice takes
            plain[_entry_of(key, w.dim)] = slice(None)
        plain = tuple(plain)
        return lambda a: a[plain]

    return Strategy(region, choices, kernel_for=kernel_for,
                    window_kernel_for=window_kernel_for, shares_windows=True)


def _entry_of(key, dim: int) -> int:
    """The position in ``key`` of the entry that indexes tensor dim ``dim``."""
    return next(at for at, _, d, _ in indexed_dims(key) if d == dim)


def _window_choices(call: OpCall, key, picked) -> list:
    """A slice of step 1 along a split dim is read through a window (its rows are the
    block's own shifted by a few: a halo exchange brings the neighbours'), when every
    picked split dim can be; else none, and the gather or the partial terms decide."""
    operand = call.operands[0]
    if is_advanced(key):
        return []
    out = []
    for _, entry, dim, pos in indexed_dims(key):
        if dim not in picked or not any(p == Shard(dim) and n > 1 for p, n in
                                        zip(operand.placements, call.mesh_shape)):
            continue
        mesh_dim = is_split_once(operand.placements, call.mesh_shape, dim)
        if mesh_dim is None or entry[0] != "s" or entry[3] != 1:
            return []
        window = Window(0, mesh_dim, dim, max(entry[2] - entry[1], 0), entry[1])
        if halo_plan(window, operand.shape[dim], call.mesh_shape[mesh_dim]) is None:
            return []
        out.append(Choice((Shard(dim),), Shard(pos), window=window))
    return out


def _no_terms(like, shape):
    """Terms of ``shape`` that add nothing to a sum: its identity, ``-0.0`` for floats and
    complex (``+0.0`` would turn a picked ``-0.0`` into ``+0.0``), 0 for integers."""
    return np.full_like(like, REDUCE_OPS["sum"].identity(like.dtype), shape=shape)


def _fill_kernel(plan, out_bounds):
    """This rank's terms: the part of ``x[key]`` inside its block, no terms elsewhere."""
    shape = tuple(hi - lo for lo, hi in out_bounds)
    if plan is None:
        return lambda a: _no_terms(a, shape)
    src, region_key = plan
    dst = region_index(region_key, [lo for lo, _ in out_bounds])

    def fill(a):
        out = _no_terms(a, shape)
        out[dst] = a[src]
        return out
    return fill


@register("index_put")
def index_put_rule(call: OpCall) -> Strategy:
    """The adjoint of getitem: zeros of ``shape`` with the operand written at ``key``."""
    key, shape = call.params
    in_to_out, none_dims, pos = [], [], 0
    for entry in key:
        if entry[0] == "n":
            none_dims.append(pos)
            pos += 1
            continue
        d = len(in_to_out)
        in_to_out.append(pos if is_whole(entry, shape[d]) else None)
        pos += entry[0] == "s"
    choices = [replicated(1)] + [shard_along([k], d) for d, k in enumerate(in_to_out)
                                 if k is not None]
    choices += [Choice((Partial(op),), Partial(op)) for op in ("sum", "avg")]
    plain = tuple(slice(None) if k is not None else _plain(entry)
                  for entry, k in zip([e for e in key if e[0] != "n"], in_to_out))

    def kernel_for(in_layouts, out_layout, mesh):
        mine = local_shape(tuple(shape), mesh.shape, out_layout, mesh.coordinate)

        def put(g):
            out = np.zeros(mine, g.dtype, like=g)
            out[plain] = np.squeeze(g, axis=tuple(none_dims)) if none_dims else g
            return out
        return put

    return Strategy(tuple(shape), choices, kernel_for=kernel_for)


def _along(i, n: int, mode: str):
    """Indices into an axis of size ``n`` as non-negative positions (numpy's take modes; with
    "raise" the caller has checked them against ``[-n, n)`` already)."""
    if n == 0:
        return i
    return np.clip(i, 0, n - 1) if mode == "clip" else np.mod(i, n)


def _fill_picks(pick, lo: int, hi: int, at: int, empty_shape):
    """This rank's terms of a pick along a split axis: ``pick(block, positions)`` where an
    index falls in the block's ``[lo, hi)``, no terms elsewhere (``i``'s dims sit at ``at`` in
    the result; ``empty_shape(block, i)``: the result's shape when the block is empty)."""
    def fill(blk, i):
        if hi == lo:
            return _no_terms(blk, empty_shape(blk, i))
        inside = (i >= lo) & (i < hi)
        got = pick(blk, np.where(inside, i - lo, 0))
        inside = inside.reshape((1,) * at + inside.shape
                                + (1,) * (got.ndim - at - inside.ndim))
        return np.where(inside, got, REDUCE_OPS["sum"].identity(got.dtype))
    return fill


def _index_choices(data: Operand, picked: int, whole, by_index) -> list:
    """Choices of an op that picks along ``picked`` of ``data`` with an index operand:
    ``whole`` maps each other data dim to (the index's placement when the data is split
    there, the output dim), ``by_index`` each index dim the data does not span to its output
    dim.  A split picked axis is gathered or left as identity-filled ``P(sum)`` terms (numeric
    dtypes); picking commutes with every reduction of terms."""
    choices = [replicated(2)]
    choices += [Choice((Shard(d), idx), Shard(out)) for d, (idx, out) in whole.items()]
    choices += [Choice((Replicate(), Shard(j)), Shard(out)) for j, out in by_index.items()]
    choices += [Choice((Partial(op), Replicate()), Partial(op)) for op in REDUCE_OPS]
    if data.dtype.kind in "iufc":
        choices.append(Choice((Shard(picked), Replicate()), Partial("sum")))
    return choices


@register("take")
def take_rule(call: OpCall) -> Strategy:
    """``np.take(a, indices, axis, mode)``: a dim of ``a`` other than ``axis`` keeps its split,
    a split of the indices becomes the output's along the dims they make."""
    axis, mode = call.params
    a, idx = call.operands
    n, k = a.shape[axis], idx.ndim
    shape = a.shape[:axis] + idx.shape + a.shape[axis + 1:]
    whole = {d: (Replicate(), d if d < axis else d + k - 1) for d in range(a.ndim)
             if d != axis}
    choices = _index_choices(a, axis, whole, {j: axis + j for j in range(k)})

    def kernel_for(in_layouts, out_layout, mesh):
        lo, hi = local_bounds(a.shape, mesh.shape, in_layouts[0], mesh.coordinate)[axis]
        if (lo, hi) == (0, n):
            return lambda blk, i: np.take(blk, _along(i, n, mode), axis)
        fill = _fill_picks(lambda blk, j: np.take(blk, j, axis), lo, hi, axis,
                           lambda blk, i: blk.shape[:axis] + np.shape(i) + blk.shape[axis + 1:])
        return lambda blk, i: fill(blk, _along(i, n, mode))

    return Strategy(shape, choices, kernel_for=kernel_for)


@register("take_along_axis")
def take_along_axis_rule(call: OpCall) -> Strategy:
    """``np.take_along_axis(arr, indices, axis)``: the index spans every dim, so a dim other
    than ``axis`` is split alike on both (a size-1 dim broadcasts: used whole); the indices
    may be split along ``axis`` itself when ``arr`` is whole there."""
    (axis,) = call.params
    arr, idx = call.operands
    n = arr.shape[axis]
    shape = tuple(idx.shape[d] if d == axis else max(arr.shape[d], idx.shape[d])
                  for d in range(arr.ndim))
    spans = [idx.shape[d] == shape[d] for d in range(arr.ndim)]
    whole = {d: (Shard(d) if spans[d] else Replicate(), d) for d in range(arr.ndim)
             if d != axis and arr.shape[d] == shape[d]}
    by_index = {d: d for d in range(arr.ndim) if spans[d] and (d == axis or
                                                               arr.shape[d] != shape[d])}
    choices = _index_choices(arr, axis, whole, by_index)

    def kernel_for(in_layouts, out_layout, mesh):
        lo, hi = local_bounds(arr.shape, mesh.shape, in_layouts[0], mesh.coordinate)[axis]
        if (lo, hi) == (0, n):
            return lambda blk, i: np.take_along_axis(blk, _along(i, n, "raise"), axis)
        fill = _fill_picks(lambda blk, j: np.take_along_axis(blk, j, axis), lo, hi, 0,
                           lambda blk, i: np.broadcast_shapes(
                               blk.shape[:axis] + i.shape[axis:axis + 1] + blk.shape[axis + 1:],
                               i.shape))
        return lambda blk, i: fill(blk, _along(i, n, "raise"))

    return Strategy(shape, choices, kernel_for=kernel_for)
