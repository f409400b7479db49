"""In-place accumulation: a ufunc whose operand dies at it may write its result into that
operand's block (``g = g + t`` runs as ``g += t`` when nothing else reads ``g``).

The pass names, per node, the operands that may take the result (``Node.into``): read for
the last time there, made by a node of the step (not an argument or a constant), and the
op a ufunc with one result (elementwise: numpy computes ``f(x, out=x)`` as ``f(x)``).
The replay takes one only when, at run time, nothing but the replay holds its block (no
view of it, no DTensor: a reference count) and the block has the
shape, dtype and strides the result had when fresh, so every later op sees what eager code
saw, bit for bit.  Gradients summed over a step's uses, residual additions and elementwise
chains then reuse warm memory instead of a fresh array per op.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .slots import nbytes, reads


def run(graph):
    left = reads(graph.nodes, graph.outputs)
    made = {s for n in graph.nodes if n.kind == "compute" for s in n.outs}
    nodes, marked, reusable = [], 0, 0
    for node in graph.nodes:
        left.subtract(node.ins)
        if node.kind == "compute" and elementwise(node):
            into = tuple(s for s in dict.fromkeys(node.ins) if s in made and left[s] == 0)
            if into:
                node = replace(node, into=into)
                marked += 1
                reusable += nbytes(graph, node.outs[0])
        nodes.append(node)
    counts = {"may_write_in_place": marked, "reusable_bytes": reusable} if marked else {}
    return replace(graph, nodes=nodes), counts


def elementwise(node) -> bool:
    """Whether ``node`` runs a ufunc with one result on its operands as they are."""
    return isinstance(node.fn, np.ufunc) and node.fn.nout == 1 and len(node.outs) == 1
