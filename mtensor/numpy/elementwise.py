"""numpy's elementwise functions that are not ufuncs: ``where``, ``clip``, ``copy``, ``astype``.
"""
from __future__ import annotations

import numpy as np

from ..dtensor import DTensor
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


@implements(np.astype)
def astype(a, dtype, /, *, copy=True, device=None):
    """numpy 2's ``np.astype`` (the array API's): ``copy=False`` returns ``a`` itself when
    the dtype already matches; ``device`` may only name ``a``'s own mesh."""
    if device is not None and device != a.device_mesh:
        raise ValueError(f"astype: device={device!r} is not the DTensor's mesh "
                         f"{a.device_mesh!r}; use redistribute or to_device")
    if not copy and a.dtype == np.dtype(dtype):
        return a
    return run("astype", (a,), (np.dtype(dtype),))


def _dtype_of(x):
    return x.dtype if type(x) is DTensor else x


@implements(np.result_type)
def result_type(*arrays_and_dtypes):
    """A DTensor counts as its dtype (an array: NEP 50's strong type, as numpy's arrays)."""
    return np.result_type(*(_dtype_of(x) for x in arrays_and_dtypes))


@implements(np.can_cast)
def can_cast(from_, to, casting="safe"):
    return np.can_cast(_dtype_of(from_), to, casting)
