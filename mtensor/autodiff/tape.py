"""The tape: while ``value_and_grad`` runs a function, dispatch reports every op to it
(through ``modes.active.tape``), and the ops that depend on a parameter are kept, in order,
for the backward pass.

An op's outputs depend on a parameter when one of its DTensor operands does.  Ops whose
outputs are integers or booleans (comparisons, argmax, ...) and ops with a zero derivative
(floor, sign, ...) give constants; any other op without a gradient rule raises, so a
gradient is never silently missing a term.
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager
from typing import Dict, List, Optional, Set

from .. import modes, views
from ..device.arrays import is_block
from ..dtensor import DTensor
from ..placement import Replicate, reduced
from ..pytree import flatten
from ..spec import DTensorSpec, check_placements
from . import residuals, vjps, vjps_numpy

# op name -> vjp(j, cotangent, output, operands, params): the cotangent of operand j; the
# escape hatches (blocks, custom_vjp, local_map) add theirs
VJPS: Dict[str, tuple] = {**vjps.VJPS, **vjps_numpy.VJPS}
ZERO_DERIVATIVE = {"floor", "ceil", "rint", "trunc", "sign", "floor_divide", "argmax",
                   "argmin", "heaviside", "spacing", "stop_gradient"}
# ops whose rule takes the tuple of all their outputs' cotangents at once (None where none
# came), as they are: ``mt.remat``'s, which walks its whole block back in one call
JOINT = {"remat"}


class Entry:
    """One recorded op.  operands: as passed, the followed ones as their ghosts (their ids
    take the gradients); values: as the op used them (maybe in another layout) where its
    rule reads them, else as ``operands`` holds them; outputs: ghosts; region: the
    debug.region it ran in (its gradient runs there too); result: the output as the rule
    reads it, value or ghost."""

    __slots__ = ("name", "operands", "values", "params", "outputs", "region", "result")

    def __init__(self, name: str, operands: tuple, values: tuple, params: tuple,
                 outputs: tuple, region: str, result=None):
        self.name, self.operands, self.values, self.params = name, operands, values, params
        self.outputs, self.region, self.result = outputs, region, result

    def __repr__(self) -> str:
        return f"Entry({self.name}, {len(self.operands)} operands)"


class Ghost:
    """A followed DTensor as the tape holds it: its identity (the key of its cotangent) and
    its spec (shape, dtype, layout), not its block; entries keep the value itself only
    where a gradient rule reads it (``residuals``), so the forward's temporaries are freed
    as they would be without a tape.  A DTensor keeps its ghosts, one per live tape that
    follows it (a pipeline's micro-batches each record one), newest first; each names its
    tape weakly, so a parameter's ghost does not keep a finished step's values alive."""

    __slots__ = ("tape", "_spec", "prev")

    def __init__(self, tape, spec, prev):
        self.tape, self._spec, self.prev = weakref.ref(tape), spec, prev

    shape = property(lambda self: self._spec.shape)
    ndim = property(lambda self: len(self._spec.shape))
    dtype = property(lambda self: self._spec.dtype)
    placements = property(lambda self: self._spec.placements)
    device_mesh = property(lambda self: self._spec.mesh)

    def __repr__(self) -> str:
        return f"Ghost({self._spec})"


def _ghost_on(x, tape) -> Optional[Ghost]:
    g = x._ghost
    while g is not None and g.tape() is not tape:
        g = g.prev
    return g


def _live(g) -> Optional[Ghost]:
    """The chain from ``g`` with the ghosts of finished tapes left out."""
    head = last = None
    while g is not None:
        if g.tape() is not None:
            if last is None:
                head = g
            else:
                last.prev = g
            last = g
        g = g.prev
    if last is not None:
        last.prev = None
    return head


class Tape:
    """What ``value_and_grad`` records while it runs the function: registered as
    ``modes.active.tape``, so dispatch pushes every op here."""

    def __init__(self, leaves):
        self.entries: List[Entry] = []
        self.leaves = tuple(leaves)      # held_bytes leaves their blocks out
        self.tracked: Set[int] = {id(self.ghost(leaf)) for leaf in leaves}

    def ghost(self, x: DTensor) -> Ghost:
        """``x``'s ghost on this tape (made on first sight, kept by ``x``)."""
        if x._ghost is None:        # a new value: its first ghost, without a walk
            g = x._ghost = Ghost(self, x._spec, None)
            return g
        g = _ghost_on(x, self)
        if g is None:
            g = x._ghost = Ghost(self, x._spec, _live(x._ghost))
        return g

    def ghost_of(self, x) -> Optional[Ghost]:
        """``x``'s ghost on this tape, or None (a value it never saw)."""
        return _ghost_on(x, self) if type(x) is DTensor and x._ghost is not None else None

    def follows(self, x) -> bool:
        """Whether ``x`` depends on a parameter."""
        g = self.ghost_of(x)
        return g is not None and id(g) in self.tracked

    def key(self, x) -> int:
        """The id ``x``'s cotangent goes by: its ghost's where followed."""
        g = self.ghost_of(x)
        return id(x) if g is None else id(g)

    def _followed(self, operands) -> dict:
        """The followed operands' ghosts by position."""
        found, tracked = {}, self.tracked
        for j, o in enumerate(operands):
            g = self.ghost_of(o)
            if g is not None and id(g) in tracked:
                found[j] = g
        return found

    def push(self, name: str, operands, params, out, values=None) -> None:
        """Keep ``name`` applied to ``operands`` if it depends on a parameter."""
        followed = self._followed(operands)
        if not followed:
            return
        outputs = out if type(out) is tuple else (out,)
        if name in ZERO_DERIVATIVE or not any(o.dtype.kind in "fc" for o in outputs):
            return
        if name not in VJPS:
            raise TypeError(f"value_and_grad: {name} has no gradient rule in mtensor; compute "
                            f"it outside the differentiated function or express it with "
                            f"other ops")
        ghosts = tuple(self.ghost(o) for o in outputs)
        self.tracked.update(id(g) for g in ghosts)
        used = operands if values is None else values
        read, reads_out = residuals.reads(name, followed, len(operands))
        held, kept = [], []
        for k, o in enumerate(operands):
            h = followed.get(k, o)
            held.append(h)
            kept.append(used[k] if k in read else h)
        self.entries.append(Entry(name, tuple(held), tuple(kept), params, ghosts,
                                  modes.active.region, outputs[0] if reads_out else ghosts[0]))

    def may_overwrite(self, name: str, operands, at) -> bool:
        """Whether ``name``'s result may be written over its operands at positions ``at``
        (eager temporary elision): no rule the tape would keep reads their values."""
        followed = self._followed(operands)
        if not followed:
            return True
        read, _ = residuals.reads(name, followed, len(operands))
        return not any(k in read for k in at)

    def held_bytes(self) -> int:
        """Bytes of the distinct arrays the entries keep for the backward pass (the
        operands as used, the outputs, residuals among the params), each counted once by
        the buffer it views; the differentiated parameters' own blocks are not counted
        (their owner keeps them whatever the tape does).  ``mt.debug.tape_bytes`` reads it."""
        seen, total = {id(_root(leaf._local)) for leaf in self.leaves}, 0
        for entry in self.entries:
            for x in (*entry.values, entry.result, *flatten(entry.params)[0]):
                block = x._local if type(x) is DTensor else x if is_block(x) else None
                root = None if block is None else _root(block)
                if root is not None and id(root) not in seen:
                    seen.add(id(root))
                    total += root.nbytes
        return total

    def local_of(self, x, grad_placements):
        """``x.to_local()`` of a followed ``x``: its block as a DTensor of the rank's
        one-rank mesh, followed too; its cotangent comes back laid out as
        ``grad_placements`` (default: ``x``'s placements, Partial made Replicate: each term's
        gradient is the whole gradient, DTensor's default since its pull 173454)."""
        if x._view is not None:
            views.sync(x)
        mesh, block = x.device_mesh, x._local
        grads = reduced(x.placements) if grad_placements is None else check_placements(
            "to_local (grad_placements)", grad_placements, mesh, block.shape)
        out = DTensor(block, DTensorSpec(mesh.local_mesh(), (Replicate(),), block.shape,
                                         block.dtype))
        self.push("to_local", (x,), (tuple(grads),), out)
        return out


def start(leaves) -> Tape:
    if modes.active.tape is not None or modes.active.reuse is not None:
        raise RuntimeError("value_and_grad: nested gradients are not supported")
    modes.active.tape = Tape(leaves)
    return modes.active.tape


def stop() -> None:
    modes.active.tape = None


@contextmanager
def nested(leaves):
    """A tape of its own, following ``leaves``, for a recording made while another tape's
    backward pass runs (``mt.remat`` recomputes its block so): a forward's slots (no reuse
    memo) inside, and the outer pass's slots (tape, reuse memo, region, phase) back after."""
    active = modes.active
    saved = active.tape, active.reuse, active.region, active.phase
    active.tape, active.reuse = Tape(leaves), None
    try:
        yield active.tape
    finally:
        active.tape, active.reuse, active.region, active.phase = saved


def _root(block):
    """The array whose memory ``block`` views (itself when it owns it)."""
    while is_block(getattr(block, "base", None)):
        block = block.base
    return block
