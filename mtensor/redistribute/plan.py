"""Pure planner: placements A -> B as the cheapest chain of one-mesh-dim steps.

Each step changes the placement of one mesh dim.  Which steps are legal follows from the
nesting rule of layouts (mesh dim 0 splits first, later mesh dims split the pieces): a step
may split or unsplit tensor dim ``d`` on mesh dim ``i`` only if no later mesh dim also shards
``d``, because that later split would cut across the pieces being moved.  A shortest-path
search over layouts (Dijkstra, priced by the cost model) then finds the cheapest legal chain,
so nested layouts such as ``[S(0), S(0)] -> [S(1), S(0)]`` come out in the fewest steps.
Chains are ranked by their number of collectives first, then by predicted time: the cost
model alone would sometimes detour (split on a fast mesh dim, reduce the smaller piece on a
slow one, gather back), which saves bandwidth only across a slow link and always costs an
extra collective; the expert's plan, and so ours, is one collective per changed mesh dim.
Mesh dims of size 1 hold the same block under any placement and are relabelled for free.

Plans depend only on shapes and placements, never on rank-local data, so every rank builds
the same plan; they are cached per (mesh shape, placements, shape, itemsize, cost model).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Tuple

from ..cost.model import CostModel, bus_bytes, get_cost_model
from ..placement import Partial, Placement, Replicate, Shard, max_local_shape
from ..step_kinds import STEP_KINDS

Layout = Tuple[Placement, ...]


@dataclass(frozen=True)
class Step:
    """One transition on one mesh dim, with the whole layout before and after it.

    ``kind`` is a collective name (``all_reduce``, ``all_gather``, ``reduce_scatter``,
    ``all_to_all``) or a local step (``local_slice``: R -> S, ``local_partial``: R -> P).
    ``comm_bytes`` is the planning estimate (largest block, bus-bandwidth convention).
    """

    kind: str
    mesh_dim: int
    before: Layout
    after: Layout
    comm_bytes: int

    @property
    def src(self) -> Placement:
        return self.before[self.mesh_dim]

    @property
    def dst(self) -> Placement:
        return self.after[self.mesh_dim]

    def __repr__(self) -> str:
        return f"{self.kind}(mesh_dim={self.mesh_dim}: {self.src!r} -> {self.dst!r}, {self.comm_bytes} B)"


@dataclass(frozen=True)
class Plan:
    steps: Tuple[Step, ...]
    cost: float
    src: Layout
    dst: Layout

    @property
    def collectives(self) -> Tuple[Step, ...]:
        return tuple(s for s in self.steps if STEP_KINDS[s.kind].collective)


def _inner_shards(layout: Layout, mesh_shape, mesh_dim: int, tensor_dim: int) -> bool:
    """Whether a later mesh dim really splits ``tensor_dim`` again (size 1 splits nothing)."""
    return any(
        p == Shard(tensor_dim) and n > 1
        for p, n in zip(layout[mesh_dim + 1:], mesh_shape[mesh_dim + 1:])
    )


def _later_other_partial(layout: Layout, mesh_shape, mesh_dim: int) -> bool:
    """Whether a later mesh dim holds a Partial of another op.  Terms of a Partial mesh dim
    are split again along the later ones, so those reduce first: (P(sum), P(max)) is the sum
    over mesh dim 0 of the max over mesh dim 1, whatever layout it is redistributed to."""
    return any(
        isinstance(p, Partial) and p != layout[mesh_dim] and n > 1
        for p, n in zip(layout[mesh_dim + 1:], mesh_shape[mesh_dim + 1:])
    )


def _step_kind(layout: Layout, mesh_shape, i: int, dst: Placement):
    """The step that moves mesh dim ``i`` of ``layout`` to another placement ``dst``, or None
    where illegal.  A Partial ``dst`` is always the target's (the only one callers offer)."""
    src = layout[i]
    for p in (src, dst):
        if isinstance(p, Shard) and _inner_shards(layout, mesh_shape, i, p.dim):
            return None
    if isinstance(src, Partial):
        if _later_other_partial(layout, mesh_shape, i):
            return None
        return {Replicate: "all_reduce", Shard: "reduce_scatter"}.get(type(dst))
    if isinstance(src, Shard):
        return {Replicate: "all_gather", Shard: "all_to_all"}.get(type(dst))
    return "local_slice" if isinstance(dst, Shard) else "local_partial"


def _step_bytes(kind, layout, new, shape, mesh_shape, i, itemsize) -> Tuple[int, int]:
    """(bytes the step prices, bus bytes it moves), from the largest block of each layout."""
    sized = new if STEP_KINDS[kind].sized_after else layout
    nbytes = math.prod(max_local_shape(shape, mesh_shape, sized)) * itemsize
    return nbytes, bus_bytes(kind, mesh_shape[i], nbytes)


def _moves(layout: Layout, target: Layout, mesh_shape, ndim: int):
    """Every legal one-mesh-dim step out of ``layout``: (mesh dim, new placement, kind)."""
    options = (Replicate(),) + tuple(Shard(d) for d in range(ndim))
    for i, n in enumerate(mesh_shape):
        if n == 1:
            continue
        extra = (target[i],) if isinstance(target[i], Partial) else ()
        for dst in options + extra:
            if dst != layout[i]:
                kind = _step_kind(layout, mesh_shape, i, dst)
                if kind is not None:
                    yield i, dst, kind


@lru_cache(maxsize=4096)
def _search(src: Layout, dst: Layout, shape, mesh_shape, itemsize, model: CostModel) -> Plan:
    """A* over layouts, ranking chains by (number of collectives, predicted time).

    The heuristic counts mesh dims still Shard or Partial where the target differs: each
    needs a collective of its own, and a local step never removes one, so it is consistent.
    """
    ndim = len(shape)
    best = {src: (0, 0.0)}
    parent = {}
    heap = [(_needed(src, dst), 0.0, 0, 0, src)]
    counter = 0
    while heap:
        _, cost, _, ncoll, layout = heapq.heappop(heap)
        if layout == dst:
            return Plan(_chain(parent, src, dst), cost, src, dst)
        if (ncoll, cost) > best[layout]:
            continue
        for i, placement, kind in _moves(layout, dst, mesh_shape, ndim):
            new = layout[:i] + (placement,) + layout[i + 1:]
            nbytes, moved = _step_bytes(kind, layout, new, shape, mesh_shape, i, itemsize)
            rank = (ncoll + STEP_KINDS[kind].collective,
                    cost + model.step_time(kind, i, mesh_shape[i], nbytes))
            if rank < best.get(new, (math.inf, math.inf)):
                best[new] = rank
                parent[new] = (layout, kind, i, moved)
                counter += 1
                heapq.heappush(heap, (rank[0] + _needed(new, dst), rank[1], counter, rank[0], new))
    raise ValueError(f"redistribute: no plan from {list(src)} to {list(dst)} for shape {shape}")


def _needed(layout: Layout, dst: Layout) -> int:
    """A*'s lower bound.  Its mutants (``or``, ``==``) only reorder plans of equal cost on every
    layout pair of the 2-D and 3-D meshes up to 8 ranks (checked by brute force), hence:"""
    return sum(p != q and not isinstance(p, Replicate)  # pragma: no mutate
               for p, q in zip(layout, dst))


def _chain(parent, src: Layout, dst: Layout) -> Tuple[Step, ...]:
    """The steps that led the search from ``src`` to ``dst``."""
    steps, layout = [], dst
    while layout != src:
        before, kind, i, moved = parent[layout]
        steps.append(Step(kind, i, before, layout, moved))
        layout = before
    return tuple(reversed(steps))


def plan_redistribute(
    src: Layout, dst: Layout, shape, mesh_shape, itemsize: int, model: CostModel = None
) -> Plan:
    """The cheapest chain of steps that turns layout ``src`` into ``dst`` (validated specs)."""
    model = get_cost_model() if model is None else model
    # A size-1 mesh dim holds the whole tensor under any placement: relabel it for free.
    start = tuple(d if n == 1 else s for s, d, n in zip(src, dst, mesh_shape))
    args = (start, tuple(dst), tuple(shape), tuple(mesh_shape), itemsize, model)
    plan = _direct(*args) or _search(*args)
    return Plan(plan.steps, plan.cost, tuple(src), tuple(dst))


@lru_cache(maxsize=4096)
def _direct(src: Layout, dst: Layout, shape, mesh_shape, itemsize, model: CostModel):
    """The one-step plan when layouts differ on one mesh dim and that step is legal.

    Any other chain must also change that mesh dim, so it has at least as many collectives,
    and any detour would cost more of them (the unit tests check this against the search);
    skipping the search makes a first call of a new signature cheap.
    """
    diff = [i for i, (s, d) in enumerate(zip(src, dst)) if s != d]
    if len(diff) != 1:
        return None if diff else Plan((), 0.0, src, dst)
    i = diff[0]
    kind = _step_kind(src, mesh_shape, i, dst[i])
    if kind is None:
        return None
    nbytes, moved = _step_bytes(kind, src, dst, shape, mesh_shape, i, itemsize)
    return Plan((Step(kind, i, src, dst, moved),), model.step_time(kind, i, mesh_shape[i], nbytes),
                src, dst)


def plan_cache_info():
    """Hits and misses of the plan cache (a second identical request does no search)."""
    return _search.cache_info()
