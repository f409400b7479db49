"""Vector-Jacobian products, written as ordinary DTensor ops on the global arrays.

Each rule maps the output's cotangent ``g`` to one operand's, with numpy's global
semantics; placements never appear, so the sharding rules and the cost model choose every
backward collective, exactly as they choose the forward's."""
from __future__ import annotations

import math

import numpy as np

from .. import views
from ..dispatch import dispatch
from ..dtensor import DTensor, relayout
from ..ops.contraction import einsum_form
from ..ops.gemm import copies_first, gemm_plan
from ..ops.registry import OpCall, Operand, normalize_axes
from ..placement import reduced

# op name -> vjp(j, cotangent, output, operands, params): the cotangent of operand j
VJPS: dict = {}


def unbroadcast(g, shape):
    """Sum ``g`` over the dims broadcasting added to an operand of ``shape``."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def pointwise_vjp(*rules):
    """Rules on (g, out, *operands), one per operand; results unbroadcast to its shape."""
    return lambda j, g, out, ops, params: unbroadcast(rules[j](g, out, *ops), np.shape(ops[j]))


def _unary(rule):
    """A rule for the one operand of a view or reduction: (g, out, operands, params)."""
    return lambda j, g, out, ops, params: rule(g, out, ops, params)


def _is_two(b) -> bool:
    """``x ** 2``: its gradient 2 x g stays linear in x (a Partial x need not be reduced)."""
    return isinstance(b, (int, float)) and b == 2


VJPS.update({
    "add": pointwise_vjp(lambda g, o, a, b: g, lambda g, o, a, b: g),
    "subtract": pointwise_vjp(lambda g, o, a, b: g, lambda g, o, a, b: -g),
    "multiply": pointwise_vjp(lambda g, o, a, b: g * b, lambda g, o, a, b: g * a),
    "divide": pointwise_vjp(lambda g, o, a, b: g / b, lambda g, o, a, b: -g * o / b),
    "power": pointwise_vjp(lambda g, o, a, b: g * 2 * a if _is_two(b) else g * b * a ** (b - 1),
                        lambda g, o, a, b: g * o * np.log(a)),
    "maximum": pointwise_vjp(lambda g, o, a, b: g * (a >= b), lambda g, o, a, b: g * (a < b)),
    "minimum": pointwise_vjp(lambda g, o, a, b: g * (a <= b), lambda g, o, a, b: g * (a > b)),
    "negative": pointwise_vjp(lambda g, o, a: -g),
    "positive": pointwise_vjp(lambda g, o, a: g),
    "absolute": pointwise_vjp(lambda g, o, a: g * np.sign(a)),
    "exp": pointwise_vjp(lambda g, o, a: g * o),
    "expm1": pointwise_vjp(lambda g, o, a: g * (o + 1)),
    "log": pointwise_vjp(lambda g, o, a: g / a),
    "log1p": pointwise_vjp(lambda g, o, a: g / (a + 1)),
    "sqrt": pointwise_vjp(lambda g, o, a: g / (2 * o)),
    "square": pointwise_vjp(lambda g, o, a: 2 * a * g),
    "reciprocal": pointwise_vjp(lambda g, o, a: -g * o * o),
    "tanh": pointwise_vjp(lambda g, o, a: g * (1 - o * o)),
    "sin": pointwise_vjp(lambda g, o, a: g * np.cos(a)),
    "cos": pointwise_vjp(lambda g, o, a: -g * np.sin(a)),
    "where": pointwise_vjp(None, lambda g, o, c, a, b: np.where(c, g, 0),
                        lambda g, o, c, a, b: np.where(c, 0, g)),
    "clip": pointwise_vjp(lambda g, o, a, lo, hi: g * ((a >= lo) & (a <= hi)), None, None),
    "copy": pointwise_vjp(lambda g, o, a: g),
    "contiguous": pointwise_vjp(lambda g, o, a: g),
    "astype": _unary(lambda g, out, ops, params: g.astype(ops[0].dtype)),
})


def _einsum_vjp(name):
    """Contract the cotangent with the other operands back to operand j's labels; labels
    operand j holds alone (or broadcasts) come back by broadcasting."""
    def vjp(j, g, out, ops, params):
        if name == "matmul" and np.ndim(ops[0]) == np.ndim(ops[1]) == 2:
            # the common case as BLAS likes it: transposed views, no copies
            return g @ ops[1].T if j == 0 else ops[0].T @ g
        key = (name, j, params, g.shape, tuple(np.shape(o) for o in ops))
        plan = _EINSUM_PLANS.get(key)
        if plan is None:
            if len(_EINSUM_PLANS) >= 4096:
                _EINSUM_PLANS.clear()
            plan = _EINSUM_PLANS[key] = _einsum_plan(name, j, g.shape, ops, params)
        spec, kept_shape, shape, relaid = plan
        if relaid is not None and type(g) is DTensor:
            spec, g = relaid[1], _relaid(g, relaid[0])
        grad = np.einsum(spec, g, *[o for k, o in enumerate(ops) if k != j])
        if grad.shape != kept_shape:
            grad = grad.reshape(kept_shape)
        return grad if kept_shape == shape else np.broadcast_to(grad, shape) + 0
    return vjp


# the last cotangent laid out for its products' GEMMs: (cotangent, its storage's stamp, the
# transposition, the C-ordered copy), which the other operand's gradient reuses
_RELAID: list = [None, None, None, None]


def _relaid(g, perm):
    """``g`` transposed by ``perm`` into a C-ordered block of its own, made once for the
    gradients of both operands of a product (as a hand-written backward makes one copy of
    attention's cotangent for its weight and input gradients)."""
    last, now = _RELAID, views.stamp(g)
    if last[0] is g and last[1] == now and last[2] == perm:
        return last[3]
    out = dispatch("contiguous", (np.transpose(g, perm),))
    last[:] = [g, now, perm, out]
    return out


def forget_relaid() -> None:
    """Drop the kept copy (the backward pass is over)."""
    _RELAID[:] = [None, None, None, None]


_EINSUM_PLANS: dict = {}   # (op, operand, params, shapes) -> _einsum_plan's answer


def _einsum_plan(name, j, g_shape, ops, params):
    """(the einsum that brings the cotangent back to operand ``j``'s kept labels, the shape
    with the others as ones, operand ``j``'s shape): parsed once per signature."""
    metas = tuple(Operand(np.shape(o), getattr(o, "dtype", None) or np.result_type(o), None)
                  for o in ops)
    inputs, output, _ = einsum_form(OpCall(name, metas, params, ()))
    target, shape = inputs[j], np.shape(ops[j])
    if len(set(target)) != len(target):
        raise TypeError(f"value_and_grad: {name} with a repeated label ({target}) has no "
                        f"gradient rule")
    others = [k for k in range(len(ops)) if k != j]
    seen = output + "".join(inputs[k] for k in others)
    sizes = dict(zip(output, g_shape))
    for k in others:
        sizes.update((c, n) for c, n in zip(inputs[k], np.shape(ops[k])) if n != 1)
    kept = "".join(c for c, n in zip(target, shape) if c in seen and sizes.get(c) == n)
    rest = [inputs[k] for k in others]
    spec = ",".join([output] + rest) + "->" + kept
    return (spec, tuple(n if c in kept else 1 for c, n in zip(target, shape)), tuple(shape),
            _gemm_order(inputs, output, rest, kept))


def _gemm_order(inputs, output, rest, kept):
    """For a product run as one GEMM whose output labels interleave its operands' free
    labels (``btd,dhk->bhtk``): (the transposition of the cotangent into (a's free, b's
    free) order, the gradient's einsum on it), which then needs no copy; else None."""
    if (len(inputs) != 2 or gemm_plan(list(inputs), output) is None
            or not copies_first([output] + rest, kept)):
        return None      # not a GEMM, or its gradient reads the cotangent as it is
    a, b = inputs
    order = [c for c in a if c not in b] + [c for c in b if c not in a]
    if "".join(order) == output or sorted(order) != sorted(output):
        return None
    return (tuple(output.index(c) for c in order),
            ",".join(["".join(order)] + rest) + "->" + kept)


for _name in ("matmul", "dot", "tensordot", "einsum"):
    VJPS[_name] = _einsum_vjp(_name)


def _expand(g, a, params):
    """The cotangent of a reduction, brought back to the input's shape (keepdims first)."""
    axis, keepdims = params[0], params[1]
    axes = normalize_axes(None, axis, a.ndim) if axis is not None else tuple(range(a.ndim))
    if not keepdims:
        g = g.reshape(tuple(1 if d in axes else n for d, n in enumerate(a.shape)))
    return g, axes


def _sum_vjp(g, out, ops, params):
    g, _ = _expand(g, ops[0], params)
    return np.broadcast_to(g, ops[0].shape) + 0


def _mean_vjp(g, out, ops, params):
    g, axes = _expand(g, ops[0], params)
    return np.broadcast_to(g / math.prod(ops[0].shape[d] for d in axes), ops[0].shape) + 0


def _extreme_vjp(g, out, ops, params):
    """Ties share the cotangent equally (the subgradient numpy's max picks none of)."""
    a = ops[0]
    g, axes = _expand(g, a, params)
    o, _ = _expand(out, a, params)
    hit = (a == o) + 0.0
    return g * hit / hit.sum(axis=axes, keepdims=True)


def _prod_vjp(g, out, ops, params):
    g, _ = _expand(g, ops[0], params)
    o, _ = _expand(out, ops[0], params)
    return g * o / ops[0]


VJPS.update({
    "sum": _unary(_sum_vjp), "mean": _unary(_mean_vjp), "max": _unary(_extreme_vjp),
    "min": _unary(_extreme_vjp), "prod": _unary(_prod_vjp),
    "transpose": _unary(lambda g, out, ops, params: np.transpose(
        g, None if params[0] is None else tuple(np.argsort(
            [a % ops[0].ndim for a in params[0]])))),
    "reshape": _unary(lambda g, out, ops, params: g.reshape(ops[0].shape)),
    "expand_dims": _unary(lambda g, out, ops, params: g.reshape(ops[0].shape)),
    "squeeze": _unary(lambda g, out, ops, params: g.reshape(ops[0].shape)),
    "broadcast_to": _unary(lambda g, out, ops, params: unbroadcast(g, ops[0].shape)),
    "getitem": _unary(lambda g, out, ops, params: _slice_put(g, params[0], ops[0].shape)),
    "roll": _unary(lambda g, out, ops, params: dispatch("roll", (g,), (params[0], -params[1]))),
    # the reverse redistribution: all-gather <-> reduce-scatter, a Partial source is whole
    "redistribute": _unary(lambda g, out, ops, params: relayout(g, reduced(params[0]))),
})


def _index_put(g, key, shape):
    return dispatch("index_put", (g,), (key, tuple(shape)))


def _slice_put(g, key, shape):
    """The adjoint of getitem.  A key of step-1 slices alone (a stencil's ``U[2:, 1:-1]``):
    ``g`` padded with zeros along each sliced dim (``np.pad``'s constant mode, which reads a
    split dim through a window: the rows of ``g`` move to the blocks of the input that hold
    them, a halo's worth, where a write at the key would gather ``g``); else the zeros of
    ``index_put`` with ``g`` written at the key."""
    if any(e[0] != "s" or e[3] != 1 for e in key):
        return _index_put(g, key, shape)
    for d, entry in enumerate(key):
        start, stop = entry[1], max(entry[2], entry[1])
        if (start, stop) != (0, shape[d]):
            g = dispatch("pad_axis", (g,), (d, start, shape[d] - stop, "constant", (0, 0)))
    return g


def _join_vjp(stacked):
    def vjp(j, g, out, ops, params):
        axis = params[0] % out.ndim
        if stacked:
            return g[(slice(None),) * axis + (j,)]
        start = sum(np.shape(o)[axis] for o in ops[:j])
        return g[(slice(None),) * axis + (slice(start, start + np.shape(ops[j])[axis]),)]
    return vjp


VJPS["concatenate"] = _join_vjp(stacked=False)
VJPS["stack"] = _join_vjp(stacked=True)
