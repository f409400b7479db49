"""The graph IR of a traced step: numbered value slots and nodes that read and write them.

A node is local compute (``fn(*ins) -> outs``), an in-place effect (``fn(*ins)``, no outs),
or a collective (``fn`` is the executor's ``Collective``: prepare, MPI call, finish).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, NamedTuple, Optional, Tuple

from ..cost.model import get_cost_model
from ..device.arrays import is_block


class Aval(NamedTuple):
    """What a slot held while tracing: shape, dtype, and the order of its axes in memory,
    outermost first (None: C order), which later reductions' rounding depends on."""

    shape: tuple
    dtype: Any
    order: Optional[tuple] = None


def aval_of(value) -> Optional[Aval]:
    """The Aval of an array (None for anything else)."""
    if not is_block(value):
        return None
    if value.flags.c_contiguous or value.ndim < 2:
        return Aval(tuple(value.shape), value.dtype)
    order = tuple(sorted(range(value.ndim), key=lambda d: -abs(value.strides[d])))
    return Aval(tuple(value.shape), value.dtype, None if order == tuple(range(value.ndim))
                else order)


@dataclass(frozen=True)
class Node:
    """One recorded instruction: a local kernel (``compute``: ``fn(*ins) -> outs``), an
    in-place write (``effect``: ``fn(*ins)``, no outs) or a ``collective`` (``fn`` is the
    executor's bound collective), reading and writing value slots."""

    kind: str              # "compute" | "effect" | "collective"
    name: str              # op name, local step, or collective kind
    fn: Any
    ins: Tuple[int, ...]
    outs: Tuple[int, ...]
    seconds: float         # how long it took while tracing (explain's prediction)
    detail: str = ""       # an op's strategy: the placements it ran on and produced
    where: Tuple[str, str] = ("", "forward")   # the debug.region and phase it ran in
    params: tuple = ()     # the op's static params (axis, subscripts, ...), as dispatched
    into: Tuple[int, ...] = ()   # operands that may take the result (``passes.inplace``)


@dataclass
class Graph:
    """A traced step: its nodes in the order they ran, the slots of its arguments, constants
    and results, and what the passes and ``explain`` need (mesh, sizes, the result's
    pytree).  Pure data: the passes read it, ``Replay`` runs it."""

    name: str
    nodes: list
    nslots: int
    consts: Dict[int, Any]
    inputs: list           # slot per flattened argument leaf (None: not an array)
    outputs: list          # (slot, spec or None) per flattened result leaf, or (None, value)
    rebuild: Any = None    # the result's pytree from its leaves
    mesh: Any = None       # the mesh of the DTensors it takes or returns
    input_bytes: int = 0   # this rank's bytes of the array arguments and results
    output_bytes: int = 0
    avals: list = field(default_factory=list)   # slot -> the Aval of its array, or None
    private: frozenset = frozenset()   # constant slots nothing outside the graph holds
    notes: dict = field(default_factory=dict)   # what code said of the step while traced
    #                                             (mt.pipeline: its schedule, for explain)

    def collectives(self):
        return [n for n in self.nodes if n.kind == "collective"]

    def cost_model(self):
        """The cost model of the mesh its collectives run on (its links applied), or the
        current one when there are none."""
        collectives = self.collectives()
        if collectives:
            return collectives[0].fn.mesh.cost_model()
        return get_cost_model()

    def __str__(self) -> str:
        inputs = [s for s in self.inputs if s is not None]
        lines = [f"graph {self.name}: {len(self.nodes)} nodes "
                 f"({len(self.collectives())} collectives), inputs "
                 f"{', '.join(f'%{s}' for s in inputs) or 'none'}"]
        lines += [f"  {_node_line(n, self.consts)}" for n in self.nodes]
        outs = [f"%{s}" for s, _ in self.outputs if s is not None]
        lines.append(f"  return {', '.join(outs) or 'constants'}")
        return "\n".join(lines)

    __repr__ = __str__


def _arg(slot: int, consts) -> str:
    if slot not in consts:
        return f"%{slot}"
    value = consts[slot]
    if is_block(value):
        return f"const{list(value.shape)}"
    return repr(value) if not callable(value) else getattr(value, "__name__", "fn")


def _node_line(node: Node, consts) -> str:
    args = ", ".join(_arg(s, consts) for s in node.ins)
    if node.kind == "collective":
        c = node.fn
        op = f", {c.op}" if c.op else ""
        what = f"{node.name}[mesh dim {c.mesh_dim}{op}]({args})  {c.dtype} {c.nbytes} B"
    else:
        what = f"{node.name}({args})"
    if not node.outs:
        return f"{what}  (in place)"
    return f"{', '.join(f'%{s}' for s in node.outs)} = {what}"
