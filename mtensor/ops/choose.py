"""The strategy chooser: per mesh dim, the rule's cheapest choice under the cost model.

Each candidate is priced by what it costs to bring every operand to the placements it wants
(``CostModel.change_time`` on the operand's current block), so a candidate that needs no
communication costs nothing and wins.  A choice that splits the output where no operand is
split comes last; ties go to the choice that relabels fewer operands, then to a whole output
over partial terms, then to the earlier choice in the rule's list, so every rank decides
alike.  Mesh dims are decided one after another; a choice on one mesh dim does not change
what another costs, because each rule is written for one mesh dim.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import List, Tuple

from ..placement import Partial, Replicate, Shard, max_local_shape
from .registry import Choice, OpCall
from .windows import halo_plan


@lru_cache(maxsize=8192)
def _change_cost(placements, mesh_dim, want, shape, mesh_shape, itemsize, model) -> float:
    """The change on one mesh dim, for the operand's largest block.  Cutting a whole block
    (Replicate -> Shard) copies the block left once every mesh dim where the operand is
    whole has cut it too (one copy does all the cuts): so priced, a replicated operand is
    sliced, not the sharded ones gathered to meet it."""
    block = math.prod(max_local_shape(shape, mesh_shape, placements)) * itemsize
    if isinstance(want, Shard) and placements[mesh_dim] == Replicate():
        block //= math.prod(n for i, (n, p) in enumerate(zip(mesh_shape, placements))
                            if i != mesh_dim and p == Replicate())
    return model.change_time(placements[mesh_dim], want, mesh_dim, mesh_shape[mesh_dim], block)


def _price(call: OpCall, mesh_dim: int, choice: Choice, model) -> Tuple:
    """(introduces a split, predicted seconds, operands relabelled, leaves partial terms,
    relabels the first operand's placement in the output).

    A choice that splits the output along a mesh dim where no operand is split comes last:
    undoing that split costs the all-gather that the greedy price does not see (a reduce-
    scatter of partial terms is cheaper than an all-reduce now, and dearer once gathered
    again).  On equal prices fewer changed placements win, so a size-1 mesh dim (where every
    change is free) keeps the operands' layout; then a whole value beats partial terms, then
    an output placed as the first operand is (a rule whose choices differ in the output
    alone: ``np.diff`` gathering a split axis keeps it split, a replicated one whole).  An
    operand that is an earlier one again (``x * x``) is priced once: its block moves once."""
    cost = 0.0 if choice.window is None else _halo_cost(call, mesh_dim, choice.window, model)
    moved = 0  # pragma: no mutate
    split = isinstance(choice.output, Shard)
    aliases = call.aliases
    for j, (operand, want) in enumerate(zip(call.operands, choice.inputs)):
        if operand.placements is None:
            if isinstance(want, Partial):
                return True, math.inf, 0, 0, 0  # pragma: no mutate  (a constant cannot be partial terms)
            continue
        have = operand.placements[mesh_dim]
        split = split and not isinstance(have, Shard)
        if aliases and j and aliases[j - 1] >= 0 and choice.inputs[aliases[j - 1]] == want:
            continue
        cost += _change_cost(operand.placements, mesh_dim, want, operand.shape,
                             call.mesh_shape, operand.dtype.itemsize, model)
        moved += have != want
    first = call.operands[0].placements
    kept = first is None or first[mesh_dim] == choice.output
    return split, cost, moved, isinstance(choice.output, Partial), not kept


def _halo_cost(call: OpCall, mesh_dim: int, window, model) -> float:
    """A window's exchange: latency and the widest rank's edge rows (inf on another mesh
    dim: the rule offers it on the one that splits the dim)."""
    if window.mesh_dim != mesh_dim:
        return math.inf
    operand = call.operands[window.operand]
    n = call.mesh_shape[mesh_dim]
    plan = halo_plan(window, operand.shape[window.dim], n)
    rows = max((r.to_prev[1] - r.to_prev[0]) + (r.to_next[1] - r.to_next[0]) for r in plan)
    block = max_local_shape(operand.shape, call.mesh_shape, operand.placements)
    per_row = math.prod(block) // max(block[window.dim], 1) * operand.dtype.itemsize
    return model.step_time("halo", mesh_dim, n, rows * per_row) if rows else 0.0


def choose(call: OpCall, choices, model, into=None):
    """(placements wanted for each operand, output placements, predicted seconds).
    ``into``: the output placements required (an out= target); None when no choice gives
    them."""
    chosen = choose_windows(call, choices, model, into)
    return None if chosen is None else chosen[:3]


def choose_windows(call: OpCall, choices, model, into=None):
    """:func:`choose`'s answer and the windows chosen (``Choice.window``), in mesh dim
    order."""
    wanted: List[list] = [[] for _ in call.operands]
    output, total, windows = [], 0.0, []
    for mesh_dim in range(len(call.mesh_shape)):
        best, best_cost = None, (True, math.inf, 0, 0, 0)
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
        total += best_cost[1]
        if best.window is not None:
            windows.append(best.window)
    return tuple(tuple(w) for w in wanted), tuple(output), total, tuple(windows)
