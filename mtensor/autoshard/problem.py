"""The search problem of a step graph: items that each pick one choice per mesh dim, edges
that cost what moving a value between two choices costs, and the memory each choice holds.

- An *op* offers its sharding rule's choices (written for one mesh dim, as the chooser uses
  them), partial terms of sums only; a *leaf* (a DTensor argument) offers Replicate and a
  split of every dim at least as long as the mesh dim, or only the layout pinned; a
  *source* (a DTensor made in the step) and a *pin* (``redistribute``, ``shard_hint``) keep
  theirs.
- A value of partial terms read more than once gets a *settle* item: reduced once for every
  later read, or kept as terms, as dispatch's ``_settle`` and the backward's ``_settled``
  do, so one all-reduce is priced once however many ops read the sum.
- Edges price the change from the producer's placement to the one the consumer wants with
  the cost model's ``change_time``; an op's compute (a contraction's flops at ``flops``, any
  other op's bytes at ``copy_beta``) divides by the ranks of every mesh dim its choice
  splits.  A gradient is laid out like its parameter (an edge into the leaf), and an
  in-place op's result lands in its target's layout (an edge into the target).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..ops import RULES, Choice
from ..placement import Partial, Replicate, Shard
from .graph import StepGraph

CONTRACTIONS = {"matmul", "einsum", "dot", "tensordot", "inner", "vdot", "outer", "kron"}


@dataclass
class Item:
    kind: str                    # "leaf" | "source" | "op" | "pin" | "settle"
    label: str
    choices: List[List[Choice]]  # per mesh dim
    node: Optional[int] = None   # the graph node of an op or pin
    value: Optional[int] = None  # the value it provides (an op: its first output)
    work: float = 0.0            # compute seconds on one rank with nothing split


@dataclass(frozen=True)
class Edge:
    value: int
    src: int        # the item whose output placement the value has
    dst: int        # the item that reads it
    slot: int       # the operand of dst's choices it is; -1: dst's output placement
    nbytes: int


@dataclass
class Problem:
    graph: StepGraph
    items: List[Item]
    edges: List[Edge]
    provider: Dict[int, int]                 # value -> item whose output it is
    memory: List[Tuple[int, float]] = field(default_factory=list)  # (item, bytes x count)
    budget: Optional[float] = None

    @property
    def mesh_shape(self):
        return self.graph.mesh_shape


def _leaf_choices(shape, n: int) -> List[Choice]:
    return [Choice((), Replicate())] + [Choice((), Shard(d)) for d, size in enumerate(shape)
                                        if size >= n and n > 1]


def _fixed(layout, with_input: bool) -> List[List[Choice]]:
    return [[Choice((p,) if with_input else (), p)] for p in layout]


def _sums_only(choices, inputs) -> List[Choice]:
    """The rule's choices with partial terms of sums only, and no constant wanted as terms
    (and no windows: the solver prices layouts; a window's halo is the chooser's)."""
    out = []
    for c in choices:
        if c.window is not None:
            continue
        placements = (*c.inputs, c.output)
        if any(isinstance(p, Partial) and p.reduce_op != "sum" for p in placements):
            continue
        if any(v is None and isinstance(p, Partial) for v, p in zip(inputs, c.inputs)):
            continue
        if c not in out:
            out.append(c)
    return out


def work_seconds(node, values, model) -> float:
    """Compute of an op on one rank with nothing split: a contraction's flops (2 x the
    square root of the product of its three sizes: m n k for a matmul) at ``flops``, any
    other op's bytes read and written at ``copy_beta``."""
    ins = [o for o in node.call.operands]
    outs = [values[v] for v in node.outputs]
    if node.name in CONTRACTIONS and len(ins) >= 2 and outs:
        sizes = [math.prod(ins[0].shape), math.prod(ins[1].shape), math.prod(outs[0].shape)]
        return 2 * math.sqrt(math.prod(max(s, 1) for s in sizes)) / model.flops
    moved = sum(math.prod(o.shape) * o.dtype.itemsize for o in ins)
    moved += sum(v.nbytes for v in outs)
    return moved / model.copy_beta


def build(graph: StepGraph, model, budget: Optional[float] = None) -> Problem:
    mesh = graph.mesh_shape
    items: List[Item] = []
    provider: Dict[int, int] = {}

    def add(item: Item) -> int:
        items.append(item)
        return len(items) - 1

    leaf_item = {}
    for leaf in graph.leaves:
        shape = graph.values[leaf.value].shape
        choices = (_fixed(leaf.pinned, False) if leaf.pinned is not None
                   else [_leaf_choices(shape, n) for n in mesh])
        leaf_item[leaf.value] = provider[leaf.value] = add(Item("leaf", leaf.path, choices,
                                                                value=leaf.value))
    for v, layout in graph.sources.items():
        provider[v] = add(Item("source", f"%{v} (made in the step)", _fixed(layout, False),
                               value=v))
    node_item = {}
    for k, node in enumerate(graph.nodes):
        if node.kind == "pin":
            item = Item("pin", f"{node.name} #{k}", _fixed(node.layout, True), k,
                        node.outputs[0] if node.outputs else None)
        else:
            rule = RULES[node.name](node.call)
            choices = _sums_only(rule.choices, node.inputs)
            item = Item("op", f"{node.name} #{k}", [list(choices) for _ in mesh], k,
                        node.outputs[0] if node.outputs else None,
                        work_seconds(node, graph.values, model))
        node_item[k] = add(item)
        for v in node.outputs:
            provider[v] = node_item[k]

    edges: List[Edge] = []
    reads = graph.consumers()
    settled = {}
    for v, count in reads.items():
        src = provider.get(v)
        if src is None or count < 2 or items[src].kind != "op":
            continue
        # in the choices' order (a set's would follow hashes: ranks must index alike)
        outs = [list(dict.fromkeys(c.output for c in per_dim)) for per_dim in items[src].choices]
        if not any(isinstance(p, Partial) for dim in outs for p in dim):
            continue
        choices = [[Choice((p,), p) for p in dim_outs] +
                   [Choice((Partial(),), Replicate())] * (Partial() in dim_outs)
                   for dim_outs in outs]
        settled[v] = add(Item("settle", f"reduce %{v} once", choices, value=v))
        edges.append(Edge(v, src, settled[v], 0, graph.values[v].nbytes))
        provider[v] = settled[v]
    for k, node in enumerate(graph.nodes):
        for j, v in enumerate(node.inputs):
            if v is not None:
                edges.append(Edge(v, provider[v], node_item[k], j, graph.values[v].nbytes))
        if node.target is not None:
            edges.append(Edge(node.target, node_item[k], provider[node.target], -1,
                              graph.values[node.target].nbytes))
    for g, leaf_value in graph.grads:
        if g in provider and leaf_value in leaf_item:
            edges.append(Edge(g, provider[g], leaf_item[leaf_value], -1, graph.values[g].nbytes))

    memory = []
    params = {leaf.value for leaf in graph.leaves if leaf.param}
    for leaf in graph.leaves:
        count = 2 + graph.optimizer_slots if leaf.value in params else 1
        memory.append((leaf_item[leaf.value], graph.values[leaf.value].nbytes * count))
    for v in graph.saved_for_backward():
        if v not in leaf_item and v in provider:
            memory.append((provider[v], graph.values[v].nbytes))
    return Problem(graph, items, edges, provider, memory, budget)


def splits(choice: Choice) -> bool:
    """Whether a choice divides the op's work over the mesh dim (some block is a split)."""
    return any(isinstance(p, Shard) for p in (*choice.inputs, choice.output))


def wanted(item: Item, dim: int, c: int, slot: int):
    choice = item.choices[dim][c]
    return choice.output if slot < 0 else choice.inputs[slot]


class Pricer:
    """The per-mesh-dim prices of a problem, given every other mesh dim's current choices:
    ``at(dim, assignment)`` reads those once (each item's shards and work splits on the
    other mesh dims), then the prices are lookups."""

    def __init__(self, problem: Problem, model):
        self.p, self.model = problem, model
        self.dim, self.shards, self.split = None, [], []

    def at(self, dim: int, assignment) -> "Pricer":
        items, mesh = self.p.items, self.p.mesh_shape
        self.dim, self.shards, self.split = dim, [], []
        for i, item in enumerate(items):
            shards = split = 1
            for k, n in enumerate(mesh):
                if k != dim:
                    choice = item.choices[k][assignment[i][k]]
                    shards *= n if isinstance(choice.output, Shard) else 1
                    split *= n if splits(choice) else 1
            self.shards.append(shards)
            self.split.append(split)
        self._change = {}
        return self

    def change(self, p, q, nbytes: int) -> float:
        key = (p, q, nbytes)
        cost = self._change.get(key)
        if cost is None:
            cost = self._change[key] = self.model.change_time(
                p, q, self.dim, self.p.mesh_shape[self.dim], nbytes)
        return cost

    def edge_cost(self, edge: Edge, p, q) -> float:
        return self.change(p, q, edge.nbytes // self.shards[edge.src])

    def item_cost(self, item: int, c: int) -> float:
        it = self.p.items[item]
        choice = it.choices[self.dim][c]
        if it.kind == "settle":
            nbytes = self.p.graph.values[it.value].nbytes // self.shards[item]
            return self.change(choice.inputs[0], choice.output, nbytes)
        if it.work:
            n = self.p.mesh_shape[self.dim]
            return it.work / self.split[item] / (n if splits(choice) else 1)
        return 0.0

    def memory(self, item: int, c: int, nbytes: float) -> float:
        choice = self.p.items[item].choices[self.dim][c]
        n = self.p.mesh_shape[self.dim]
        return nbytes / self.shards[item] / (n if isinstance(choice.output, Shard) else 1)
