"""numpy's set functions on DTensors: ``isin``, ``intersect1d``, ``union1d``, ``setdiff1d``,
written with the distributed ``unique``, ``sort``, ``searchsorted`` and ``take``.

``isin`` looks each element up in the sorted test values (used whole: a DTensor is gathered),
so ``element`` keeps its layout.  The others follow numpy's own algorithms on the flattened
arrays (``intersect1d``: the sorted concatenation of both uniques, kept where a value repeats),
so their results are laid out as ``unique`` and masks lay them out: balanced ``S(0)``.
"""
from __future__ import annotations

import numpy as np

from .dtensor import DTensor, asnumpy
from .numpy_api import implements, refuse
from .numpy_select import take
from .numpy_shapes import concatenate, getitem, ravel


@implements(np.isin)
def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """Each element looked up in the sorted test values (``element``'s layout, no gather)."""
    if type(element) is not DTensor:
        return np.isin(np.asarray(element), np.asarray(test_elements), assume_unique,
                       invert, kind=kind)
    values = np.unique(asnumpy(test_elements))          # a collective for a DTensor
    if values.size == 0:
        found = np.zeros_like(element, dtype=bool)
    else:
        found = take(values, np.searchsorted(values, element), mode="clip") == element
    return ~found if invert else found


@implements(np.intersect1d)
def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    refuse("intersect1d", return_indices=return_indices or None)
    a, b = (ravel(x) if assume_unique else np.unique(x) for x in (ar1, ar2))
    aux = np.sort(concatenate((a, b)))
    head = getitem(aux, slice(None, -1)) if type(aux) is DTensor else aux[:-1]
    tail = getitem(aux, slice(1, None)) if type(aux) is DTensor else aux[1:]
    return head[head == tail]


@implements(np.union1d)
def union1d(ar1, ar2):
    return np.unique(concatenate((ravel(ar1), ravel(ar2))))


@implements(np.setdiff1d)
def setdiff1d(ar1, ar2, assume_unique=False):
    a = ravel(ar1) if assume_unique else np.unique(ar1)
    return a[isin(a, ar2, assume_unique=True, invert=True)]


__all__ = ["intersect1d", "isin", "setdiff1d", "union1d"]
