"""Eager temporary elision: an op on a DTensor that nothing but the expression holds
(``a * b + c``: the product) writes its result into that temporary's block, as numpy does
for its own temporaries (the operators and ``__array_ufunc__`` tell a temporary by its
reference count).  A temporary of partial sums that the op reads reduced is reduced in
its own block first (``MPI_IN_PLACE``, as a hand-written step reduces its partial sums)."""
from __future__ import annotations

import sys

import numpy as np

from . import modes
from .comm import guard
from .device.arrays import is_block, owns_memory
from .dtensor import DTensor
from .operands import lay_out
from .redistribute.execute import Program


def into_temporary(name, operands, seen, params, decision, temporary):
    """Run ``decision`` writing its result into ``temporary``'s block (numpy's temporary
    elision) and return the result, where that changes nothing anyone sees: no tracer or
    plan recording, the result laid out and typed as the temporary, its block its own (no
    view, no twin); None, having done nothing, elsewhere.  The same kernel on the same
    blocks: the bits are the fresh result's.  A temporary of partial sums that the op reads
    reduced is reduced in its own block first (``_reduced_first``).  While a tape records,
    only where the op's gradient rule does not read the temporary's value (the tape keeps
    no other reference to it: ``autodiff.residuals``) and every other operand is used as it
    is; the result is then a new DTensor on the block, a value of its own to the tape."""
    active = modes.active
    tape = active.tape
    if (decision.into is None or decision.nout != 1
            or active.tracer is not None or active.autoshard is not None
            or temporary._view is not None or temporary._reduced is not None
            or decision.shape != temporary._spec.shape or not owned(temporary._local)
            or decision.dtype != temporary.dtype or (
                type(temporary._local) is not np.ndarray
                and not all(_keeps_dtype(o, temporary.dtype) for o in seen))):
        return None
    reduce = _reduced_first(decision, seen, temporary)
    if reduce is False or tape is not None and (
            any(p is not reduce for p in decision.prepare if p is not None)
            or not tape.may_overwrite(name, operands,
                                      [k for k, o in enumerate(operands) if o is temporary])):
        return None
    if reduce is None:
        blocks = lay_out(name, seen, decision)
    else:   # the other operands are used as they are
        guard.state.op = name
        reduce.reduce_in_place(temporary._local)
        blocks = [o._local if type(o) is DTensor else o for o in seen]
    decision.into(*blocks, temporary._local)
    temporary._version += 1
    if tape is None and reduce is None:
        return temporary
    out = DTensor(temporary._local, temporary._spec if reduce is None
                  else decision.out_spec(temporary.dtype))
    if tape is None:
        return out
    if not tape.follows(temporary):     # a constant operand the entry would keep: its spec
        stand_in = tape.ghost(temporary)
        operands = tuple(stand_in if o is temporary else o for o in operands)
        seen = tuple(stand_in if o is temporary else o for o in seen)
    tape.push(name, operands, params, out, seen)
    return out


def _reduced_first(decision, seen, temporary):
    """How ``temporary`` comes to the result's layout: None where it has it; where it holds
    partial sums of it, and every other operand is used as it is, its lone all-reduce, to
    run in its own contiguous block (``Program.reduce_in_place``); False elsewhere."""
    if decision.placements == temporary._spec.placements:
        return None
    k = next(k for k, o in enumerate(seen) if o is temporary)
    run = decision.prepare[k]
    if (type(run) is Program and run.reduces and temporary._local.flags.c_contiguous
            and decision.in_specs[k].placements == decision.placements
            and sum(p is not None for p in decision.prepare) == 1):
        return run
    return False


def owned(block) -> bool:
    """Whether nothing but its DTensor holds ``block`` and its memory, which it may write
    (``device.arrays.owns_memory``)."""
    return sys.getrefcount(block) == _HELD_BY_ONE and owns_memory(block)


def _keeps_dtype(operand, dtype) -> bool:
    """Whether an operand leaves an arithmetic result in ``dtype`` (Python scalars are weak:
    an int or float leaves a float dtype as it is): what a device block asks, whose library
    may resolve scalars otherwise than numpy."""
    if type(operand) is DTensor or is_block(operand):
        return operand.dtype == dtype
    if type(operand) in (int, float):
        return dtype.kind in "fc"
    return False


def _measure_owned() -> int:
    """The count at which ``owned`` tells a block only its holder holds from one held
    once more, found through ``owned`` itself (called as ``into_temporary`` calls it)."""
    global _HELD_BY_ONE

    class Holder:
        __slots__ = ("_local",)

    alone, shared = Holder(), Holder()
    alone._local, shared._local = np.empty(1), np.empty(1)
    other = shared._local
    for _HELD_BY_ONE in range(1, 16):
        if owned(alone._local) and not owned(shared._local):
            del other
            return _HELD_BY_ONE
    raise RuntimeError("elision: cannot count a block's holders on this interpreter")


_HELD_BY_ONE = 0
_HELD_BY_ONE = _measure_owned()
