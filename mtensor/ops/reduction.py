"""Reductions: sum, mean, prod, max, min, argmax, argmin, any, all (var and std are built
from mean and sum in ``numpy.reductions``).

On one mesh dim, a dim that is not reduced keeps its split; reducing a split dim leaves each
rank with a partial result, which is a ``Partial`` term where the reduction has a matching
reduce op (sum -> P(sum), max -> P(max), any -> P(max) on bools).  ``mean`` sums its local
block and divides by the GLOBAL count, so uneven shards come out exact; ``max``/``min`` start
from the op's identity, so a rank holding an empty shard still gives a valid term.  prod,
argmax and argmin have no such term and need the reduced dims whole.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..placement import REDUCE_OPS, Partial, Shard
from .registry import (
    Choice,
    OpCall,
    Strategy,
    normalize_axes,
    register,
    replicated,
    shard_along,
    terms_survive,
)

# op -> (the Partial that reducing a split dim gives, or None; Partials that pass through)
REDUCTIONS = {
    "sum": ("sum", ("sum", "avg")),
    "mean": ("sum", ("sum", "avg")),
    "prod": (None, ()),
    "max": ("max", ("max",)),
    "min": ("min", ("min",)),
    "any": ("max", ()),
    "all": ("min", ()),
    "argmax": (None, ()),
    "argmin": (None, ()),
}
NO_IDENTITY = ("max", "min", "argmax", "argmin")


def _axes(call: OpCall, axis):
    ndim = call.operands[0].ndim
    if call.name in ("argmax", "argmin") and axis is not None and not isinstance(axis, (int, np.integer)):
        raise call.error(f"axis {axis} must be an int or None", "reduce one axis at a time")
    return normalize_axes(call, axis, ndim)


def _out_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if d in axes else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in axes)


@register(*REDUCTIONS)
def reduction_rule(call: OpCall) -> Strategy:
    axis, keepdims, dtype = call.params
    operand = call.operands[0]
    axes = _axes(call, axis)
    if call.name in NO_IDENTITY and any(operand.shape[d] == 0 for d in axes):
        raise call.error(f"zero-size reduction over axis {axis} has no identity",
                         "reduce over non-empty dims")
    produced, passing = REDUCTIONS[call.name]
    out_dtype = _out_dtype(call.name, operand.dtype, dtype)
    if call.name == "mean" and out_dtype.kind not in "fc":
        produced = None  # integer terms of a mean would each be truncated
    passing = [op for op in passing if op not in ("sum", "avg")
               or terms_survive(call, op, out_dtype)]
    choices = [replicated(1)]
    kept = [d for d in range(operand.ndim) if d not in axes]
    for d in range(operand.ndim):
        if d not in axes:
            choices.append(shard_along([d], d if keepdims else kept.index(d)))
        elif produced is not None:
            choices.append(Choice((Shard(d),), Partial(produced)))
    choices += [Choice((Partial(op),), Partial(op)) for op in passing]

    def kernel_for(in_layouts, out_layout, mesh):
        split = any(isinstance(p, Shard) and p.dim in axes for p in in_layouts[0])
        return _kernel(call.name, operand, axis, axes, keepdims, dtype, split)

    return Strategy(_out_shape(operand.shape, axes, keepdims), choices, kernel_for=kernel_for)


# numpy's reductions as ufunc reduces (what np.sum & co. call, minus their Python wrapper)
_UFUNC_OF = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
             "any": np.logical_or, "all": np.logical_and}


def _out_dtype(name, in_dtype, dtype):
    if name in ("sum", "prod", "mean"):
        return getattr(np, name)(np.zeros(1, in_dtype), dtype=dtype).dtype
    return np.dtype(in_dtype)


def _kernel(name, operand, axis, axes, keepdims, dtype, split):
    if name in ("argmax", "argmin"):
        fn = getattr(np, name)
        return lambda a: fn(a, axis=axis, keepdims=keepdims)
    if name == "mean":
        return _split_mean(operand, axes, keepdims, dtype) if split else (
            lambda a: np.mean(a, axis=axes, dtype=dtype, keepdims=keepdims))
    reduce = _UFUNC_OF[name].reduce
    if name in ("any", "all"):
        return _on_any_device(partial(reduce, axis=axes, dtype=bool, keepdims=keepdims),
                              name, axes, keepdims)
    if name in ("max", "min") and split:
        identity = REDUCE_OPS[name].identity(operand.dtype)
        return _on_any_device(partial(reduce, axis=axes, keepdims=keepdims, initial=identity),
                              name, axes, keepdims, identity)
    if name in ("max", "min"):
        return _on_any_device(partial(reduce, axis=axes, keepdims=keepdims),
                              name, axes, keepdims)
    return _on_any_device(partial(reduce, axis=axes, dtype=dtype, keepdims=keepdims),
                          name, axes, keepdims, dtype=dtype)


_FUNCTION_OF = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "any": np.any,
                "all": np.all}


def _on_any_device(host, name, axes, keepdims, identity=None, **kw):
    """``host`` on numpy blocks; on device blocks the function form (CuPy's ufuncs reduce
    only with add and multiply, and its max/min take no ``initial``: an empty reduced dim
    gets the identity here)."""
    fn = _FUNCTION_OF[name]

    def kernel(a):
        if type(a) is np.ndarray:
            return host(a)
        if identity is not None and any(a.shape[d] == 0 for d in axes):
            shape = _out_shape(a.shape, axes, keepdims)
            return np.full_like(a, identity, shape=shape)
        return fn(a, axis=axes, keepdims=keepdims, **kw)
    return kernel


def _split_mean(operand, axes, keepdims, dtype):
    """The local sum over the global count: terms of the mean that add up exactly."""
    count = math.prod(operand.shape[d] for d in axes)
    out_dtype = np.mean(np.zeros(1, operand.dtype), dtype=dtype).dtype
    acc = dtype if dtype is not None else (np.float64 if operand.dtype.kind in "biu" else
                                           np.promote_types(operand.dtype, np.float32))

    def mean(a):
        total = np.sum(a, axis=axes, dtype=acc, keepdims=keepdims)
        return np.true_divide(total, count).astype(out_dtype, copy=False)
    return mean
