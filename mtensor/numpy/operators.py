"""numpy's arithmetic, comparison and unary operators on DTensor (``install_operators``):
straight to dispatch, with their reflected and in-place forms.

Arithmetic on a temporary (``a * b + c``: the product is held by nothing but the
expression) writes its result into the temporary's block, as numpy does for its own
temporaries: an expression then walks one array instead of allocating one per op, which
is what makes a backward pass of fresh products cost more than the same ops compiled.
``temporary`` tells one by its reference count, measured through these same methods.
"""
from __future__ import annotations

import sys

from ..dispatch import dispatch
from ..dtensor import DTensor
from .util import temporary_count
from .writes import inplace

_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARE = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
            "eq": "equal", "ne": "not_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}


def _binary(op, run=dispatch, cls=DTensor):
    def binary(self, other):
        if sys.getrefcount(self) == _TEMPORARY:
            return run(op, (self, other), temporary=self)
        if type(other) is cls and sys.getrefcount(other) == _TEMPORARY:
            return run(op, (self, other), temporary=other)
        return run(op, (self, other))
    return binary


def _inplace(op):
    return lambda self, other: inplace.inplace(op, self, other)


def _reflected(op, run=dispatch):
    def reflected(self, other):
        if sys.getrefcount(self) == _TEMPORARY:
            return run(op, (other, self), temporary=self)
        return run(op, (other, self))
    return reflected


def _unary(op, run=dispatch):
    def unary(self):
        if sys.getrefcount(self) == _TEMPORARY:
            return run(op, (self,), temporary=self)
        return run(op, (self,))
    return unary


def _told_at(count) -> list:
    """What ``binary`` tells ``Probe() + 1`` and a named probe with ``count`` as the
    temporary's reference count (``util.temporary_count``)."""
    global _TEMPORARY
    _TEMPORARY, told = count, []

    class Probe:
        __add__ = _binary("add", lambda op, operands, temporary=None: told.append(
            temporary is not None), object)

    named = Probe()
    Probe() + 1
    named + 1
    return told


_TEMPORARY = temporary_count("numpy.operators", _told_at)


def install_operators(cls) -> None:
    """Give ``cls`` (DTensor) numpy's arithmetic, comparison and unary operators, each
    with its reflected and in-place forms."""
    for name, op in _BINARY.items():
        setattr(cls, f"__{name}__", _binary(op))
        setattr(cls, f"__r{name}__", _reflected(op))
        setattr(cls, f"__i{name}__", _inplace(op))
    for name, op in _COMPARE.items():
        setattr(cls, f"__{name}__", lambda self, other, op=op: dispatch(op, (self, other)))
    for name, op in _UNARY.items():
        setattr(cls, f"__{name}__", _unary(op))
