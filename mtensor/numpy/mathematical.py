"""numpy's mathematical functions beyond the ufuncs: ``round``, ``real``, ``imag``, ``angle``,
``interp``, ``nan_to_num``, ``fix``, ``sinc``, ``i0``, ``iscomplex``/``isreal``,
``real_if_close`` and ``trapezoid``.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from .sorting import prepare, wrap_block
from .util import agreed, implements, into_out, run

# --- elementwise -------------------------------------------------------------------------

@implements(np.round, np.around)
def round(a, decimals=0, out=None):
    return into_out(run("round", (a,), (int(decimals),)), out)


@implements(np.real)
def real(val):
    """The real part (a copy for complex DTensors; numpy's is a view)."""
    return run("real", (val,)) if np.dtype(val.dtype).kind == "c" else val


@implements(np.imag)
def imag(val):
    return run("imag", (val,))


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
    return run("interp", (x, xp, fp), (left, right, period))


@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN to ``nan``, infinities to ``posinf``/``neginf`` (the dtype's largest finite values
    by default), elementwise; complex parts each on their own.  Always a new DTensor."""
    if x.dtype.kind not in "fc":
        return x.copy()
    if x.dtype.kind == "c":
        parts = [nan_to_num(part, nan=nan, posinf=posinf, neginf=neginf)
                 for part in (real(x), imag(x))]
        return parts[0] + 1j * parts[1]
    info = np.finfo(x.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = np.where(np.isnan(x), nan, x)
    out = np.where(np.isposinf(out), hi, out)
    return np.where(np.isneginf(out), lo, out).astype(x.dtype, copy=False)


@implements(np.fix)
def fix(x, out=None):
    return into_out(np.trunc(x), out)


@implements(np.sinc)
def sinc(x):
    """numpy's ``sin(pi y) / (pi y)``, with 0 replaced by a tiny value as numpy does."""
    y = np.pi * np.where(x == 0, 1.0e-20, x)
    return np.sin(y) / y


@implements(np.i0)
def i0(x):
    """numpy's ``i0`` on each rank's block (elementwise; Partial terms summed first; not
    under gradients or ``mt.compile``, as the other functions of whole blocks)."""
    a = prepare("i0", x)
    return wrap_block(np.i0(a._block()), a.device_mesh, a.placements, a.shape)


@implements(np.iscomplex)
def iscomplex(x):
    return imag(x) != 0 if x.dtype.kind == "c" else np.zeros_like(x, dtype=bool)


@implements(np.isreal)
def isreal(x):
    return imag(x) == 0 if x.dtype.kind == "c" else np.ones_like(x, dtype=bool)


@implements(np.real_if_close)
def real_if_close(a, tol=100):
    """The real part when every imaginary part is within ``tol`` machine epsilons (one
    agreed read), else ``a``."""
    if a.dtype.kind != "c":
        return a
    bound = tol * np.finfo(a.dtype).eps if tol > 1 else tol
    return real(a) if agreed("real_if_close", np.all(np.abs(imag(a)) < bound)) else a


@implements(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """``sum((y[1:] + y[:-1]) / 2 * d)`` along ``axis`` (slices and a sum: a split axis
    sums partial terms)."""
    axis = normalize_axis_index(axis, y.ndim)
    head = (slice(None),) * axis
    upper, lower = y[head + (slice(1, None),)], y[head + (slice(None, -1),)]
    if x is None:
        d = dx
    else:
        d = np.diff(x, axis=axis if np.ndim(x) > 1 else 0)
        if np.ndim(d) == 1 and y.ndim > 1:
            d = np.reshape(d, (-1,) + (1,) * (y.ndim - 1 - axis))
    return np.sum(d * (upper + lower) / 2.0, axis=axis)

