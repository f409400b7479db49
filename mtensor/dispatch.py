"""Dispatch: the one path every op takes on DTensors.

    unwrap -> rule -> choose -> redistribute inputs -> local compute -> wrap

Everything up to the choice depends only on the op name, static params and the operands'
specs, so it is decided once per signature and cached as a ``Decision``: a repeated call
looks the signature up, runs the bound redistribution programs (none when the layouts
already fit), calls the kernel on the local blocks and wraps the result."""
from __future__ import annotations

import sys

import numpy as np

from . import modes, views
from .comm import guard
from .decide import Decision, current_model, decide, decided_with, decision_for, direct_into
from .device.arrays import is_block
from .dtensor import DTensor
from .placement import Partial
from .spec import fmt_placements as fmt


def dispatch(name: str, operands, params=(), cache: bool = True, keep=None, temporary=None):
    """Run op ``name`` on ``operands`` (DTensors, scalars, arrays) with ``params``, hashable
    unless ``cache`` is False (index arrays: decided anew on each call).  ``keep``: an
    operand that must keep its layout (the target an in-place op writes back into).
    ``temporary``: an operand nothing else holds, whose block may take the result."""
    if views.state.detached:
        _sync(operands)
    seen = read_forms(operands) if reduced.count else operands
    decision = decision_for(name, seen, params) if cache else decide(name, seen, params)
    if temporary is not None:
        out = _into_temporary(name, operands, seen, params, decision, temporary)
        if out is not None:
            return out
    return run_decision(name, operands, params, decision, keep, seen)


def _into_temporary(name, operands, seen, params, decision, temporary):
    """Run ``decision`` writing its result into ``temporary``'s block (numpy's temporary
    elision) and return the result, where that changes nothing anyone sees: no tracer or
    plan recording, the result laid out and typed as the temporary, its block its own (no
    view, no twin); None, having done nothing, elsewhere.  The same kernel on the same
    blocks: the bits are the fresh result's.  While a tape records, only where the op's
    gradient rule does not read the temporary's value (the tape keeps no other reference
    to it: ``autodiff.residuals``) and every operand is used as it is; the result is then a
    new DTensor on the block, a value of its own to the tape."""
    active = modes.active
    tape = active.tape
    if (decision.into is None or decision.nout != 1
            or active.tracer is not None or active.autoshard is not None
            or temporary._view is not None or temporary._reduced is not None
            or decision.placements != temporary._spec.placements
            or decision.shape != temporary._spec.shape or not _owned(temporary._local)
            or decision.dtype != temporary.dtype or (
                type(temporary._local) is not np.ndarray
                and not all(_keeps_dtype(o, temporary.dtype) for o in seen))):
        return None
    if tape is not None and (any(decision.prepare) or not tape.may_overwrite(
            name, operands, [k for k, o in enumerate(operands) if o is temporary])):
        return None
    decision.into(*_blocks(name, seen, decision), temporary._local)
    temporary._version += 1
    if tape is None:
        return temporary
    if not tape.follows(temporary):     # a constant operand the entry would keep: its spec
        stand_in = tape.ghost(temporary)
        operands = tuple(stand_in if o is temporary else o for o in operands)
        seen = tuple(stand_in if o is temporary else o for o in seen)
    out = DTensor(temporary._local, temporary._spec)
    tape.push(name, operands, params, out, seen)
    return out


def _owned(block) -> bool:
    """Whether nothing but its DTensor holds ``block`` and it owns its memory."""
    return block.base is None and sys.getrefcount(block) == _HELD_BY_ONE


def _keeps_dtype(operand, dtype) -> bool:
    """Whether an operand leaves an arithmetic result in ``dtype`` (Python scalars are weak:
    an int or float leaves a float dtype as it is): what a device block asks, whose library
    may resolve scalars otherwise than numpy."""
    if type(operand) is DTensor or is_block(operand):
        return operand.dtype == dtype
    if type(operand) in (int, float):
        return dtype.kind in "fc"
    return False


def read_forms(operands, keep=None) -> tuple:
    """The operands as ops read them (``DTensor.reduced_form``): a tensor of partial terms
    that an earlier op reduced is read reduced; ``keep`` (a write's target) as it is."""
    for o in operands:
        if type(o) is DTensor and o._reduced is not None and o is not keep:
            return tuple(x.reduced_form() if type(x) is DTensor and x is not keep else x
                         for x in operands)
    return operands


def run_decision(name: str, operands, params, decision, keep=None, seen=None):
    """Run a decision (``decision_for``'s, made on ``seen``: the operands as read, by
    default themselves) on the operands and wrap the result; the tape and auto_shard see
    the operands themselves."""
    seen = operands if seen is None else seen
    tracer = modes.active.tracer
    if decision.direct and tracer is None:
        blocks = None
        result = decision.kernel(*[o._local for o in seen])
    else:
        blocks = _blocks(name, seen, decision, keep)
        if tracer is None:
            result = decision.kernel(*blocks)
        else:
            result = tracer.call(name, decision.traced, blocks, decision.nout,
                                 detail=_strategy(decision, seen), params=params)
    if decision.nout > 1:
        out = tuple(_wrap(r, decision) for r in result)
    elif is_block(result) and result.dtype in decision.specs:
        out = DTensor(result, decision.specs[result.dtype])
    else:
        out = _wrap(result, decision)
    if modes.active.tape is not None or modes.active.autoshard is not None:
        used = _as_used(seen, decision, blocks)
        if modes.active.tape is not None:
            modes.active.tape.push(name, operands, params, out, used)
        if modes.active.autoshard is not None and not decision.mesh.is_local:
            modes.active.autoshard.ran(name, operands, params, out, used=used)
    return out


def dispatch_into(name: str, operands, params, target) -> bool:
    """Run op ``name`` writing its result into ``target``'s block, in ``target``'s layout
    (numpy's ``out=``, the in-place operators).  False, having done nothing, when no
    strategy of the op produces that layout or the op cannot write into a block: the caller
    then computes the result and assigns it."""
    if views.state.detached:
        _sync(operands + (target,))
    operands = read_forms(operands, target) if reduced.count else operands
    decision = decision_for(name, operands, params, target._spec.placements)
    if decision is None or decision.into is None or decision.shape != target._spec.shape:
        return False
    if (decision.direct and not decision.check and not params and len(operands) == 2
            and operands[0] is target and modes.active.autoshard is None):
        direct_into[(name, target._spec, operands[1]._spec)] = decision.into
    blocks = _blocks(name, operands, decision, target) + [target._local]
    if modes.active.tracer is None:
        decision.into(*blocks)
    else:
        modes.active.tracer.call(name, decision.into, blocks, 0, "effect",
                                 _strategy(decision, operands), params)
    if modes.active.autoshard is not None and not decision.mesh.is_local:
        modes.active.autoshard.ran(name, operands, params, None, target=target)
    return True


def inplace_direct(name: str, target, other) -> bool:
    """``target op= other`` where both blocks are used as they are (the common case) in one
    lookup; False when that case has not been decided yet (``dispatch_into`` decides it).
    The caller makes sure no hook (tape, tracer, view) needs to see the write."""
    into = direct_into.get((name, target._spec, other._spec))
    if into is None or decided_with[0] is not current_model[0]:
        return False
    into(target._local, other._local, target._local)
    return True


def _sync(operands) -> None:
    for o in operands:
        if type(o) is DTensor and o._view is not None:
            views.sync(o)


def _blocks(name, operands, decision, keep=None) -> list:
    """Each operand's block as the decision wants it (redistributed where needed); the
    DTensors reduced on the way keep their reduced block (:func:`_settle`), but ``keep``."""
    guard.state.op = name
    reuse = modes.active.reuse
    if reuse is not None:
        return [(o._local if type(o) is DTensor else o) if run is None
                else _laid_out_once(o, run, spec, reuse)
                for o, run, spec in zip(operands, decision.prepare, decision.in_specs)]
    blocks, moved = [], {}
    for o, run, spec in zip(operands, decision.prepare, decision.in_specs):
        if run is None:
            blocks.append(o._local if type(o) is DTensor else o)
        elif type(o) is not DTensor:
            blocks.append(run(o))
        else:
            key = (id(o), id(run))
            if key not in moved:       # spec None: read through windows, from the DTensor
                moved[key] = (o, run(o._local) if spec is not None else run(o), spec)
            blocks.append(moved[key][1])
    for o, block, spec in moved.values():
        if o is not keep:
            _settle(o, block, spec)
    return blocks


class _Reduced:
    count = 0   # reduced twins made so far: until the first, operands are read as they are


reduced = _Reduced()


def _settle(operand, block, spec) -> None:
    """A DTensor of partial terms that an op needed reduced keeps the reduced block as its
    twin (``DTensor.reduced_form``): the same value, so every later read (the normalisation
    after the variance, the residual read again) finds it whole instead of reducing it
    again, as Megatron's all-reduce hands its one result to every consumer.  The operand's
    own placements and block stay as its owner made them (reading never changes a layout);
    its next write drops the twin.  Views keep their own reads, and a compiled step's
    arguments too (the graph reads them as they were passed)."""
    if (operand._view is None and spec is not None
            and any(isinstance(p, Partial) for p in operand._spec.placements)
            and not any(isinstance(p, Partial) for p in spec.placements)
            and (modes.active.tracer is None or not modes.active.tracer.is_input(operand._local))):
        operand._reduced = (operand._version, views.state.epoch, DTensor(block, spec))
        reduced.count += 1


def _strategy(decision: Decision, operands) -> str:
    """``[S(0), R] x const -> [S(0), R]``: the layouts the kernel ran on and produced."""
    used = [fmt(spec.placements) if spec is not None else
            fmt(o.placements) if type(o) is DTensor else "const"
            for o, spec in zip(operands, decision.in_specs)]
    return f"{' x '.join(used)} -> {fmt(decision.placements)}"


def _as_used(operands, decision, blocks):
    """The operands laid out as the op used them: the backward pass reuses these (the
    all-reduced activation, not the Partial one it came from)."""
    if blocks is None:
        return operands
    return tuple(DTensor(b, spec) if spec is not None else o
                 for o, b, spec in zip(operands, blocks, decision.in_specs))


def _laid_out_once(operand, run, spec, reuse: dict):
    """During a backward pass a tensor is redistributed once per layout, however many
    products use it; ``reuse[id]`` also keeps its latest layout, which the pass hands to the
    next product (the memo lives as long as the pass and keeps the operand alive)."""
    if type(operand) is not DTensor or spec is None:     # a constant, or read through windows
        return run(operand)
    key = (id(operand), id(run))
    if key not in reuse:
        reuse[key] = reuse[id(operand)] = (operand, DTensor(run(operand._local), spec))
    return reuse[key][1]._local


def _wrap(result, decision: Decision) -> DTensor:
    if not is_block(result):
        result = np.asarray(result)       # numpy reductions return scalars
    return DTensor(result, decision.out_spec(result.dtype))


def _measure_owned() -> int:
    """The count at which ``_owned`` tells a block only its holder holds from one held
    once more, found through ``_owned`` itself (called as ``_into_temporary`` calls it)."""
    global _HELD_BY_ONE

    class Holder:
        __slots__ = ("_local",)

    alone, shared = Holder(), Holder()
    alone._local, shared._local = np.empty(1), np.empty(1)
    other = shared._local
    for count in range(1, 16):
        _HELD_BY_ONE = count
        if _owned(alone._local) and not _owned(shared._local):
            del other
            return count
    raise RuntimeError("dispatch: cannot count a block's holders on this interpreter")


_HELD_BY_ONE = 0
_HELD_BY_ONE = _measure_owned()
