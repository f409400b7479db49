"""Placements and the pure arithmetic of layouts.

A placement says how one mesh dim holds a tensor: ``Shard(d)`` splits tensor dim ``d`` across
the ranks of that mesh dim, ``Replicate()`` gives every rank the whole thing, ``Partial(op)``
gives every rank a term of a pending reduction.  Uneven splits follow ``numpy.array_split``:
the first ``size % n`` ranks hold one more element.  When several mesh dims shard the same
tensor dim, mesh dim 0 splits first and each piece is split again along the next mesh dim.

Nothing here talks to MPI: every function is a function of shapes and coordinates only, so
every rank computes the same answers.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence, Tuple, Union

import numpy as np


@dataclass(frozen=True)
class ReduceOp:
    """A reduction as data (after CuPy's ``_modes.py``): how to combine partial terms.

    ``idempotent``: combining a value with itself gives it back (max, min, avg), so a
    replicated value is already a valid partial term on every rank.  ``linear``: the
    reduction commutes with scaling and with adding replicated terms (sum, avg).
    """

    name: str
    ufunc: np.ufunc
    linear: bool
    idempotent: bool
    mpi: str            # the MPI op of the reduction (a name: planning loads no MPI)

    def identity(self, dtype) -> object:
        """The element that leaves a reduction unchanged, for ``dtype``: for a float sum
        ``-0.0`` (``-0.0 + x`` is ``x`` bit for bit, ``x = -0.0`` too; ``+0.0`` is not)."""
        dtype = np.dtype(dtype)
        if self.name in ("sum", "avg"):
            return -dtype.type(0) if dtype.kind in "fc" else dtype.type(0)
        if dtype.kind == "b":
            return self.name == "min"
        if dtype.kind in ("i", "u"):
            info = np.iinfo(dtype)
            return info.min if self.name == "max" else info.max
        return -np.inf if self.name == "max" else np.inf


REDUCE_OPS = {
    "sum": ReduceOp("sum", np.add, linear=True, idempotent=False, mpi="SUM"),
    "avg": ReduceOp("avg", np.add, linear=True, idempotent=True, mpi="SUM"),
    "max": ReduceOp("max", np.maximum, linear=False, idempotent=True, mpi="MAX"),
    "min": ReduceOp("min", np.minimum, linear=False, idempotent=True, mpi="MIN"),
}
_OP_CODES = {name: k for k, name in enumerate(REDUCE_OPS)}   # hashes alike on every rank


# Placements compare and hash by type and field in one step (no NotImplemented round trip
# between types): every redistribute and dispatch compares layouts.

@dataclass(frozen=True, eq=False)
class Shard:
    """Split tensor dim ``dim`` across the ranks of one mesh dim."""

    dim: int

    def __eq__(self, other) -> bool:
        return type(other) is Shard and other.dim == self.dim

    def __hash__(self) -> int:
        return hash((0, self.dim))      # no str: its hash differs from process to process

    def __repr__(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True, eq=False)
class Replicate:
    """Every rank of the mesh dim holds the whole tensor."""

    def __eq__(self, other) -> bool:
        return type(other) is Replicate

    def __hash__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return "R"


@dataclass(frozen=True, eq=False)
class Partial:
    """Every rank of the mesh dim holds a term; the tensor is their reduction."""

    reduce_op: str = "sum"

    def __eq__(self, other) -> bool:
        return type(other) is Partial and other.reduce_op == self.reduce_op

    def __hash__(self) -> int:
        return hash((2, _OP_CODES[self.reduce_op]))

    def __post_init__(self):
        if self.reduce_op not in REDUCE_OPS:
            raise ValueError(
                f"Partial: unknown reduce_op {self.reduce_op!r}; "
                f"use one of {', '.join(repr(k) for k in REDUCE_OPS)}"
            )

    @property
    def op(self) -> ReduceOp:
        return REDUCE_OPS[self.reduce_op]

    def __repr__(self) -> str:
        return f"P({self.reduce_op})"


Placement = Union[Shard, Replicate, Partial]
Shape = Tuple[int, ...]


def reduced(placements) -> Tuple[Placement, ...]:
    """The placements with every Partial made Replicate: the layout of the reduced value."""
    return tuple(Replicate() if isinstance(p, Partial) else p for p in placements)


def shard_bounds(size: int, n: int, index: int) -> Tuple[int, int]:
    """``(start, stop)`` of piece ``index`` when ``size`` items split into ``n`` (array_split)."""
    base, extra = divmod(size, n)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


def shard_counts(size: int, n: int) -> Tuple[int, ...]:
    """Lengths of the ``n`` pieces of ``size`` items, as ``numpy.array_split`` makes them."""
    base, extra = divmod(size, n)
    return tuple(base + (1 if i < extra else 0) for i in range(n))


def local_bounds(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coord: Sequence[int],
) -> Tuple[Tuple[int, int], ...]:
    """Per tensor dim, the ``(start, stop)`` global bounds of the block held at ``coord``.

    Mesh dims are applied in order, so a tensor dim sharded by mesh dims 0 and 1 is split by
    mesh dim 0 first and each piece again by mesh dim 1.
    """
    bounds = [(0, int(s)) for s in global_shape]
    for mesh_dim, placement in enumerate(placements):
        if isinstance(placement, Shard):
            start, stop = bounds[placement.dim]
            lo, hi = shard_bounds(stop - start, mesh_shape[mesh_dim], coord[mesh_dim])
            bounds[placement.dim] = (start + lo, start + hi)
    return tuple(bounds)


def local_shape(global_shape, mesh_shape, placements, coord) -> Shape:
    """Shape of the block held at mesh coordinate ``coord``."""
    return tuple(hi - lo for lo, hi in local_bounds(global_shape, mesh_shape, placements, coord))


def local_offset(global_shape, mesh_shape, placements, coord) -> Shape:
    """Global index of the first element of the block held at ``coord``."""
    return tuple(lo for lo, _ in local_bounds(global_shape, mesh_shape, placements, coord))


def local_slices(global_shape, mesh_shape, placements, coord) -> Tuple[slice, ...]:
    """Slices that cut the block held at ``coord`` out of the full array."""
    return tuple(slice(lo, hi) for lo, hi in local_bounds(global_shape, mesh_shape, placements, coord))


@lru_cache(maxsize=8192)
def max_local_shape(global_shape, mesh_shape, placements) -> Shape:
    """The largest block: coordinate 0 everywhere holds the biggest piece under array_split.

    Planning prices with this shape because it is the same on every rank.
    """
    return local_shape(global_shape, mesh_shape, placements, (0,) * len(mesh_shape))


def mesh_coords(mesh_shape) -> Tuple[Shape, ...]:
    """Every mesh coordinate in rank order (row-major, as the mesh lays ranks out)."""
    return tuple(np.ndindex(*mesh_shape))
