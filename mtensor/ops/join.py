"""concatenate and stack: operands of one shape (but the joined dim) joined along a dim.

The joined dim must be whole on every operand (array_split pieces of the inputs are not the
pieces of the result); every other dim may be split, alike on all operands.  Joining partial
terms gives partial terms of the join, for every reduce op.
"""
from __future__ import annotations

import numpy as np

from .registry import OpCall, Strategy, register
from .views import dim_map_choices


def _check_same(call: OpCall, skip_dim):
    shapes = [o.shape for o in call.operands]
    first = shapes[0]
    for shape in shapes[1:]:
        if len(shape) != len(first) or any(
                a != b for d, (a, b) in enumerate(zip(shape, first)) if d != skip_dim):
            raise call.error("operand shapes differ" + ("" if skip_dim is None else
                                                       f" outside axis {skip_dim}"),
                             "join arrays of one shape")


def _axis(call: OpCall, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise call.error(f"axis {axis} is out of range for {ndim} dims",
                         f"pass an axis in range(-{ndim}, {ndim})")
    return axis % ndim


@register("concatenate")
def concatenate_rule(call: OpCall) -> Strategy:
    (axis,) = call.params
    ndim = call.operands[0].ndim
    if ndim == 0:
        raise call.error("zero-dimensional arrays cannot be concatenated", "use stack")
    axis = _axis(call, axis, ndim)
    _check_same(call, axis)
    shape = list(call.operands[0].shape)
    shape[axis] = sum(o.shape[axis] for o in call.operands)
    in_to_out = [None if d == axis else d for d in range(ndim)]
    return Strategy(tuple(shape), dim_map_choices(in_to_out, len(call.operands)),
                    kernel=lambda *a: np.concatenate(a, axis=axis))


@register("stack")
def stack_rule(call: OpCall) -> Strategy:
    (axis,) = call.params
    ndim = call.operands[0].ndim
    axis = _axis(call, axis, ndim + 1)
    _check_same(call, None)
    shape = list(call.operands[0].shape)
    shape.insert(axis, len(call.operands))
    in_to_out = [d if d < axis else d + 1 for d in range(ndim)]
    return Strategy(tuple(shape), dim_map_choices(in_to_out, len(call.operands)),
                    kernel=lambda *a: np.stack(a, axis=axis))
