"""numpy's elementwise functions that are not ufuncs: ``where``, ``clip``, ``copy``, ``astype``.
"""
from __future__ import annotations

import numpy as np

from .util import HANDLED, implements, into_out, refuse, run


@implements(np.where)
def where(condition, x=None, y=None):
    if x is None and y is None:
        return HANDLED[np.nonzero](condition)   # numpy_nonzero's
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y should be given")
    return run("where", (condition, x, y))


@implements(np.clip)
def clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue,
         max=np._NoValue, **kwargs):
    refuse("clip", **kwargs)
    lo = min if a_min is np._NoValue else a_min
    hi = max if a_max is np._NoValue else a_max
    lo, hi = (None if v is np._NoValue else v for v in (lo, hi))
    if lo is None and hi is None:
        raise ValueError("clip: give a_min, a_max or both")
    if lo is None:
        return into_out(run("minimum", (a, hi)), out, "same_kind")
    if hi is None:
        return into_out(run("maximum", (a, lo)), out, "same_kind")
    return into_out(run("clip", (a, lo, hi)), out, "same_kind")


@implements(np.copy)
def copy(a, order="K", subok=False):
    return run("copy", (a,))


def astype(a, dtype):
    return run("astype", (a,), (np.dtype(dtype),))
