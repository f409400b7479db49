"""numpy's in-place operators, ``out=`` and ``ufunc.at`` on DTensors.

``x op= y`` runs the op with its output pinned to ``x``'s placements and writes into
``x``'s block (numpy's ``same_kind`` casting); where no strategy of the op produces that
layout (``P(sum) **= 2``), the result is computed and assigned back in ``x``'s layout
(:func:`writes.assign`), so the target never changes layout.  ``x op= y`` with both blocks
as they are takes a one-lookup fast path.
"""
from __future__ import annotations

import numpy as np

from ... import modes, views
from ...device import arrays as device
from ...dispatch import dispatch, dispatch_into, inplace_direct
from ...dtensor import DTensor, asnumpy
from ...placement import Partial
from ...spec import fmt_placements
from .setitem import WHOLE, assign, check_write, entries_for, host_key


def inplace(name: str, target: DTensor, other):
    """``target <op>= other`` (``__iadd__`` and the rest): same object, same layout."""
    if (type(other) is DTensor and modes.active.tape is None and modes.active.tracer is None
            and (not views.state.detached or target._view is other._view is None)
            and inplace_direct(name, target, other)):
        if target._view is None:
            target._version += 1
        else:
            views.wrote(target)   # an attached view: its storage's version
        return target
    return call_into(name, (target, other), (), target)


def call_into(name: str, operands, params, target: DTensor, fn=None):
    """Op ``name`` (numpy's ``fn``) of ``operands`` written into ``target`` with numpy's
    ``same_kind`` casting: straight into its block where a strategy yields its layout,
    else computed and assigned."""
    check_write(f"{name} (in place)", target, *operands[1:] if operands[0] is target
                else operands)
    if not any(type(o) is DTensor for o in operands):
        assign(target, WHOLE, fn(*operands, **dict(params)), "same_kind", name)
    elif not dispatch_into(name, operands, params, target):
        assign(target, WHOLE, dispatch(name, operands, params, keep=target), "same_kind", name)
    else:
        views.wrote(target)       # assign counts its own write
    return target


def write_out(result, out, casting: str = "same_kind"):
    """numpy's ``out=`` for a computed result: a DTensor ``out`` is written in its own
    layout, a numpy one receives the whole result on every rank (a gather, as
    ``np.asarray``).  Returns ``out`` as numpy does (a tuple for several outputs)."""
    outs = out if isinstance(out, tuple) else (out,)
    results = result if isinstance(result, tuple) else (result,)
    if len(outs) != len(results):
        raise ValueError(f"out=: {len(outs)} arrays given for {len(results)} results")
    for o, r in zip(outs, results):
        if type(o) is DTensor:
            check_write("out=", o, r)
            assign(o, WHOLE, r, casting, "out=")
        else:
            np.copyto(o, device.like(asnumpy(r), o), casting=casting)
    return outs[0] if len(outs) == 1 else outs


def ufunc_at(ufunc, target, indices, values=None):
    """``ufunc.at(target, indices, values)``: unbuffered, so a repeated index applies once
    per repeat; each rank applies the indices that fall in its block.  Into a plain array
    (the same on every rank) every rank applies the gathered indices and values."""
    if type(target) is not DTensor:
        modes.refuse_while_tracing(f"{ufunc.__name__}.at into a {type(target).__name__}")
        values = device.like(asnumpy(values), target) if type(values) is DTensor else values
        device.ufunc_at(ufunc, target, host_key(indices), *(() if values is None else (values,)))
        return
    check_write(f"{ufunc.__name__}.at", target, values)
    if any(isinstance(p, Partial) for p in target.placements):
        raise TypeError(f"{ufunc.__name__}.at: target placements {fmt_placements(target.placements)} "
                        f"hold partial terms, which {ufunc.__name__}.at cannot update one "
                        f"by one; redistribute the target to Replicate() or Shard(dim) first")
    entries, _ = entries_for(indices, target.shape, f"{ufunc.__name__}.at")
    assign(target, entries, values, op=f"{ufunc.__name__}.at", at=ufunc)


def inplace_matmul(target: DTensor, other):
    """``target @= other``: numpy computes into a temporary and needs the same shape back."""
    check_write("matmul (in place)", target, other)
    result = dispatch("matmul", (target, other), keep=target)
    if result.shape != target.shape:
        raise ValueError(f"matmul (in place): x of shape {target.shape} @ {np.shape(other)} "
                         f"gives {result.shape}; in-place @ needs the shape of x back")
    assign(target, WHOLE, result, "same_kind", "matmul")
    return target
