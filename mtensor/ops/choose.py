"""The strategy chooser: per mesh dim, the rule's cheapest choice under the cost model.

Each candidate is priced by what it costs to bring every operand to the placements it wants
(``CostModel.change_time`` on the operand's current block), so a candidate that needs no
communication costs nothing and wins.  Ties go to the choice that relabels fewer operands, then
to the earlier choice in the rule's list, so every rank decides alike.  Mesh dims are decided one after another; a choice on one mesh dim
does not change what another costs, because each rule is written for one mesh dim.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import List, Tuple

from ..placement import Partial, max_local_shape
from .registry import Choice, OpCall


@lru_cache(maxsize=8192)
def _change_cost(placements, mesh_dim, want, shape, mesh_shape, itemsize, model) -> float:
    block = math.prod(max_local_shape(shape, mesh_shape, placements)) * itemsize
    return model.change_time(placements[mesh_dim], want, mesh_dim, mesh_shape[mesh_dim], block)


def _price(call: OpCall, mesh_dim: int, choice: Choice, model) -> Tuple[float, int]:
    """(predicted seconds, operands relabelled): on a tie, fewer changed placements win, so a
    size-1 mesh dim (where every change is free) keeps the operands' layout."""
    cost = 0.0
    moved = 0  # pragma: no mutate
    for operand, want in zip(call.operands, choice.inputs):
        if operand.placements is None:
            if isinstance(want, Partial):
                return math.inf, 0  # pragma: no mutate  (a constant cannot be partial terms)
            continue
        cost += _change_cost(operand.placements, mesh_dim, want, operand.shape,
                             call.mesh_shape, operand.dtype.itemsize, model)
        moved += operand.placements[mesh_dim] != want
    return cost, moved


def choose(call: OpCall, choices, model, into=None):
    """(placements wanted for each operand, output placements, predicted seconds).
    ``into``: the output placements required (an out= target); None when no choice gives
    them."""
    wanted: List[list] = [[] for _ in call.operands]
    output, total = [], 0.0
    for mesh_dim in range(len(call.mesh_shape)):
        best, best_cost = None, (math.inf, 0)
        for choice in choices:
            if into is not None and choice.output != into[mesh_dim]:
                continue
            cost = _price(call, mesh_dim, choice, model)
            if cost < best_cost:
                best, best_cost = choice, cost
        if best is None:
            if into is not None:
                return None
            raise call.error("no strategy fits these operands",
                             "redistribute the operands to Replicate() first")
        for j, want in enumerate(best.inputs):
            wanted[j].append(want)
        output.append(best.output)
        total += best_cost[0]
    return tuple(tuple(w) for w in wanted), tuple(output), total
