"""The recording executor: while ``mt.compile`` traces a function (registered as
``modes.active.tracer``), dispatch and the redistribution programs report every local
computation and every collective here.

Values are numbered slots.  An array is known by its identity: the local blocks of the
arguments are the inputs, each recorded result gets a new slot, and an array the tracer has
never seen (a constant, a block made by ``zeros_like``) becomes a constant of the graph,
held by reference.  Every array stays alive until the trace ends, so identities stay unique.
"""
from __future__ import annotations

import sys
import time
from collections import Counter

import numpy as np

from .. import modes
from ..device.arrays import is_block
from .graph import Node, aval_of


class Tracer:
    """The recording executor: while ``mt.compile`` traces, dispatch and the redistribution
    executor hand it every local kernel and collective they run (``call``, ``collective``),
    and it numbers the blocks they read and write as slots.  Blocks the step did not make
    become inputs (arguments) or constants; the result is the ``Graph`` of the step."""

    def __init__(self):
        self.nodes = []
        self.values = []        # slot -> value seen while tracing
        self.consts = {}        # slot -> constant value
        self._slot_of = {}      # id(array) -> its latest slot
        self._inputs = set()    # ids of the arguments' blocks
        self.notes = {}         # what the traced code says of itself (Graph.notes)

    def _new(self, value) -> int:
        slot = len(self.values)
        self.values.append(value)
        if is_block(value):
            self._slot_of[id(value)] = slot
        return slot

    def input(self, value) -> int:
        self._inputs.add(id(value))
        return self._new(value)

    def is_input(self, value) -> bool:
        return id(value) in self._inputs

    def ref(self, value) -> int:
        """The slot of a value an op reads: recorded before, or a new constant."""
        if is_block(value):
            slot = self._slot_of.get(id(value))
            if slot is not None:
                return slot
        slot = self._new(value)
        self.consts[slot] = value
        return slot

    def call(self, name: str, fn, args, nout: int = 1, kind: str = "compute", detail: str = "",
             params: tuple = ()):
        """Run ``fn(*args)`` and record it; ``nout`` results (0: ``fn`` works in place).
        Results that are not arrays (numpy reductions return scalars) are made arrays, and
        so is the recorded function, so the graph holds exactly the arrays DTensors wrap.
        ``params``: the op's static params, for the graph passes."""
        ins = tuple(self.ref(a) for a in args)
        start = time.perf_counter()
        result = fn(*args)
        seconds = time.perf_counter() - start
        produced = () if nout == 0 else (result,) if nout == 1 else result
        if not all(is_block(r) for r in produced):
            fn = _as_arrays(fn, nout)
            produced = tuple(np.asarray(r) for r in produced)
            result = produced[0] if nout == 1 else produced
        self.nodes.append(Node(kind, name, fn, ins, tuple(self._new(r) for r in produced),
                               seconds, detail, (modes.active.region, modes.active.phase),
                               params))
        return result

    def collective(self, collective, local, out, seconds: float) -> None:
        """Record a collective that just ran eagerly on ``local`` and gave ``out``."""
        ins = (self.ref(local),)
        self.nodes.append(Node("collective", collective.kind, collective, ins,
                               (self._new(out),), seconds,
                               where=(modes.active.region, modes.active.phase)))


    def avals(self) -> list:
        """Per slot, the ``Aval`` of the array it held while tracing, or None."""
        return [aval_of(v) for v in self.values]

    def private_consts(self) -> frozenset:
        """The constant slots whose values nothing but the trace holds (a block made inside
        the step, a Python scalar), so no later write from outside can change them: the
        passes may compute with their values once.  Read right after the trace, while the
        step's own DTensors are gone."""
        views = Counter(id(v.base) for v in self.values
                        if is_block(v) and getattr(v, "base", None) is not None)
        return frozenset(s for s in self.consts
                         if _private(self.consts, s, views.get(id(self.consts[s]), 0)))


def _as_arrays(fn, nout: int):
    if nout == 1:
        return lambda *args: np.asarray(fn(*args))
    return lambda *args: tuple(np.asarray(r) for r in fn(*args))


def _private(consts, slot, views: int) -> bool:
    """Whether ``consts[slot]`` is a scalar, or an array owning its memory that only the
    tracer holds, itself and through ``views`` views of it the trace made (no local name
    here may hold it: the count would grow by one)."""
    if not is_block(consts[slot]):
        return True
    if getattr(consts[slot], "base", None) is not None:
        return False
    return _references(consts, slot) <= _HELD_BY_TRACE + views


def _references(consts, slot) -> int:
    return sys.getrefcount(consts[slot])


# what ``_references`` reads for a constant only the tracer holds (its values list and
# consts dict): measured through the same function, not assumed
_probe = Tracer()
_probe.ref(np.empty(1))
_HELD_BY_TRACE = _references(_probe.consts, 0)
del _probe
