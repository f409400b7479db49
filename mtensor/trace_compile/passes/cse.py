"""Common-subexpression elimination: a compute node that runs the same kernel on the same
slots as an earlier one reads the earlier one's results instead.

Kernels are pure functions of their operands (random draws are constants of the graph), so
the same kernel object (dispatch caches one per op, layouts and params) on the same slots
gives the same values, bit for bit.  Nodes reading a slot an in-place write may change
(``slots.mutable``) are left alone, and so are nodes whose results are returned (two
results would share one array).
"""
from __future__ import annotations

from dataclasses import replace

from .slots import mutable, renamed


def run(graph):
    written = mutable(graph.nodes)
    returned = {s for s, _ in graph.outputs if s is not None}
    seen, alias, kept, merged = {}, {}, [], 0
    for node in graph.nodes:
        node = renamed(node, alias)
        if (node.kind == "compute" and node.fn is not None and not written.intersection(node.ins)
                and not written.intersection(node.outs) and not returned.intersection(node.outs)):
            key = (id(node.fn), node.name, node.ins, len(node.outs))
            earlier = seen.get(key)
            if earlier is not None:
                alias.update(zip(node.outs, earlier.outs))
                merged += 1
                continue
            seen[key] = node
        kept.append(node)
    return replace(graph, nodes=kept), {"merged": merged} if merged else {}
