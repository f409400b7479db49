"""Recording a step's graph for the search: the step runs once, every DTensor argument a
replicated copy, with the recorder in ``modes.active.autoshard``, so dispatch reports each op
(name, operands, static params, results), the gradient pass each gradient laid out like its
parameter, and ``redistribute`` each layout the user asked for.

Replicated copies make the run a single-process numpy run on every rank: no collective,
and the arguments the step updates in place (parameters, optimizer state) are copies, so
the caller's arrays are left as they were.  It costs one step's compute and one replica's
memory.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from .. import modes
from ..decide import as_operand
from ..dtensor import DTensor
from ..ops import OpCall
from ..placement import Replicate
from ..pytree import flatten
from .graph import Leaf, Node, StepGraph, Value


class Recorder:
    def __init__(self, mesh):
        self.mesh = mesh
        self.values: List[Value] = []
        self.nodes: List[Node] = []
        self.sources: Dict[int, tuple] = {}
        self.grads = []
        self._ids: Dict[int, int] = {}
        self._alive = []            # every DTensor seen: ids stay unique while recording

    def _new(self, x) -> int:
        self.values.append(Value(tuple(x.shape), np.dtype(x.dtype), modes.active.phase))
        self._alive.append(x)
        self._ids[id(x)] = len(self.values) - 1
        return len(self.values) - 1

    def leaf(self, x) -> int:
        return self._new(x)

    def value(self, x) -> int:
        """The value of a DTensor an op reads; one made in the step by no op (``zeros_like``,
        a creation) is a source with the layout it has."""
        v = self._ids.get(id(x))
        if v is None:
            v = self._new(x)
            self.sources[v] = tuple(x.placements)
        return v

    def strategy(self, call, choices, into):
        return None                 # the recording run keeps dispatch's own choices

    def ran(self, name, operands, params, out, target=None, used=None):
        inputs = tuple(self.value(o) if type(o) is DTensor else None for o in operands)
        if used is not None:        # the backward reads an operand as the op used it
            for o, u in zip(operands, used):
                if type(o) is DTensor and u is not o:
                    self._ids[id(u)] = self._ids[id(o)]
                    self._alive.append(u)
        call = OpCall(name, tuple(as_operand(o) for o in operands), params, self.mesh.shape)
        outs = () if out is None else out if isinstance(out, tuple) else (out,)
        self.nodes.append(Node("op", name, inputs, tuple(self._new(o) for o in outs), call,
                               None if target is None else self.value(target),
                               phase=modes.active.phase, region=modes.active.region))

    def like(self, grad, leaf) -> None:
        self.grads.append((self.value(grad), self.value(leaf)))

    def pinned(self, x, out) -> None:
        self.nodes.append(Node("pin", "redistribute", (self.value(x),), (self._new(out),),
                               layout=tuple(out.placements), phase=modes.active.phase,
                               region=modes.active.region))

    def results(self, result) -> None:
        """The step's DTensor results are read whole by the caller (``float(loss)``): a
        read of each, replicated, closes the graph."""
        whole = (Replicate(),) * self.mesh.ndim
        for out in flatten(result)[0]:
            if type(out) is DTensor:
                self.nodes.append(Node("pin", "result", (self.value(out),), (), layout=whole,
                                       phase="forward", region=""))

    def graph(self, leaves, optimizer_slots: int) -> StepGraph:
        """The recorded graph; ``leaves``: (path, value, pinned layout) per DTensor argument."""
        params = {leaf for _, leaf in self.grads}
        return StepGraph(tuple(self.mesh.shape), self.values, self.nodes,
                         [Leaf(path, v, pin, v in params) for path, v, pin in leaves],
                         self.sources, self.grads, optimizer_slots)


def record(step, args, mesh, leaves_at, optimizer_slots):
    """Run ``step(*args)`` (replicated copies already) with a recorder; ``leaves_at``:
    (path, DTensor, pinned layout) per DTensor argument."""
    if modes.active.tracer is not None or modes.active.tape is not None:
        raise TypeError("auto_shard: call it outside mt.compile and value_and_grad (it runs "
                        "the step itself, gradients and all)")
    recorder = Recorder(mesh)
    leaves = [(path, recorder.leaf(x), pin) for path, x, pin in leaves_at]
    modes.active.autoshard = recorder
    try:
        result = step(*args)
    finally:
        modes.active.autoshard = None
    recorder.results(result)
    return recorder.graph(leaves, optimizer_slots)
