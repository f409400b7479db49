"""Eager executor: a plan bound to this rank, then run on its local block through ``comm``.

Binding does the rank-local arithmetic once per (mesh, layouts, shape, dtype): each step's
communicator, ``array_split`` counts and buffer shapes.  A bound program then only allocates
(from the buffer pool), calls MPI and records.  MPI concatenates contiguous segments, so the
tensor dim a step gathers, scatters or exchanges is moved to the front and made contiguous;
uneven pieces go through the v-variants with array_split counts (no padding).
"""
from __future__ import annotations

import math
import numpy as np

from .. import buffers, comm
from ..comm import guard
from ..debug.comm_mode import record
from ..placement import REDUCE_OPS, local_shape, shard_bounds, shard_counts
from .cost import COLLECTIVES, bus_bytes
from .plan import Step, plan_redistribute


def _front_shape(shape, dim):
    return (shape[dim],) + shape[:dim] + shape[dim + 1:]


def _front_axes(ndim, dim):
    """Transpose axes that move ``dim`` to the front (np.moveaxis, minus its overhead)."""
    return (dim,) + tuple(a for a in range(ndim) if a != dim)


def _to_front(a: np.ndarray, dim: int) -> np.ndarray:
    """``a`` with ``dim`` moved to axis 0, C-contiguous (no copy when it already is)."""
    if dim == 0:
        return np.ascontiguousarray(a)
    out = buffers.empty(_front_shape(a.shape, dim), a.dtype)
    np.copyto(out, a.transpose(_front_axes(a.ndim, dim)))
    return out


def _back_axes(ndim, dim):
    """Transpose axes that undo :func:`_front_axes`: axis 0 goes back to ``dim``."""
    return tuple(range(1, dim + 1)) + (0,) + tuple(range(dim + 1, ndim))


def _from_front(a: np.ndarray, dim: int) -> np.ndarray:
    """Inverse of :func:`_to_front`."""
    if dim == 0:
        return a
    moved = a.transpose(_back_axes(a.ndim, dim))
    out = buffers.empty(moved.shape, a.dtype)
    np.copyto(out, moved)
    return out


class _Bound:
    """What every step builder needs: this rank's view of the plan."""

    def __init__(self, mesh, shape, dtype):
        self.mesh, self.shape, self.dtype = mesh, shape, dtype

    def local_shape(self, layout):
        return local_shape(self.shape, self.mesh.shape, layout, self.mesh.coordinate)

    def recorder(self, step: Step, full_bytes_shape):
        n = self.mesh.shape[step.mesh_dim]
        nbytes = bus_bytes(step.kind, n, math.prod(full_bytes_shape) * self.dtype.itemsize)
        out_shape, dtype = self.local_shape(step.after), self.dtype
        return lambda: record(step.kind, step.mesh_dim, out_shape, dtype, nbytes)


def _all_reduce(step: Step, b: _Bound):
    group, op, n = b.mesh.get_group(step.mesh_dim), step.src.reduce_op, b.mesh.shape[step.mesh_dim]
    done = b.recorder(step, b.local_shape(step.before))

    def run(local):
        out = buffers.empty(local.shape, local.dtype)
        comm.all_reduce(group, np.ascontiguousarray(local), out, op)
        if op == "avg":
            np.divide(out, n, out=out, casting="unsafe")
        done()
        return out
    return run


def _all_gather(step: Step, b: _Bound):
    d, group = step.src.dim, b.mesh.get_group(step.mesh_dim)
    full = b.local_shape(step.after)
    rest = math.prod(full[:d] + full[d + 1:])
    counts = tuple(c * rest for c in shard_counts(full[d], b.mesh.shape[step.mesh_dim]))
    front = _front_shape(full, d)
    done = b.recorder(step, full)

    def run(local):
        out = buffers.empty(front, local.dtype)
        comm.all_gather_v(group, _to_front(local, d), out, counts)
        done()
        return _from_front(out, d)
    return run


def _reduce_scatter(step: Step, b: _Bound):
    e, group = step.dst.dim, b.mesh.get_group(step.mesh_dim)
    n, op = b.mesh.shape[step.mesh_dim], step.src.reduce_op
    before, mine = b.local_shape(step.before), b.local_shape(step.after)
    rest = math.prod(mine[:e] + mine[e + 1:])
    counts = tuple(c * rest for c in shard_counts(before[e], n))
    front = _front_shape(mine, e)
    done = b.recorder(step, before)

    def run(local):
        out = buffers.empty(front, local.dtype)
        comm.reduce_scatter_v(group, _to_front(local, e), out, counts, op)
        if op == "avg":
            np.divide(out, n, out=out, casting="unsafe")
        done()
        return _from_front(out, e)
    return run


def _all_to_all(step: Step, b: _Bound):
    """S(d) -> S(e): piece k of dim e goes to rank k; everyone's dim-d pieces come back."""
    d, e, group = step.src.dim, step.dst.dim, b.mesh.get_group(step.mesh_dim)
    n = b.mesh.shape[step.mesh_dim]
    before, mine = b.local_shape(step.before), b.local_shape(step.after)
    per_e = math.prod(before[:e] + before[e + 1:])
    per_d = math.prod(mine[:d] + mine[d + 1:])
    send_counts = tuple(c * per_e for c in shard_counts(before[e], n))
    recv_counts = tuple(c * per_d for c in shard_counts(mine[d], n))
    front = _front_shape(mine, d)
    pack = _pack_even(before, d, e, n) if before[e] % n == 0 else _pack_uneven(before, d, e, n, send_counts)
    done = b.recorder(step, before)

    def run(local):
        send = pack(local)
        out = buffers.empty(front, local.dtype)
        comm.all_to_all_v(group, send, send_counts, out, recv_counts)
        done()
        return _from_front(out, d)
    return run


def _pack_even(shape, d, e, n):
    """Send buffer for an even split of dim e: one reshape, one strided copy."""
    split = shape[:e] + (n, shape[e] // n) + shape[e + 1:]
    moved_d = d if d < e else d + 1
    axes = (e, moved_d) + tuple(a for a in range(len(split)) if a not in (e, moved_d))

    def pack(local):
        chunks = local.reshape(split).transpose(axes)
        send = buffers.empty(chunks.shape, local.dtype)
        np.copyto(send, chunks)
        return send.reshape(-1)
    return pack


def _pack_uneven(shape, d, e, n, counts):
    """Send buffer for an uneven split of dim e: chunk k (dim d first) copied to its slot."""
    index = [(slice(None),) * e + (slice(*shard_bounds(shape[e], n, k)),) for k in range(n)]
    offsets = np.cumsum((0,) + tuple(counts))

    axes = _front_axes(len(shape), d)

    def pack(local):
        send = buffers.empty((local.size,), local.dtype)
        for k in range(n):
            chunk = local[index[k]].transpose(axes)
            send[offsets[k]:offsets[k + 1]].reshape(chunk.shape)[...] = chunk
        return send
    return pack


def _local_slice(step: Step, b: _Bound):
    e, i = step.dst.dim, step.mesh_dim
    before = b.local_shape(step.before)
    index = (slice(None),) * e + (slice(*shard_bounds(before[e], b.mesh.shape[i], b.mesh.coordinate[i])),)

    def run(local):
        block = local[index]
        out = buffers.empty(block.shape, local.dtype)
        np.copyto(out, block)
        return out
    return run


def _local_partial(step: Step, b: _Bound):
    op = REDUCE_OPS[step.dst.reduce_op]
    if op.idempotent or b.mesh.coordinate[step.mesh_dim] == 0:
        return lambda local: local
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

    __slots__ = ("plan", "_runs", "_bound")

    def __init__(self, plan, runs, bound: _Bound):
        self.plan, self._runs, self._bound = plan, tuple(runs), bound

    def __call__(self, local: np.ndarray) -> np.ndarray:
        if guard.state.active:
            return self._guarded(local)
        for run in self._runs:
            local = run(local)
        return local

    def _guarded(self, local: np.ndarray) -> np.ndarray:
        """The same steps, each collective announced to the check mode and the timeout."""
        b = self._bound
        for run, step in zip(self._runs, self.plan.steps):
            if step.kind in COLLECTIVES:
                guard.before(step.kind, step.mesh_dim, b.shape, b.dtype, b.mesh.comm)
            try:
                local = run(local)
            finally:
                guard.after()
        return local


def bind_program(mesh, src, dst, shape, dtype, model) -> Program:
    """The program that turns this rank's ``src`` block into its ``dst`` block (the caller
    caches it per spec)."""
    plan = plan_redistribute(src, dst, shape, mesh.shape, dtype.itemsize, model)
    bound = _Bound(mesh, shape, dtype)
    return Program(plan, [_BUILDERS[s.kind](s, bound) for s in plan.steps], bound)
