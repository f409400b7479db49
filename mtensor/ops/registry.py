"""What a sharding rule sees and returns, and the one table of rules.

A rule is written for ONE mesh dim: it lists ``Choice`` values (the placement each operand
must have on that mesh dim, and the placement the output then has), cheapest-to-think-about
first.  The chooser applies the same list to every mesh dim of an N-D mesh, so no rule ever
mentions mesh shapes.  Rules read only shapes, dtypes and placements, which are the same on
every rank, so every rank picks the same strategy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..placement import Placement, Replicate, Shard
from ..spec import fmt_placements
from .windows import Window

Shape = Tuple[int, ...]
Layout = Tuple[Placement, ...]


@dataclass(frozen=True)
class Operand:
    """One array operand as a rule sees it.  ``placements`` is None for a constant (a scalar or
    plain array, the same on every rank), which can only be used replicated or sliced."""

    shape: Shape
    dtype: np.dtype
    placements: Optional[Layout]
    weak: bool = False  # a Python scalar: numpy promotes it weakly (NEP 50)
    safe: bool = True   # a constant free of inf, nan and 0: partial terms may meet it

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def promotion_arg(self):
        """What to hand ``np.result_type`` so that it promotes as the op will."""
        return self.dtype.type(0).item() if self.weak else self.dtype


@dataclass(frozen=True)
class OpCall:
    """An op application with everything that decides its strategy (the cache key's content)."""

    name: str
    operands: Tuple[Operand, ...]
    params: tuple
    mesh_shape: Shape
    aliases: Tuple[int, ...] = ()   # per operand from the second: the earlier index it is, or -1

    def describe(self) -> str:
        """``name`` with each operand's shape and placements, for error messages."""
        parts = [
            f"{o.shape}" + ("" if o.placements is None else f" {fmt_placements(o.placements)}")
            for o in self.operands
        ]
        return f"{self.name} of " + ", ".join(parts)

    def error(self, what: str, fix: str) -> ValueError:
        return ValueError(f"{self.describe()}: {what}; {fix}")


@dataclass(frozen=True)
class Choice:
    """One mesh dim's strategy: each operand's placement there, and the output's.
    ``window``: the operand is read through a window of rows along its split dim (a halo
    exchange on this mesh dim brings the neighbours' rows: ``ops.windows``)."""

    inputs: Tuple[Placement, ...]
    output: Placement
    window: Optional[Window] = None


Kernel = Callable[..., object]


@dataclass
class Strategy:
    """A rule's answer: the output shape(s), the one-mesh-dim choices, and the local kernel.

    ``kernel_for(in_layouts, out_layout, mesh)`` returns the function applied to the local
    blocks once the chooser has picked; most rules compute the same way under every choice and
    pass a plain ``kernel`` instead.
    """

    out_shape: Shape
    choices: Sequence[Choice]
    kernel: Optional[Kernel] = None
    kernel_for: Optional[Callable] = None
    nout: int = 1
    into: Optional[Kernel] = None   # the kernel writing into its last argument (out=)
    dtype: Optional[np.dtype] = None   # the result's dtype, where known before running
    window_kernel_for: Optional[Callable] = None   # (..., windows): on the operands' windows
    # the kernel's result is a view of its window that the op links as a view of the operand
    # (getitem): windows may be views of one widened block shared by every such read
    shares_windows: bool = False

    def bind(self, in_layouts, out_layout, mesh, windows=()) -> Kernel:
        if windows:
            return self.window_kernel_for(in_layouts, out_layout, mesh, windows)
        if self.kernel_for is not None:
            return self.kernel_for(in_layouts, out_layout, mesh)
        return self.kernel


RULES: Dict[str, Callable[[OpCall], Strategy]] = {}


def register(*names: str):
    """Register a rule for each op name (one table for every family)."""
    def add(rule):
        for name in names:
            if name in RULES:
                raise ValueError(f"ops: a rule for {name!r} is registered twice")
            RULES[name] = rule
        return rule
    return add


def result_dtype(call: OpCall) -> np.dtype:
    return np.result_type(*[o.promotion_arg() for o in call.operands])


def terms_survive(call: OpCall, op: str, out_dtype=None) -> bool:
    """Whether partial terms of reduce op ``op`` may pass through this op as terms.

    Only when no operand changes dtype on the way (widening int8 terms loses numpy's
    wrap-around, narrowing float terms rounds each term instead of the sum), and ``avg``
    only on floats (its all-reduce divides, which truncates integers)."""
    out = result_dtype(call) if out_dtype is None else np.dtype(out_dtype)
    same = all(o.dtype == out for o in call.operands if o.placements is not None)
    return same and (op != "avg" or out.kind in ("f", "c"))


def replicated(n_inputs: int) -> Choice:
    """Every operand whole on this mesh dim; the output whole too (always valid)."""
    return Choice((Replicate(),) * n_inputs, Replicate())


def wants(dims: Sequence[Optional[int]]) -> Tuple[Placement, ...]:
    """Operand j sharded on its dim ``dims[j]``, or used whole where that is None."""
    return tuple(Replicate() if d is None else Shard(d) for d in dims)


def shard_along(dims: Sequence[Optional[int]], out_dim: int) -> Choice:
    """Operand j sharded on its dim ``dims[j]`` (None: used whole), output on ``out_dim``."""
    return Choice(wants(dims), Shard(out_dim))


def normalize_axes(call: OpCall, axis, ndim: int) -> Tuple[int, ...]:
    """``axis`` (None, int or tuple) as sorted non-negative dims, or a clear error."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:      # numpy's AxisError: a ValueError and an IndexError
            raise np.exceptions.AxisError(str(call.error(
                f"axis {a} is out of range for {ndim} dims",
                f"pass an axis in range(-{ndim}, {ndim})")))
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise call.error(f"axis {axis} repeats a dim", "name each dim once")
    return tuple(sorted(out))
