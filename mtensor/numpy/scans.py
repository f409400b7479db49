"""numpy's cumulative functions on DTensors: ``cumsum``, ``cumprod``, ``nancumsum``,
``nancumprod``, each the scan of ``ufunc_methods``.
"""
from __future__ import annotations

import numpy as np

from .shapes import ravel
from .ufunc_methods import scan
from .util import dtype_arg, implements, into_out, run


def _cumulative(name, ufunc, skip_nan=False):
    def cumulate(a, axis=None, dtype=None, out=None):
        if skip_nan and a.dtype.kind in "fc":
            a = run("where", (run("isnan", (a,)), 0 if ufunc is np.add else 1, a))
        if axis is None:
            a, axis = ravel(a), 0
        return into_out(scan(ufunc.__name__, a, axis, dtype_arg(dtype)), out)
    cumulate.__name__ = name
    return cumulate


cumsum = implements(np.cumsum)(_cumulative("cumsum", np.add))
cumprod = implements(np.cumprod)(_cumulative("cumprod", np.multiply))
nancumsum = implements(np.nancumsum)(_cumulative("nancumsum", np.add, skip_nan=True))
nancumprod = implements(np.nancumprod)(_cumulative("nancumprod", np.multiply, skip_nan=True))
