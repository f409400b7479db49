"""numpy's reductions on DTensors: ``sum``, ``prod``, ``mean``, ``max``, ``min``, ``any``,
``all``, ``argmax``, ``argmin`` (one op each: a split reduced dim gives partial terms), and
``var``/``std`` as numpy's two-pass formula of DTensor ops.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from ..placement import reduced
from .util import axis_arg, dtype_arg, implements, into_out, refuse, run

# --- reductions --------------------------------------------------------------------------

def _reduction(name, with_dtype=True):
    def reduce(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        refuse(name, **kwargs)
        return into_out(run(name, (a,), (axis_arg(axis), bool(keepdims), dtype_arg(dtype))), out)

    def reduce_no_dtype(a, axis=None, out=None, keepdims=False, **kwargs):
        refuse(name, **kwargs)
        return into_out(run(name, (a,), (axis_arg(axis), bool(keepdims), None)), out)

    handler = reduce if with_dtype else reduce_no_dtype
    handler.__name__ = name
    return handler


sum = implements(np.sum)(_reduction("sum"))
prod = implements(np.prod)(_reduction("prod"))
mean = implements(np.mean)(_reduction("mean"))
max = implements(np.max, np.amax)(_reduction("max", with_dtype=False))
min = implements(np.min, np.amin)(_reduction("min", with_dtype=False))
any = implements(np.any)(_reduction("any", with_dtype=False))
all = implements(np.all)(_reduction("all", with_dtype=False))
argmax = implements(np.argmax)(_reduction("argmax", with_dtype=False))
argmin = implements(np.argmin)(_reduction("argmin", with_dtype=False))


def _ddof(name, ddof, correction):
    """numpy 2's ``correction`` (the array API's name for ``ddof``): one of the two."""
    if correction is np._NoValue:
        return ddof
    if ddof != 0:
        raise ValueError(f"{name}: ddof and correction can't be provided simultaneously.")
    return correction


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
        correction=np._NoValue, **kwargs):
    """numpy's two-pass variance from DTensor ops: mean, deviations, mean of squares."""
    refuse("var", **kwargs)
    ddof = _ddof("var", ddof, correction)
    axis = axis_arg(axis)
    deviation = a - mean(a, axis, dtype=dtype, keepdims=True)
    squares = np.square(np.abs(deviation)) if deviation.dtype.kind == "c" else np.square(deviation)
    axes = range(a.ndim) if axis is None else np.atleast_1d(axis)
    count = math.prod(a.shape[d] for d in axes)
    total = sum(squares, axis, dtype=dtype, keepdims=keepdims)
    if count - ddof <= 0:  # numpy's inf/nan come from the whole sum, not from each term
        total = total.redistribute(placements=reduced(total.placements))
    return into_out(total / builtins.max(count - ddof, 0), out)


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
        correction=np._NoValue, **kwargs):
    refuse("std", **kwargs)
    ddof = _ddof("std", ddof, correction)
    return into_out(np.sqrt(var(a, axis, dtype=dtype, ddof=ddof, keepdims=keepdims)), out)
