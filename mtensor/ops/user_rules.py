"""User-taught ops: ``mt.register_sharding(op, rule)``.

A user's rule has the form of mtensor's own, written for ONE mesh dim: ``rule(call)`` reads a
:class:`ShardingCall` (the op's array operands' shapes and dtypes, its other arguments by
name) and returns the layouts under which the op may run on blocks, each a pair
``(placements of the operands, placement of the output)``.  The chooser applies the list to
every mesh dim and prices it with the cost model, as it does a built-in rule's; the
all-Replicate choice (the op on whole arrays) is always added, so some choice always fits.

Among numpy's arguments, the arrays (anything implementing ``__array_function__``:
DTensors, numpy and device arrays), positional or keyword, are the operands; every other
argument is static and reaches the kernel as given.  The kernel is the op itself applied to
the blocks unless ``kernel=`` replaces it (called the same way, blocks in the arrays'
places); the output shape is numpy's on stand-ins of the global shapes (zero-stride arrays
of zeros, one numpy call per new signature, so numpy's argument errors surface alike on
every rank) unless ``out_shape(call)`` gives it.  Ops with one output only.

Registration routes ``np.op(x)`` on DTensors (``__array_function__``, ``__array_ufunc__``)
to the rule; operators (``x + y``) and mtensor's own uses of an op keep the built-in rule.
"""
from __future__ import annotations

import inspect
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..placement import Partial, Replicate, Shard
from .registry import RULES, Choice, OpCall, Operand, Strategy, replicated

ROUTES: Dict[Any, "Route"] = {}   # numpy function or ufunc -> what np.op(DTensor) dispatches
BUILT_IN: list = []               # tables of the functions mtensor handles (the numpy wing's)
_serial = itertools.count()       # each registration's token: a new rule, new cache keys


@dataclass(frozen=True)
class Slot:
    """Where operand ``index`` sat among the op's arguments."""

    index: int


@dataclass(frozen=True)
class ShardingCall:
    """What a user's rule reads: ``operands`` (``.shape``, ``.dtype``, ``.ndim``) in the
    order they appear among the arguments, and ``args``, the other arguments by parameter
    name with numpy's defaults filled in (by position where the op has no Python
    signature)."""

    name: str
    operands: Tuple[Operand, ...]
    args: Dict[Any, Any]

    def error(self, what: str, fix: str) -> ValueError:
        """A ValueError naming the op, its operands' shapes, what went wrong and the fix."""
        return OpCall(self.name, self.operands, (), ()).error(what, fix)


def _is_array(value) -> bool:
    return hasattr(type(value), "__array_function__")


def _holds_array(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_is_array(v) or _holds_array(v) for v in value)
    return isinstance(value, dict) and _holds_array(list(value.values()))


class Route:
    """One registration: splits numpy's arguments into operands and static params, and is
    the registry rule that turns the user's choices into a :class:`Strategy`."""

    def __init__(self, op, rule, kernel=None, out_shape=None):
        self.op, self.rule, self.kernel, self.out_shape = op, rule, kernel, out_shape
        self.name, self.token = op_name(op), next(_serial)
        try:
            self.signature = inspect.signature(op)
        except (TypeError, ValueError):
            self.signature = None

    def split(self, args, kwargs):
        """(op name, operands, params, whether params are hashable: the decision cache)."""
        if kwargs.get("out") is not None:
            raise TypeError(f"{self.name}: out= is not supported for an op taught by "
                            f"register_sharding; assign the result instead")
        operands = []

        def take(value):
            if _is_array(value):
                operands.append(value)
                return Slot(len(operands) - 1)
            if _holds_array(value):
                raise TypeError(f"{self.name}: an array inside a list, tuple or dict argument "
                                f"is not supported for an op taught by register_sharding; "
                                f"pass each array as its own argument")
            return value
        static = tuple(take(v) for v in args)
        named = tuple((k, take(kwargs[k])) for k in sorted(kwargs) if k != "out")
        params = (self.token, static, named)
        try:
            hash(params)
        except TypeError:
            return self.name, tuple(operands), params, False
        return self.name, tuple(operands), params, True

    def arguments(self, static, named) -> dict:
        if self.signature is None:
            found = {**dict(enumerate(static)), **dict(named)}
        else:
            try:
                bound = self.signature.bind(*static, **dict(named))
            except TypeError as e:
                raise TypeError(f"{self.name}: {e}") from None
            bound.apply_defaults()
            found = bound.arguments
        return {k: v for k, v in found.items() if type(v) is not Slot}

    def __call__(self, call: OpCall) -> Strategy:
        _, static, named = call.params
        view = ShardingCall(self.name, call.operands, self.arguments(static, named))
        shape = (_stand_in_shape(self.name, self.op, call.operands, static, named)
                 if self.out_shape is None else tuple(int(s) for s in self.out_shape(view)))
        choices = [_as_choice(view, len(shape), k, c) for k, c in enumerate(self.rule(view))]
        whole = replicated(len(call.operands))
        choices = choices if whole in choices else [whole] + choices
        return Strategy(shape, choices, kernel=_kernel(self.kernel or self.op, static, named))


def _kernel(fn, static, named):
    def kernel(*blocks):
        def put(v):
            return blocks[v.index] if type(v) is Slot else v
        return fn(*[put(v) for v in static], **{k: put(v) for k, v in named})
    return kernel


def _stand_in_shape(name, op, operands, static, named):
    stand_ins = [np.broadcast_to(np.zeros((), o.dtype), o.shape) for o in operands]
    with np.errstate(all="ignore"):
        out = _kernel(op, static, named)(*stand_ins)
    if isinstance(out, (tuple, list)):
        raise TypeError(f"{name}: returns {len(out)} outputs; register_sharding teaches ops "
                        f"with one output")
    return tuple(np.shape(out))


def _as_choice(view: ShardingCall, out_ndim: int, k: int, given) -> Choice:
    """The rule's ``k``-th choice as a Choice, or a ValueError saying what is wrong."""
    def bad(what):
        return ValueError(f"register_sharding: the rule for {view.name} returned choice {k} "
                          f"{given!r}, which {what}; return (placements of the "
                          f"{len(view.operands)} operand(s), placement of the output)")
    if isinstance(given, Choice):
        inputs, output = given.inputs, given.output
    else:
        try:
            inputs, output = given
        except (TypeError, ValueError):
            raise bad("is not a pair") from None
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if len(inputs) != len(view.operands):
        raise bad(f"has {len(inputs)} operand placement(s)")
    for p, ndim in zip(inputs + (output,), [o.ndim for o in view.operands] + [out_ndim]):
        if not _is_placement(p):
            raise bad(f"holds {p!r}, not Shard(d), Replicate() or Partial(op)")
        if isinstance(p, Shard) and not 0 <= p.dim < ndim:
            raise bad(f"shards dim {p.dim} of an array of {ndim} dims")
    return Choice(inputs, output)


def _is_placement(p) -> bool:
    return isinstance(p, (Shard, Replicate, Partial))


def op_name(op) -> str:
    """``np.unwrap`` -> ``"np.unwrap"``, ``np.linalg.det`` -> ``"np.linalg.det"``."""
    module = getattr(op, "__module__", None) or ""
    if module == "numpy" or module.startswith("numpy."):
        module = "np" + module[len("numpy"):]
    return f"{module}.{op.__name__}" if module else op.__name__


def resolve(op):
    """A numpy function or ufunc, or its name under numpy (``"unwrap"``, ``"linalg.det"``)."""
    if isinstance(op, str):
        found = np
        for part in op.split("."):
            found = getattr(found, part, None)
        if not callable(found):
            raise ValueError(f"register_sharding: numpy has no function {op!r}; pass the "
                             f"function itself (np.unwrap) or its name under numpy ('unwrap')")
        return found
    if not callable(op):
        raise TypeError(f"register_sharding: op must be a numpy function, ufunc or name, "
                        f"not {type(op).__name__}")
    return op


def _built_in(op) -> bool:
    if isinstance(op, np.ufunc):
        return op.__name__ in RULES
    return any(op in table for table in BUILT_IN)


def register_sharding(op, rule: Optional[Callable] = None, *, kernel: Optional[Callable] = None,
                      out_shape: Optional[Callable] = None, override: bool = False):
    """Teach mtensor ``op`` (a numpy function or ufunc, or its name): ``rule(call)`` returns
    the one-mesh-dim choices ``[(operand placements, output placement), ...]`` (see the
    module's docstring); ``kernel`` replaces the op on blocks, ``out_shape(call)`` numpy's
    shape on stand-ins.  An op mtensor already handles, or one registered before, needs
    ``override=True``.  Returns ``rule``; without it, a decorator::

        @mt.register_sharding(np.unwrap)
        def unwrap_rule(call):
            axis = call.args["axis"] % call.operands[0].ndim
            return [(Shard(d), Shard(d)) for d in range(call.operands[0].ndim) if d != axis]
    """
    if rule is None:
        return lambda r: register_sharding(op, r, kernel=kernel, out_shape=out_shape,
                                           override=override)
    op = resolve(op)
    if not callable(rule):
        raise TypeError(f"register_sharding: the rule for {op_name(op)} must be callable, "
                        f"not {type(rule).__name__}")
    if not override and (op in ROUTES or _built_in(op)):
        taught = "was registered before" if op in ROUTES else "has a built-in rule"
        raise ValueError(f"register_sharding: {op_name(op)} {taught}; pass override=True to "
                         f"replace what np.{op.__name__}(...) runs on DTensors")
    route = Route(op, rule, kernel, out_shape)
    RULES[route.name] = route
    ROUTES[op] = route
    return rule
