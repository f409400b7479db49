"""Vector-Jacobian products of numpy's selections, scans, differences, elementwise
functions and FFT stages, written as DTensor ops on the global arrays (as ``vjps``).
"""
from __future__ import annotations

import numpy as np

from .. import modes
from ..dispatch import dispatch
from ..dtensor import DTensor, asnumpy
from ..numpy.creation import zeros
from ..ops.plans.indexing import plain_key
from ..placement import reduced
from .vjps import pointwise_vjp

# op name -> vjp(j, cotangent, output, operands, params): the cotangent of operand j
VJPS: dict = {}


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
    ``n`` times and cut into the operands' rows."""
    kind, axis, roles, rest = params
    if kind != "diff":
        raise TypeError(f"value_and_grad: np.{kind} has no gradient rule in mtensor; write "
                        f"it with slices (a[2:] - a[:-2], a[1:] * w[0] + a[:-1] * w[1]) or "
                        f"np.diff")
    n, before, _ = rest
    for _ in range(n):
        g = -np.diff(g, axis=axis, prepend=0, append=0)
    start = {"prepend": 0, "a": before, "append": before + ops[0].shape[axis]}[roles[j]]
    rows = slice(start, start + np.shape(ops[j])[axis])
    return _dtype_of(g[(slice(None),) * axis + (rows,)], ops[j])


def _pad_vjp(j, g, out, ops, params):
    """``np.pad`` along one axis copies rows: each row of ``a`` gets the cotangent of the
    output rows that copy it.  Constant: the middle rows; edge: those, the end rows adding
    the pad beyond them; wrap: the output zero-padded so that its rows line up with ``a``'s
    every ``n`` rows, folded by a reshape and summed."""
    axis, before, after, mode, _ = params
    n = ops[0].shape[axis]

    def rows(x, lo, hi):
        return x[(slice(None),) * axis + (slice(lo, hi),)]
    if mode == "constant":
        return rows(g, before, before + n)
    if mode == "edge":
        head = np.sum(rows(g, 0, before + 1), axis=axis, keepdims=True)
        tail = np.sum(rows(g, before + n - 1, before + n + after), axis=axis, keepdims=True)
        if n == 1:
            return head + tail - rows(g, before, before + 1)
        return np.concatenate([head, rows(g, before + 1, before + n - 1), tail], axis=axis)
    lead = -before % n
    total = lead + before + n + after
    folded = np.pad(g, [(0, 0)] * axis + [(lead, -total % n)] + [(0, 0)] * (g.ndim - axis - 1))
    shape = g.shape[:axis] + (folded.shape[axis] // n, n) + g.shape[axis + 1:]
    return np.sum(np.reshape(folded, shape), axis=axis)


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


def _fft_vjp(j, g, out, ops, params):
    """An FFT stage is linear: its cotangent is the stage's transpose (``ops.fft.adjoint``:
    the DFT matrix is symmetric, so ``fft``'s is ``fft`` with the same norm; JAX's rules for
    the real transforms), cropped or zero-padded back to the input's lengths, real for a
    real input.  It runs where the cotangent lies: the stage's axes are whole there."""
    x = ops[0]
    axes = params[1]
    return dispatch("fft_adjoint", (g,), (*params, tuple(x.shape[a] for a in axes),
                                          x.dtype.kind != "c"))


VJPS.update({
    "fft": _fft_vjp,
    "take": _take_vjp, "take_along_axis": _take_along_axis_vjp,
    "ufunc_accumulate": _scan_vjp, "scan_apply": _scan_apply_vjp,
    "scan_totals": _helper_of("scan_totals", "np.cumsum"),
    "getitem_advanced": lambda j, g, out, ops, params: _added_at(g, ops[0],
                                                                 plain_key(params[0])),
    "halo_apply": _halo_apply_vjp, "interp": _interp_vjp, "pad_axis": _pad_vjp,
    "round": pointwise_vjp(lambda g, o, a: np.zeros_like(g)),
    "real": pointwise_vjp(lambda g, o, a: g.astype(a.dtype)),
    "imag": pointwise_vjp(lambda g, o, a: g * -1j if a.dtype.kind == "c" else np.zeros_like(g)),
    "conjugate": pointwise_vjp(lambda g, o, a: np.conjugate(g)),
})
