"""Indexing: ints, slices (any step), None, ``...`` and integer arrays on any dim.

A dim taken whole keeps its split.  A dim that is sliced or indexed is either gathered first
(Replicate) or, for numeric dtypes, left split: each rank writes the part of the result that
falls in its block into zeros, which makes ``P(sum)`` terms.  The cost model picks between
them (gathering the input versus reducing the result), and the result then goes wherever
the next op needs it: a later redistribution rebalances it into the array_split layout.
"""
from __future__ import annotations

import numpy as np

from ..placement import Partial, Shard, local_bounds, local_shape
from .index_plan import block_plan, is_whole, plain_key, region_index, region_layout
from .registry import Choice, OpCall, Strategy, register, replicated, shard_along
from .views import dim_map_choices


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
    if operand.dtype.kind in "iufc":
        choices += [Choice((Shard(p),), Partial("sum")) for p in picked]

    def kernel_for(in_layouts, out_layout, mesh):
        bounds = local_bounds(operand.shape, mesh.shape, in_layouts[0], mesh.coordinate)
        if all(bounds[p] == (0, operand.shape[p]) for p in picked):
            plain = plain_key(key)
            return lambda a: a[plain]
        mine = local_bounds(region, mesh.shape, out_layout, mesh.coordinate)
        return _fill_kernel(block_plan(key, operand.shape, bounds), mine)

    return Strategy(region, choices, kernel_for=kernel_for)


def _fill_kernel(plan, out_bounds):
    """This rank's terms: the part of ``x[key]`` inside its block, zeros elsewhere."""
    shape = tuple(hi - lo for lo, hi in out_bounds)
    if plan is None:
        return lambda a: np.zeros(shape, a.dtype, like=a)
    src, region_key = plan
    dst = region_index(region_key, [lo for lo, _ in out_bounds])

    def fill(a):
        out = np.zeros(shape, a.dtype, like=a)
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
