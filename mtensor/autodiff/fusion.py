"""Composites on the tape: before the backward walk, the ops of each layer norm, GELU,
softmax and logsumexp the function wrote in plain numpy are replaced by one entry whose
backward is the hand-derived rule of ``composites`` (``fusion.patterns`` finds them).

The forward has already run op by op, so values are untouched; only the backward changes,
by fewer and cheaper ops (equal to the unfused backward to rounding).  Eager and compiled
steps fuse alike (``mt.compile`` traces the eager backward), so they stay bit for bit equal.
A match is taken only when nothing else reads the gradient of a value inside it, and every
followed value it reads is one of the composite's differentiable inputs.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..dtensor import DTensor
from ..fusion.match import match
from ..fusion.patterns import PATTERNS, ROOT_OPS
from .composites import READS, READS_OUTPUT, RULES
from .tape import VJPS, Entry, Ghost


class _TapeView:
    """The tape as ``fusion.match`` reads it: values by identity, made by entries."""

    def __init__(self, entries):
        self.entries = entries
        self.made = {id(o): i for i, e in enumerate(entries) for o in e.outputs}

    def producer(self, value):
        i = self.made.get(id(value))
        if i is None:
            return None
        e = self.entries[i]
        return e.name, e.params, e.operands, i

    @staticmethod
    def scalar(value):
        if isinstance(value, (bool, np.bool_)) or type(value) is DTensor:
            return None
        if isinstance(value, (int, float, np.integer, np.floating)):
            return float(value)
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
            return float(value)
        return None

    @staticmethod
    def key(value):
        return id(value)


@dataclass(eq=False)
class Composite:
    """One composite on the tape: its rule, the match's bindings, and its inputs'
    cotangents, computed once for all of them at the first input's turn (the walk hands
    each input the cotangent laid out as the previous product left it, so not one object)
    and each handed out once."""

    name: str
    bound: dict
    inputs: tuple
    cotangents: Optional[dict] = field(default=None, repr=False)

    def cotangent(self, j, dy, out):
        if self.cotangents is None:
            rule = RULES[self.name][0]
            self.cotangents = rule(self.bound, dy, out, self.inputs)
        return self.cotangents.pop(self.inputs[j])


def _composite_vjp(j, g, out, operands, params):
    return params[0].cotangent(j, g, out)


for _name in RULES:
    VJPS[_name] = _composite_vjp


def fuse(recorded, seeded=()) -> int:
    """Replace the composites among ``recorded``'s entries, in place; ``seeded``: the ids of
    the values whose cotangents come from outside (the differentiated value; or a dict of
    seeds keyed by those ids, as a nested walk has them).  Returns how many it replaced."""
    entries = recorded.entries
    view = _TapeView(entries)
    held = _held(recorded)
    uses = Counter(id(o) for e in entries for o in e.operands)
    uses.update(tuple(seeded))     # a dict's keys: update(dict) would add its values
    taken, replaced = set(), {}
    for i in reversed(range(len(entries))):
        entry = entries[i]
        if i in taken or entry.name not in ROOT_OPS or len(entry.outputs) != 1:
            continue
        for name, pattern in PATTERNS:
            m = match(pattern, entry.outputs[0], view, uses.__getitem__)
            if m is None or taken.intersection(m.records):
                continue
            composite = _composite(name, m, recorded.tracked, held, entry.result)
            if composite is None:
                continue
            taken.update(m.records)
            operands = tuple(m.bound[k] for k in composite.inputs)
            replaced[i] = Entry(name, operands, operands, (composite,), entry.outputs,
                                entry.region, entry.result)
            break
    if replaced:
        recorded.entries = [replaced.get(i, e) for i, e in enumerate(entries)
                            if i not in taken or i in replaced]
    return len(replaced)


def _held(recorded) -> dict:
    """The values the tape keeps, by the id of the ghost that stands for each: what a
    composite's rule may read."""
    held = {id(recorded.ghost(leaf)): leaf for leaf in recorded.leaves}
    for e in recorded.entries:
        for o, v in zip(e.operands, e.values):
            if type(o) is Ghost and type(v) is DTensor:
                held[id(o)] = v
        if type(e.result) is DTensor:
            held[id(e.outputs[0])] = e.result
    return held


def _composite(name, m, tracked, held, out):
    """The composite of a match, or None when its rule does not apply: a followed input the
    rule does not differentiate (a shift that is not a constant), complex values, np.var's
    divisor other than the axis' length (``ddof``), or a value its rule reads that the tape
    did not keep.  Its bindings are the kept values; its inputs' ghosts route cotangents."""
    _, differentiable = RULES[name]
    bound = m.bound
    if any(type(bound[k]) is Ghost and id(bound[k]) in tracked
           for k in m.inputs if k not in differentiable):
        return None
    if any(type(v) in (DTensor, Ghost) and v.dtype.kind == "c" for v in bound.values()):
        return None
    if "n" in bound and bound["n"] != bound["x"].shape[bound["axis"]]:
        return None
    values = {k: held.get(id(v), v) if type(v) is Ghost else v for k, v in bound.items()}
    if any(type(values.get(k)) is Ghost for k in READS[name]) or (
            name in READS_OUTPUT and type(out) is not DTensor):
        return None
    inputs = tuple(k for k in differentiable
                   if type(bound.get(k)) is Ghost and id(bound[k]) in tracked)
    return Composite(name, values, inputs)
