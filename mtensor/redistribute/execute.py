"""Eager executor: runs a plan's steps on this rank's local block through ``comm``.

Each step acts along one tensor dim.  MPI concatenates contiguous segments, so the dim that is
gathered, scattered or exchanged is moved to the front, made contiguous, and moved back;
uneven pieces go through the v-variants with ``array_split`` counts (no padding).
"""
from __future__ import annotations

import math

import numpy as np

from .. import comm
from ..debug.comm_mode import record
from ..placement import REDUCE_OPS, local_shape, shard_bounds, shard_counts
from .cost import bus_bytes
from .plan import Plan, Step


def _front(a: np.ndarray, dim: int) -> np.ndarray:
    """``a`` with ``dim`` moved to axis 0, C-contiguous (no copy when it already is)."""
    return np.ascontiguousarray(np.moveaxis(a, dim, 0) if dim else a)


def _back(a: np.ndarray, dim: int) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(a, 0, dim)) if dim else a


class _Ctx:
    """What a step needs to know about this rank: layouts' shapes and its group."""

    __slots__ = ("mesh", "shape", "coord")

    def __init__(self, mesh, shape):
        self.mesh, self.shape, self.coord = mesh, shape, mesh.coordinate

    def local_shape(self, layout):
        return local_shape(self.shape, self.mesh.shape, layout, self.coord)


def _all_reduce(local, step: Step, ctx: _Ctx):
    op = step.src.reduce_op
    out = np.empty_like(local, order="C")
    comm.all_reduce(ctx.mesh.get_group(step.mesh_dim), np.ascontiguousarray(local), out, op)
    if op == "avg":
        np.divide(out, ctx.mesh.shape[step.mesh_dim], out=out, casting="unsafe")
    return out, local.nbytes


def _all_gather(local, step: Step, ctx: _Ctx):
    d, n = step.src.dim, ctx.mesh.shape[step.mesh_dim]
    full = ctx.local_shape(step.after)
    rest = math.prod(full[:d] + full[d + 1:])
    out = np.empty((full[d],) + full[:d] + full[d + 1:], dtype=local.dtype)
    counts = [c * rest for c in shard_counts(full[d], n)]
    comm.all_gather_v(ctx.mesh.get_group(step.mesh_dim), _front(local, d), out, counts)
    return _back(out, d), out.nbytes


def _reduce_scatter(local, step: Step, ctx: _Ctx):
    e, i = step.dst.dim, step.mesh_dim
    n, op = ctx.mesh.shape[i], step.src.reduce_op
    mine = ctx.local_shape(step.after)
    rest = math.prod(mine[:e] + mine[e + 1:])
    out = np.empty((mine[e],) + mine[:e] + mine[e + 1:], dtype=local.dtype)
    counts = [c * rest for c in shard_counts(local.shape[e], n)]
    comm.reduce_scatter_v(ctx.mesh.get_group(i), _front(local, e), out, counts, op)
    if op == "avg":
        np.divide(out, n, out=out, casting="unsafe")
    return _back(out, e), local.nbytes


def _all_to_all(local, step: Step, ctx: _Ctx):
    """S(d) -> S(e): send piece k of dim e to rank k, gather everyone's dim-d pieces."""
    d, e, i = step.src.dim, step.dst.dim, step.mesh_dim
    n = ctx.mesh.shape[i]
    mine = ctx.local_shape(step.after)
    e_counts = shard_counts(local.shape[e], n)
    d_counts = shard_counts(mine[d], n)
    per_e = math.prod(local.shape[:e] + local.shape[e + 1:])
    chunks = []
    for k in range(n):
        lo, hi = shard_bounds(local.shape[e], n, k)
        chunks.append(_front(local[(slice(None),) * e + (slice(lo, hi),)], d).reshape(-1))
    send = np.concatenate(chunks)
    out = np.empty((mine[d],) + mine[:d] + mine[d + 1:], dtype=local.dtype)
    per_d = math.prod(mine[:d] + mine[d + 1:])
    comm.all_to_all_v(
        ctx.mesh.get_group(i), send, [x * per_e for x in e_counts],
        out, [x * per_d for x in d_counts],
    )
    return _back(out, d), local.nbytes


def _local_slice(local, step: Step, ctx: _Ctx):
    e, i = step.dst.dim, step.mesh_dim
    lo, hi = shard_bounds(local.shape[e], ctx.mesh.shape[i], ctx.coord[i])
    return local[(slice(None),) * e + (slice(lo, hi),)].copy(), None


def _local_partial(local, step: Step, ctx: _Ctx):
    op = REDUCE_OPS[step.dst.reduce_op]
    if op.idempotent or ctx.coord[step.mesh_dim] == 0:
        return local, None
    return np.full_like(local, op.identity(local.dtype)), None


_RUNNERS = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
    "local_slice": _local_slice,
    "local_partial": _local_partial,
}


def execute_plan(local: np.ndarray, plan: Plan, mesh, shape) -> np.ndarray:
    """Run ``plan`` on this rank's block ``local`` of a tensor of global ``shape``."""
    ctx = _Ctx(mesh, tuple(shape))
    for step in plan.steps:
        local, nbytes = _RUNNERS[step.kind](local, step, ctx)
        if nbytes is not None:
            n = mesh.shape[step.mesh_dim]
            record(step.kind, step.mesh_dim, local.shape, local.dtype, bus_bytes(step.kind, n, nbytes))
    return local
