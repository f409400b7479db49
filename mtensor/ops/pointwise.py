"""Pointwise ops: every numpy ufunc, ``where``, ``clip``, ``astype``, ``copy`` (and
``contiguous``, a C-ordered copy the backward pass makes of a cotangent), ``round``,
``real``, ``imag`` and ``interp`` (elementwise in ``x``, its sample points used whole).

Sharding: operands broadcast against each other, so on one mesh dim the output may be split
along dim d when every operand that really spans d (not broadcast along it) is split on it;
broadcast operands are used whole.  Partial terms pass through an op only where the algebra
allows it, listed below by the property relied on; anything else reduces first.
"""
from __future__ import annotations

import math

import numpy as np

from ..device import arrays as device
from ..device import buffers
from ..placement import Partial, Replicate, local_shape
from .registry import (
    Choice,
    OpCall,
    Strategy,
    register,
    replicated,
    shard_along,
    terms_survive,
)

UFUNCS = tuple(sorted({
    getattr(np, name).__name__ for name in dir(np)
    if isinstance(getattr(np, name), np.ufunc) and getattr(np, name).signature is None
}))

SUM_AVG = ("sum", "avg")
MAX_MIN = ("max", "min")


def _all_partial(ops):
    """Every operand a term of the same reduction: the op commutes with it (sum of sums)."""
    return lambda call: [Choice((Partial(op),) * len(call.operands), Partial(op)) for op in ops]


def _one_partial(ops, positions=None):
    """One operand holds terms, the others are whole: the op is linear (or monotone for
    max/min) in that operand alone."""
    def make(call):
        nin = len(call.operands)
        where = range(nin) if positions is None else positions
        return [
            Choice(tuple(Partial(op) if j == k else Replicate() for j in range(nin)), Partial(op))
            for op in ops for k in where
        ]
    return make


def _unary_map(mapping):
    """A unary op that turns a reduction of terms into another (negation swaps max and min)."""
    return lambda call: [Choice((Partial(a),), Partial(b)) for a, b in mapping.items()]


def _join(*makers):
    return lambda call: [c for make in makers for c in make(call)]


def _floats(make):
    """Order-based algebra (shifting or negating a max) fails where integers wrap around."""
    return lambda call: make(call) if all(o.dtype.kind == "f" for o in call.operands) else []


PARTIAL_ALGEBRA = {
    # adding terms adds the sums; adding a whole value shifts a max or min
    "add": _join(_all_partial(SUM_AVG), _floats(_one_partial(MAX_MIN))),
    "subtract": _join(_all_partial(SUM_AVG), _floats(_one_partial(MAX_MIN, positions=(0,)))),
    # scaling by a whole value scales a sum
    "multiply": _one_partial(SUM_AVG),
    "divide": _one_partial(SUM_AVG, positions=(0,)),
    "negative": _join(_unary_map({"sum": "sum", "avg": "avg"}),
                      _floats(_unary_map({"max": "min", "min": "max"}))),
    "positive": _unary_map({op: op for op in SUM_AVG + MAX_MIN}),
    "conjugate": _unary_map({op: op for op in SUM_AVG}),
    # the max of maxes is the max
    "maximum": _all_partial(("max",)),
    "fmax": _all_partial(("max",)),
    "minimum": _all_partial(("min",)),
    "fmin": _all_partial(("min",)),
}


def _aligned_dim(shape, out_dim: int, out_shape):
    """The operand's dim that lines up with ``out_dim`` under broadcasting, or None when the
    operand lacks it or broadcasts along it."""
    d = out_dim - (len(out_shape) - len(shape))
    if d < 0 or shape[d] != out_shape[out_dim]:
        return None
    return d


def broadcast_shape(call: OpCall):
    shapes = [o.shape for o in call.operands]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise call.error(f"shapes {', '.join(map(str, shapes))} do not broadcast together",
                         "make trailing dims equal or 1") from None


def pointwise_choices(call: OpCall, out_shape, algebra=None):
    nin = len(call.operands)
    choices = [replicated(nin)]
    for d in range(len(out_shape)):
        dims = [_aligned_dim(o.shape, d, out_shape) for o in call.operands]
        choices.append(shard_along(dims, d))
    numeric = all(o.dtype.kind in "iufc" and o.safe for o in call.operands)
    if algebra is not None and numeric:
        choices += [c for c in algebra(call) if c.output.reduce_op in MAX_MIN
                    or terms_survive(call, c.output.reduce_op)]
    return choices


@register(*UFUNCS)
def ufunc_rule(call: OpCall) -> Strategy:
    ufunc = getattr(np, call.name)
    kwargs = dict(call.params)
    out_shape = broadcast_shape(call)
    algebra = None if "dtype" in kwargs else PARTIAL_ALGEBRA.get(call.name)  # casts each term
    kernel = (lambda *a: ufunc(*a, **kwargs)) if kwargs else ufunc
    plain = not kwargs and ufunc.nout == 1
    dtype = _resolved(ufunc, call) if plain else None
    return Strategy(
        out_shape, pointwise_choices(call, out_shape, algebra),
        kernel=kernel, nout=ufunc.nout, into=_into(ufunc, kwargs) if ufunc.nout == 1 else None,
        kernel_for=_pooled(ufunc, out_shape, dtype) if plain else None, dtype=dtype,
    )


def _resolved(ufunc, call: OpCall):
    """The dtype ``ufunc`` gives on the call's operands (weak Python scalars, NEP 50), or
    None where numpy's resolution cannot name it."""
    try:
        return ufunc.resolve_dtypes(tuple(
            type(o.promotion_arg()) if o.weak else o.dtype for o in call.operands) + (None,))[-1]
    except (TypeError, ValueError):
        return None


def _pooled(ufunc, out_shape, dtype):
    """``kernel_for``: a large block written into a pooled buffer (``device.buffers``).  A
    fresh large array costs page faults on first write (numpy's own operators avoid most by
    reusing their temporaries, which a kernel cannot see); a stencil step makes dozens of
    them.  Small blocks, and dtypes numpy's resolution cannot name, take the plain ufunc."""

    def kernel_for(in_layouts, out_layout, mesh):
        if dtype is None or dtype.kind not in "biufc":
            return ufunc
        shape = local_shape(out_shape, mesh.shape, out_layout, mesh.coordinate)
        if math.prod(shape) * dtype.itemsize < buffers.MIN_BYTES:
            return ufunc
        return PooledUfunc(ufunc, shape, dtype, getattr(mesh, "device_type", "cpu"))
    return kernel_for


class PooledUfunc:
    """A ufunc writing its block into a pooled buffer of the shape and dtype it gives.
    ``unpooled``: the plain ufunc, which a trace records instead (the compiled replay writes
    results into operands that die at the op, warmer memory than a pooled buffer)."""

    __slots__ = ("unpooled", "shape", "dtype", "device_type")

    def __init__(self, ufunc, shape, dtype, device_type):
        self.unpooled, self.shape, self.dtype, self.device_type = ufunc, shape, dtype, device_type

    def __call__(self, *blocks):
        out = device.empty_on(self.device_type, self.shape, self.dtype)
        return self.unpooled(*blocks, out=out)


def _into(ufunc, kwargs):
    """The ufunc writing into its last argument (numpy's out=, same_kind casting)."""
    if ufunc.nin == 2 and not kwargs:
        return lambda a, b, out: ufunc(a, b, out=out)
    return lambda *a: ufunc(*a[:-1], out=a[-1], **kwargs)


@register("where")
def where_rule(call: OpCall) -> Strategy:
    out_shape = broadcast_shape(call)
    return Strategy(out_shape, pointwise_choices(call, out_shape), kernel=np.where)


@register("clip")
def clip_rule(call: OpCall) -> Strategy:
    out_shape = broadcast_shape(call)
    return Strategy(out_shape, pointwise_choices(call, out_shape), kernel=np.clip)


def _cast_algebra(src: np.dtype, dst: np.dtype):
    """Casts that keep every value (numpy's "safe") or round floats to floats keep order, so
    max/min terms survive them.  Sums survive only a cast that leaves terms alone or narrows
    integers (which agrees modulo 2**k); any other cast changes each term on its own."""
    keep = []
    if "b" not in (src.kind, dst.kind) and dst.kind != "c" and (
            np.can_cast(src, dst, "safe") or (src.kind in "fc" and dst.kind in "fc")):
        keep += list(MAX_MIN)
    if src == dst or (src.kind in "iu" and dst.kind in "iu" and dst.itemsize <= src.itemsize):
        keep.append("sum")
    return _unary_map({op: op for op in keep})


@register("astype")
def astype_rule(call: OpCall) -> Strategy:
    (dtype,) = call.params
    src = call.operands[0]
    choices = [replicated(1)] + [shard_along([d], d) for d in range(src.ndim)]
    return Strategy(src.shape, choices + _cast_algebra(src.dtype, dtype)(call),
                    kernel=lambda a: a.astype(dtype))


@register("copy", "stop_gradient", "contiguous")
def copy_rule(call: OpCall) -> Strategy:
    shape = call.operands[0].shape
    return Strategy(shape, pointwise_choices(call, shape, PARTIAL_ALGEBRA["positive"]),
                    kernel=_c_ordered if call.name == "contiguous" else np.copy)


def _c_ordered(block):
    """A copy of ``block`` in C order (``np.copy`` keeps the operand's memory order)."""
    return block.copy(order="C")


@register("round")
def round_rule(call: OpCall) -> Strategy:
    """``np.round(a, decimals)``: numpy's own rounding (half to even, integers too) on each
    element; numpy's checks run on a stand-in first, so errors are alike on every rank."""
    (decimals,) = call.params
    operand = call.operands[0]
    np.round(np.zeros(1, operand.dtype), decimals)
    return Strategy(operand.shape, pointwise_choices(call, operand.shape),
                    kernel=lambda a: np.round(a, decimals))


# the real and imaginary parts of a sum are the sums of the parts
_PARTS = _unary_map({op: op for op in SUM_AVG})


@register("real", "imag")
def part_rule(call: OpCall) -> Strategy:
    """The real or imaginary part, as a fresh array (numpy's is a view of the input)."""
    part = np.real if call.name == "real" else np.imag
    shape = call.operands[0].shape
    return Strategy(shape, pointwise_choices(call, shape, _PARTS), kernel=lambda a: part(a).copy())


@register("interp")
def interp_rule(call: OpCall) -> Strategy:
    """``np.interp(x, xp, fp)``: elementwise in ``x`` (any split), the sample points whole."""
    left, right, period = call.params
    x, xp, fp = call.operands
    np.interp(np.zeros(1, x.dtype), np.arange(xp.shape[0] if xp.ndim else 1, dtype=xp.dtype)
              .reshape(xp.shape), np.ones(fp.shape, fp.dtype), period=period)
    choices = [replicated(3)] + [shard_along([d, None, None], d) for d in range(x.ndim)]
    return Strategy(x.shape, choices,
                    kernel=lambda a, p, f: _array(np.interp(a, p, f, left, right, period)))


def _array(out):
    """A kernel's scalar result (numpy's interp of a 0-d input) as a 0-d array; device
    arrays pass as they are."""
    return np.asarray(out) if isinstance(out, (np.generic, float, int, complex)) else out
