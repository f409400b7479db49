"""Vector-Jacobian products, written as ordinary DTensor ops on the global arrays.

Each rule maps the output's cotangent ``g`` to one operand's, with numpy's global
semantics; placements never appear, so the sharding rules and the cost model choose every
backward collective, exactly as they choose the forward's.
"""
from __future__ import annotations

import math

import numpy as np

from .. import modes
from ..dtensor import DTensor, asnumpy
from ..ops.contraction import einsum_form
from ..ops.index_plan import plain_key
from ..ops.registry import Operand, OpCall, normalize_axes
from ..placement import reduced
from .tape import VJPS


def unbroadcast(g, shape):
    """Sum ``g`` over the dims broadcasting added to an operand of ``shape``."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def _pointwise(*rules):
    """Rules on (g, out, *operands), one per operand; results unbroadcast to its shape."""
    return lambda j, g, out, ops, params: unbroadcast(rules[j](g, out, *ops), np.shape(ops[j]))


def _unary(rule):
    """A rule for the one operand of a view or reduction: (g, out, operands, params)."""
    return lambda j, g, out, ops, params: rule(g, out, ops, params)


def _is_two(b) -> bool:
    """``x ** 2``: its gradient 2 x g stays linear in x (a Partial x need not be reduced)."""
    return isinstance(b, (int, float)) and b == 2


VJPS.update({
    "add": _pointwise(lambda g, o, a, b: g, lambda g, o, a, b: g),
    "subtract": _pointwise(lambda g, o, a, b: g, lambda g, o, a, b: -g),
    "multiply": _pointwise(lambda g, o, a, b: g * b, lambda g, o, a, b: g * a),
    "divide": _pointwise(lambda g, o, a, b: g / b, lambda g, o, a, b: -g * o / b),
    "power": _pointwise(lambda g, o, a, b: g * 2 * a if _is_two(b) else g * b * a ** (b - 1),
                        lambda g, o, a, b: g * o * np.log(a)),
    "maximum": _pointwise(lambda g, o, a, b: g * (a >= b), lambda g, o, a, b: g * (a < b)),
    "minimum": _pointwise(lambda g, o, a, b: g * (a <= b), lambda g, o, a, b: g * (a > b)),
    "negative": _pointwise(lambda g, o, a: -g),
    "positive": _pointwise(lambda g, o, a: g),
    "absolute": _pointwise(lambda g, o, a: g * np.sign(a)),
    "exp": _pointwise(lambda g, o, a: g * o),
    "expm1": _pointwise(lambda g, o, a: g * (o + 1)),
    "log": _pointwise(lambda g, o, a: g / a),
    "log1p": _pointwise(lambda g, o, a: g / (a + 1)),
    "sqrt": _pointwise(lambda g, o, a: g / (2 * o)),
    "square": _pointwise(lambda g, o, a: 2 * a * g),
    "reciprocal": _pointwise(lambda g, o, a: -g * o * o),
    "tanh": _pointwise(lambda g, o, a: g * (1 - o * o)),
    "sin": _pointwise(lambda g, o, a: g * np.cos(a)),
    "cos": _pointwise(lambda g, o, a: -g * np.sin(a)),
    "where": _pointwise(None, lambda g, o, c, a, b: np.where(c, g, 0),
                        lambda g, o, c, a, b: np.where(c, 0, g)),
    "clip": _pointwise(lambda g, o, a, lo, hi: g * ((a >= lo) & (a <= hi)), None, None),
    "copy": _pointwise(lambda g, o, a: g),
    "astype": _unary(lambda g, out, ops, params: g.astype(ops[0].dtype)),
})


def _einsum_vjp(name):
    """Contract the cotangent with the other operands back to operand j's labels; labels
    operand j holds alone (or broadcasts) come back by broadcasting."""
    def vjp(j, g, out, ops, params):
        if name == "matmul" and np.ndim(ops[0]) == np.ndim(ops[1]) == 2:
            # the common case as BLAS likes it: transposed views, no copies
            return g @ ops[1].T if j == 0 else ops[0].T @ g
        metas = tuple(Operand(np.shape(o), getattr(o, "dtype", None) or np.result_type(o), None)
                      for o in ops)
        call = OpCall(name, metas, params, ())
        inputs, output, _ = einsum_form(call)
        target, shape = inputs[j], np.shape(ops[j])
        if len(set(target)) != len(target):
            raise TypeError(f"value_and_grad: {name} with a repeated label ({target}) has no "
                            f"gradient rule")
        others = [k for k in range(len(ops)) if k != j]
        seen = output + "".join(inputs[k] for k in others)
        sizes = dict(zip(output, g.shape))
        for k in others:
            sizes.update((c, n) for c, n in zip(inputs[k], np.shape(ops[k])) if n != 1)
        kept = "".join(c for c, n in zip(target, shape) if c in seen and sizes.get(c) == n)
        spec = ",".join([output] + [inputs[k] for k in others]) + "->" + kept
        grad = np.einsum(spec, g, *[ops[k] for k in others])
        grad = grad.reshape(tuple(n if c in kept else 1 for c, n in zip(target, shape)))
        return grad if grad.shape == shape else np.broadcast_to(grad, shape) + 0
    return vjp


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
    "getitem": _unary(lambda g, out, ops, params: _index_put(g, params[0], ops[0].shape)),
    # the reverse redistribution: all-gather <-> reduce-scatter, a Partial source is whole
    "redistribute": _unary(lambda g, out, ops, params: g._redistribute(reduced(params[0]))),
})


def _index_put(g, key, shape):
    from ..dispatch import dispatch
    return dispatch("index_put", (g,), (key, tuple(shape)))


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


# --- numpy's selections, scans, differences and elementwise functions ------------------------

def _dtype_of(grad, a):
    """``grad`` in the dtype of the float or complex operand ``a`` it is the gradient of."""
    return grad if grad.dtype == a.dtype or a.dtype.kind not in "fc" else grad.astype(a.dtype)


def _whole(value, what: str):
    """A value a rule needs whole on every rank (indices, sample points): a DTensor is
    gathered, a read of values that a compiled step cannot replay."""
    if type(value) is DTensor:
        modes.refuse_while_tracing(f"the gradient of {what} with DTensor operands (it "
                                   f"gathers them)")
    return asnumpy(value)


def _added_at(g, like, key):
    """The adjoint of a pick: zeros laid out like ``like`` (partial terms reduced) with ``g``
    added at ``key`` as ``np.add.at`` adds (a repeated index adds once per repeat).  A
    DTensor index in ``key`` is gathered, and ``g`` goes where each block needs it (the
    write's own layout rule).  The zeros are copied by an op, so a compiled step adds into
    a fresh block at each replay, not into the constant zeros its trace captured."""
    from ..creation import zeros
    out = np.copy(zeros(like.shape, g.dtype, mesh=like.device_mesh,
                        placements=reduced(like.placements)))
    np.add.at(out, key, g)
    return out


def _take_vjp(j, g, out, ops, params):
    axis, mode = params
    a, idx = ops
    idx, n = _whole(idx, "np.take"), a.shape[axis]
    if mode != "raise":
        idx = np.clip(idx, 0, n - 1) if mode == "clip" else np.mod(idx, n)
    return _added_at(g, a, (slice(None),) * axis + (idx,))


def _take_along_axis_vjp(j, g, out, ops, params):
    (axis,) = params
    arr, idx = ops
    idx = _whole(idx, "np.take_along_axis")
    key = tuple(idx if d == axis else
                np.arange(s).reshape((1,) * d + (s,) + (1,) * (arr.ndim - d - 1))
                for d, s in enumerate(arr.shape))
    return _added_at(g, arr, key)


def _scan_vjp(j, g, out, ops, params):
    """A cumulative sum's adjoint sums the cotangent from each position to the end: the
    total minus the cumulative sum plus the cotangent itself (one scan, no reversal of a
    split axis).  Where the axis is split this op scans blocks, and ``scan_apply``, which
    completes the scan, hands it the whole scan's cotangent: the rule is the scan's."""
    name, axis = params[0], params[1] % ops[0].ndim
    if name != "add":
        raise TypeError(f"value_and_grad: np.{name}.accumulate (np.cumprod, np.cummax, ...) "
                        f"has no gradient rule in mtensor; only cumulative sums do")
    return _dtype_of(g.sum(axis=axis, keepdims=True) - np.cumsum(g, axis=axis) + g, ops[0])


def _scan_apply_vjp(j, g, out, ops, params):
    """The split scan's last step: the cotangent goes unchanged to the local scans, whose
    rule (``ufunc_accumulate``'s) is the whole scan's adjoint; the block totals are
    ``local``'s own values and get none, so their path costs nothing."""
    return g if j == 0 else None


def _helper_of(name, composite):
    """The rule of an op that runs only inside ``composite``, whose other rules carry the
    whole gradient (its output's cotangent is always None, so this never runs there)."""
    def vjp(j, g, out, ops, params):
        raise TypeError(f"value_and_grad: {name} has a gradient only as part of {composite}")
    return vjp


def _halo_apply_vjp(j, g, out, ops, params):
    """``np.diff`` is linear: the adjoint of one difference is minus the difference of the
    cotangent padded with a zero at each end (the whole [prepend, a, append] rows), taken
    ``n`` times and cut into the operands' rows.  The gathered edges are ``a``'s own rows,
    already counted in ``a``'s share: they get none."""
    kind, axis, _, _, roles, rest = params
    if kind != "diff":
        raise TypeError(f"value_and_grad: np.{kind} has no gradient rule in mtensor; write "
                        f"it with slices (a[2:] - a[:-2], a[1:] * w[0] + a[:-1] * w[1]) or "
                        f"np.diff")
    if roles[j] == "edges":
        return None
    n, before, _ = rest
    for _ in range(n):
        g = -np.diff(g, axis=axis, prepend=0, append=0)
    start = {"prepend": 0, "a": before, "append": before + ops[0].shape[axis]}[roles[j]]
    rows = slice(start, start + np.shape(ops[j])[axis])
    return _dtype_of(g[(slice(None),) * axis + (rows,)], ops[j])


def _interp_vjp(j, g, out, ops, params):
    """With respect to ``x``: the slope of the segment ``x`` falls in (the right one at a
    sample point, the last one at the end), zero outside the sample points."""
    x, xp, fp = ops
    if j != 0 or params[2] is not None:
        raise TypeError("value_and_grad: np.interp has a gradient rule with respect to x "
                        "only, without period=; compute it with xp and fp held constant")
    xp, fp = _whole(xp, "np.interp"), _whole(fp, "np.interp")
    if xp.size < 2:
        return np.zeros_like(x)
    k = np.arange(xp.size, dtype=np.float64)
    segment = np.clip(np.floor(np.interp(x, xp, k)), 0, xp.size - 2)
    slope = np.interp(segment, k[:-1], np.diff(fp) / np.diff(xp))
    return _dtype_of(g * slope * ((x >= xp[0]) & (x <= xp[-1])), x)


VJPS.update({
    "take": _take_vjp, "take_along_axis": _take_along_axis_vjp,
    "ufunc_accumulate": _scan_vjp, "scan_apply": _scan_apply_vjp,
    "scan_totals": _helper_of("scan_totals", "np.cumsum"),
    "halo_edges": _helper_of("halo_edges", "np.diff"),
    "getitem_advanced": lambda j, g, out, ops, params: _added_at(g, ops[0],
                                                                 plain_key(params[0])),
    "halo_apply": _halo_apply_vjp, "interp": _interp_vjp,
    "round": _pointwise(lambda g, o, a: np.zeros_like(g)),
    "real": _pointwise(lambda g, o, a: g.astype(a.dtype)),
    "imag": _pointwise(lambda g, o, a: g * -1j if a.dtype.kind == "c" else np.zeros_like(g)),
    "conjugate": _pointwise(lambda g, o, a: np.conjugate(g)),
})
