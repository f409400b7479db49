"""Matching composite patterns in a recorded list of ops, by value (pure: no arrays needed).

A pattern is a small expression tree read from its root value back to its inputs:
``Op("divide", Op("exp", x), ...)``.  The recorded program is seen through an ``OpView``:
for a value, the op that produced it (name, params, operands), or that it is a scalar, or
neither (an input of the pattern).  The same patterns and matcher serve the gradient tape
(``autodiff.fusion``: a composite's hand-derived backward) and the traced graph
(``trace_compile.passes``).

- ``Var(name)`` matches any value and binds it; a second ``Var`` of that name must see the
  same value (``x - mean(x)`` needs one ``x``).
- ``Scalar(name, value=None)`` matches a scalar constant (equal to ``value`` when given)
  and binds its float value.
- ``Same(name)`` matches only the value already bound to ``name``.
- ``Op(names, *args, params=, label=)`` matches a value made by one of the op ``names`` whose
  operands match ``args`` (``add`` and ``multiply`` in either order); ``params(params,
  operands)`` returns bindings (a dict) or None to refuse.  One ``Op`` object used twice in a
  tree must match one value twice (shared subexpressions).  ``label`` names the value for
  the rule that uses the match (a residual its backward reads).
- ``Alt(*options)``: the first option that matches.

A match is refused when a value inside the pattern (not its root) is used outside it: the
composite replaces those ops, so nothing else may read their results' gradients.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Protocol, Tuple

COMMUTATIVE = frozenset({"add", "multiply"})


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Scalar:
    name: str
    value: Optional[float] = None     # when given, the constant must equal it


@dataclass(frozen=True)
class Same:
    name: str


@dataclass(frozen=True, eq=False)
class Op:
    names: Tuple[str, ...]
    args: tuple
    params: Optional[Callable] = None
    label: str = ""

    def __init__(self, names, *args, params=None, label=""):
        object.__setattr__(self, "names", (names,) if isinstance(names, str) else tuple(names))
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "label", label)


@dataclass(frozen=True, eq=False)
class Alt:
    options: tuple

    def __init__(self, *options):
        object.__setattr__(self, "options", options)


class OpView(Protocol):
    """How the matcher reads a recorded program."""

    def producer(self, value) -> Optional[Tuple[str, tuple, tuple, Any]]:
        """(op name, params, operands, record) of the op that made ``value``, or None."""

    def scalar(self, value) -> Optional[float]:
        """``value`` as a float when it is a scalar constant, else None."""

    def key(self, value) -> Any:
        """A hashable identity of ``value``."""


@dataclass
class Match:
    """What a pattern matched: ``bound`` the Vars, Scalars, labels and params' bindings by
    name; ``inputs`` the names bound by Vars (the values the pattern reads from outside);
    ``records`` the matched ops' records; ``internal`` the keys of the values made inside
    the pattern other than the root; ``reads`` how often the matched ops read each value
    (by key)."""

    bound: Dict[str, Any]
    inputs: frozenset
    records: list
    internal: list
    reads: Counter


def match(pattern, root, view: OpView, uses: Callable[[Any], int]) -> Optional[Match]:
    """``pattern`` matched at the value ``root``, or None; also None when a value made
    inside the pattern is read outside it (``uses(key)``: how often the whole program
    reads the value of that key)."""
    env = _match(pattern, root, view, {})
    if env is None:
        return None
    bound, inputs, made, reads = {}, set(), {}, Counter()
    for k, v in env.items():
        if isinstance(k, str):
            bound[k] = v
        elif isinstance(k, tuple):
            inputs.add(k[1])
        elif v[0] not in made:
            made[v[0]] = v[1]
            reads.update(v[2])
    internal = [k for k in made if k != view.key(root)]
    if any(uses(k) != reads[k] for k in internal):
        return None
    return Match(bound, frozenset(inputs), list(made.values()), internal, reads)


def _match(pat, value, view, env):
    if isinstance(pat, Var):
        env = _bind(env, pat.name, value, view)
        return None if env is None else {**env, ("var", pat.name): True}
    if isinstance(pat, Scalar):
        s = view.scalar(value)
        if s is None or (pat.value is not None and s != pat.value):
            return None
        return _bind(env, pat.name, s, None)
    if isinstance(pat, Same):
        return env if pat.name in env and view.key(env[pat.name]) == view.key(value) else None
    if isinstance(pat, Alt):
        for option in pat.options:
            out = _match(option, value, view, env)
            if out is not None:
                return out
        return None
    return _match_op(pat, value, view, env)


def _match_op(pat: Op, value, view, env):
    key = view.key(value)
    seen = env.get(id(pat))
    if seen is not None:
        return env if seen[0] == key else None
    made = view.producer(value)
    if made is None or made[0] not in pat.names:
        return None
    name, params, operands, record = made
    if len(operands) != len(pat.args):
        return None
    env = {**env, id(pat): (key, record, tuple(view.key(o) for o in operands))}
    if pat.label:
        env = _bind(env, pat.label, value, view)
        if env is None:
            return None
    if pat.params is not None:
        extra = pat.params(params, operands)
        if extra is None:
            return None
        for k, v in extra.items():
            env = _bind(env, k, v, None)
            if env is None:
                return None
    orders = [operands]
    if name in COMMUTATIVE and len(operands) == 2:
        orders.append(operands[::-1])
    for order in orders:
        out = env
        for arg, operand in zip(pat.args, order):
            out = _match(arg, operand, view, out)
            if out is None:
                break
        if out is not None:
            return out
    return None


def _bind(env, name, value, view):
    """``env`` with ``name`` bound to ``value``; None when it is bound to another value
    (compared by ``view.key`` for values, by equality for scalars and params)."""
    if name not in env:
        return {**env, name: value}
    old = env[name]
    same = view.key(old) == view.key(value) if view is not None else old == value
    return env if same else None
