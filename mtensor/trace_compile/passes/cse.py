"""Common-subexpression elimination: a compute node that runs the same kernel on the same
slots as an earlier one reads the earlier one's results instead.

Kernels are pure functions of their operands (random draws are constants of the graph), so
the same kernel object (dispatch caches one per op, layouts and params) on the same slots
gives the same values, bit for bit.  Nodes reading a slot an in-place write may change
(``slots.mutable``) are left alone, and so are nodes whose results are returned (two
results would share one array).

An elementwise op is merged only where the earlier result is still read at or after the
repeat: recomputing it costs one pass over memory, while keeping it alive from a forward
to a backward holds its array all that time and keeps the ops between from writing into it
(``x * x`` in a GELU, recomputed by its backward: merging it cost the forward's
``(x * x) * x`` its in-place write, more than the product saved).
"""
from __future__ import annotations

from dataclasses import replace

from .inplace import elementwise
from .slots import mutable, renamed


def run(graph):
    written = mutable(graph.nodes)
    returned = {s for s, _ in graph.outputs if s is not None}
    last_read = {s: i for i, n in enumerate(graph.nodes) for s in n.ins}
    last_read.update((s, len(graph.nodes)) for s in returned)
    seen, alias, kept, merged = {}, {}, [], 0
    for i, node in enumerate(graph.nodes):
        node = renamed(node, alias)
        if (node.kind == "compute" and node.fn is not None and not written.intersection(node.ins)
                and not written.intersection(node.outs) and not returned.intersection(node.outs)):
            key = (id(node.fn), node.name, node.ins, len(node.outs))
            earlier = seen.get(key)
            if earlier is not None and (not elementwise(node) or last_read.get(
                    earlier.outs[0], -1) >= i):
                alias.update(zip(node.outs, earlier.outs))
                for s in earlier.outs:
                    last_read[s] = max(last_read.get(s, -1), *(last_read.get(o, -1)
                                                               for o in node.outs))
                merged += 1
                continue
            seen[key] = node
        kept.append(node)
    return replace(graph, nodes=kept), {"merged": merged} if merged else {}
