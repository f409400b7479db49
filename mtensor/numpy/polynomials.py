"""numpy's polynomial functions on DTensors: ``polyval`` (Horner's rule, elementwise, so the
points keep their layout), ``polyfit`` (the scaled Vandermonde least squares of numpy's,
on the distributed ``lstsq``: a row-split sample stays split), ``vander``, and the functions
of short coefficient vectors (``poly``, ``polyadd`` ... ``roots``: numpy on the whole).
"""
from __future__ import annotations

import numpy as np

from ..dtensor import asnumpy
from .creation import replicated
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
    lhs = vander(x, deg + 1)
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    rcond = x.shape[0] * np.finfo(x.dtype).eps if rcond is None else rcond
    c = lstsq(lhs / scale, y, rcond=rcond)[0]
    return (c.T / scale).T


@implements(np.vander)
def vander(x, N=None, increasing=False):
    """The powers of ``x`` as columns (elementwise: the rows keep ``x``'s layout)."""
    n = x.shape[0] if N is None else int(N)
    powers = range(n) if increasing else range(n - 1, -1, -1)
    if n == 0:
        return np.zeros_like(x, shape=(x.shape[0], 0))
    return stack([x ** p for p in powers], axis=1)


# Coefficient and root vectors are short: these run numpy on the whole vectors on every rank
# (a DTensor argument is gathered) and return the results replicated on its mesh.
def _on_whole(fn):
    def whole(*args, **kwargs):
        mesh = next(a.device_mesh for a in args if is_dtensor(a))
        out = fn(*(asnumpy(a) if is_dtensor(a) else a for a in args), **kwargs)
        if isinstance(out, tuple):
            return tuple(replicated(o, mesh) for o in out)
        return replicated(out, mesh)
    whole.__name__ = fn.__name__
    return implements(fn)(whole)


poly = _on_whole(np.poly)
polyadd = _on_whole(np.polyadd)
polysub = _on_whole(np.polysub)
polymul = _on_whole(np.polymul)
polydiv = _on_whole(np.polydiv)
polyder = _on_whole(np.polyder)
polyint = _on_whole(np.polyint)
roots = _on_whole(np.roots)
