"""numpy's sorting on DTensors: ``sort``, ``argsort``, ``partition``, ``argpartition``.  Along an
axis every rank holds whole, each block sorts with numpy; a split 1-D axis is sample-sorted
(``ops.plans.sample_sort``) and rebalanced to the input's layout.  The helpers the counting,
set and statistics sections share are here.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from .. import modes
from ..device import arrays as device
from ..dtensor import DTensor
from ..ops.plans import sample_sort as plan
from ..placement import Replicate, Shard, local_offset, reduced
from ..spec import DTensorSpec
from . import exchange
from .shapes import ravel
from .util import implements, refuse


def prepare(name: str, a, differentiable: bool = True) -> DTensor:
    """Refuse tracing (and the tape, for float results); reduce Partial placements."""
    modes.refuse_while_tracing(f"np.{name}")
    if type(a) is not DTensor:
        raise TypeError(f"np.{name}: expected a DTensor, got {type(a).__name__}")
    if differentiable and modes.is_tracked(a):
        raise TypeError(f"np.{name}: gradients of np.{name} are not supported; compute it "
                        f"outside the differentiated function")
    return a.redistribute(placements=reduced(a.placements))


def wrap_block(local, mesh, placements, shape) -> DTensor:
    """``local`` (a block, or host values) as this rank's block on the mesh's device."""
    local = device.to_device(local if device.is_block(local) else np.asarray(local),
                             mesh.device_type)
    return DTensor(local, DTensorSpec(mesh, tuple(placements), tuple(shape), local.dtype))


def is_split(a: DTensor, axis: int) -> bool:
    """Whether some mesh dim of size > 1 splits ``axis`` of ``a``."""
    return any(p == Shard(axis) and n > 1 for p, n in zip(a.placements, a.device_mesh.shape))


def spread_layout(mesh):
    """The 1-D layout the sample sort works in: one distinct piece per rank, in rank order."""
    return (Shard(0),) * mesh.ndim


def _along(a: DTensor, axis: int, fn) -> DTensor:
    """``fn`` on blocks that hold ``axis`` whole (gathered where split), in ``a``'s layout."""
    whole = tuple(Replicate() if p == Shard(axis) else p for p in a.placements)
    local = fn(a.redistribute(placements=whole)._block())
    return wrap_block(local, a.device_mesh, whole, a.shape).redistribute(placements=a.placements)


def one_hot_counts(mesh, name, n):
    """Every rank's ``n``, agreed with one small all-reduce."""
    counts = np.zeros(mesh.size(), np.int64)
    counts[mesh.communicator().rank] = n
    return exchange.sum_ints(mesh, name, counts)


# --- the sample sort ---------------------------------------------------------------------

def sample_sort(mesh, name, keys, payloads, runs, together=False):
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


def rebalance(mesh, name, blocks, held, target):
    """Rows held in global order as ``held`` per rank, moved to the layout ``target``."""
    send, recv = plan.rebalance_counts(held, target, mesh.communicator().rank)
    return [exchange.all_to_all(mesh, name, b, send, recv, np.sum(target)) for b in blocks]


def _sort_1d(name, a: DTensor, with_index: bool) -> DTensor:
    """A split 1-D ``a`` sorted (or argsorted, stably) by the sample sort, in ``a``'s layout."""
    mesh, spread, n = a.device_mesh, spread_layout(a.device_mesh), a.shape[0]
    block = a.redistribute(placements=spread)._block()
    runs = plan.layout_counts(n, mesh.shape, spread)
    if with_index:
        order = np.argsort(block, kind="stable")
        start = local_offset((n,), mesh.shape, spread, mesh.coordinate)[0]
        keys, payloads = block[order], [order + start]
    else:
        keys, payloads = np.sort(block), []
    moved, _, matrix = sample_sort(mesh, name, keys, payloads, runs)
    (local,) = rebalance(mesh, name, moved[-1:], matrix.sum(axis=0), runs)
    return wrap_block(local, mesh, spread, (n,)).redistribute(placements=a.placements)


def _sorting(name, a, axis, local_fn, with_index):
    """The three paths: whole axis (local), split 1-D (sample sort), split N-D (gathered)."""
    a = prepare(name, a, differentiable=not with_index)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis_index(axis, a.ndim)
    if not is_split(a, axis):
        return wrap_block(local_fn(a._block(), axis), a.device_mesh, a.placements, a.shape)
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


@implements(np.lexsort)
def lexsort(keys, axis=-1):
    """The last key primary: stable argsorts from the first key to the last, each on the
    keys taken in the order so far (1-D keys: the sample sort and ``take``)."""
    keys = list(keys) if not isinstance(keys, DTensor) else [keys[i] for i in range(len(keys))]
    if not keys or any(np.ndim(k) != 1 for k in keys) or normalize_axis_index(axis, 1) != 0:
        raise TypeError(f"np.lexsort: only 1-D keys are supported on DTensors, got shapes "
                        f"{[np.shape(k) for k in keys]}; call full_tensor() and use numpy")
    order = np.argsort(keys[0], kind="stable")
    for key in keys[1:]:
        order = np.take(order, np.argsort(np.take(key, order), kind="stable"))
    return order


@implements(np.sort_complex)
def sort_complex(a):
    """Sorted by real part, then imaginary part (numpy's order for complex), as complex."""
    b = sort(a)
    if b.dtype.kind == "c":
        return b
    return b.astype(np.complex64 if b.dtype.char in "bhBH" else np.complex128)
