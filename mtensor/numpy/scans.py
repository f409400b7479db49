"""numpy's cumulative functions on DTensors: ``cumsum``, ``cumprod``, ``nancumsum``,
``nancumprod`` and numpy 2's ``cumulative_sum``/``cumulative_prod`` (the array API's), each
the scan of ``ufunc_methods``.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from .creation import full
from .joins import concatenate
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


def _cumulative_api(name, ufunc):
    def cumulate(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        if axis is None:
            if x.ndim > 1:
                raise ValueError(f"{name}: axis must be specified for a {x.ndim}-D input")
            axis = 0
        axis = normalize_axis_index(axis, max(x.ndim, 1))
        scanned = scan(ufunc.__name__, x, axis, dtype_arg(dtype))
        if include_initial:
            shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
            identity = full(shape, ufunc.identity, scanned.dtype, mesh=x.device_mesh)
            scanned = concatenate((identity, scanned), axis=axis)
        return into_out(scanned, out)
    cumulate.__name__ = name
    return cumulate


cumulative_sum = implements(np.cumulative_sum)(_cumulative_api("cumulative_sum", np.add))
cumulative_prod = implements(np.cumulative_prod)(_cumulative_api("cumulative_prod", np.multiply))
