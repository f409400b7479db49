"""numpy's counting functions on DTensors: ``searchsorted``, ``digitize``, ``bincount``,
``histogram``.

Each block counts with numpy; the counts are ``Partial(sum)`` terms over the mesh dims that
split the input (reduced when next used).  The lengths and bin edges that depend on values
(``bincount``'s length, ``histogram``'s edges for an int ``bins``) are agreed first with one
small all-gather of each block's extrema.  They read values outside dispatch: ``mt.compile``
refuses them.
"""
from __future__ import annotations

import numpy as np

from ..device import arrays as device
from ..dtensor import DTensor, guarded
from ..placement import Partial, Replicate, Shard, local_slices
from .shapes import ravel
from .sorting import prepare, wrap_block
from .util import implements


def _terms(placements):
    """Counts of blocks split on a mesh dim are Partial(sum) terms there."""
    return tuple(Partial("sum") if isinstance(p, Shard) else p for p in placements)


def _like(name, x: DTensor, other, what: str):
    """``other`` (a DTensor or array shaped like ``x``) as this rank's block of ``x``'s layout."""
    if np.shape(other) != x.shape:
        raise ValueError(f"np.{name}: {what} has shape {np.shape(other)} but the array has "
                         f"{x.shape}; give them the same shape")
    if type(other) is DTensor:
        return prepare(name, other).redistribute(placements=x.placements)._block()
    mesh = x.device_mesh
    return np.asarray(other)[local_slices(x.shape, mesh.shape, x.placements, mesh.coordinate)]


@implements(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    """A split sorted ``a``: each block counts the values before each ``v`` and the counts
    are Partial(sum) terms (``v`` is made whole on the mesh dims that split ``a``)."""
    if sorter is not None:          # a in sorted order: a gather of a by the sorter
        a = np.take(a, sorter)
    if type(a) is not DTensor:
        v = prepare("searchsorted", v, differentiable=False)
        a = device.to_device(np.asarray(a), v.device_mesh.device_type)
        return wrap_block(np.searchsorted(a, v._block(), side), v.device_mesh,
                     v.placements, v.shape)
    a = prepare("searchsorted", a, differentiable=False)
    if a.ndim != 1:
        raise ValueError(f"np.searchsorted: a has shape {a.shape}; it must be 1-D")
    split = tuple(isinstance(p, Shard) for p in a.placements)
    if type(v) is DTensor:
        v = prepare("searchsorted", v, differentiable=False)
        if v.device_mesh != a.device_mesh:
            raise ValueError("np.searchsorted: a and v live on different meshes; "
                             "redistribute one onto the other's mesh")
        keep = tuple(Replicate() if s else p for s, p in zip(split, v.placements))
        values, shape = v.redistribute(placements=keep)._block(), v.shape
    else:
        keep = (Replicate(),) * len(split)
        values = device.to_device(np.asarray(v), a.device_mesh.device_type)
        shape = values.shape
    local = np.searchsorted(a._block(), values, side).astype(np.intp, copy=False)
    out = tuple(Partial("sum") if s else p for s, p in zip(split, keep))
    return wrap_block(local, a.device_mesh, out, shape)


def _extrema(mesh, name, block):
    """Global ``(min, max)`` of the blocks (NaN if any is), or None when all are empty."""
    mine = (block.min().item(), block.max().item()) if block.size else None
    with guarded(name, "allgather", (), np.uint8, mesh):
        seen = [s for s in mesh.communicator().allgather_object(mine) if s is not None]
    if not seen:
        return None
    lows, highs = (np.array([s[i] for s in seen], block.dtype) for i in (0, 1))
    return np.minimum.reduce(lows), np.maximum.reduce(highs)


@implements(np.bincount)
def bincount(x, weights=None, minlength=0):
    """Each block's bincount to the agreed length (one small all-gather of the extrema):
    Partial(sum) terms over the mesh dims that split ``x``."""
    x = prepare("bincount", x, differentiable=False)
    if x.ndim != 1:
        raise ValueError(f"np.bincount: x has shape {x.shape}; it must be 1-D")
    if not np.can_cast(x.dtype, np.intp, "safe"):
        raise TypeError(f"np.bincount: cannot cast array data from {x.dtype} to "
                        f"{np.dtype(np.intp)} according to the rule 'safe'")
    if minlength < 0:
        raise ValueError("np.bincount: 'minlength' must not be negative")
    w = None if weights is None else _like("bincount", x, weights, "weights")
    block = x._block()
    span = _extrema(x.device_mesh, "np.bincount", block)
    if span is not None and span[0] < 0:
        raise ValueError("np.bincount: 'list' argument must have no negative elements")
    length = max(int(minlength), 0 if span is None else int(span[1]) + 1)
    # numpy's dtype and errors from a one-element probe, not from the block (an empty block's
    # weighted count is intp; complex weights raise only on a non-empty one)
    dtype = np.bincount(np.zeros(1, x.dtype), None if w is None else np.ones(1, w.dtype)).dtype
    local = np.bincount(block, w, minlength=length).astype(dtype, copy=False)
    return wrap_block(local, x.device_mesh, _terms(x.placements), local.shape)


def _bin_edges(a: DTensor, block, bins, range):
    """numpy's edges: for an int ``bins`` without ``range``, from the agreed global extrema."""
    if type(bins) is DTensor or isinstance(bins, str):
        raise TypeError(f"np.histogram: bins={bins!r} is not supported on DTensors; give "
                        f"an int or the edges as a plain array")
    if np.ndim(bins) != 0 or range is not None:
        return np.histogram_bin_edges(np.empty(0, a.dtype), bins, range)
    span = _extrema(a.device_mesh, "np.histogram", block)
    probe = np.empty(0, a.dtype) if span is None else np.array(span, a.dtype)
    return np.histogram_bin_edges(probe, bins)


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """Each block's histogram over the agreed edges: counts are Partial(sum) terms (reduced
    and normalised on every rank with ``density``); the edges come back replicated."""
    a = prepare("histogram", a, differentiable=False)
    w = None
    if weights is not None:
        if np.shape(weights) != a.shape:
            raise ValueError(f"np.histogram: weights have shape {np.shape(weights)} but a has "
                             f"{a.shape}; give them the same shape")
        weights = ravel(weights)
    a = ravel(a)
    if weights is not None:
        w = _like("histogram", a, weights, "weights")
    block = a._block()
    edges = _bin_edges(a, block, bins, range)
    local_bins = bins if np.ndim(bins) == 0 else edges
    local_range = (edges[0], edges[-1]) if np.ndim(bins) == 0 else None
    probe, _ = np.histogram(np.zeros(1, a.dtype), local_bins, local_range,
                            weights=None if w is None else np.ones(1, w.dtype))
    if np.ndim(local_bins):
        local_bins = device.to_device(local_bins, a.device_mesh.device_type)
    counts, _ = np.histogram(block, local_bins, local_range,
                             weights=None if w is None else device.like(w, block))
    counts = counts.astype(probe.dtype, copy=False)   # an empty block's dtype as the others'
    mesh, whole = a.device_mesh, (Replicate(),) * a.device_mesh.ndim
    hist = wrap_block(counts, mesh, _terms(a.placements), counts.shape)
    if density:
        n = hist.redistribute(placements=whole)._block()
        widths = device.to_device(np.diff(edges).astype(float), mesh.device_type)
        hist = wrap_block(n / widths / n.sum(), mesh, whole, n.shape)
    return hist, wrap_block(edges, mesh, whole, edges.shape)


def _monotonic(bins) -> int:
    """1 for non-decreasing ``bins``, -1 for non-increasing, 0 for neither (numpy's rule)."""
    if bins.ndim != 1:
        raise ValueError("object too deep for desired array")
    steps = np.diff(bins)
    return 1 if np.all(steps >= 0) else -1 if np.all(steps <= 0) else 0


@implements(np.digitize)
def digitize(x, bins, right=False):
    """numpy's ``digitize``: each value of ``x`` looked up in the whole ``bins`` (a DTensor is
    gathered), so ``x`` keeps its layout."""
    bins = np.asarray(bins)
    if type(x) is not DTensor:
        return np.digitize(np.asarray(x), bins, right)
    if np.issubdtype(x.dtype, np.complexfloating):
        raise TypeError("x may not be complex")
    mono = _monotonic(bins)
    if mono == 0:
        raise ValueError("bins must be monotonically increasing or decreasing")
    side = "left" if right else "right"
    if mono == -1:
        return len(bins) - searchsorted(bins[::-1], x, side=side)
    return searchsorted(bins, x, side=side)


__all__ = ["bincount", "digitize", "histogram", "searchsorted"]


@implements(np.histogram_bin_edges)
def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The edges ``histogram`` computes (its counts, one all-reduce, are dropped)."""
    return histogram(a, bins, range, weights=weights)[1]
