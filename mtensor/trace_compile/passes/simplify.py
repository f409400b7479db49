"""Algebraic simplification: the identities autodiff and plain numpy leave in a step.

Each rule says whether it keeps eager's bits (``EXACT``):

- ``x * 1``, ``1 * x``, ``x / 1``, ``x - 0`` -> ``x`` (exact, where the result has x's shape
  and dtype);
- ``-(-x)``, ``transpose(transpose(x))`` back to x's order -> ``x`` (exact);
- ``x + 0`` -> ``x``: exact except that ``-0.0 + 0`` is ``+0.0``;
- ``x ** 2`` -> ``x * x``, ``x ** 3`` -> ``x * x * x``: numpy's ``power`` calls libm's
  ``pow`` (over ten times slower than products), whose last bit may differ;
- ``sum(broadcast_to(x), axes the broadcast added)`` -> ``x * n``: a sum of ``n`` copies
  rounds differently from one product (exact on integers).

Broadcasts of constants and every other op on constants alone are ``fold``'s.  Nodes whose
slots an in-place write may reach (``slots.mutable``) and results the step returns are
left alone.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .slots import mutable, renamed

EXACT = frozenset({"multiply_one", "subtract_zero", "double_negative", "double_transpose"})
RULES = ("multiply_one", "subtract_zero", "add_zero", "double_negative", "double_transpose",
         "small_power", "sum_of_broadcast")


def run(graph, exact: bool = False):
    rules = EXACT if exact else frozenset(RULES)
    graph = replace(graph, avals=list(graph.avals))      # _fresh adds slots to the copy
    written = mutable(graph.nodes)
    returned = {s for s, _ in graph.outputs if s is not None}
    made, alias, kept, counts = {}, {}, [], {}
    for node in graph.nodes:
        node = renamed(node, alias)
        touchable = (node.kind == "compute" and len(node.outs) == 1 and node.fn is not None
                     and not written.intersection(node.ins + node.outs)
                     and node.outs[0] not in returned)
        new = _rewrite(graph, node, made, rules) if touchable else None
        if new is None:
            kept.append(node)
        else:
            rule, result = new
            counts[rule] = counts.get(rule, 0) + 1
            if isinstance(result, int):
                alias[node.outs[0]] = result
                continue
            kept.extend(result)
            node = result[-1]
        for s in node.outs:
            made[s] = node
    graph.nodes = kept
    return graph, counts


def _rewrite(graph, node, made, rules):
    """(rule, a slot to read instead or the nodes to run instead), or None."""
    const = graph.consts
    name, ins = node.name, node.ins
    same = _same_aval(graph, node)
    if name == "multiply" and "multiply_one" in rules and len(ins) == 2:
        for a, b in ((0, 1), (1, 0)):
            if _is(const, ins[b], 1) and same(ins[a]):
                return "multiply_one", ins[a]
    if name == "divide" and "multiply_one" in rules and _is(const, ins[1], 1) and same(ins[0]):
        return "multiply_one", ins[0]
    if name == "subtract" and "subtract_zero" in rules and _is(const, ins[1], 0) and same(ins[0]):
        return "subtract_zero", ins[0]
    if name == "add" and "add_zero" in rules and len(ins) == 2:
        for a, b in ((0, 1), (1, 0)):
            if _is(const, ins[b], 0) and same(ins[a]):
                return "add_zero", ins[a]
    inner = made.get(ins[0]) if ins else None
    if name == "negative" and "double_negative" in rules and inner is not None \
            and inner.name == "negative" and same(inner.ins[0]):
        return "double_negative", inner.ins[0]
    if name == "transpose" and "double_transpose" in rules and inner is not None \
            and inner.name == "transpose" and same(inner.ins[0]) \
            and _composes_to_identity(graph, inner, node):
        return "double_transpose", inner.ins[0]
    if name == "power" and "small_power" in rules and len(ins) == 2:
        return _small_power(graph, node)
    if name == "sum" and "sum_of_broadcast" in rules and inner is not None \
            and inner.name == "broadcast_to":
        return _sum_of_broadcast(graph, node, inner)
    return None


def _is(consts, slot, value) -> bool:
    v = consts.get(slot)
    if v is None or isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, float, np.integer, np.floating)):
        return v == value
    return isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iuf" and v == value


def _same_aval(graph, node):
    """Whether a slot holds an array of exactly the node's result shape and dtype."""
    out = graph.avals[node.outs[0]]
    return lambda slot: out is not None and graph.avals[slot] == out


def _composes_to_identity(graph, first, second) -> bool:
    ndim = len(graph.avals[first.ins[0]].shape)
    p, q = (tuple(range(ndim))[::-1] if n.params[0] is None else
            tuple(a % ndim for a in n.params[0]) for n in (first, second))
    return all(p[q[i]] == i for i in range(ndim))


def _small_power(graph, node):
    x, e = node.ins
    aval = graph.avals[node.outs[0]]
    if aval is None or graph.avals[x] != aval or aval.dtype.kind not in "fc":
        return None
    for exponent, rule_nodes in ((2, 1), (3, 2)):
        if _is(graph.consts, e, exponent):
            base = node.outs[0]
            if rule_nodes == 1:
                return "small_power", [replace(node, name="multiply", fn=np.multiply,
                                               ins=(x, x), params=())]
            square = _fresh(graph, aval)
            return "small_power", [
                replace(node, name="multiply", fn=np.multiply, ins=(x, x), outs=(square,),
                        params=()),
                replace(node, name="multiply", fn=np.multiply, ins=(square, x), outs=(base,),
                        params=())]
    return None


def _sum_of_broadcast(graph, node, broadcast):
    """sum(broadcast_to(x, shape), axis, keepdims) over exactly the dims the broadcast made."""
    src = broadcast.ins[0]
    if graph.avals[src] is None or graph.avals[node.outs[0]] is None:
        return None
    src_shape, dtype = graph.avals[src].shape, graph.avals[src].dtype
    shape = graph.avals[broadcast.outs[0]].shape
    axis = node.params[0]
    if len(node.params) > 2 and node.params[2] is not None:
        return None
    padded = (1,) * (len(shape) - len(src_shape)) + tuple(src_shape)
    made = {d for d, (a, b) in enumerate(zip(padded, shape)) if a != b}
    axes = set(range(len(shape))) if axis is None else {
        a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    if axes != made or not made:
        return None
    out_shape, n = graph.avals[node.outs[0]].shape, math.prod(shape[d] for d in made)
    if dtype.kind not in "iuf":
        return None
    kernel = _times(tuple(out_shape), n)
    node = replace(node, name="multiply", fn=kernel, ins=(src,), params=(n,))
    return "sum_of_broadcast", [node]


def _times(shape, n):
    return lambda x: np.multiply(np.reshape(x, shape), n)


def _fresh(graph, aval) -> int:
    """A new slot past every slot the graph uses (``run`` works on its own copy)."""
    graph.nslots += 1
    graph.avals.append(aval)
    return graph.nslots - 1
