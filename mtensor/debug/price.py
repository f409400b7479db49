"""Pricing from shapes alone: what an op would choose and communicate, with no data, no mesh
of ranks and no MPI (the planning layers are pure).  ``examples/propagator.py --dry-run``
prices a model this way for a mesh bigger than the machine.

Bytes are the planner's (largest block, bus-bandwidth convention), which are what
``CommDebugMode`` reports on a real run when the shards are even.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Tuple

import numpy as np

from ..cost.model import get_cost_model
from ..ops import RULES, OpCall, Operand, choose
from ..placement import max_local_shape
from ..redistribute.plan import plan_redistribute


@dataclass(frozen=True)
class AbstractTensor:
    """A DTensor's description without data: global shape, dtype, placements."""

    shape: Tuple[int, ...]
    dtype: np.dtype
    placements: tuple

    def block_bytes(self, mesh_shape) -> int:
        """Bytes of the largest block one rank holds."""
        return math.prod(max_local_shape(self.shape, tuple(mesh_shape), self.placements)) * self.dtype.itemsize


class Collective(NamedTuple):
    kind: str
    mesh_dim: int
    bytes: int


@dataclass(frozen=True)
class OpPrice:
    op: str
    wanted: tuple            # the placements each operand is brought to
    output: AbstractTensor
    collectives: Tuple[Collective, ...]


def price_redistribute(x: AbstractTensor, placements, mesh_shape, model=None):
    """The collectives that lay ``x`` out as ``placements``."""
    plan = plan_redistribute(tuple(x.placements), tuple(placements), tuple(x.shape),
                             tuple(mesh_shape), x.dtype.itemsize, model or get_cost_model())
    return tuple(Collective(s.kind, s.mesh_dim, s.comm_bytes) for s in plan.collectives)


def price_op(name: str, operands, mesh_shape, params=(), model=None) -> OpPrice:
    """The strategy the chooser picks for op ``name`` on ``operands`` (AbstractTensors) over
    a mesh of ``mesh_shape``, and the collectives that bring the operands to it."""
    model, mesh_shape = model or get_cost_model(), tuple(mesh_shape)
    call = OpCall(name, tuple(Operand(tuple(o.shape), np.dtype(o.dtype), tuple(o.placements))
                              for o in operands), params, mesh_shape)
    strategy = RULES[name](call)
    wanted, out_layout, _ = choose(call, strategy.choices, model)
    collectives = tuple(c for o, layout in zip(operands, wanted)
                        for c in price_redistribute(o, layout, mesh_shape, model))
    dtype = np.result_type(*[o.dtype for o in operands])
    return OpPrice(name, wanted, AbstractTensor(strategy.out_shape, dtype, out_layout), collectives)
