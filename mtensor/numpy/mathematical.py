"""numpy's mathematical functions beyond the ufuncs: ``round``, ``real``, ``imag``, ``angle``
and ``interp``.
"""
from __future__ import annotations

import numpy as np

from .util import implements, into_out, run

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
