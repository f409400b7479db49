"""Constant folding: a compute node whose operands are all private constants runs once, now,
and its results become constants of the graph (the ones seed of a backward, a mask made
with ``np.tril(np.ones(...))`` and broadcast, a scale divided by a count).

Only constants nothing outside the graph holds (``Graph.private``: made inside the step, or
Python scalars) are read, so no later write from outside can make the folded value stale;
nodes an in-place write may reach (``slots.mutable``) stay.  Bit for bit: the same kernel
runs on the same values, once instead of every step.
"""
from __future__ import annotations

from dataclasses import replace

from .slots import mutable


def run(graph):
    written = mutable(graph.nodes)
    consts, private = dict(graph.consts), set(graph.private)
    returned = {s for s, _ in graph.outputs if s is not None}
    kept, folded = [], 0
    for node in graph.nodes:
        if (node.kind == "compute" and node.fn is not None and all(s in private for s in node.ins)
                and not written.intersection(node.ins + node.outs)
                and not returned.intersection(node.outs)):
            result = node.fn(*[consts[s] for s in node.ins])
            results = (result,) if len(node.outs) == 1 else tuple(result)
            for s, value in zip(node.outs, results):
                consts[s] = value
                private.add(s)
            folded += 1
            continue
        kept.append(node)
    if not folded:
        return graph, {}
    return replace(graph, nodes=kept, consts=consts, private=frozenset(private)), {
        "folded": folded}
