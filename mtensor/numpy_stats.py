"""numpy's comparisons and statistics on DTensors: ``isclose``, ``allclose``,
``array_equal``, ``array_equiv``, ``round``, ``real``, ``imag``, ``angle``, ``interp``,
``count_nonzero``, ``ptp``, ``average``, ``cov``, ``corrcoef``, registered in the table of
:mod:`numpy_api` (the ``nan*`` reductions: :mod:`numpy_nan`).

Each is numpy's own formula written with DTensor ops (``where``, ``isnan``, ``sum``,
``max``, ``dot``, ...), so it stays distributed wherever they do: a NaN-skipping sum is
``sum(where(isnan(a), 0, a))``, a reduction of a split dim leaves partial terms that the
next consumer reduces.  The functions that answer a Python bool (``allclose``,
``array_equal``, ``array_equiv``) all-reduce one flag, so every rank gets the same answer;
numpy's value checks (zero weights, all-NaN slices for ``nanargmax``) read values the
same way.  ``nanmean``, ``nanvar``, ``nanmax``... give numpy's values for all-NaN slices
without its warnings (a warning would cost a collective on every call).
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from . import modes
from .creation import full_like, ones_like
from .numpy_api import _axis, _out, _run, all, astype, dot, implements, max, mean, min, sum
from .numpy_api import _dt, where
from .numpy_shapes import getitem, reshape, squeeze, transpose

_SCALARS = (int, float, complex)



def _agreed(name, flag) -> bool:
    """A DTensor flag read as a Python bool: one all-reduce, the same answer everywhere."""
    if not _dt(flag):
        return builtins.bool(flag)
    modes.refuse_while_tracing(name)
    return builtins.bool(flag)


# --- comparisons -------------------------------------------------------------------------

def _inexact(y):
    """isclose's ``y`` made inexact (no abs(MIN_INT) overflow)."""
    if _dt(y):
        dt = np.result_type(y.dtype, 1.0)
        return y if y.dtype == dt else astype(y, dt)
    if isinstance(y, _SCALARS):
        return float(y) if isinstance(y, int) else y
    y = np.asanyarray(y)
    return y if y.dtype.kind == "m" else np.asanyarray(y, dtype=np.result_type(y, 1.0))


@implements(np.isclose)
def isclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    x, rtol, atol = (v if _dt(v) or isinstance(v, _SCALARS) else np.asanyarray(v)
                     for v in (a, rtol, atol))
    y = _inexact(b)
    if not builtins.any(_dt(t) for t in (atol, rtol)) and not (
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
    return _agreed("np.allclose", all(isclose(a, b, rtol, atol, equal_nan)))


def _arrays(a1, a2):
    out = []
    for x in (a1, a2):
        out.append(x if _dt(x) else np.asarray(x))
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
    return _agreed("np.array_equal", all(same))


@implements(np.array_equiv)
def array_equiv(a1, a2):
    try:
        a1, a2 = _arrays(a1, a2)
        np.broadcast_shapes(a1.shape, a2.shape)
    except (TypeError, ValueError):
        return False
    return _agreed("np.array_equiv", all(np.equal(a1, a2)))


# --- elementwise -------------------------------------------------------------------------

@implements(np.round, np.around)
def round(a, decimals=0, out=None):
    return _out(_run("round", (a,), (int(decimals),)), out)


@implements(np.real)
def real(val):
    """The real part (a copy for complex DTensors; numpy's is a view)."""
    return _run("real", (val,)) if np.dtype(val.dtype).kind == "c" else val


@implements(np.imag)
def imag(val):
    return _run("imag", (val,))


@implements(np.angle)
def angle(z, deg=False):
    if np.dtype(z.dtype).kind == "c":
        a = np.arctan2(imag(z), real(z))
    else:
        a = np.arctan2(0, z)
    return a * (180 / np.pi) if deg else a


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """Elementwise in ``x``, which keeps its layout; ``xp`` and ``fp`` are used whole."""
    return _run("interp", (x, xp, fp), (left, right, period))


# --- counts, ranges, averages ------------------------------------------------------------

@implements(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    """A 0-d DTensor for ``axis=None`` (numpy's int, without reading the value)."""
    flags = a if a.dtype == np.bool_ else astype(a, bool)
    return sum(flags, _axis(axis), dtype=np.intp, keepdims=keepdims)


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    axis = _axis(axis)
    return _out(np.subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims)),
                out)


def _weights(weights, a, axis):
    """numpy's check of ``weights``, then their shape made to broadcast along ``axis``."""
    w = weights if _dt(weights) else np.asanyarray(weights)
    if a.shape == w.shape:
        return w
    if axis is None:
        raise TypeError("Axis must be specified when shapes of a and weights differ.")
    if w.shape != tuple(a.shape[ax] for ax in axis):
        raise ValueError("Shape of weights must be consistent with shape of a along "
                         "specified axis.")
    order = tuple(int(i) for i in np.argsort(axis))
    shape = tuple(s if ax in axis else 1 for ax, s in enumerate(a.shape))
    return reshape(transpose(w, order), shape) if _dt(w) else w.transpose(order).reshape(shape)


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=np._NoValue):
    if axis is not None:
        axis = normalize_axis_tuple(axis, np.ndim(a), argname="axis")
    keep = builtins.bool(keepdims) if keepdims is not np._NoValue else False
    if weights is None:
        avg = mean(a, axis, keepdims=keep)
        scl = avg.dtype.type(a.size / builtins.max(avg.size, 1))
    else:
        w = _weights(weights, a, axis)
        extra = ("f8",) if np.dtype(a.dtype).kind in "iub" else ()
        dtype = np.result_type(a.dtype, w.dtype, *extra)
        scl = w.sum(axis=axis, dtype=dtype, keepdims=keep)
        if _agreed("np.average (its check for weights that sum to zero)", np.any(scl == 0.0)):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = sum(np.multiply(a, w, dtype=dtype), axis, keepdims=keep) / scl
    if not returned or (_dt(scl) and scl.shape == avg.shape):
        return (avg, scl) if returned else avg
    if np.ndim(scl) == 0 and not _dt(scl):       # numpy's scale, laid out like the average
        return avg, full_like(avg, scl, dtype=np.result_type(scl))
    return avg, ones_like(avg, dtype=scl.dtype) * scl


# --- covariance --------------------------------------------------------------------------

def _rows(m, dtype, flip):
    """numpy's ``array(m, ndmin=2, dtype=dtype)``, transposed where ``flip(rows)``."""
    if not _dt(m):
        x = np.array(m, ndmin=2, dtype=dtype)
        return x.T if flip(x) else x
    x = m if m.dtype == dtype else astype(m, dtype)
    x = reshape(x, (1, m.shape[0])) if m.ndim == 1 else x
    return transpose(x) if flip(x) else x


def _sample_weights(weights, name, count):
    if weights is None:
        return None
    w = astype(weights, np.float64) if _dt(weights) else np.asarray(weights, dtype=float)
    if w.ndim > 1:
        raise RuntimeError(f"cannot handle multidimensional {name}")
    if w.shape[0] != count:
        raise RuntimeError(f"incompatible numbers of samples and {name}")
    if name == "fweights" and not _agreed("np.cov", np.all(w == np.around(w))):
        raise TypeError("fweights must be integer")
    if _agreed("np.cov", np.any(w < 0)):
        raise ValueError(f"{name} cannot be negative")
    return w


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """numpy's covariance: weighted means (``average``), then one ``dot`` of the centred
    rows, which contracts the split samples into partial terms."""
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if dtype is None:
        dtype = np.result_type(*[v.dtype if _dt(v) else np.asarray(v)
                                 for v in (m, y) if v is not None], np.float64)
    for name, v in (("m", m), ("y", y)):
        if np.ndim(v) > 2:
            raise ValueError(f"{name} has more than 2 dimensions")
    x = _rows(m, dtype, lambda x: not rowvar and np.ndim(m) != 1)
    if x.shape[0] == 0:
        return np.array([]).reshape(0, 0)
    if y is not None:
        from .numpy_shapes import concatenate
        x = concatenate((x, _rows(y, dtype, lambda y: not rowvar and y.shape[0] != 1)), axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    f = _sample_weights(fweights, "fweights", x.shape[1])
    aw = _sample_weights(aweights, "aweights", x.shape[1])
    w = f if aw is None else aw if f is None else f * aw
    avg, w_sum = average(x, axis=1, weights=w, returned=True)
    w_sum = getitem(w_sum, 0)
    if w is None:
        fact = x.shape[1] - ddof
    elif ddof == 0:
        fact = w_sum
    elif aw is None:
        fact = w_sum - ddof
    else:
        fact = w_sum - ddof * np.sum(w * aw) / w_sum
    if _agreed("np.cov", fact <= 0):
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        fact = 0.0
    x = x - getitem(avg, (slice(None), None))
    x_t = transpose(x if w is None else x * w)
    c = dot(x, np.conjugate(x_t))
    with np.errstate(divide="ignore", invalid="ignore"):
        c = c * np.true_divide(1, fact)
    return squeeze(c)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if not _dt(c):
        return c
    with np.errstate(divide="ignore", invalid="ignore"):
        if c.ndim == 0:
            return c / c
        from .numpy_diag import diag
        stddev = np.sqrt(real(diag(c)))
        c = c / getitem(stddev, (slice(None), None))
        c = c / getitem(stddev, (None, slice(None)))
    if c.dtype.kind != "c":
        return np.clip(c, -1, 1)
    re, im = real(c), imag(c)
    outside = (np.abs(re) > 1) | (np.abs(im) > 1)
    return where(outside, np.clip(re, -1, 1) + np.clip(im, -1, 1) * 1j, c)
