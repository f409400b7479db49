"""numpy's comparisons of whole arrays on DTensors: ``isclose``, ``allclose``,
``array_equal``, ``array_equiv`` (the booleans read agreed over the mesh).
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from .elementwise import astype
from .reductions import all
from .util import SCALARS, agreed, implements, into_out, is_dtensor

# --- comparisons -------------------------------------------------------------------------

def _inexact(y):
    """isclose's ``y`` made inexact (no abs(MIN_INT) overflow)."""
    if is_dtensor(y):
        dt = np.result_type(y.dtype, 1.0)
        return y if y.dtype == dt else astype(y, dt)
    if isinstance(y, SCALARS):
        return float(y) if isinstance(y, int) else y
    y = np.asanyarray(y)
    return y if y.dtype.kind == "m" else np.asanyarray(y, dtype=np.result_type(y, 1.0))


@implements(np.isclose)
def isclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    x, rtol, atol = (v if is_dtensor(v) or isinstance(v, SCALARS) else np.asanyarray(v)
                     for v in (a, rtol, atol))
    y = _inexact(b)
    if not builtins.any(is_dtensor(t) for t in (atol, rtol)) and not (
            np.all(np.isfinite(atol)) and np.all(np.isfinite(rtol))):
        warnings.warn(f"One of rtol or atol is not valid, atol: {atol}, rtol: {rtol}",
                      RuntimeWarning, stacklevel=2)
    with np.errstate(invalid="ignore"):
        result = (np.less_equal(np.abs(x - y), atol + rtol * np.abs(y)) & np.isfinite(y)
                  | np.equal(x, y))
        if equal_nan:
            result = result | (np.isnan(x) & np.isnan(y))
    return result


@implements(np.allclose)
def allclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    return agreed("np.allclose", all(isclose(a, b, rtol, atol, equal_nan)))


def _arrays(a1, a2):
    out = []
    for x in (a1, a2):
        out.append(x if is_dtensor(x) else np.asarray(x))
    return out


@implements(np.array_equal)
def array_equal(a1, a2, equal_nan=False):
    try:
        a1, a2 = _arrays(a1, a2)
    except (TypeError, ValueError):
        return False
    if a1.shape != a2.shape:
        return False
    same = np.equal(a1, a2)
    if equal_nan and builtins.all(np.dtype(x.dtype).kind in "fc" for x in (a1, a2)):
        same = same | (np.isnan(a1) & np.isnan(a2))
    return agreed("np.array_equal", all(same))


@implements(np.array_equiv)
def array_equiv(a1, a2):
    try:
        a1, a2 = _arrays(a1, a2)
        np.broadcast_shapes(a1.shape, a2.shape)
    except (TypeError, ValueError):
        return False
    return agreed("np.array_equiv", all(np.equal(a1, a2)))


@implements(np.isposinf)
def isposinf(x, out=None):
    return into_out(np.isinf(x) & ~np.signbit(x), out)


@implements(np.isneginf)
def isneginf(x, out=None):
    return into_out(np.isinf(x) & np.signbit(x), out)
