"""numpy's polynomial functions on DTensors: ``polyval`` (Horner's rule, elementwise, so the
points keep their layout) and ``polyfit`` (the scaled Vandermonde least squares of numpy's,
on the distributed ``lstsq``: a row-split sample stays split).
"""
from __future__ import annotations

import numpy as np

from .joins import stack
from .linalg.solve import lstsq
from .shapes import getitem
from .util import as_array, implements, is_dtensor, refuse


@implements(np.polyval)
def polyval(p, x):
    p, x = as_array(p), as_array(x)
    y = np.zeros_like(x, dtype=np.result_type(p.dtype, x.dtype))
    for i in range(p.shape[0]):
        y = y * x + (getitem(p, i) if is_dtensor(p) else p[i])
    return y


@implements(np.polyfit)
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least squares of the columns ``x**deg .. x**0``, each scaled to unit norm first (as
    numpy does, for the conditioning); ``full``, ``w`` and ``cov`` are refused."""
    refuse("polyfit", full=full or None, w=w, cov=cov or None)
    deg = int(deg)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    x = as_array(x).astype(np.result_type(x.dtype, float))
    if x.ndim != 1 or x.shape[0] == 0:
        raise TypeError("expected 1D vector for x" if x.ndim != 1 else "expected non-empty vector for x")
    if np.ndim(y) not in (1, 2) or np.shape(y)[0] != x.shape[0]:
        raise TypeError("expected x and y to have same length")
    vander = stack([x ** (deg - i) for i in range(deg + 1)], axis=1)
    scale = np.sqrt(np.sum(vander * vander, axis=0))
    rcond = x.shape[0] * np.finfo(x.dtype).eps if rcond is None else rcond
    c = lstsq(vander / scale, y, rcond=rcond)[0]
    return (c.T / scale).T
