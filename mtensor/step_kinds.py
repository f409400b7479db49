"""The step kinds of a redistribution, as data: one table that the planner, the cost model,
the executor and bucketing all read.  A new kind is a row here, a builder in
``redistribute/execute.py`` and, if it communicates, a method of the Communicator protocol.
(The reduce ops a step may carry are the other table: ``placement.REDUCE_OPS``.)

``halo`` is the one kind no layout change makes: a rank sends a few edge slices of its block
to the previous and the next rank of a mesh dim and receives theirs (``ops.windows`` plans
which, from shapes alone); the rule of an op that reads shifted slices asks for it.

``send`` and ``recv`` are point to point: one rank of a mesh dim sends a block to one other
(``mt.pipeline``'s activations and their gradients between neighbouring stages).  They run
nonblocking where ranks run different programs, so a compiled replay starts them where they
were traced, never fuses them, and never turns them into blocking calls
(``overlap.schedule``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepKind:
    name: str
    collective: bool    # moves data between the ranks of a mesh dim (else local)
    bus_factor: int     # bytes per rank = bus_factor * (n-1)/n * S (nccl-tests' convention)
    sized_after: bool   # S is the block after the step (a gather grows it), else before
    reduces: bool       # carries the source Partial's reduce op
    fusible: bool       # a compiled step may fuse several into one bucket
    neighbours: bool = False  # sends to neighbouring ranks (edge slabs, a stage's output):
    #                           S is the bytes sent, priced as one latency plus S / beta
    point_to_point: bool = False  # one message to or from one rank (counts: (peer, tag))


STEP_KINDS = {kind.name: kind for kind in (
    StepKind("all_reduce", True, 2, False, True, True),
    StepKind("all_gather", True, 1, True, False, True),
    StepKind("reduce_scatter", True, 1, False, True, True),
    StepKind("all_to_all", True, 1, False, False, False),
    StepKind("halo", True, 1, False, False, False, neighbours=True),
    StepKind("send", True, 1, False, False, False, neighbours=True, point_to_point=True),
    StepKind("recv", True, 1, True, False, False, neighbours=True, point_to_point=True),
    StepKind("local_slice", False, 0, True, False, False),
    StepKind("local_partial", False, 0, False, False, False),
)}

COLLECTIVES = tuple(name for name, kind in STEP_KINDS.items() if kind.collective)
FUSIBLE = tuple(name for name, kind in STEP_KINDS.items() if kind.fusible)
POINT_TO_POINT = tuple(name for name, kind in STEP_KINDS.items() if kind.point_to_point)
