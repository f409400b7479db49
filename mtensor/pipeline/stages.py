"""A pipeline's parameters as its stages see them, and their gradients back on the whole mesh.

The parameters are one pytree of DTensors on the whole mesh, ``(pp, dp, tp)`` say, so the
optimizer, gradient clipping and checkpoints treat them as any other.  A leaf split over
``pp`` (``Shard(a)``) is a stack of layers along axis ``a`` (its index there is the global
layer index, which is what a checkpoint records, so a run saved with pp=2 loads at pp=1 or
pp=4); each stage holds its ``numpy.array_split`` share of the layers.  A leaf replicated
over ``pp`` is shared (an embedding, a head): every stage holds it, the stages that use it
add their gradients over ``pp``.

A stage function sees a stacked leaf as the list of its own layers, each a DTensor of the
stage's ``(dp, tp)`` sub-mesh viewing the layer in the local block (no copy), and a shared
leaf as itself on the sub-mesh.  With ``virtual`` stages per rank (interleaved 1F1B), a
stacked leaf holds ``virtual`` chunks on axis ``a - 1``: virtual stage ``c * pp + r`` is
chunk ``c`` of rank ``r``'s layers.

While ``mt.compile`` records, each layer view is a node of the graph (so the replay views
the parameters it is given, not the traced ones); the rest is DTensor ops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .. import modes, views
from ..dtensor import DTensor, relayout
from ..placement import Partial, Replicate, Shard, shard_bounds
from ..pytree import flatten
from ..spec import DTensorSpec, fmt_placements


@dataclass(frozen=True)
class Stage:
    """What a stage function is told: its (virtual) stage ``index`` of ``count``, whether
    it is the ``first`` (it reads the micro-batch) or the ``last`` (its output goes to the
    loss), and the global indices of its ``layers`` (one per entry of a stacked leaf's list)."""

    index: int
    count: int
    layers: range

    @property
    def first(self) -> bool:
        return self.index == 0

    @property
    def last(self) -> bool:
        return self.index == self.count - 1


def _error(what: str, fix: str) -> ValueError:
    return ValueError(f"pipeline: {what}; {fix}")


class StageLayout:
    """Which leaves of a parameter tree are stacked layers (and along which axis) and which
    are shared, checked once per tree signature on every rank alike."""

    def __init__(self, mesh, dim: int, stage_mesh, params, virtual: int):
        self.mesh, self.dim, self.stage_mesh, self.virtual = mesh, dim, stage_mesh, virtual
        leaves, self.rebuild = flatten(params)
        self.axes = [self._axis(i, leaf) for i, leaf in enumerate(leaves)]
        counts = {leaf.shape[a] for leaf, a in zip(leaves, self.axes) if a is not None}
        if len(counts) > 1:
            raise _error(f"the leaves split over the pipeline dim stack different numbers of "
                         f"layers ({sorted(counts)})", "stack every layer's parameters "
                         "alike (one entry per layer along the split axis)")
        per_chunk = counts.pop() if counts else 0
        r, n = mesh.coordinate[dim], mesh.shape[dim]
        self.lo, self.hi = shard_bounds(per_chunk, n, r)
        self.per_chunk = per_chunk

    def _axis(self, i: int, leaf) -> Optional[int]:
        if type(leaf) is not DTensor:
            return None
        if leaf.device_mesh != self.mesh:
            raise _error(f"parameter leaf {i} lives on {leaf.device_mesh}, not on the "
                         f"pipeline's mesh {self.mesh}", "put every parameter on that mesh")
        mine = leaf.placements[self.dim]
        if isinstance(mine, Partial) or any(isinstance(p, Partial) for p in leaf.placements):
            raise _error(f"parameter leaf {i} is Partial {fmt_placements(leaf.placements)}",
                         "parameters hold values: reduce it first")
        if isinstance(mine, Replicate):
            return None
        a = mine.dim
        others = [p for d, p in enumerate(leaf.placements) if d != self.dim]
        low = a - 1 if self.virtual > 1 else a
        if any(isinstance(p, Shard) and low <= p.dim <= a for p in others):
            raise _error(f"parameter leaf {i} of shape {leaf.shape} "
                         f"{fmt_placements(leaf.placements)} splits its layer axis {a} over "
                         f"another mesh dim too", "split the layers over the pipeline dim only")
        if self.virtual > 1 and (a < 1 or leaf.shape[a - 1] != self.virtual):
            raise _error(f"parameter leaf {i} of shape {leaf.shape} has no axis of "
                         f"{self.virtual} chunks before its layer axis {a}",
                         f"with {self.virtual} stages per rank, stack layers as (chunks, "
                         f"layers per chunk, ...), split over the pipeline dim on axis 1")
        return a

    def _sub(self, spec, shape, drop=()) -> DTensorSpec:
        return sub_spec(spec, self.dim, self.stage_mesh, shape, drop)

    def layers(self, chunk: int) -> range:
        """The global layer indices of this rank's virtual stage ``chunk``."""
        base = chunk * self.per_chunk
        return range(base + self.lo, base + self.hi)

    def view(self, params, chunk: int):
        """(the stage's parameter tree, its DTensor leaves in order) for this rank's
        virtual stage ``chunk``."""
        leaves, _ = flatten(params)
        out, followed = [], []
        for leaf, a in zip(leaves, self.axes):
            if type(leaf) is not DTensor:
                out.append(leaf)
            elif a is None:
                shared = DTensor(_block(leaf), self._sub(leaf.spec, leaf.shape))
                out.append(shared)
                followed.append(shared)
            else:
                layers = [self._layer(leaf, a, chunk, j) for j in range(self.hi - self.lo)]
                out.append(layers)
                followed.extend(layers)
        return self.rebuild(out), followed

    def _layer(self, leaf, a: int, chunk: int, j: int) -> DTensor:
        index = (slice(None),) * (a - 1) + (chunk, j) if self.virtual > 1 else \
            (slice(None),) * a + (j,)
        drop = (a - 1, a) if self.virtual > 1 else (a,)
        block = _recorded("pipeline layer view", lambda b: b[index], _block(leaf))
        return DTensor(block, self._sub(leaf.spec, leaf.shape, drop))

    def gradients(self, params, totals):
        """The gradient tree on the whole mesh from ``totals[chunk]`` (the stage's gradients
        by position among ``view``'s followed leaves), laid out like the parameters: each
        stage reduces its layers' gradients over its own sub-mesh, and the shared leaves'
        are added over the pipeline dim."""
        leaves, _ = flatten(params)
        out, at = [], 0
        for leaf, a in zip(leaves, self.axes):
            if type(leaf) is not DTensor:
                out.append(None)
                continue
            if a is None:
                parts = [t[at] for t in totals]
                at += 1
                out.append(self._shared(leaf, parts))
            else:
                count = self.hi - self.lo
                parts = [t[at:at + count] for t in totals]
                at += count
                out.append(self._stacked(leaf, a, parts))
        return self.rebuild(out)

    def _shared(self, leaf, parts) -> DTensor:
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        sub = self._sub(leaf.spec, leaf.shape)
        total = relayout(total, sub.placements)
        placements = list(sub.placements)
        placements.insert(self.dim, Partial("sum"))
        lifted = DTensor(_block(total), DTensorSpec(self.mesh, tuple(placements), leaf.shape,
                                                    leaf.dtype))
        return relayout(lifted, leaf.placements)

    def _stacked(self, leaf, a: int, parts) -> DTensor:
        stacked_shape = list(leaf.shape)
        stacked_shape[a] = self.hi - self.lo
        sub = self._sub(leaf.spec, stacked_shape)
        if self.hi == self.lo:                   # no layers here: an empty block
            zeros = np.zeros_like(_block(leaf))
            return DTensor(zeros, leaf.spec)
        chunks = [np.stack(p, axis=a - 1 if self.virtual > 1 else a) for p in parts]
        stacked = chunks[0] if self.virtual == 1 else np.stack(chunks, axis=a - 1)
        stacked = relayout(stacked, sub.placements)
        return DTensor(_block(stacked), leaf.spec)


def sub_spec(spec: DTensorSpec, dim: int, stage_mesh, shape, drop=()) -> DTensorSpec:
    """The spec on the stage mesh (mesh dim ``dim`` left out) of a block laid out as
    ``spec``, seen without its axes ``drop`` (a layer's view of a stack)."""
    placements = []
    for d, p in enumerate(spec.placements):
        if d == dim:
            continue
        if isinstance(p, Shard):
            p = Shard(p.dim - sum(x < p.dim for x in drop))
        placements.append(p)
    shape = tuple(s for k, s in enumerate(shape) if k not in drop)
    return DTensorSpec(stage_mesh, tuple(placements), shape, spec.dtype)


def _block(x: DTensor):
    """``x``'s block for the pipeline's own views (never followed by the tape: the views
    are the leaves it follows)."""
    if x._view is not None:
        views.sync(x)
    return x._local


def _recorded(name: str, fn, block):
    """``fn(block)``, a node of the graph while ``mt.compile`` records."""
    tracer = modes.active.tracer
    return fn(block) if tracer is None else tracer.call(name, fn, (block,))
