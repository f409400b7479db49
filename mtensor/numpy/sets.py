"""numpy's set functions on DTensors: ``unique`` (a sample sort that keeps equal values
together, then a merge per rank), numpy 2's ``unique_values``/``_counts``/``_inverse``/``_all``
(the array API's: every NaN its own value), ``isin``, ``intersect1d``, ``union1d``,
``setdiff1d``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..device import arrays as device
from ..dtensor import DTensor, asnumpy
from ..ops.plans import sample_sort as plan
from ..placement import Replicate, local_offset
from . import exchange
from .creation import arange, ones
from .joins import concatenate
from .selection import take
from .shapes import getitem, ravel, reshape
from .sorting import (
    is_split,
    one_hot_counts,
    prepare,
    rebalance,
    sample_sort,
    spread_layout,
    wrap_block,
)
from .util import implements, refuse


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


@implements(np.setxor1d)
def setxor1d(ar1, ar2, assume_unique=False):
    """The sorted values in exactly one of the two: the union minus the intersection."""
    both = intersect1d(ar1, ar2, assume_unique)
    union = union1d(ar1, ar2)
    return union[isin(union, both, invert=True)]


@implements(np.union1d)
def union1d(ar1, ar2):
    return np.unique(concatenate((ravel(ar1), ravel(ar2))))


@implements(np.setdiff1d)
def setdiff1d(ar1, ar2, assume_unique=False):
    a = ravel(ar1) if assume_unique else np.unique(ar1)
    return a[isin(a, ar2, assume_unique=True, invert=True)]


__all__ = ["intersect1d", "isin", "setdiff1d", "setxor1d", "union1d", "unique_all", "unique_counts",
           "unique_inverse", "unique_values"]


# --- unique ------------------------------------------------------------------------------

def _run_starts(keys) -> np.ndarray:
    """Where a new value starts in sorted ``keys`` (NaNs count as one value, as numpy's)."""
    starts = np.ones_like(keys, dtype=bool)
    starts[1:] = keys[1:] != keys[:-1]
    if keys.dtype.kind in "fc":
        nan = np.isnan(keys)
        starts[1:] &= ~(nan[1:] & nan[:-1])
    return starts


def _unique_spread(flat: DTensor):
    """A split 1-D ``flat``: local uniques sample-sorted with equal values kept together,
    merged per rank, then rebalanced.  Returns (values, first index, inverse, counts)."""
    mesh, spread, n, name = flat.device_mesh, spread_layout(flat.device_mesh), flat.shape[0], "np.unique"
    block = flat.redistribute(placements=spread)._block()
    start = local_offset((n,), mesh.shape, spread, mesh.coordinate)[0]
    keys, first, inverse, counts = np.unique(block, return_index=True, return_inverse=True,
                                             return_counts=True)
    runs = one_hot_counts(mesh, name, len(keys))
    (keys, first, counts), merge, matrix = sample_sort(
        mesh, name, keys, [first + start, counts], runs, together=True)
    starts = _run_starts(keys)
    at = np.flatnonzero(starts)
    held = one_hot_counts(mesh, name, len(at))
    me = mesh.communicator().rank
    ids = np.empty_like(keys, dtype=np.intp)
    ids[merge] = np.cumsum(starts) - 1 + int(held[:me].sum())
    back = exchange.all_to_all(mesh, name, ids, matrix[:, me], matrix[me], runs.sum())
    merged = [keys[at], device.through_host(np.minimum.reduceat)(first, at) if len(at) else first,
              np.add.reduceat(counts, at) if len(at) else counts]
    target = plan.layout_counts(int(held.sum()), mesh.shape, spread)
    values, index, count = (wrap_block(b, mesh, spread, (int(held.sum()),))
                            for b in rebalance(mesh, name, merged, held, target))
    return values, index, wrap_block(back[inverse], mesh, spread, (n,)), count


@implements(np.unique)
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True):
    """``axis=None`` only.  A split array gives results split over every mesh dim
    (``Shard(0)`` on each, balanced); an array every rank holds whole gives replicated ones."""
    refuse("unique", axis=axis, equal_nan=None if equal_nan else equal_nan)
    a = prepare("unique", ar)
    flat = ravel(a)
    if is_split(flat, 0):
        values, index, inverse, counts = _unique_spread(flat)
    else:
        mesh, whole = flat.device_mesh, (Replicate(),) * flat.device_mesh.ndim
        found = np.unique(flat._block(), return_index=True, return_inverse=True,
                          return_counts=True)
        values, index, inverse, counts = (wrap_block(x, mesh, whole, np.shape(x)) for x in found)
    extras = [x for x, want in ((index, return_index),
                                (reshape(inverse, a.shape) if return_inverse else None,
                                 return_inverse), (counts, return_counts)) if want]
    return (values, *extras) if extras else values


# --- numpy 2's unique_* (NaNs distinct) ----------------------------------------------------

class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _nans(flat):
    """The NaN mask of a floating ``flat`` and how many it holds (None, 0 for other dtypes)."""
    if flat.dtype.kind not in "fc":
        return None, 0
    nan = np.isnan(flat)
    return nan, int(np.count_nonzero(nan))


def _distinct(flat, want_index, want_inverse, want_counts):
    """``unique`` of ``flat`` with every NaN its own value, last: the NaNs are set to the
    first other value for the sort (so they add no value), then each gets its own entry."""
    nan, k = _nans(flat)
    if k == 0:
        return unique(flat, want_index, want_inverse, want_counts)
    n, mesh = flat.shape[0], flat.device_mesh
    first = int(np.argmin(nan))                   # the first value that is not NaN
    if k == n:
        values, index = flat.copy(), arange(n, mesh=mesh)
        inverse, counts = index.copy(), ones(n, np.intp, mesh=mesh)
    else:
        values, index, inverse, counts = unique(np.where(nan, flat[first], flat), True, True, True)
        at = int(np.searchsorted(asnumpy(values), float(asnumpy(flat[first]))))
        counts[at] -= k
        index[at] = first
        inverse = np.where(nan, len(values) + np.cumsum(nan) - 1, inverse)
        values = concatenate((values, flat[nan]))
        index = concatenate((index, np.flatnonzero(nan)))
        counts = concatenate((counts, ones(k, counts.dtype, mesh=mesh)))
    out = [values]
    out += [index] if want_index else []
    out += [inverse] if want_inverse else []
    out += [counts] if want_counts else []
    return tuple(out) if len(out) > 1 else values


@implements(np.unique_values)
def unique_values(x):
    return _distinct(ravel(prepare("unique_values", x)), False, False, False)


@implements(np.unique_counts)
def unique_counts(x):
    return UniqueCountsResult(*_distinct(ravel(prepare("unique_counts", x)), False, False, True))


@implements(np.unique_inverse)
def unique_inverse(x):
    a = prepare("unique_inverse", x)
    values, inverse = _distinct(ravel(a), False, True, False)
    return UniqueInverseResult(values, reshape(inverse, a.shape))


@implements(np.unique_all)
def unique_all(x):
    a = prepare("unique_all", x)
    values, index, inverse, counts = _distinct(ravel(a), True, True, True)
    return UniqueAllResult(values, index, reshape(inverse, a.shape), counts)
