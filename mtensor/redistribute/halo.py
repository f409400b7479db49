"""The halo executor: a :class:`~mtensor.ops.windows.Window` bound to this rank, run on its
local block through ``comm``'s ``halo`` kind.

Binding does the arithmetic once per (mesh, layout, shape, dtype, window): the plan's rows
for this rank and its element counts.  Running it makes the send buffer (the rows for the
previous rank, then those for the next, the split dim moved to the front), exchanges it in
one call, and joins the rows received before and after the block's own rows: the window.
While ``mt.compile`` records, the exchange is a collective of the graph (the replay starts
it early and waits late) and the join a compute node after it.
"""
from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from .. import modes
from ..comm import guard
from ..cost.model import bus_bytes
from ..device import arrays as device
from ..device import buffers
from ..ops.windows import Window, halo_plan, reach, widened
from ..placement import local_shape
from .execute import Collective
from .layout import from_front, to_front


def _rows(a, dim: int, rows):
    return a[(slice(None),) * dim + (slice(*rows),)]


class HaloProgram:
    """Turns this rank's block into its window (call it on the block)."""

    __slots__ = ("collective", "dim", "own", "split", "shape", "dtype", "mesh", "window_shape")

    def __init__(self, mesh, shape, dtype, block, window: Window):
        """``block``: this rank's block shape as the exchange finds it (an earlier window
        on another mesh dim may have widened it)."""
        plan = halo_plan(window, shape[window.dim], mesh.shape[window.mesh_dim])
        if plan is None:
            raise ValueError(f"halo: window {window} reaches past a neighbour's block of "
                             f"shape {shape} on mesh {mesh.shape}")
        i, d = window.mesh_dim, window.dim
        me = plan[mesh.coordinate[i]]
        self.dim, self.own, self.split = d, me.own, me.from_prev
        self.shape, self.dtype, self.mesh = shape, dtype, mesh
        self.collective = None
        rows = me.from_prev + (me.own[1] - me.own[0]) + me.from_next
        self.window_shape = tuple(block[:d]) + (rows,) + tuple(block[d + 1:])
        if any(r.moves for r in plan):
            self.collective = _exchange(mesh, i, d, tuple(block), dtype, me, shape)

    def __call__(self, local):
        edges = None
        if self.collective is not None:
            edges = self._exchange(local)
        tracer = modes.active.tracer
        if tracer is None:
            return self._join(local, edges)
        args = (local,) if edges is None else (local, edges)
        return tracer.call("halo window", self._join, args)

    def _exchange(self, local):
        c = self.collective
        tracer = modes.active.tracer
        if not guard.state.active and tracer is None:
            return c(local)
        start = time.perf_counter()
        if guard.state.active:
            guard.before("halo", c.mesh_dim, self.shape, self.dtype, self.mesh.comm)
        try:
            out = c(local)
        finally:
            guard.after()
        if tracer is not None:
            tracer.collective(c, local, out, time.perf_counter() - start)
        return out

    def _join(self, local, edges=None):
        """The window: a view of the block where no rank receives rows (an op whose result
        could be its window copies it: ``roll``), else the rows joined into a pooled
        buffer (a fresh large array would fault in every page)."""
        own = _rows(local, self.dim, self.own)
        if edges is None:
            return own
        parts = [own]
        if self.split:
            parts.insert(0, _rows(edges, self.dim, (0, self.split)))
        if edges.shape[self.dim] > self.split:
            parts.append(_rows(edges, self.dim, (self.split, edges.shape[self.dim])))
        if type(local) is not np.ndarray:
            return np.concatenate(parts, axis=self.dim)
        shape = list(own.shape)
        shape[self.dim] = sum(p.shape[self.dim] for p in parts)
        return np.concatenate(parts, axis=self.dim, out=buffers.empty(shape, local.dtype))


class Windows:
    """An operand's windows on several mesh dims, one exchange after another in mesh dim
    order (the second sends rows the first brought: the corners of a 9-point stencil)."""

    __slots__ = ("halos",)

    def __init__(self, mesh, shape, dtype, placements, windows):
        block = local_shape(shape, mesh.shape, placements, mesh.coordinate)
        self.halos = []
        for w in sorted(windows, key=lambda w: w.mesh_dim):
            halo = HaloProgram(mesh, shape, dtype, block, w)
            self.halos.append(halo)
            block = halo.window_shape

    def __call__(self, local):
        for halo in self.halos:
            local = halo(local)
        return local


class SharedWindows:
    """An operand's windows served as views of its block widened by ``widths`` rows (at
    least their reach), so that every read of one array at one width shares one exchange
    and one copy: a stencil's shifted slices.  ``widen`` makes the widened block, which
    the caller keeps while the array is unchanged (``geom`` and ``widths`` name it);
    ``take`` cuts one read's window out of it."""

    __slots__ = ("geom", "widths", "widen", "index")

    def __init__(self, mesh, shape, dtype, placements, windows, widths, takes):
        wide = tuple(Window(w.operand, w.mesh_dim, w.dim, shape[w.dim], 0, widen=r)
                     for w, r in zip(windows, widths))
        self.geom = (tuple(placements), tuple((w.mesh_dim, w.dim) for w in windows))
        self.widths = tuple(widths)
        self.widen = Windows(mesh, shape, dtype, placements, wide)
        index = [slice(None)] * len(shape)
        for w, rows in zip(windows, takes):
            index[w.dim] = slice(*rows[mesh.coordinate[w.mesh_dim]])
        self.index = tuple(index)

    def take(self, wide):
        tracer = modes.active.tracer
        if tracer is None:
            return wide[self.index]
        return tracer.call("halo window", lambda a: a[self.index], (wide,))  # a view


_bound: dict = {}


def _cached(key, make):
    program = _bound.get(key, _bound)
    if program is _bound:
        if len(_bound) > 4096:
            _bound.clear()
        program = _bound[key] = make()
    return program


def bind_windows(mesh, shape, dtype, placements, windows) -> Windows:
    """The cached :class:`Windows` of a layout (a stencil reads the same few each step)."""
    return _cached((mesh, tuple(shape), dtype, tuple(placements), tuple(windows)),
                   lambda: Windows(mesh, shape, dtype, placements, windows))


def bind_shared(mesh, shape, dtype, placements, windows, widths=None
                ) -> Optional[SharedWindows]:
    """The cached :class:`SharedWindows` of a layout, its block widened by ``widths`` rows
    (default: the windows' reach), or None where the windows move no rows (each is a view
    of the block: cheaper still) or cannot be cut from such a widened block."""
    def make():
        sizes = [(shape[w.dim], mesh.shape[w.mesh_dim]) for w in windows]
        if not any(r.moves for w, (n, p) in zip(windows, sizes) for r in halo_plan(w, n, p)):
            return None
        wide = widths or [reach(w, n, p) for w, (n, p) in zip(windows, sizes)]
        takes = [widened(w, r, n, p) for w, r, (n, p) in zip(windows, wide, sizes)]
        if any(t is None for t in takes):
            return None
        return SharedWindows(mesh, shape, dtype, placements, windows, wide, takes)
    return _cached(("shared", mesh, tuple(shape), dtype, tuple(placements), tuple(windows),
                    widths), make)


def _exchange(mesh, i: int, d: int, block, dtype, me, shape) -> Collective:
    """The ``halo`` collective of this rank: block rows out, the neighbours' rows in."""
    per_row = math.prod(block[:d] + block[d + 1:])
    sent = (me.to_prev[1] - me.to_prev[0], me.to_next[1] - me.to_next[0])
    received = me.from_prev + me.from_next
    recv_shape = (received,) + tuple(block[:d]) + tuple(block[d + 1:])
    c = Collective()
    c.kind, c.mesh, c.mesh_dim = "halo", mesh, i
    c.group = mesh.communicator(i)
    c.run = c.group.halo
    c.n, c.index, c.dtype, c.op = mesh.shape[i], mesh.coordinate[i], dtype, None
    c.counts = ((sent[0] * per_row, sent[1] * per_row),
                (me.from_prev * per_row, me.from_next * per_row))
    c.recv_shape, c.global_shape = recv_shape, shape
    c.out_shape = recv_shape[1:d + 1] + (received,) + recv_shape[d + 1:]
    c.unpooled = math.prod(recv_shape) * dtype.itemsize < buffers.MIN_BYTES
    c.nbytes = bus_bytes("halo", c.n, (sent[0] + sent[1]) * per_row * dtype.itemsize)
    c.bucket_bytes = c.nbytes

    def prepare(local):
        moved = to_front(local, d)
        if sent[0] and sent[1]:
            return np.concatenate([moved[slice(*me.to_prev)], moved[slice(*me.to_next)]])
        rows = me.to_prev if sent[0] else me.to_next
        return device.contiguous(moved[slice(*rows)])

    c.prepare = prepare
    c.finish = lambda recv: from_front(recv, d)
    return c
