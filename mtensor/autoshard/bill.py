"""What a solved problem predicts: every redistribution and reduction with the planner's own
steps (collectives, bytes, seconds), the compute, and the memory per rank.

The search prices one mesh dim at a time; the bill re-prices the chosen layouts whole with
``plan_redistribute``, the plan the executor will really run, so totals and ``explain()``
name the collectives a run inserts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..placement import Shard
from ..redistribute.plan import plan_redistribute
from .problem import Problem, splits, wanted


@dataclass(frozen=True)
class Move:
    """One redistribution the plan inserts: of ``value`` before ``node`` reads it (the
    node's phase and region), or the once-for-all reduction of a value read several
    times."""

    value: int
    node: Optional[int]
    phase: str
    region: str
    src: tuple
    dst: tuple
    collectives: Tuple[Tuple[str, int, int], ...]   # (kind, mesh dim, bytes per rank)
    seconds: float
    why: str = "read"   # "read" | "reduce once" | "gradient" (into its parameter's layout)


@dataclass
class Bill:
    moves: List[Move]
    compute_s: float
    memory_bytes: float

    @property
    def comm_s(self) -> float:
        return sum(m.seconds for m in self.moves)

    @property
    def step_s(self) -> float:
        return self.comm_s + self.compute_s

    @property
    def collectives(self):
        return [c for m in self.moves for c in m.collectives]

    @property
    def comm_bytes(self) -> int:
        return sum(c[2] for c in self.collectives)


def out_layout(problem: Problem, assignment, item: int) -> tuple:
    it = problem.items[item]
    return tuple(it.choices[d][assignment[item][d]].output for d in range(len(it.choices)))


def wanted_layout(problem: Problem, assignment, item: int, slot: int) -> tuple:
    it = problem.items[item]
    return tuple(wanted(it, d, assignment[item][d], slot) for d in range(len(it.choices)))


def bill(problem: Problem, assignment, model) -> Bill:
    graph, mesh = problem.graph, tuple(problem.mesh_shape)
    moves = []
    first_reader = {}
    for e in problem.edges:
        if problem.items[e.dst].node is not None:
            first_reader.setdefault(e.value, problem.items[e.dst].node)

    def move(value, src, dst, node, fallback_node=None, why="read"):
        if src == dst:
            return
        v = graph.values[value]
        plan = plan_redistribute(src, dst, v.shape, mesh, v.dtype.itemsize, model)
        where = node if node is not None else fallback_node
        phase, region = ((graph.nodes[where].phase, graph.nodes[where].region)
                         if where is not None else ("backward", ""))
        moves.append(Move(value, where, phase, region, src, dst,
                          tuple((s.kind, s.mesh_dim, s.comm_bytes) for s in plan.collectives),
                          plan.cost, why))

    for i, item in enumerate(problem.items):
        if item.kind == "settle":
            choice_in = wanted_layout(problem, assignment, i, 0)
            move(item.value, choice_in, out_layout(problem, assignment, i),
                 first_reader.get(item.value), why="reduce once")
    for e in problem.edges:
        dst_node = problem.items[e.dst].node
        if problem.items[e.dst].kind == "settle":
            dst_node = first_reader.get(e.value)
        src_node = problem.items[e.src].node
        move(e.value, out_layout(problem, assignment, e.src),
             wanted_layout(problem, assignment, e.dst, e.slot), dst_node, src_node,
             "gradient" if problem.items[e.dst].kind == "leaf" else "read")
    compute = 0.0
    for i, item in enumerate(problem.items):
        if item.work:
            split = math.prod(n for d, n in enumerate(mesh)
                              if splits(item.choices[d][assignment[i][d]]))
            compute += item.work / split
    memory = 0.0
    for i, nbytes in problem.memory:
        layout = out_layout(problem, assignment, i)
        memory += nbytes / math.prod(n for p, n in zip(layout, mesh) if isinstance(p, Shard))
    return Bill(moves, compute, memory)
