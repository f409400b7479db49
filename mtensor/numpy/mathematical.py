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
