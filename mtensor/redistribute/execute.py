"""Eager executor: a plan bound to this rank, then run on its local block through ``comm``.

Binding does the rank-local arithmetic once per (mesh, layouts, shape, dtype): each step's
communicator, ``array_split`` counts and buffer shapes.  A bound program then only allocates
(from the buffer pool), calls MPI and records.  MPI concatenates contiguous segments, so the
tensor dim a step gathers, scatters or exchanges is moved to the front and made contiguous;
uneven pieces go through the v-variants with array_split counts (no padding).
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from .. import modes
from ..comm import guard
from ..comm.protocol import EvenExchange
from ..cost.model import bus_bytes
from ..device import arrays as device
from ..device import buffers
from ..placement import REDUCE_OPS, local_shape, max_local_shape, shard_bounds, shard_counts
from ..step_kinds import STEP_KINDS
from .layout import front_shape, moved, pack_even, pack_uneven, same
from .plan import Step, plan_redistribute

# A small collective's output buffer is kept by its bound step and used again once its
# DTensor is gone: memory MPI just wrote is still in cache, a fresh allocation's is not (raw
# Allgather of 64 KiB at 2 ranks: 10.4 us into one buffer, 12.0 us into np.empty each call).
# At most one buffer per bound step, of at most KEEP_BYTES, and KEEP_BUDGET in all.
KEEP_BYTES = 64 << 10
KEEP_BUDGET = 64 << 20
_kept = [0]


def _free_count() -> int:
    """What ``sys.getrefcount`` reads, in ``Collective.__call__``, of a spare that nothing but
    its slot holds (the slot, the local name, the argument): measured, not assumed, so it
    follows the interpreter."""
    class Slot:
        __slots__ = ("spare",)
    slot = Slot()
    slot.spare = np.empty(1)
    recv = slot.spare
    return sys.getrefcount(recv)


_FREE = _free_count()


class Collective:
    """One collective step bound to this rank, in three parts: ``prepare`` makes the local
    block a contiguous send buffer, MPI fills a ``recv_shape`` buffer, ``finish`` makes that
    the new local block.  Eager execution runs the three at once; the traced replay runs
    them apart (start early, wait late) or fuses several into one bucket.

    ``group`` is the mesh dim's Communicator and ``run`` its method for ``kind``; ``counts``
    follows ``comm.protocol``; ``index`` is this rank's place on the mesh dim;
    ``bucket_bytes`` is the largest block's send size, the same on every rank, so bucketing
    decisions agree everywhere."""

    __slots__ = ("kind", "mesh", "mesh_dim", "group", "run", "n", "index", "op", "dtype",
                 "counts", "unpooled", "keeps", "spare",
                 "recv_shape", "out_shape", "prepare", "finish", "nbytes", "bucket_bytes",
                 "global_shape")

    def __init__(self):
        self.keeps, self.spare = False, None

    def __call__(self, local: np.ndarray) -> np.ndarray:
        if self.unpooled and type(local) is np.ndarray:     # small host block: numpy's own
            recv = self.spare       # free again once nothing but this slot holds it
            if recv is None or sys.getrefcount(recv) != _FREE:
                recv = np.empty(self.recv_shape, self.dtype)
                if self.keeps:
                    self.keep(recv)
        else:
            recv = device.empty(self.recv_shape, self.dtype, like=local)
        self.run(self.prepare(local), recv, self.counts, self.op)
        if modes.active.counters:
            self.count()
        return self.finish(recv)

    def keep(self, recv) -> None:
        """Keep ``recv`` as this step's spare output buffer, within the processes' budget
        (a step that finds it spent keeps none from then on)."""
        if self.spare is None:
            if _kept[0] + recv.nbytes > KEEP_BUDGET:
                self.keeps = False
                return
            _kept[0] += recv.nbytes
        self.spare = recv

    def count(self, nbytes=None) -> None:
        """Report this collective to the active CommDebugModes."""
        modes.count_collective(self.kind, self.mesh_dim, self.out_shape, self.dtype,
                               self.nbytes if nbytes is None else nbytes,
                               self.mesh.backends[self.mesh_dim])


class _RankPlan:
    """What every step builder needs: this rank's view of the plan."""

    def __init__(self, mesh, shape, dtype):
        self.mesh, self.shape, self.dtype = mesh, shape, dtype

    def local_shape(self, layout):
        return local_shape(self.shape, self.mesh.shape, layout, self.mesh.coordinate)

    def collective(self, step: Step, bytes_layout, recv_shape, counts, prepare, finish):
        """The step's :class:`Collective`; bytes are counted over the ``bytes_layout`` block."""
        c, i = Collective(), step.mesh_dim
        c.kind, c.mesh, c.mesh_dim = step.kind, self.mesh, i
        c.group = self.mesh.communicator(i)
        c.run = getattr(c.group, step.kind)
        c.n, c.index, c.dtype = self.mesh.shape[i], self.mesh.coordinate[i], self.dtype
        c.op = step.src.reduce_op if STEP_KINDS[step.kind].reduces else None
        c.counts, c.recv_shape, c.out_shape = counts, recv_shape, self.local_shape(step.after)
        recv_bytes = math.prod(recv_shape) * self.dtype.itemsize
        c.unpooled = recv_bytes < buffers.MIN_BYTES
        c.keeps = recv_bytes <= KEEP_BYTES
        c.prepare, c.finish, c.global_shape = prepare, finish, self.shape
        if c.op == "avg":
            c.finish = lambda out, n=c.n, then=finish: then(_divide(out, n))
        size = self.dtype.itemsize
        c.nbytes = bus_bytes(step.kind, c.n, math.prod(self.local_shape(bytes_layout)) * size)
        c.bucket_bytes = math.prod(max_local_shape(self.shape, self.mesh.shape, step.before)) * size
        return c


def _divide(out, n):
    np.divide(out, n, out=out, casting="unsafe")
    return out


def _all_reduce(step: Step, b: _RankPlan):
    shape = b.local_shape(step.before)
    return b.collective(step, step.before, shape, None, device.contiguous, same)


def _all_gather(step: Step, b: _RankPlan):
    d = step.src.dim
    full = b.local_shape(step.after)
    rest = math.prod(full[:d] + full[d + 1:])
    counts = tuple(c * rest for c in shard_counts(full[d], b.mesh.shape[step.mesh_dim]))
    return b.collective(step, step.after, front_shape(full, d), counts, *moved(d))


def _reduce_scatter(step: Step, b: _RankPlan):
    e, n = step.dst.dim, b.mesh.shape[step.mesh_dim]
    before, mine = b.local_shape(step.before), b.local_shape(step.after)
    rest = math.prod(mine[:e] + mine[e + 1:])
    counts = tuple(c * rest for c in shard_counts(before[e], n))
    return b.collective(step, step.before, front_shape(mine, e), counts, *moved(e))


def _all_to_all(step: Step, b: _RankPlan):
    """S(d) -> S(e): piece k of dim e goes to rank k; everyone's dim-d pieces come back."""
    d, e = step.src.dim, step.dst.dim
    n = b.mesh.shape[step.mesh_dim]
    before, mine = b.local_shape(step.before), b.local_shape(step.after)
    per_e = math.prod(before[:e] + before[e + 1:])
    per_d = math.prod(mine[:d] + mine[d + 1:])
    send_counts = tuple(c * per_e for c in shard_counts(before[e], n))
    recv_counts = tuple(c * per_d for c in shard_counts(mine[d], n))
    even = before[e] % n == 0
    pack = pack_even(before, d, e, n, b.dtype) if even else pack_uneven(before, d, e, n, send_counts)
    # both dims split evenly: every rank of the group has this block's shape, so one count
    # per peer everywhere (MPI_Alltoall)
    pair = EvenExchange if even and mine[d] % n == 0 else tuple
    return b.collective(step, step.before, front_shape(mine, d),
                        pair((send_counts, recv_counts)), pack, moved(d)[1])


def _local_slice(step: Step, b: _RankPlan):
    e, i = step.dst.dim, step.mesh_dim
    before = b.local_shape(step.before)
    index = (slice(None),) * e + (slice(*shard_bounds(before[e], b.mesh.shape[i], b.mesh.coordinate[i])),)

    def run(local):
        block = local[index]
        out = device.empty(block.shape, local.dtype, like=local)
        np.copyto(out, block)
        return out
    return run


def _local_partial(step: Step, b: _RankPlan):
    """R -> P: one rank keeps the value (every rank, for an idempotent op), the others hold
    the op's identity.  The kept value is a view, a new array object as the others' is, so a
    compiled step records the same graph on every rank (its passes decide alike)."""
    op = REDUCE_OPS[step.dst.reduce_op]
    if op.idempotent or b.mesh.coordinate[step.mesh_dim] == 0:
        return lambda local: local.view()
    identity = op.identity(b.dtype)
    return lambda local: np.full_like(local, identity)


_BUILDERS = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
    "local_slice": _local_slice,
    "local_partial": _local_partial,
}


class Program:
    """A plan bound to this rank: call it on the local block to run every step."""

    __slots__ = ("plan", "_runs", "_bound", "_steps", "reduces")

    def __init__(self, plan, runs, bound: _RankPlan):
        self.plan, self._runs, self._bound = plan, tuple(runs), bound
        self._steps = tuple((run, step, STEP_KINDS[step.kind].collective)
                            for run, step in zip(self._runs, plan.steps))
        # a lone all-reduce (P -> R): it may run in place (``reduce_in_place``)
        self.reduces = len(plan.steps) == 1 and plan.steps[0].kind == "all_reduce"

    def __call__(self, local: np.ndarray) -> np.ndarray:
        if modes.active.tracer is not None:
            return self._traced(local)
        if not guard.state.active:
            for run in self._runs:
                local = run(local)
            return local
        b = self._bound
        for run, step, collective in self._steps:     # each collective announced (guard)
            if collective:
                guard.before(step.kind, step.mesh_dim, b.shape, b.dtype, b.mesh.comm)
                try:
                    local = run(local)
                finally:
                    guard.after()
            else:
                local = run(local)
        return local

    def reduce_in_place(self, local) -> None:
        """Run this lone all-reduce with ``local`` as both MPI buffers (``MPI_IN_PLACE``, as
        a hand-written step reduces its partial sums): for a C-contiguous block that
        nothing else holds, which the caller makes sure of.  Every rank runs the same
        collective; whether a rank passes ``MPI_IN_PLACE`` is its own affair in MPICH and
        Open MPI (each copies its send buffer into the receive buffer first otherwise)."""
        c, step, _ = self._steps[0]
        self._collective(lambda block: c.run(block, block, None, c.op), step, local)
        if modes.active.counters:
            c.count()
        c.finish(local)        # an average divides in place

    def _traced(self, local: np.ndarray) -> np.ndarray:
        """The same steps, every step reported to the tracer while ``mt.compile`` records."""
        tracer = modes.active.tracer
        for run, step, collective in self._steps:
            if not collective:
                local = tracer.call(step.kind, run, (local,))
            else:
                start = time.perf_counter()
                out = self._collective(run, step, local)
                tracer.collective(run, local, out, time.perf_counter() - start)
                local = out
        return local

    def _collective(self, run, step, local):
        if not guard.state.active:
            return run(local)
        b = self._bound
        guard.before(step.kind, step.mesh_dim, b.shape, b.dtype, b.mesh.comm)
        try:
            return run(local)
        finally:
            guard.after()


def bind_program(mesh, src, dst, shape, dtype, model) -> Program:
    """The program that turns this rank's ``src`` block into its ``dst`` block (the caller
    caches it per spec)."""
    plan = plan_redistribute(src, dst, shape, mesh.shape, dtype.itemsize, model)
    bound = _RankPlan(mesh, shape, dtype)
    return Program(plan, [_BUILDERS[s.kind](s, bound) for s in plan.steps], bound)
