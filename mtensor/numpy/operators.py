"""numpy's arithmetic, comparison and unary operators on DTensor (``install_operators``):
straight to dispatch, with their reflected and in-place forms.
"""
from __future__ import annotations

from ..dispatch import dispatch
from .writes import inplace

_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARE = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
            "eq": "equal", "ne": "not_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}


def _binary(op):
    return lambda self, other: dispatch(op, (self, other))


def _inplace(op):
    return lambda self, other: inplace.inplace(op, self, other)


def _reflected(op):
    return lambda self, other: dispatch(op, (other, self))


def _unary(op):
    return lambda self: dispatch(op, (self,))


def install_operators(cls) -> None:
    """Give ``cls`` (DTensor) numpy's arithmetic, comparison and unary operators, each
    with its reflected and in-place forms."""
    for name, op in _BINARY.items():
        setattr(cls, f"__{name}__", _binary(op))
        setattr(cls, f"__r{name}__", _reflected(op))
        setattr(cls, f"__i{name}__", _inplace(op))
    for name, op in _COMPARE.items():
        setattr(cls, f"__{name}__", _binary(op))
    for name, op in _UNARY.items():
        setattr(cls, f"__{name}__", _unary(op))
