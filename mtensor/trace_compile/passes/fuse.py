"""Elementwise fusion on the GPU: a chain (a tree) of elementwise ops whose inner values
nothing else reads becomes one generated kernel (CuPy's ``ElementwiseKernel``): one launch
and one pass over memory where the chain made one of each per op.  On the host the chain
stays numpy calls (the in-place pass gives them warm buffers): a generated loop buys
nothing numpy's own loops do not, and the pass leaves host graphs as they are.

A node joins the group of an operand when that operand is the group's result, read by no
other node; every array of a group has one float dtype (float32 or float64) and every constant
is a finite Python or 0-d scalar.  The kernel evaluates the members in the order they were
recorded, each op the C expression numpy's ufunc computes, into an output laid out as the
last op's result was (later reductions add in memory order), so with FMA contraction off
(``exact``, nvcc's ``--fmad=false``) a fused kernel rounds as the separate ufunc kernels
did; ``fast`` lets nvcc contract products and sums into FMAs.  What only a GPU run shows:
that nvcc compiles the generated source and the time it saves; the strict fake CuPy runs
the same source with numpy, so the tests check the expressions and their order.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import numpy as np

from ...device import kernels
from .slots import mutable

# numpy ufunc -> the C expression of one element (CuPy's ufunc kernels compute the same)
C_EXPRESSIONS = {
    np.add: "({0} + {1})", np.subtract: "({0} - {1})", np.multiply: "({0} * {1})",
    np.true_divide: "({0} / {1})", np.negative: "(-{0})", np.positive: "(+{0})",
    np.exp: "exp({0})", np.log: "log({0})", np.sqrt: "sqrt({0})", np.tanh: "tanh({0})",
    np.sin: "sin({0})", np.cos: "cos({0})", np.absolute: "fabs({0})",
    np.square: "({0} * {0})", np.expm1: "expm1({0})", np.log1p: "log1p({0})",
}
C_TYPES = {np.dtype(np.float64): "double", np.dtype(np.float32): "float"}


def run(graph, exact: bool = True):
    mesh = graph.mesh
    if mesh is None or getattr(mesh, "device_type", "cpu") == "cpu":
        return graph, {}
    groups = _groups(graph)
    fused = {g[-1]: g for g in groups if len(g) > 1}
    if not fused:
        return graph, {}
    inside = {i for g in fused.values() for i in g}
    nodes = []
    for i, node in enumerate(graph.nodes):
        if i in fused:
            nodes.append(_fused_node(graph, [graph.nodes[k] for k in fused[i]], exact))
        elif i not in inside:
            nodes.append(node)
    return replace(graph, nodes=nodes), {"kernels": len(fused),
                                         "ops_fused": sum(map(len, fused.values()))}


def _groups(graph):
    """Lists of node indices, each a tree of fusible nodes ending at its root."""
    readers = Counter(s for n in graph.nodes for s in set(n.ins))
    readers.update(s for s, _ in graph.outputs if s is not None)
    written = mutable(graph.nodes)
    returned = {s for s, _ in graph.outputs if s is not None}
    group_of, groups = {}, {}
    for i, node in enumerate(graph.nodes):
        dtype = _fusible(graph, node, written)
        if dtype is None:
            continue
        members = [i]
        for s in dict.fromkeys(node.ins):
            g = group_of.get(s)
            if g is not None and readers[s] == 1 and s not in returned and g[0] == dtype:
                members = groups.pop(g[1]) + members
        groups[i] = members
        group_of[node.outs[0]] = (dtype, i)
    return [sorted(g) for g in groups.values()]


def _fusible(graph, node, written):
    """The dtype of an elementwise node the pass can fuse, or None."""
    if node.kind != "compute" or node.fn not in C_EXPRESSIONS or len(node.outs) != 1:
        return None
    if written.intersection(node.ins + node.outs):
        return None
    out = graph.avals[node.outs[0]]
    if out is None or out.dtype not in C_TYPES:
        return None
    for s in node.ins:
        if s in graph.consts and not _literal(graph.consts[s]):
            return None
        aval = graph.avals[s] if s not in graph.consts else None
        if aval is not None and aval.dtype != out.dtype:
            return None
    return out.dtype


def _literal(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, np.ndarray):
        return value.ndim == 0 and value.dtype.kind in "iuf" and bool(np.isfinite(value))
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def _fused_node(graph, members, exact):
    """One node running ``members`` (in order) as a generated kernel."""
    made = {m.outs[0] for m in members}
    inputs = list(dict.fromkeys(s for m in members for s in m.ins
                                if s not in made and s not in graph.consts))
    out = graph.avals[members[-1].outs[0]]
    ctype = C_TYPES[out.dtype]
    names = {s: f"x{k}" for k, s in enumerate(inputs)}
    lines = []
    for k, m in enumerate(members):
        args = [names[s] if s in names else _c_literal(graph.consts[s], ctype) for s in m.ins]
        expr = C_EXPRESSIONS[m.fn].format(*args)
        if m is members[-1]:
            lines.append(f"out0 = {expr};")
        else:
            names[m.outs[0]] = f"t{k}"
            lines.append(f"{ctype} t{k} = {expr};")
    source = kernels.Elementwise(
        ", ".join(f"{ctype} {names[s]}" for s in inputs), f"{ctype} out0", " ".join(lines),
        "mtensor_fused", out.dtype, out.order, ("--fmad=false",) if exact else ())
    root = members[-1]
    return replace(root, name=f"fused({','.join(m.name for m in members)})", fn=source,
                   ins=tuple(inputs), params=(source.operation,), into=(),
                   seconds=sum(m.seconds for m in members))


def _c_literal(value, ctype) -> str:
    text = repr(float(value))
    return text + ("f" if ctype == "float" else "")
