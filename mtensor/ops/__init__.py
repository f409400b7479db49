"""Sharding rules, one file per op family, all registered in ``registry.RULES``."""
from . import contraction, indexing, join, pointwise, reduction, ufunc_methods, views  # noqa: F401  (register)
from .choose import choose
from .registry import RULES, Choice, OpCall, Operand, Strategy

__all__ = ["RULES", "Choice", "OpCall", "Operand", "Strategy", "choose"]
