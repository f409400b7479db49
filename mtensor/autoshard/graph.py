"""A step as the whole-graph search sees it: the global values of one call and the ops
between them, before any layout is decided.

``mt.compile``'s graph holds local blocks after dispatch has chosen every layout; the search
needs what comes before the choices (op names, global shapes, static params), so the
recorder (``autoshard.record``) keeps this graph from the same dispatch calls.  Pure data:
the search (``autoshard.problem``, ``autoshard.solve``) reads it without MPI.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..ops import RULES, OpCall, Operand
from ..placement import Replicate

Layout = tuple


@dataclass(frozen=True)
class Value:
    """One DTensor of the step: global shape, dtype, the phase that made it."""

    shape: Tuple[int, ...]
    dtype: np.dtype
    phase: str = "forward"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass(frozen=True)
class Node:
    """An op of the step.  ``kind`` "op": a dispatched op (``call`` is what its sharding rule
    reads); "pin": ``x.redistribute(...)`` or ``mt.shard_hint``, whose output layout is the
    user's (``layout``), or (named "result", no output) the caller's whole read of a
    result.  ``inputs`` holds the value of each operand (None: a constant);
    ``target``: the value an in-place op writes into (its result must end in that value's
    layout)."""

    kind: str
    name: str
    inputs: Tuple[Optional[int], ...]
    outputs: Tuple[int, ...]
    call: Optional[OpCall] = None
    target: Optional[int] = None
    layout: Optional[Layout] = None
    phase: str = "forward"
    region: str = ""


@dataclass(frozen=True)
class Leaf:
    """A DTensor argument of the step: its pytree path, its value, the layout the user pinned
    (None: free) and whether the step differentiates it (a parameter: its gradient and its
    optimizer state are laid out like it)."""

    path: str
    value: int
    pinned: Optional[Layout] = None
    param: bool = False


@dataclass
class StepGraph:
    mesh_shape: Tuple[int, ...]
    values: List[Value]
    nodes: List[Node]
    leaves: List[Leaf]
    sources: Dict[int, Layout] = field(default_factory=dict)  # made in the step, not by an op
    grads: List[Tuple[int, int]] = field(default_factory=list)  # (gradient, its leaf's value)
    optimizer_slots: int = 2     # arrays of optimizer state per parameter (Adam: 2)

    def consumers(self) -> Dict[int, int]:
        """How many reads each value has (operands, gradient links, in-place targets)."""
        count: Dict[int, int] = {}
        for node in self.nodes:
            for v in node.inputs:
                if v is not None:
                    count[v] = count.get(v, 0) + 1
            if node.target is not None:
                count[node.target] = count.get(node.target, 0) + 1
        for g, _ in self.grads:
            count[g] = count.get(g, 0) + 1
        return count

    def saved_for_backward(self) -> List[int]:
        """Values made in the forward phase that the backward reads: the activations held
        at the peak, between the two."""
        made_forward = {v for v, value in enumerate(self.values) if value.phase == "forward"}
        return sorted({v for node in self.nodes if node.phase == "backward"
                       for v in node.inputs if v in made_forward})


class GraphBuilder:
    """A step graph written by hand from shapes alone (no arrays, no MPI): to search layouts
    for a model too large for this machine (``examples/propagator.py --dry-run``) and for
    the search's unit tests.  Output shapes come from the ops' own sharding rules."""

    def __init__(self, mesh_shape, optimizer_slots: int = 2):
        self.graph = StepGraph(tuple(mesh_shape), [], [], [], optimizer_slots=optimizer_slots)

    def _value(self, shape, dtype, phase) -> int:
        self.graph.values.append(Value(tuple(shape), np.dtype(dtype), phase))
        return len(self.graph.values) - 1

    def leaf(self, path: str, shape, dtype=np.float64, pinned=None, param=False) -> int:
        v = self._value(shape, dtype, "forward")
        self.graph.leaves.append(Leaf(path, v, None if pinned is None else tuple(pinned), param))
        return v

    def op(self, name: str, *inputs, params=(), phase="forward", region="") -> int:
        """Op ``name`` of values (ints) and constants (numpy arrays or scalars)."""
        refs = tuple(x if isinstance(x, int) and not isinstance(x, bool) else None
                     for x in inputs)
        operands = tuple(
            Operand(self.graph.values[v].shape, self.graph.values[v].dtype,
                    (Replicate(),) * len(self.graph.mesh_shape)) if v is not None else
            Operand(np.shape(x), np.asarray(x).dtype, None) for v, x in zip(refs, inputs))
        call = OpCall(name, operands, tuple(params), self.graph.mesh_shape)
        out_shape = RULES[name](call).out_shape
        dtype = np.result_type(*[o.dtype for o in operands])
        out = self._value(out_shape, dtype, phase)
        self.graph.nodes.append(Node("op", name, refs, (out,), call, phase=phase,
                                     region=region))
        return out

    def pin(self, x: int, layout, phase="forward", region="") -> int:
        out = self._value(self.graph.values[x].shape, self.graph.values[x].dtype, phase)
        self.graph.nodes.append(Node("pin", "redistribute", (x,), (out,), layout=tuple(layout),
                                     phase=phase, region=region))
        return out

    def grad(self, g: int, leaf: int) -> None:
        self.graph.grads.append((g, leaf))
