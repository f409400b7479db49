"""Sharding rules, one file per op family, all registered in ``registry.RULES``."""
from . import (  # the op families: each registers its rules in registry.RULES as it loads
    contraction,
    fft,
    halo,
    indexing,
    join,
    pad,
    pointwise,
    reduction,
    ufunc_methods,
    views,
)
from .choose import choose
from .registry import RULES, Choice, OpCall, Operand, Strategy

__all__ = ["RULES", "Choice", "OpCall", "Operand", "Strategy", "choose"]
