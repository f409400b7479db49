"""What the graph passes share: which slots an in-place write may reach, how often each slot
is read, renaming slots, and the bytes a slot's array holds.

A pass may only reason about a value by its slot when nothing writes the value in place:
an effect node (an optimizer update, ``x[mask] = 0``) writes its operands, and through a
view it writes the view's base and every other view of it.  ``mutable`` is that set,
closed over the ops that may return views; the passes leave those slots alone.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

# ops whose result may share memory with an operand (numpy views, the redistribution's
# local slices, and code of the user's, which may return one)
VIEW_OPS = frozenset({"transpose", "expand_dims", "squeeze", "broadcast_to", "reshape",
                      "getitem", "slice", "diagonal", "real", "imag", "swapaxes", "moveaxis",
                      "ravel", "view", "halo window", "squeeze", "atleast_1d", "atleast_2d",
                      "atleast_3d", "flip", "rot90"})


def may_view(node) -> bool:
    return node.name in VIEW_OPS or node.name.startswith("local_map(")


def mutable(nodes) -> frozenset:
    """The slots an in-place write may change: every operand of an effect node, closed both
    ways over the compute nodes that may return a view of an operand."""
    out = {s for n in nodes if n.kind == "effect" for s in n.ins}
    if not out:
        return frozenset()
    edges = [(s, o) for n in nodes if n.kind == "compute" and may_view(n)
             for s in n.ins for o in n.outs]
    grew = True
    while grew:
        grew = False
        for a, b in edges:
            if (a in out) != (b in out):
                out.update((a, b))
                grew = True
    return frozenset(out)


def reads(nodes, outputs) -> Counter:
    """How often each slot is read: by nodes (with multiplicity) and as a result."""
    count = Counter(s for n in nodes for s in n.ins)
    count.update(s for s, _ in outputs if s is not None)
    return count


def renamed(node, alias: dict):
    """``node`` reading ``alias[s]`` in place of each renamed slot ``s``."""
    ins = tuple(alias.get(s, s) for s in node.ins)
    return node if ins == node.ins else replace(node, ins=ins)


def nbytes(graph, slot) -> int:
    """Bytes of the array ``slot`` held while tracing (0 for a scalar or unknown)."""
    aval = graph.avals[slot] if slot < len(graph.avals) else None
    return 0 if aval is None else math.prod(aval.shape) * aval.dtype.itemsize
