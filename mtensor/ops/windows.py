"""Windows: the rows of a split dim an op's block needs, and the halo exchange that brings
them (pure planning; ``redistribute.halo`` runs it, ``comm``'s ``halo`` kind moves it).

A stencil reads shifted slices of one split array (``U[2:] + U[:-2]``); each rank's block of
such a slice is its own block shifted by a row or two, so it needs a few rows of its
neighbours' blocks, not the array.  A :class:`Window` says which rows, from shapes alone: on
``mesh_dim`` (the one mesh dim that splits ``dim``, ``p`` ranks), rank ``k`` needs the global
rows ``[lo + offset - widen, hi + offset + widen + grow)`` of the operand, where ``[lo, hi)``
is block ``k`` of a dim of ``base`` rows in the array_split layout, clipped to ``[0, clip)``
(``periodic``: taken modulo the operand's length instead, as ``np.roll`` does; ``clamp``:
rows past an end read that end's row, as ``np.pad``'s 'edge' does).  ``np.diff`` reads ``n``
rows past its output block's end: ``grow``.  :func:`halo_plan` turns that into
each rank's part: rows to send to the previous and the next rank, rows of its own block,
rows to receive, or None when some rank would need rows beyond its neighbours (a window
wider than a block: the op then gathers instead).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Tuple

from ..placement import Shard, local_bounds

Rows = Tuple[int, int]


@dataclass(frozen=True)
class Window:
    """Operand ``operand`` read, along ``dim`` split on ``mesh_dim``, through a window of
    rows per block (see the module docstring)."""

    operand: int
    mesh_dim: int
    dim: int
    base: int
    offset: int
    clip: int = -1          # -1: the operand's length
    periodic: bool = False
    widen: int = 0          # rows more at each end (``mt.halo``'s width)
    grow: int = 0           # rows more after the end (``np.diff``'s order)
    clamp: bool = False     # rows past the ends read the end rows (``np.pad``'s 'edge')


@dataclass(frozen=True)
class RankHalo:
    """One rank's part of a halo exchange, as local row ranges ``(start, stop)`` of its
    block: what it sends to the previous and next rank, the rows of its own block the
    window keeps, and how many rows it receives from each."""

    to_prev: Rows
    to_next: Rows
    own: Rows
    from_prev: int
    from_next: int

    @property
    def moves(self) -> bool:
        return any(b > a for a, b in (self.to_prev, self.to_next)) or bool(
            self.from_prev or self.from_next)


def blocks(length: int, p: int) -> Tuple[Rows, ...]:
    """The array_split blocks of ``length`` rows over ``p`` ranks."""
    return tuple(local_bounds((length,), (p,), (Shard(0),), (k,))[0] for k in range(p))


def window_rows(window: Window, block: Rows, length: int) -> Rows:
    """The rows of an operand of ``length`` rows that ``window`` reads for the block
    ``[lo, hi)`` of its ``base`` rows (before wrapping round, when periodic)."""
    lo, hi = block
    if lo == hi:
        return 0, 0
    lo, hi = lo + window.offset - window.widen, hi + window.offset + window.widen + window.grow
    if window.clamp:
        if length == 0:
            return 0, 0
        return min(max(lo, 0), length - 1), max(min(hi, length), 1)
    if not window.periodic:
        clip = length if window.clip < 0 else window.clip
        lo, hi = max(lo, 0), min(hi, clip, length)
    return (lo, hi) if hi > lo else (0, 0)


def _need(window: Window, length: int, p: int, k: int) -> Rows:
    return window_rows(window, blocks(window.base, p)[k], length)


def _overlap(need: Rows, block: Rows, shift: int) -> Rows:
    """The rows of ``need`` that ``block`` (moved by ``shift`` rows: a periodic copy) holds,
    as rows of the block."""
    lo, hi = max(need[0], block[0] + shift), min(need[1], block[1] + shift)
    return (lo - block[0] - shift, hi - block[0] - shift) if hi > lo else (0, 0)


def _size(rows: Rows) -> int:
    return rows[1] - rows[0]


def _sources(k: int, p: int, length: int, periodic: bool):
    """(previous rank, its shift, next rank, its shift): in a periodic window rank 0's
    previous is the last rank, its rows one length earlier; otherwise there is none."""
    prev = (k - 1, 0) if k > 0 else ((p - 1, -length) if periodic else (None, 0))
    nxt = (k + 1, 0) if k < p - 1 else ((0, length) if periodic else (None, 0))
    return prev + nxt


@lru_cache(maxsize=4096)
def halo_plan(window: Window, length: int, p: int) -> Optional[Tuple[RankHalo, ...]]:
    """Every rank's part of the exchange (the same on every rank), or None when a window
    reaches past a neighbour's block."""
    owned = blocks(length, p)
    needs = [_need(window, length, p, k) for k in range(p)]
    takes = []                       # per rank: rows (of the source block) from prev, own, next
    for k, need in enumerate(needs):
        prev, prev_shift, nxt, next_shift = _sources(k, p, length, window.periodic)
        own = _overlap(need, owned[k], 0)
        before = _overlap(need, owned[prev], prev_shift) if prev is not None else (0, 0)
        after = _overlap(need, owned[nxt], next_shift) if nxt is not None else (0, 0)
        if _size(before) + _size(own) + _size(after) != _size(need):
            return None
        if _size(before) and _size(own) == 0 and _size(after):
            return None              # an empty block between: rows from beyond a neighbour
        takes.append((before, own, after))
    out = []
    for k in range(p):
        prev = (k - 1) % p
        nxt = (k + 1) % p
        to_prev = takes[prev][2] if window.periodic or k > 0 else (0, 0)
        to_next = takes[nxt][0] if window.periodic or k < p - 1 else (0, 0)
        before, own, after = takes[k]
        out.append(RankHalo(to_prev, to_next, own, _size(before), _size(after)))
    return tuple(out)


def is_split_once(placements, mesh_shape, dim: int) -> Optional[int]:
    """The one mesh dim (of more than one rank) that splits ``dim``, else None (whole, or
    split by two mesh dims: nested blocks, which a window does not plan)."""
    dims = [i for i, (q, n) in enumerate(zip(placements, mesh_shape))
            if q == Shard(dim) and n > 1]
    return dims[0] if len(dims) == 1 else None


def reach(window: Window, length: int, p: int) -> int:
    """How many rows past its own block (of ``length`` rows over ``p`` ranks) the farthest
    window of any rank reaches, either side."""
    own = blocks(length, p)
    out = 0
    for k in range(p):
        lo, hi = _need(window, length, p, k)
        if hi > lo:
            out = max(out, own[k][0] - lo, hi - own[k][1])
    return out


@lru_cache(maxsize=4096)
def widened(window: Window, width: int, length: int, p: int) -> Optional[Tuple[Rows, ...]]:
    """Every rank's window as rows of its own block widened by ``width`` rows each side
    (clipped to the array: what ``mt.halo(x, width)`` gives), so that every read of one
    array at one width shares one exchange; None where the widened exchange reaches past a
    neighbour or some window falls outside it (then each window has its own exchange)."""
    wide = Window(window.operand, window.mesh_dim, window.dim, length, 0, widen=width)
    if window.periodic or halo_plan(wide, length, p) is None:
        return None
    out = []
    for k in range(p):
        lo, hi = _need(window, length, p, k)
        wlo, whi = _need(wide, length, p, k)
        if hi <= lo:
            out.append((0, 0))
        elif lo < wlo or hi > whi:
            return None
        else:
            out.append((lo - wlo, hi - wlo))
    return tuple(out)
