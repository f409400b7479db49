"""Prefetch of parameters split over the batch dims (ZeRO-3, FSDP's plan) in a compiled step.

A *parameter gather* is an all-gather whose input is an argument's block: a parameter laid
out ``Shard`` over dp, gathered where an op needs it whole.  Two passes, pure (the graph
alone, the same on every rank):

- ``reshard_after_forward`` (FSDP2's option of that name): the forward's gathered copy is
  dropped after its last forward use, and the backward gathers the parameter again just
  before its first backward use; the copies alive at once are then a few blocks', not the
  whole model's, for one more all-gather per parameter.
- ``start_limits``: the node after which each gather may start.  With depth ``d`` the k-th
  gather of a phase starts just before the (k - d)-th one's result is first read: it moves
  while blocks k - d to k - 1 compute (FSDP's forward and backward prefetch); ``d = 0``
  starts each gather just before its own use (no prefetch).

``choose_depth`` picks ``d`` on the cost model's timeline (``cost.timeline``): the smallest
depth whose predicted step is within 1% of the fastest, plus one block of slack.  The model
is optimistic about a link moving behind compute: on the network test bed
(``benchmarks/netbed/ZERO3.md``) depth 1, which it predicted as fast as any, hid 64-75% of
a ZeRO-3 step's gathers where depth 2 hid 83%, for one more gathered block in memory.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import List, Optional, Sequence

import numpy as np

from ..cost.timeline import bucket_cost, simulate
from .schedule import plan_schedule


def parameter_gathers(graph) -> List[int]:
    """Indices of the all-gathers that read an argument's block."""
    inputs = {s for s in graph.inputs if s is not None}
    return [i for i, n in enumerate(graph.nodes)
            if n.kind == "collective" and n.name == "all_gather" and n.ins[0] in inputs]


def kept_for_backward(graph) -> int:
    """Bytes of the forward's parameter gathers that backward nodes read (the gathered
    copies a step without resharding keeps from the forward to the backward)."""
    total = 0
    for g in parameter_gathers(graph):
        out = graph.nodes[g].outs[0]
        if graph.nodes[g].where[1] == "forward" and any(
                out in n.ins and n.where[1] == "backward" for n in graph.nodes):
            c = graph.nodes[g].fn
            total += math.prod(c.out_shape) * np.dtype(c.dtype).itemsize
    return total


def reshard_after_forward(graph):
    """The graph with each forward parameter gather that the backward reads repeated in the
    backward; its backward readers read the new copy, so the forward's copy dies at its last
    forward use.  The copies are placed in the order the backward needs them, each just
    before the first reader of the one needed before it (the first: where the backward
    begins), so each is posted ahead of the gradient reductions of the block before it and
    the link, which serves collectives in the order they start, moves it first (FSDP2
    issues its backward prefetch before the reduce-scatter for the same reason)."""
    nodes, nslots = list(graph.nodes), graph.nslots
    again = []                                   # (first backward reader, new gather)
    for g in parameter_gathers(graph):
        gather = nodes[g]
        out = gather.outs[0]
        if gather.where[1] != "forward":
            continue
        readers = [i for i, n in enumerate(nodes) if out in n.ins and n.where[1] == "backward"]
        if not readers:
            continue
        again.append((readers[0], replace(gather, outs=(nslots,),
                                          where=(nodes[readers[0]].where[0], "backward"))))
        for i in readers:
            nodes[i] = replace(nodes[i], ins=tuple(nslots if s == out else s
                                                   for s in nodes[i].ins))
        nslots += 1
    if not again:
        return graph
    again.sort(key=lambda pair: pair[0])
    start = next(i for i, n in enumerate(nodes) if n.where[1] == "backward")
    before = {}
    for j, (_, new) in enumerate(again):
        before.setdefault(start if j == 0 else again[j - 1][0], []).append(new)
    out = [new for i, node in enumerate(nodes) for new in (*before.get(i, ()), node)]
    return replace(graph, nodes=out, nslots=nslots)


def start_limits(graph, buckets: Sequence[Sequence[int]], depth: Optional[int]) -> List[int]:
    """Per bucket, the node after which it may start (-1: no limit).  ``depth`` None:
    gathers start as early as their inputs allow (the whole forward's at the step's start)."""
    limits = [-1] * len(buckets)
    if depth is None:
        return limits
    nodes, gathers = graph.nodes, set(parameter_gathers(graph))
    first_read = {}
    for i, n in enumerate(nodes):
        for s in n.ins:
            first_read.setdefault(s, i)
    backward = next((i for i, n in enumerate(nodes) if n.where[1] == "backward"), len(nodes))

    def first_use(k):
        return min(first_read.get(s, len(nodes)) for m in buckets[k] for s in nodes[m].outs)

    for phase in ("forward", "backward"):
        seq = [k for k, b in enumerate(buckets)
               if b[0] in gathers and nodes[b[0]].where[1] == phase]
        for j, k in enumerate(seq):
            if j >= depth:
                limits[k] = first_use(seq[j - depth]) - 1
            elif phase == "backward":
                limits[k] = backward - 1        # not before the backward begins
    return limits


def bucket_costs(graph, buckets, model) -> list:
    """The cost model's price of each bucket (as ``explain`` prices the replay's)."""
    out = []
    for b in buckets:
        members = [graph.nodes[m].fn for m in b]
        first = members[0]
        out.append(bucket_cost(first.kind, first.mesh_dim, first.n,
                               sum(m.nbytes for m in members),
                               sum(m.bucket_bytes for m in members), len(members) > 1, model))
    return out


def choose_depth(graph, buckets, overlaps, inflight_cap: int, seconds, model,
                 most: int = 4) -> Optional[int]:
    """One more than the smallest prefetch depth (1 to ``most``) whose predicted step is
    within 1% of the fastest, at most ``most``; None where the step gathers no parameter."""
    gathers = set(parameter_gathers(graph))
    if not any(b[0] in gathers for b in buckets):
        return None
    costs = bucket_costs(graph, buckets, model)
    times = {}
    for depth in range(1, most + 1):
        program = plan_schedule(graph.nodes, buckets, overlaps, inflight_cap,
                                start_limits(graph, buckets, depth))
        times[depth] = simulate(program, seconds, costs, model.overlap_slowdown).step_s
    best = min(times.values())
    return min(most, 1 + min(d for d, t in times.items() if t <= best * 1.01))
