"""Views and shape ops: transpose, reshape, expand_dims, squeeze, broadcast_to; and roll.

These only move elements, so every Partial passes through, and a split dim keeps its split
wherever the dim itself survives.  ``reshape`` keeps a split through a merge or split of dims
only when every piece stays a whole number of rows on every rank (both sizes divisible by the
mesh size), so the result is still the array_split layout; otherwise the dim is gathered.
"""
from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np

from ..placement import REDUCE_OPS, Partial, Shard, local_shape
from .registry import Choice, OpCall, Strategy, normalize_axes, register, replicated, shard_along
from .windows import Window, halo_plan, is_split_once


def passthrough(nin: int = 1) -> List[Choice]:
    """Moving elements commutes with every reduction of terms."""
    return [Choice((Partial(op),) * nin, Partial(op)) for op in REDUCE_OPS]


def dim_map_choices(in_to_out, nin: int = 1) -> List[Choice]:
    """R, then each surviving dim ``d -> in_to_out[d]`` split alike, then every Partial."""
    choices = [replicated(nin)]
    for d, out_dim in enumerate(in_to_out):
        if out_dim is not None:
            choices.append(shard_along([d] * nin, out_dim))
    return choices + passthrough(nin)


@register("transpose")
def transpose_rule(call: OpCall) -> Strategy:
    (axes,) = call.params
    ndim = call.operands[0].ndim
    axes = tuple(range(ndim))[::-1] if axes is None else tuple(a % ndim if -ndim <= a < ndim
                                                                 else a for a in axes)
    if sorted(axes) != list(range(ndim)):
        raise call.error(f"axes {axes} are not a permutation of {ndim} dims",
                         f"pass each of range({ndim}) once")
    shape = tuple(call.operands[0].shape[a] for a in axes)
    return Strategy(shape, dim_map_choices([axes.index(d) for d in range(ndim)]),
                    kernel=lambda a: np.transpose(a, axes))


@register("expand_dims")
def expand_dims_rule(call: OpCall) -> Strategy:
    (axis,) = call.params
    shape = call.operands[0].shape
    new = normalize_axes(call, axis, len(shape) + (1 if np.ndim(axis) == 0 else len(axis)))
    kept = [d for d in range(len(shape) + len(new)) if d not in new]
    out = [1] * (len(shape) + len(new))
    for d, k in enumerate(kept):
        out[k] = shape[d]
    return Strategy(tuple(out), dim_map_choices(kept), kernel=lambda a: np.expand_dims(a, new))


@register("squeeze")
def squeeze_rule(call: OpCall) -> Strategy:
    (axis,) = call.params
    shape = call.operands[0].shape
    gone = (tuple(d for d, s in enumerate(shape) if s == 1) if axis is None
            else normalize_axes(call, axis, len(shape)))
    if any(shape[d] != 1 for d in gone):
        raise call.error(f"cannot squeeze axis {axis}: its size is not 1",
                         "squeeze only dims of size 1")
    kept = [d for d in range(len(shape)) if d not in gone]
    in_to_out = [kept.index(d) if d in kept else None for d in range(len(shape))]
    return Strategy(tuple(shape[d] for d in kept), dim_map_choices(in_to_out),
                    kernel=lambda a: np.squeeze(a, gone))


@register("broadcast_to")
def broadcast_to_rule(call: OpCall) -> Strategy:
    (shape,) = call.params
    src = call.operands[0].shape
    lead = len(shape) - len(src)
    if lead < 0 or any(s not in (1, t) for s, t in zip(src, shape[lead:])):
        raise call.error(f"cannot broadcast {src} to {shape}", "make trailing dims equal or 1")
    in_to_out = [lead + d if s == shape[lead + d] else None for d, s in enumerate(src)]

    def kernel_for(in_layouts, out_layout, mesh):
        mine = local_shape(shape, mesh.shape, out_layout, mesh.coordinate)
        return lambda a: np.broadcast_to(a, mine)
    return Strategy(tuple(shape), dim_map_choices(in_to_out), kernel_for=kernel_for)


def reshape_groups(src, dst) -> List[Tuple[List[int], List[int]]]:
    """Pair runs of dims of ``src`` and ``dst`` that hold the same elements (equal products);
    trailing size-1 dims form groups of their own.  Needs a non-zero element count."""
    groups, i, j = [], 0, 0
    while i < len(src) and j < len(dst):
        gi, gj, pa, pb = [i], [j], src[i], dst[j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:  # pragma: no mutate
                gi.append(i)
                pa, i = pa * src[i], i + 1
            else:
                gj.append(j)
                pb, j = pb * dst[j], j + 1
        groups.append((gi, gj))
    return groups + [([d], []) for d in range(i, len(src))] + [([], [d]) for d in range(j, len(dst))]


def _lead(dims, shape):
    """The first dim of a group that holds more than one element (the one a split can follow)."""
    return next((d for d in dims if shape[d] != 1), dims[0] if dims else None)


@register("reshape")
def reshape_rule(call: OpCall) -> Strategy:
    (shape,) = call.params
    src = call.operands[0].shape
    total = math.prod(src)
    if shape.count(-1) > 1:
        raise call.error(f"reshape to {shape} has more than one -1", "give at most one -1")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape and known and total % known == 0:
        shape = tuple(total // known if s == -1 else s for s in shape)
    if math.prod(shape) != total or any(s < 0 for s in shape):
        raise call.error(f"cannot reshape {total} elements into shape {shape}",
                         "keep the number of elements")
    mesh_size = math.prod(call.mesh_shape)
    in_to_out = [None] * len(src)
    for gi, gj in reshape_groups(src, shape) if total else ():
        a, b = _lead(gi, src), _lead(gj, shape)
        if a is None or b is None:
            continue
        same = [src[d] for d in gi if src[d] != 1] == [shape[d] for d in gj if shape[d] != 1]
        if (same and len([d for d in gi if src[d] != 1]) <= 1) or (
                src[a] % mesh_size == 0 and shape[b] % mesh_size == 0):
            in_to_out[a] = b

    def kernel_for(in_layouts, out_layout, mesh):
        mine = local_shape(shape, mesh.shape, out_layout, mesh.coordinate)
        return lambda a: a.reshape(mine)
    return Strategy(tuple(shape), dim_map_choices(in_to_out), kernel_for=kernel_for)


@register("roll")
def roll_rule(call: OpCall) -> Strategy:
    """``np.roll`` along one axis: a split axis is read through a periodic window (each
    block's rows are the input's ``shift`` rows earlier, the last rank's wrapping to the
    first: one halo exchange), else gathered; other dims keep their split."""
    axis, shift = call.params
    operand = call.operands[0]
    ndim = operand.ndim
    choices = dim_map_choices([d if d != axis else None for d in range(ndim)])
    mesh_dim = is_split_once(operand.placements, call.mesh_shape, axis)
    kernel = np.copy         # a window that moves nothing is a view of the input's block
    if mesh_dim is not None:
        n = operand.shape[axis]
        window = Window(0, mesh_dim, axis, n, -shift, periodic=True)
        plan = halo_plan(window, n, call.mesh_shape[mesh_dim])
        if plan is not None:
            choices.append(Choice((Shard(axis),), Shard(axis), window=window))
            kernel = _same if any(r.moves for r in plan) else np.copy
    return Strategy(operand.shape, choices, kernel=lambda a: np.roll(a, shift, axis),
                    window_kernel_for=lambda *args: kernel)


def _same(a):
    """A window that received rows is a fresh array: the rolled block itself."""
    return a
