"""The operands as an op reads them: a tensor of partial terms that an earlier op reduced
is read reduced (``read_forms``, ``settle``); each operand's block laid out as a decision
wants it (``lay_out``), once per backward pass (``laid_out_once``); and the operands as the
op used them, which the tape keeps (``as_used``)."""
from __future__ import annotations

from . import modes, views
from .comm import guard
from .dtensor import DTensor
from .placement import Partial


def read_forms(operands, keep=None) -> tuple:
    """The operands as ops read them (``DTensor.reduced_form``): a tensor of partial terms
    that an earlier op reduced is read reduced; ``keep`` (a write's target) as it is."""
    for o in operands:
        if type(o) is DTensor and o._reduced is not None and o is not keep:
            return tuple(x.reduced_form() if type(x) is DTensor and x is not keep else x
                         for x in operands)
    return operands


def sync(operands) -> None:
    for o in operands:
        if type(o) is DTensor and o._view is not None:
            views.sync(o)


def lay_out(name, operands, decision, keep=None) -> list:
    """Each operand's block as the decision wants it (redistributed where needed); the
    DTensors reduced on the way keep their reduced block (:func:`_settle`), but ``keep``."""
    guard.state.op = name
    reuse = modes.active.reuse
    if reuse is not None:
        return [(o._local if type(o) is DTensor else o) if run is None
                else laid_out_once(o, run, spec, reuse)
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
            settle(o, block, spec)
    return blocks


class _Reduced:
    count = 0   # reduced twins made so far: until the first, operands are read as they are


reduced = _Reduced()


def settle(operand, block, spec) -> None:
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


def as_used(operands, decision, blocks):
    """The operands laid out as the op used them: the backward pass reuses these (the
    all-reduced activation, not the Partial one it came from)."""
    if blocks is None:
        return operands
    return tuple(DTensor(b, spec) if spec is not None else o
                 for o, b, spec in zip(operands, blocks, decision.in_specs))


def laid_out_once(operand, run, spec, reuse: dict):
    """During a backward pass a tensor is redistributed once per layout, however many
    products use it; ``reuse[id]`` also keeps its latest layout, which the pass hands to the
    next product (the memo lives as long as the pass and keeps the operand alive)."""
    if type(operand) is not DTensor or spec is None:     # a constant, or read through windows
        return run(operand)
    key = (id(operand), id(run))
    if key not in reuse:
        reuse[key] = reuse[id(operand)] = (operand, DTensor(run(operand._local), spec))
    return reuse[key][1]._local
