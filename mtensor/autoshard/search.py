"""The search from a step graph to a solution, and the pins' diagnosis: pure, no MPI."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional

from ..cost.model import get_cost_model
from .bill import Bill, bill, out_layout, wanted_layout
from .graph import StepGraph
from .problem import Problem, build
from .solve import EXACT_LIMIT, solve


@dataclass
class Solution:
    problem: Problem
    assignment: list
    bill: Bill
    method: str
    seconds: float

    @property
    def graph(self) -> StepGraph:
        return self.problem.graph

    def _item_of_node(self) -> Dict[int, int]:
        return {it.node: i for i, it in enumerate(self.problem.items) if it.node is not None}

    def op_layouts(self) -> List[tuple]:
        """Per op node of the graph, in order: (its name, the placements wanted for each
        operand, the output placements)."""
        items, out = self._item_of_node(), []
        for k, node in enumerate(self.graph.nodes):
            if node.kind != "op":
                continue
            i = items[k]
            ins = tuple(wanted_layout(self.problem, self.assignment, i, j)
                        for j in range(len(node.inputs)))
            out.append((node, ins, out_layout(self.problem, self.assignment, i)))
        return out

    def leaf_layouts(self) -> Dict[str, tuple]:
        """Each DTensor argument's placements, by pytree path."""
        return {it.label: out_layout(self.problem, self.assignment, i)
                for i, it in enumerate(self.problem.items) if it.kind == "leaf"}


def search(graph: StepGraph, model=None, budget: Optional[float] = None,
           exact_limit: int = EXACT_LIMIT) -> Solution:
    model = model or get_cost_model()
    problem = build(graph, model, budget)
    assignment, method, seconds = solve(problem, model, exact_limit)
    return Solution(problem, assignment, bill(problem, assignment, model), method, seconds)


@dataclass
class PinReport:
    """The plan with the user's pins against the best plan without them, and the pin whose
    release alone saves the most (``blame``, with the bill it would have)."""

    pinned: Bill
    free: Bill
    blame: Optional[str]
    blame_bill: Optional[Bill]

    @property
    def comm_ratio(self) -> float:
        if self.free.comm_s == 0:
            return float("inf") if self.pinned.comm_s > 0 else 1.0
        return self.pinned.comm_s / self.free.comm_s

    @property
    def step_ratio(self) -> float:
        return self.pinned.step_s / self.free.step_s if self.free.step_s else 1.0

    @property
    def fights(self) -> bool:
        """The pins cost at least 1.5x the communication of the best plan and a slower step."""
        return self.comm_ratio >= 1.5 and self.step_ratio > 1.0


def _released(graph: StepGraph, paths) -> StepGraph:
    leaves = [replace(leaf, pinned=None) if leaf.path in paths else leaf
              for leaf in graph.leaves]
    return replace(graph, leaves=leaves)


def diagnose_pins(solution: Solution, model=None, exact_limit: int = EXACT_LIMIT):
    """None when the user pinned no argument; else a PinReport (one search per pin, and one
    with every pin released)."""
    graph, budget = solution.graph, solution.problem.budget
    pinned = [leaf.path for leaf in graph.leaves if leaf.pinned is not None]
    if not pinned:
        return None
    free = search(_released(graph, set(pinned)), model, budget, exact_limit).bill
    best, best_bill = None, None
    if len(pinned) > 1:
        for path in pinned:
            one = search(_released(graph, {path}), model, budget, exact_limit).bill
            if best_bill is None or one.step_s < best_bill.step_s:
                best, best_bill = path, one
    else:
        best, best_bill = pinned[0], free
    if best_bill.step_s >= solution.bill.step_s:
        best, best_bill = None, None
    return PinReport(solution.bill, free, best, best_bill)
