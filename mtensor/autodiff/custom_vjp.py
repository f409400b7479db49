"""``mt.custom_vjp``: a function of DTensors with a gradient of its own (JAX's shape).

    @mt.custom_vjp
    def f(x, w): ...
    def f_fwd(x, w): return f(x, w), (x, w)          # the value and the residuals
    def f_bwd(res, g): return (g_x, g_w)             # one cotangent per argument
    f.defvjp(f_fwd, f_bwd)

Inside ``value_and_grad`` the forward runs with the tape paused (its ops are not recorded)
and the backward pass calls ``f_bwd`` once with the output's cotangent.  Outside, ``f`` is
called as it is.  One DTensor output; cotangents are pytrees like the arguments (None for
none).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import modes
from ..dtensor import DTensor
from ..pytree import flatten
from .tape import VJPS


class custom_vjp:
    """``fun`` with the gradient ``defvjp(fwd, bwd)`` gives it."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun, self.fwd, self.bwd = fun, None, None

    def defvjp(self, fwd, bwd) -> None:
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        tape = modes.active.tape
        per_arg = [flatten(a)[0] for a in args]
        leaves = [leaf for tree in per_arg for leaf in tree if type(leaf) is DTensor]
        if tape is None or not any(tape.follows(leaf) for leaf in leaves):
            return self.fun(*args)
        if self.fwd is None:
            raise TypeError(f"custom_vjp({self.fun.__name__}): call defvjp(fwd, bwd) before "
                            f"differentiating it")
        modes.active.tape = None
        try:
            out, residuals = self.fwd(*args)
        finally:
            modes.active.tape = tape
        if type(out) is not DTensor:
            raise TypeError(f"custom_vjp({self.fun.__name__}): fwd must return (a DTensor, "
                            f"residuals); it returned {type(out).__name__} as the value")
        kept = [[type(leaf) is DTensor for leaf in tree] for tree in per_arg]
        tape.push("custom_vjp", tuple(leaves), (self, residuals, kept, {}), out)
        return out


def _custom_vjp_vjp(j, g, out, operands, params):
    """Operand ``j``'s cotangent from one call of ``bwd`` (kept for the other operands)."""
    rule, residuals, kept, memo = params
    if memo.get("g") is not g:
        cotangents = rule.bwd(residuals, g)
        if not isinstance(cotangents, tuple) or len(cotangents) != len(kept):
            raise TypeError(f"custom_vjp({rule.fun.__name__}): bwd must return a tuple of "
                            f"{len(kept)} cotangents, one per argument")
        flat = []
        for c, mask in zip(cotangents, kept):
            tree = [None] * len(mask) if c is None else flatten(c)[0]
            if len(tree) != len(mask):
                raise TypeError(f"custom_vjp({rule.fun.__name__}): a cotangent has "
                                f"{len(tree)} leaves where its argument has {len(mask)}")
            flat += [leaf for leaf, is_dtensor in zip(tree, mask) if is_dtensor]
        memo.update(g=g, flat=flat)
    grad = memo["flat"][j]
    return np.zeros_like(operands[j]) if grad is None else grad


VJPS["custom_vjp"] = _custom_vjp_vjp
