"""numpy's functions with data-dependent lengths on DTensors: ``nonzero``, ``flatnonzero``,
``argwhere`` (and one-argument ``where``), and the compaction :mod:`numpy_select`'s
``extract`` and ``compress`` use.  Each rank finds its block's hits in place, then::

    counts  = sum_ints(hits per prefix)      one small all-reduce: every block's hit count per
                                             index before the last split dim, so every rank
                                             knows each hit's place in C order
    moved   = all_to_all(hits -> owner)      each hit to the rank whose array_split block of
                                             the results holds its place (no full gather);
                                             over the whole mesh's communicator, between the
                                             ranks that share their unsplit coordinates
    ordered = stable sort by flat index      blocks' runs interleave when a later dim is split

The counts table has one row per index before the last split dim (one row when only dim 0
is split), one column per block along that dim.

The results are 1-D (``argwhere``: rows) and ``Shard(0)`` over the mesh dims that split the
input, in array_split blocks; an input replicated everywhere gives replicated results with
no communication.  These read values: refused while ``mt.compile`` traces, and on inputs a
gradient follows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import modes
from ..device import arrays as device
from ..dtensor import DTensor, relayout
from ..placement import (
    Replicate,
    Shard,
    local_bounds,
    local_offset,
    local_slices,
    mesh_coords,
    reduced,
)
from ..spec import DTensorSpec, check_same_mesh
from . import exchange
from .util import implements


def _not_tracked(name: str, *values) -> None:
    if any(modes.is_tracked(v) for v in values):
        raise TypeError(f"value_and_grad: {name} has no gradient (its result's length depends "
                        f"on the values); call it outside the differentiated function, or "
                        f"use np.where(cond, x, 0) inside it")


def _results(layout):
    """The results' placements: split over the mesh dims that split the input."""
    return tuple(Shard(0) if isinstance(p, Shard) else Replicate() for p in layout)


@dataclass(frozen=True)
class _Blocks:
    """How the distinct blocks of a layout line up in C order (from the spec alone).

    Hits are grouped by their index before ``last``, the last split dim; within a group,
    blocks follow each other along ``last`` in ``lane`` order.  ``writes``: this rank
    reports its block's counts (one rank per distinct block).  ``group``: the ranks this
    rank exchanges with (its coordinates on the unsplit mesh dims), each as (rank, lane,
    the index box before ``last`` its block covers, mesh coordinate); ``me``: this rank's
    place in it."""

    out: tuple
    last: int
    lanes: int
    lane: int
    writes: bool
    group: tuple
    me: int


@lru_cache(maxsize=1024)
def _blocks(mesh, layout, shape) -> _Blocks:
    split = {m: p.dim for m, p in enumerate(layout) if isinstance(p, Shard)}
    last = max(split.values())
    along = [m for m in sorted(split) if split[m] == last]

    def lane(coord):
        return int(np.ravel_multi_index([coord[m] for m in along],
                                        [mesh.shape[m] for m in along]))

    mine, unsplit = mesh.coordinate, [m for m in range(mesh.ndim) if m not in split]
    group = tuple((rank, lane(coord), local_slices(shape, mesh.shape, layout, coord)[:last],
                   coord) for rank, coord in enumerate(mesh_coords(mesh.shape))
                  if all(coord[m] == mine[m] for m in unsplit))
    return _Blocks(_results(layout), last, math.prod(mesh.shape[m] for m in along),
                   lane(mine), all(mine[m] == 0 for m in unsplit), group,
                   [coord for *_, coord in group].index(mine))


def hits(name: str, cond, values=None):
    """(flat C-order indices of ``cond``'s truthy elements, ``values`` there or None) as
    1-D DTensors of one layout; ``cond`` is a DTensor, or (with DTensor ``values``) an array
    of their shape.  The work happens in ``values``' layout (else ``cond``'s), Partial
    mesh dims reduced first."""
    modes.refuse_while_tracing(name)
    _not_tracked(name, cond, values)
    ref = cond if values is None else values
    mesh, shape = ref.device_mesh, ref.shape
    if type(cond) is DTensor:
        check_same_mesh(name, mesh, cond.device_mesh)
    layout = reduced(ref.placements)
    if type(cond) is DTensor:
        mask = relayout(cond, layout)._local
    else:
        mask = np.asarray(cond)[local_slices(shape, mesh.shape, layout, mesh.coordinate)]
    vals = None if values is None else relayout(values, layout)._local
    found = np.nonzero(mask.reshape(-1) if not shape else mask)
    picked = None if vals is None else vals.reshape(-1)[found] if not shape else vals[found]
    if not any(isinstance(p, Shard) for p in layout):
        flat = np.ravel_multi_index(found, shape) if shape else found[0]
        return _wrap(mesh, layout, flat, picked)
    if math.prod(shape) == 0:
        return _wrap(mesh, _results(layout), found[0], picked, 0)
    blocks = _blocks(mesh, layout, shape)
    spot = tuple(f + o for f, o in zip(found, local_offset(shape, mesh.shape, layout,
                                                           mesh.coordinate)))
    flat = np.ravel_multi_index(spot, shape)
    prefix = (np.ravel_multi_index(spot[:blocks.last], shape[:blocks.last]) if blocks.last
              else np.zeros_like(flat))
    counts, firsts = _counted(name, mesh, blocks, prefix, shape)
    total = int(counts.sum())
    place = device.xp(flat).asarray(firsts[:, blocks.lane])[prefix]
    place += np.arange(len(prefix), like=flat) - np.searchsorted(prefix, prefix)
    send, recv = _routes(mesh, blocks, shape, device.to_host(place), counts, firsts, total)
    moved = [exchange.all_to_all(mesh, name, a, send, recv, total) for a in (flat, picked)
             if a is not None]
    if blocks.last:     # a split after the first dim: the blocks' runs interleave
        order = np.argsort(moved[0], kind="stable")
        moved = [m[order] for m in moved]
    return _wrap(mesh, blocks.out, moved[0], None if values is None else moved[1], total)


def _counted(name: str, mesh, blocks: _Blocks, prefix, shape):
    """(hits per index before the last split dim and lane, the place in C order of each
    such run's first hit): one small all-reduce."""
    counts = np.zeros((math.prod(shape[:blocks.last]), blocks.lanes), np.int64)
    if blocks.writes:
        counts[:, blocks.lane] = np.bincount(device.to_host(prefix), minlength=len(counts))
    counts = exchange.sum_ints(mesh, name, counts)
    per_prefix = counts.sum(1)
    firsts = (np.cumsum(per_prefix) - per_prefix)[:, None] + np.cumsum(counts, 1) - counts
    return counts, firsts


def _routes(mesh, blocks: _Blocks, shape, place, counts, firsts, total: int):
    """(elements to send to, and to receive from, each mesh rank): each hit goes to the rank
    whose array_split block of the ``total`` results holds its ``place``."""
    bounds = [local_bounds((total,), mesh.shape, blocks.out, coord)[0]
              for *_, coord in blocks.group]
    ranks = [rank for rank, *_ in blocks.group]
    lo, hi = bounds[blocks.me]
    mine = np.clip(np.minimum(hi, firsts + counts) - np.maximum(lo, firsts), 0, None)
    mine = mine.reshape(shape[:blocks.last] + (blocks.lanes,))
    send, recv = np.zeros(mesh.size(), np.int64), np.zeros(mesh.size(), np.int64)
    owner = np.searchsorted([start for start, _ in bounds], place, "right") - 1
    send[ranks] = np.bincount(owner, minlength=len(ranks))
    recv[ranks] = [mine[box + (lane,)].sum() for _, lane, box, _ in blocks.group]
    return send, recv


def _wrap(mesh, placements, flat, picked, total=None):
    """The 1-D results as DTensors (``total``: the global length; None: the blocks are
    whole, every rank holding the same)."""
    n = (len(flat),) if total is None else (total,)
    flat = DTensor(flat.astype(np.intp, copy=False),
                   DTensorSpec(mesh, placements, n, np.dtype(np.intp)))
    if picked is None:
        return flat, None
    return flat, DTensor(picked, DTensorSpec(mesh, placements, n, picked.dtype))


def _unravel(flat: DTensor, shape):
    """Per dim index DTensors laid out like ``flat`` (a local computation)."""
    spec = flat.spec
    return tuple(DTensor(i, spec) for i in np.unravel_index(flat._local, shape))


@implements(np.nonzero)
def nonzero(a):
    if a.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "np.atleast_1d(scalar).nonzero() instead.")
    flat, _ = hits("np.nonzero", a)
    return _unravel(flat, a.shape)


@implements(np.flatnonzero)
def flatnonzero(a):
    return hits("np.flatnonzero", a)[0]


@implements(np.argwhere)
def argwhere(a):
    flat, _ = hits("np.argwhere", a)
    spec = flat.spec
    rows = np.stack(np.unravel_index(flat._local, a.shape), axis=1) if a.ndim else \
        np.zeros((len(flat._local), 0), np.intp, like=flat._local)
    return DTensor(rows, DTensorSpec(spec.mesh, spec.placements, spec.shape + (a.ndim,),
                                     spec.dtype))
