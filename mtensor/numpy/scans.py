"""ufunc methods on DTensors beyond ``__call__``: ``outer``, ``reduce`` of any binary ufunc,
``accumulate`` (a distributed scan), ``reduceat`` (the axis gathered), and ``np.cumsum``,
``np.cumprod``, ``np.nancumsum``, ``np.nancumprod``.  ``apply_ufunc`` in :mod:`numpy_api`
finds the methods in ``HANDLED`` under ``("ufunc", method)``, registered here (so numpy_api
need not import this module).

The scan along a split axis, for associative ufuncs (``ops.ufunc_methods.SCANNABLE``)::

    local   = ufunc_accumulate(a)           each rank scans its own block (no communication)
    totals  = scan_totals(local)            each block's last slice: (nblocks, ...) sharded
    totals  = totals.redistribute(gathered) the planner's all-gather of those small totals
    result  = scan_apply(local, totals)     block k: fold(totals[j], j < k) op local

Only the totals move: one slice per block, never the blocks themselves.

``np.diff``, ``np.ediff1d``, ``np.gradient`` and ``np.convolve`` along a split axis exchange
halos
(:mod:`ops.halo`): each block's first and last few slices are all-gathered, and each rank
computes its output block from its own block and those edges."""
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
