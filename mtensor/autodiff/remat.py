"""``mt.remat(fn)``: rematerialisation (JAX's ``jax.checkpoint``; gradient checkpointing).

    block = mt.remat(block)          # or @mt.remat
    h = block(params_i, h)

Outside ``value_and_grad`` the result is ``fn`` itself.  Inside, when a DTensor argument is
followed by the tape, ``fn`` runs with the tape paused (as ``custom_vjp``'s forward), so
none of its intermediate activations is kept, and the tape gets ONE entry holding only
``fn``'s inputs and outputs.  Its gradient runs ``fn``'s forward again from those inputs
under a fresh tape of its own (``tape.nested``, following the inputs the outer tape
follows), then walks that tape back from the outputs' cotangents with the backward walk of
``value_and_grad`` (``api.backward_from``); each input's cotangent goes on into the outer
walk as it came, so the gradients are laid out as without remat.  The block's activations
live only while its own backward runs: the tape holds one block's inputs per block instead
of every intermediate (``mt.debug.tape_bytes`` measures it).

The recomputed forward runs its collectives again (what JAX does by default): a tensor-
parallel block pays its forward all-reduce once more in the backward, billed by
``CommDebugMode`` to the block's region in the ``"backward"`` phase.  Under ``mt.compile``
the trace records the backward as it ran, recompute included, and the replay repeats it.

Arguments are pytrees (dicts, lists, tuples) of DTensors and other values, keyword
arguments too; the result is a DTensor or a pytree holding at least one.  ``fn`` must be a
pure function of its arguments: a random draw inside would draw again in the recompute
(pass the values in), and it must not write into its inputs.  Blocks nest (a remat inside
a remat recomputes the inner block during the outer one's backward) and repeat.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from .. import modes
from ..dtensor import DTensor
from ..pytree import flatten
from . import api, tape
from .tape import VJPS


def remat(fn: Callable) -> Callable:
    """``fn`` whose intermediate activations are recomputed in the backward pass instead of
    kept by the tape (JAX's ``jax.checkpoint``); usable as a decorator.

    Outside ``value_and_grad`` it is ``fn``.  Inside, ``fn`` runs with the tape paused and
    the tape keeps one entry with ``fn``'s inputs and outputs only; the backward pass runs
    ``fn`` again from the inputs and differentiates that run, so the gradients are those
    without remat.  The recompute runs ``fn``'s collectives again.  ``fn`` takes pytrees of
    DTensors and other values (keywords too), returns a DTensor or a pytree holding at least
    one (else ``TypeError``), and must be pure: no random draws inside (pass them in), no
    writes into its inputs.  ``mt.debug.tape_bytes()`` measures what the tape holds."""
    name = getattr(fn, "__name__", "fn")

    @functools.wraps(fn)
    def rematerialised(*args, **kwargs):
        recording = modes.active.tape
        leaves, rebuild = flatten((args, kwargs))
        at = [i for i, leaf in enumerate(leaves) if type(leaf) is DTensor]
        if recording is None or not any(recording.follows(leaves[i]) for i in at):
            return fn(*args, **kwargs)
        modes.active.tape = None
        try:
            out = fn(*args, **kwargs)
        finally:
            modes.active.tape = recording
        outs, build = _outputs(name, out, "returned")
        inputs = {id(leaves[i]) for i in at}
        outs = [np.copy(o) if id(o) in inputs else o for o in outs]   # its own id for each
        operands = tuple({id(leaves[i]): leaves[i] for i in at}.values())   # each once
        call = _Call(name, fn, tuple(leaves), rebuild,
                     tuple(recording.follows(o) for o in operands))
        recording.push("remat", operands, (call,), tuple(outs))
        return build(outs)
    return rematerialised


@dataclass(eq=False)
class _Call:
    """One call of a remat'd function, as its tape entry keeps it: the function and its
    flattened arguments (their distinct DTensors are the entry's operands), which operands
    the tape followed, and, once the backward reaches it, their cotangents by position
    (each handed out once)."""

    name: str
    fn: Callable
    leaves: tuple
    rebuild: Callable
    followed: tuple
    cotangents: Optional[dict] = field(default=None, repr=False)


def _outputs(name: str, out, how: str):
    """The DTensors among ``out``'s leaves, and a function putting new ones in their place."""
    leaves, rebuild = flatten(out)
    at = [i for i, leaf in enumerate(leaves) if type(leaf) is DTensor]
    if not at:
        kinds = sorted({type(leaf).__name__ for leaf in leaves})
        raise TypeError(f"remat({name}): the function must return a DTensor or a pytree "
                        f"(tuple, list, dict) holding DTensors, whose gradients the backward "
                        f"pass can follow; it {how} {type(out).__name__} (leaves: "
                        f"{', '.join(kinds)}); return the DTensors, or call it outside "
                        f"mt.remat")

    def build(outs):
        new = list(leaves)
        for i, o in zip(at, outs):
            new[i] = o
        return rebuild(new)
    return [leaves[i] for i in at], build


def _remat_vjp(j, g, out, operands, params):
    """Operand ``j``'s cotangent, from one recompute and walk of the block (made at the
    first call, handed out to each followed operand)."""
    call = params[0]
    if call.cotangents is None:
        call.cotangents = _recompute(call, operands, g)
    grad = call.cotangents.pop(j, None)
    return np.zeros_like(operands[j]) if grad is None else grad


def _recompute(call: _Call, operands, cotangents) -> list:
    """The block's forward again under a tape of its own, walked back from ``cotangents``
    (one per DTensor output, None where none came): the followed operands' cotangents by
    position."""
    followed = [o for o, f in zip(operands, call.followed) if f]
    with tape.nested(followed) as inner:
        args, kwargs = call.rebuild(list(call.leaves))
        outs, _ = _outputs(call.name, call.fn(*args, **kwargs), "returned in the recompute")
        if len(outs) != len(cotangents):
            raise RuntimeError(f"remat({call.name}): the recompute returned {len(outs)} "
                               f"DTensors where the forward returned {len(cotangents)}; the "
                               f"function must be pure (the same structure every call)")
        seeds: dict = {}
        for o, c in zip(outs, cotangents):
            if c is not None and inner.follows(o):
                k = inner.key(o)
                seeds[k] = c if k not in seeds else seeds[k] + c
        left = api.backward_from(inner, seeds)
    return {j: left.get(inner.key(o)) for j, (o, f) in enumerate(zip(operands, call.followed))
            if f}


VJPS["remat"] = _remat_vjp
