"""``np.emath`` (``numpy.lib.scimath``) on DTensors: the functions whose real inputs outside
their real domain give complex results.  Whether any input is outside is one agreed read;
then the input is cast to complex and the ufunc runs on it, as numpy does.
"""
from __future__ import annotations

import numpy as np

from .util import agreed, implements, is_dtensor

_SM = np.lib.scimath


def _complex_where(name, x, outside):
    """``x`` cast to complex when it is real and ``outside(x)`` holds anywhere."""
    if not is_dtensor(x) or x.dtype.kind == "c":
        return x
    if agreed(f"emath.{name}", np.any(outside(x))):
        return x.astype(np.complex128 if x.dtype.itemsize >= 8 or x.dtype.kind in "iub"
                        else np.complex64)
    return x if x.dtype.kind == "f" else x.astype(float)


def _negative(x):
    return x < 0


def _beyond_one(x):
    return np.abs(x) > 1


def _one(name, ufunc, outside):
    def fn(x):
        return ufunc(_complex_where(name, x, outside))
    fn.__name__ = name
    return implements(getattr(_SM, name))(fn)


sqrt = _one("sqrt", np.sqrt, _negative)
log = _one("log", np.log, _negative)
log2 = _one("log2", np.log2, _negative)
log10 = _one("log10", np.log10, _negative)
arccos = _one("arccos", np.arccos, _beyond_one)
arcsin = _one("arcsin", np.arcsin, _beyond_one)
arctanh = _one("arctanh", np.arctanh, _beyond_one)


@implements(_SM.logn)
def logn(n, x):
    return log(x) / log(n)


@implements(_SM.power)
def power(x, p):
    return np.power(_complex_where("power", x, _negative), p)
