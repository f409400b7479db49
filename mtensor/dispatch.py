"""Dispatch: the one path every op takes on DTensors.

    unwrap -> rule -> choose -> redistribute inputs -> local compute -> wrap

Everything up to the choice depends only on the op name, static params and the operands'
specs, so it is decided once per signature and cached as a ``Decision``: a repeated call
looks the signature up, runs the bound redistribution programs (none when the layouts
already fit), calls the kernel on the local blocks and wraps the result."""
from __future__ import annotations

import numpy as np

from . import modes, views
from .decide import Decision, current_model, decide, decided_with, decision_for, direct_into
from .device.arrays import is_block
from .dtensor import DTensor
from .elision import into_temporary
from .operands import as_used, lay_out, read_forms, reduced, sync
from .spec import fmt_placements as fmt


def dispatch(name: str, operands, params=(), cache: bool = True, keep=None, temporary=None):
    """Run op ``name`` on ``operands`` (DTensors, scalars, arrays) with ``params``, hashable
    unless ``cache`` is False (index arrays: decided anew on each call).  ``keep``: an
    operand that must keep its layout (the target an in-place op writes back into).
    ``temporary``: an operand nothing else holds, whose block may take the result."""
    if views.state.detached:
        sync(operands)
    seen = read_forms(operands) if reduced.count else operands
    decision = decision_for(name, seen, params) if cache else decide(name, seen, params)
    if temporary is not None:
        out = into_temporary(name, operands, seen, params, decision, temporary)
        if out is not None:
            return out
    return run_decision(name, operands, params, decision, keep, seen)


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
        blocks = lay_out(name, seen, decision, keep)
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
        used = as_used(seen, decision, blocks)
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
        sync(operands + (target,))
    operands = read_forms(operands, target) if reduced.count else operands
    decision = decision_for(name, operands, params, target._spec.placements)
    if decision is None or decision.into is None or decision.shape != target._spec.shape:
        return False
    if (decision.direct and not decision.check and not params and len(operands) == 2
            and operands[0] is target and modes.active.autoshard is None):
        direct_into[(name, target._spec, operands[1]._spec)] = decision.into
    blocks = lay_out(name, operands, decision, target) + [target._local]
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


def _strategy(decision: Decision, operands) -> str:
    """``[S(0), R] x const -> [S(0), R]``: the layouts the kernel ran on and produced."""
    used = [fmt(spec.placements) if spec is not None else
            fmt(o.placements) if type(o) is DTensor else "const"
            for o, spec in zip(operands, decision.in_specs)]
    return f"{' x '.join(used)} -> {fmt(decision.placements)}"


def _wrap(result, decision: Decision) -> DTensor:
    if not is_block(result):
        result = np.asarray(result)       # numpy reductions return scalars
    return DTensor(result, decision.out_spec(result.dtype))


