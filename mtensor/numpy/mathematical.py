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
without its warnings (a warning would cost a collective on every call)."""
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
