"""numpy's sorting, set and counting family on DTensors: ``sort``, ``argsort``,
``partition``, ``argpartition``, ``unique``, ``searchsorted``, ``bincount``, ``histogram``,
``quantile``, ``percentile``, ``median`` and their nan variants.

Partial inputs are reduced first.  Along an axis that every rank holds whole, numpy runs
on each block and the result keeps the layout (no communication).  Along a split axis:

- 1-D arrays (and ``axis=None``, after ``ravel``) for ``sort``, ``argsort``, ``partition``,
  ``argpartition`` and ``unique``: a sample sort over the whole mesh (plan in
  ``ops.sort_plan``).  Each rank sorts its block, ``p`` regular samples per rank are
  all-gathered, ``p - 1`` splitters cut every block, one all-reduce of the ``p x p`` count
  matrix agrees the sizes, one all-to-all (per carried array) moves the pieces, each rank
  merges them, and a second all-to-all rebalances to the ``array_split`` layout, which then
  goes back to the input's layout.  ``argsort`` carries global indices (ties in index order:
  numpy's stable order); ``partition`` is a full sort there (a valid partition).
- N-D arrays sorted along a split axis, and the quantile family: the planner gathers the
  axis (Replicate on the mesh dims that split it), numpy runs on the blocks, and the result
  goes back to the input's layout (quantiles keep the splits of the other dims).

``searchsorted``, ``bincount``, ``histogram``: :mod:`numpy_counting`.

These read values outside dispatch: ``mt.compile`` refuses them, and gradients do not flow
through their float results.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from . import device, exchange, modes
from .dtensor import DTensor
from .numpy_api import implements, refuse
from .numpy_shapes import ravel, reshape
from .ops import sort_plan as plan
from .placement import Replicate, Shard, local_offset, local_shape, reduced
from .spec import DTensorSpec


def _prepare(name: str, a, differentiable: bool = True) -> DTensor:
    """Refuse tracing (and the tape, for float results); reduce Partial placements."""
    modes.refuse_while_tracing(f"np.{name}")
    if type(a) is not DTensor:
        raise TypeError(f"np.{name}: expected a DTensor, got {type(a).__name__}")
    if differentiable and modes.is_tracked(a):
        raise TypeError(f"np.{name}: gradients of np.{name} are not supported; compute it "
                        f"outside the differentiated function")
    return a.redistribute(placements=reduced(a.placements))


def _wrap(local, mesh, placements, shape) -> DTensor:
    """``local`` (a block, or host values) as this rank's block on the mesh's device."""
    local = device.to_device(local if device.is_block(local) else np.asarray(local),
                             mesh.device_type)
    return DTensor(local, DTensorSpec(mesh, tuple(placements), tuple(shape), local.dtype))


def _split(a: DTensor, axis: int) -> bool:
    """Whether some mesh dim of size > 1 splits ``axis`` of ``a``."""
    return any(p == Shard(axis) and n > 1 for p, n in zip(a.placements, a.device_mesh.shape))


def _spread(mesh):
    """The 1-D layout the sample sort works in: one distinct piece per rank, in rank order."""
    return (Shard(0),) * mesh.ndim


def _along(a: DTensor, axis: int, fn) -> DTensor:
    """``fn`` on blocks that hold ``axis`` whole (gathered where split), in ``a``'s layout."""
    whole = tuple(Replicate() if p == Shard(axis) else p for p in a.placements)
    local = fn(a.redistribute(placements=whole)._block())
    return _wrap(local, a.device_mesh, whole, a.shape).redistribute(placements=a.placements)


def _one_hot_counts(mesh, name, n):
    """Every rank's ``n``, agreed with one small all-reduce."""
    counts = np.zeros(mesh.size(), np.int64)
    counts[mesh.communicator().rank] = n
    return exchange.sum_ints(mesh, name, counts)


# --- the sample sort ---------------------------------------------------------------------

def _sample_sort(mesh, name, keys, payloads, runs, together=False):
    """Sorted runs (this rank's ``keys``; every rank's length in ``runs``) to merged sorted
    buckets, one per rank.  Returns the moved ``[keys, *payloads]``, the merge order applied
    to what arrived (None without payloads), and the count matrix (``matrix[s, d]``: rows
    sent from s to d)."""
    p, me, total = mesh.size(), mesh.communicator().rank, int(np.sum(runs))
    if total == 0:
        return [keys, *payloads], np.zeros(0, np.intp), np.zeros((p, p), np.int64)
    mine = keys[plan.sample_positions(len(keys), p)]
    counts = [len(plan.sample_positions(int(n), p)) for n in runs]
    # the splitters are picked on the host (p * p samples); a device run is cut on a host copy
    samples = device.to_host(exchange.all_gather(mesh, name, mine, counts))
    ranks, positions = plan.sample_owners(runs, p)
    pick = np.argsort(samples, kind="stable")[plan.splitter_picks(len(samples), p)]
    cuts = plan.cut_points(device.to_host(keys), me, samples[pick], ranks[pick],
                           positions[pick], together)
    matrix = np.zeros((p, p), np.int64)
    matrix[me] = plan.bucket_counts(cuts, len(keys))
    matrix = exchange.sum_ints(mesh, name, matrix.ravel()).reshape(p, p)
    moved = [exchange.all_to_all(mesh, name, x, matrix[me], matrix[:, me], total)
             for x in (keys, *payloads)]
    if not payloads:
        return [np.sort(moved[0], kind="stable")], None, matrix   # timsort merges the runs
    merge = np.argsort(moved[0], kind="stable")
    return [x[merge] for x in moved], merge, matrix


def _rebalance(mesh, name, blocks, held, target):
    """Rows held in global order as ``held`` per rank, moved to the layout ``target``."""
    send, recv = plan.rebalance_counts(held, target, mesh.communicator().rank)
    return [exchange.all_to_all(mesh, name, b, send, recv, np.sum(target)) for b in blocks]


def _sort_1d(name, a: DTensor, with_index: bool) -> DTensor:
    """A split 1-D ``a`` sorted (or argsorted, stably) by the sample sort, in ``a``'s layout."""
    mesh, spread, n = a.device_mesh, _spread(a.device_mesh), a.shape[0]
    block = a.redistribute(placements=spread)._block()
    runs = plan.layout_counts(n, mesh.shape, spread)
    if with_index:
        order = np.argsort(block, kind="stable")
        start = local_offset((n,), mesh.shape, spread, mesh.coordinate)[0]
        keys, payloads = block[order], [order + start]
    else:
        keys, payloads = np.sort(block), []
    moved, _, matrix = _sample_sort(mesh, name, keys, payloads, runs)
    (local,) = _rebalance(mesh, name, moved[-1:], matrix.sum(axis=0), runs)
    return _wrap(local, mesh, spread, (n,)).redistribute(placements=a.placements)


def _sorting(name, a, axis, local_fn, with_index):
    """The three paths: whole axis (local), split 1-D (sample sort), split N-D (gathered)."""
    a = _prepare(name, a, differentiable=not with_index)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis_index(axis, a.ndim)
    if not _split(a, axis):
        return _wrap(local_fn(a._block(), axis), a.device_mesh, a.placements, a.shape)
    if a.ndim == 1:
        return _sort_1d(name, a, with_index)
    return _along(a, axis, lambda block: local_fn(block, axis))


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    refuse("sort", order=order)
    return _sorting("sort", a, axis, lambda b, ax: np.sort(b, ax, kind, stable=stable), False)


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """Along a split 1-D axis the order is numpy's stable one (valid for every ``kind``)."""
    refuse("argsort", order=order)
    return _sorting("argsort", a, axis,
                    lambda b, ax: np.argsort(b, ax, kind, stable=stable), True)


def _check_kth(name, a, kth, axis, kind):
    refuse(name, kind=None if kind == "introselect" else kind)
    if type(kth) is DTensor:
        raise TypeError(f"np.{name}: kth given as a DTensor is not supported; pass ints")
    if a.size == 0:        # numpy partitions an empty array for any kth
        return
    n = a.size if axis is None else a.shape[normalize_axis_index(axis, a.ndim)]
    bad = [int(k) for k in np.atleast_1d(kth) if not -n <= int(k) < n]
    if bad:
        raise ValueError(f"np.{name}: kth(={bad[0]}) out of bounds ({n})")


@implements(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """Along a split 1-D axis a full sort: a valid partition, as numpy's order is unspecified."""
    refuse("partition", order=order)
    _check_kth("partition", a, kth, axis, kind)
    return _sorting("partition", a, axis, lambda b, ax: np.partition(b, kth, ax), False)


@implements(np.argpartition)
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    refuse("argpartition", order=order)
    _check_kth("argpartition", a, kth, axis, kind)
    return _sorting("argpartition", a, axis, lambda b, ax: np.argpartition(b, kth, ax), True)


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
    mesh, spread, n, name = flat.device_mesh, _spread(flat.device_mesh), flat.shape[0], "np.unique"
    block = flat.redistribute(placements=spread)._block()
    start = local_offset((n,), mesh.shape, spread, mesh.coordinate)[0]
    keys, first, inverse, counts = np.unique(block, return_index=True, return_inverse=True,
                                             return_counts=True)
    runs = _one_hot_counts(mesh, name, len(keys))
    (keys, first, counts), merge, matrix = _sample_sort(
        mesh, name, keys, [first + start, counts], runs, together=True)
    starts = _run_starts(keys)
    at = np.flatnonzero(starts)
    held = _one_hot_counts(mesh, name, len(at))
    me = mesh.communicator().rank
    ids = np.empty_like(keys, dtype=np.intp)
    ids[merge] = np.cumsum(starts) - 1 + int(held[:me].sum())
    back = exchange.all_to_all(mesh, name, ids, matrix[:, me], matrix[me], runs.sum())
    merged = [keys[at], device.through_host(np.minimum.reduceat)(first, at) if len(at) else first,
              np.add.reduceat(counts, at) if len(at) else counts]
    target = plan.layout_counts(int(held.sum()), mesh.shape, spread)
    values, index, count = (_wrap(b, mesh, spread, (int(held.sum()),))
                            for b in _rebalance(mesh, name, merged, held, target))
    return values, index, _wrap(back[inverse], mesh, spread, (n,)), count


@implements(np.unique)
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True):
    """``axis=None`` only.  A split array gives results split over every mesh dim
    (``Shard(0)`` on each, balanced); an array every rank holds whole gives replicated ones."""
    refuse("unique", axis=axis, equal_nan=None if equal_nan else equal_nan)
    a = _prepare("unique", ar)
    flat = ravel(a)
    if _split(flat, 0):
        values, index, inverse, counts = _unique_spread(flat)
    else:
        mesh, whole = flat.device_mesh, (Replicate(),) * flat.device_mesh.ndim
        found = np.unique(flat._block(), return_index=True, return_inverse=True,
                          return_counts=True)
        values, index, inverse, counts = (_wrap(x, mesh, whole, np.shape(x)) for x in found)
    extras = [x for x, want in ((index, return_index),
                                (reshape(inverse, a.shape) if return_inverse else None,
                                 return_inverse), (counts, return_counts)) if want]
    return (values, *extras) if extras else values


# --- quantiles: the reduced axes gathered ------------------------------------------------

def _quantile_like(name, fn, a, q, axis, keepdims, **kwargs):
    """numpy's ``fn`` on blocks holding the reduced axes whole; the other dims keep their
    splits (shifted past ``q``'s dims)."""
    refuse(name, **{k: v for k, v in kwargs.items() if k in ("out", "weights")})
    kwargs = {k: v for k, v in kwargs.items() if k == "method"}
    if type(q) is DTensor:
        raise TypeError(f"np.{name}: q given as a DTensor is not supported; pass numbers")
    a = _prepare(name, a)
    axes = tuple(range(a.ndim)) if axis is None else normalize_axis_tuple(axis, a.ndim)
    whole = tuple(Replicate() if isinstance(p, Shard) and p.dim in axes else p
                  for p in a.placements)
    if keepdims is not np._NoValue:
        kwargs["keepdims"] = bool(keepdims)
    args = () if q is None else (q,)
    block = a.redistribute(placements=whole)._block()
    local = fn(block, *args, axis=axis, **kwargs)
    kept = [d for d in range(a.ndim) if kwargs.get("keepdims") or d not in axes]
    lead = np.ndim(q)
    shape = np.shape(q) + tuple(1 if d in axes else a.shape[d] for d in kept)
    placements = tuple(Shard(lead + kept.index(p.dim)) if isinstance(p, Shard) else p
                       for p in whole)
    # the dtype from a one-element probe, the same on every rank (numpy's errors too): the
    # nan* quantiles answer an empty block with nanmean's shape and dtype
    dtype = np.asarray(fn(np.zeros((1,) * a.ndim, a.dtype), *args, axis=axis, **kwargs)).dtype
    if a.size and not block.size:
        mesh = a.device_mesh
        local = device.empty_on(mesh.device_type,
                                local_shape(shape, mesh.shape, placements, mesh.coordinate), dtype)
    local = local if device.is_block(local) else np.asarray(local)
    return _wrap(local.astype(dtype, copy=False), a.device_mesh, placements, shape)


def _quantiles(name, fn):
    def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                 keepdims=np._NoValue, *, weights=None):
        return _quantile_like(name, fn, a, q, axis, keepdims, out=out, weights=weights,
                              method=method)
    quantile.__name__ = name
    return quantile


def _medians(name, fn):
    def median(a, axis=None, out=None, overwrite_input=False, keepdims=np._NoValue):
        return _quantile_like(name, fn, a, None, axis, keepdims, out=out)
    median.__name__ = name
    return median


quantile = implements(np.quantile)(_quantiles("quantile", np.quantile))
percentile = implements(np.percentile)(_quantiles("percentile", np.percentile))
nanquantile = implements(np.nanquantile)(_quantiles("nanquantile", np.nanquantile))
nanpercentile = implements(np.nanpercentile)(_quantiles("nanpercentile", np.nanpercentile))
median = implements(np.median)(_medians("median", np.median))
nanmedian = implements(np.nanmedian)(_medians("nanmedian", np.nanmedian))

__all__ = ["argpartition", "argsort", "median", "nanmedian", "nanpercentile", "nanquantile",
           "partition", "percentile", "quantile", "sort", "unique"]
