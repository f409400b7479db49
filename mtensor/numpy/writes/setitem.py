"""numpy's item assignment on DTensors (the in-place operators are in :mod:`inplace`).

A write keeps the target's layout, always: the value is brought to where the target's block
needs it, then each rank writes the part of the key that falls in its own block.

- ``x[key] = v``: along a dim the key takes whole, the value is split like the target (no
  communication when it already is); where the key picks elements of a split dim, the value
  is used whole there (gathered when it is a split DTensor; a plain array or scalar is the
  same on every rank and costs nothing).  Into a ``Partial`` target the value goes as terms
  of the same reduction (a constant: at coordinate 0 for a sum, everywhere for max, min, avg).
- A bool DTensor mask of the target's shape with a scalar value (``x[x > 0] = 0``) writes
  locally; other DTensors in a key are gathered first (every rank needs the same key).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ... import modes, views
from ...device import arrays as device
from ...dispatch import dispatch
from ...dtensor import DTensor, asnumpy, relayout
from ...ops.plans.indexing import (
    block_plan,
    check_value_shape,
    is_advanced,
    normalize_index,
    region_index,
    region_layout,
    value_placements,
)
from ...placement import Partial, local_bounds, local_offset, reduced
from ...spec import check_same_mesh, fmt_placements
from .windows import window_block, windowed_value

_KINDS = "biufc"   # numpy's order of kinds for same_kind casting of Python scalars


def check_write(op: str, target, *values) -> None:
    """Inside ``value_and_grad`` a write may not touch what the gradient needs (as PyTorch's
    and JAX's autograd refuse): a parameter-dependent target or value, or a tensor an op
    recorded for the backward pass."""
    if modes.active.tape is None:
        return
    if (modes.is_tracked(target) or any(modes.is_tracked(v) for v in values)
            or _saved(target)):
        raise TypeError(f"value_and_grad: {op} writes in place into a DTensor the gradient "
                        f"depends on; write y = x + v instead of x += v (or x[key] = v) "
                        f"inside the differentiated function")


def _saved(target) -> bool:
    """Whether an op the tape recorded read ``target``'s storage: its owner or a view of it
    among the entries' values, or the owner's ghost (a followed value no rule reads)."""
    tape = modes.active.tape
    base = views.owner(target)
    ghost = tape.ghost_of(base)

    def reads(v) -> bool:
        if type(v) is DTensor:
            return views.owner(v) is base
        return ghost is not None and v is ghost
    return any(reads(v) for entry in tape.entries for v in entry.operands + entry.values)


class _Whole:
    """The key of a whole-array write (``x[...] = v``)."""


WHOLE = _Whole()


def scalar_mask(key):
    """A 0-d boolean key (``x[True]``, ``x[x.sum() > 0]``) read as a Python bool, else None:
    numpy treats it as a new axis of length 1 (True) or 0 (False)."""
    if isinstance(key, (bool, np.bool_)):
        return bool(key)
    if getattr(key, "ndim", None) == 0 and getattr(key, "dtype", None) == np.bool_:
        return bool(key)             # a DTensor's read agrees on every rank
    return None


def setitem(target: DTensor, key, value) -> None:
    """``target[key] = value`` with any key numpy takes."""
    flag = scalar_mask(key)
    if flag is not None:             # x[True] = v writes everything, x[False] = v nothing
        if flag:
            if np.ndim(value) == target.ndim + 1 and np.shape(value)[0] == 1:
                value = value[0]
            setitem(target, Ellipsis, value)
        return
    view = value._view if type(value) is DTensor else None
    if view is not None and view.parent is target and view.attached and (
            view.key is key or _is_view_at(value, target, entries_for(key, target.shape,
                                                                      "setitem")[0])):
        return      # x[k] op= v wrote through the view x[k] already (numpy skips it too)
    check_write("setitem", target, value)
    mask = _same_shape_mask(target, key)
    if mask is not None and np.size(value) == 1 and type(value) is not DTensor:
        _fill_where(target, mask, np.asarray(value).reshape(()))
        return
    assign(target, entries_for(key, target.shape, "setitem")[0], value)


_entries: dict = {}   # (hashable basic key, shape) -> normalized entries


def entries_for(key, shape, op: str):
    """(``normalize_index`` of ``key`` with its DTensors gathered, whether it holds index
    arrays); remembered for basic keys: a stencil indexes with the same few keys again and
    again."""
    memo = _basic(key)
    if memo is None:
        entries = normalize_index(host_key(key), shape, op)
        return entries, is_advanced(entries)
    memo = (memo, shape)
    entries = _entries.get(memo)
    if entries is None:
        if len(_entries) > 4096:
            _entries.clear()
        entries = _entries[memo] = normalize_index(key, shape, op)
    return entries, False


def _basic(key):
    """A hashable stand-in for a key of ints, slices, None and ... (else None)."""
    parts = key if type(key) is tuple else (key,)
    out = []
    for k in parts:
        t = type(k)
        if t is slice:
            bounds = (k.start, k.stop, k.step)
            if any(type(b) is DTensor for b in bounds):
                return None
            out.append(bounds)
        elif t is int or k is None or k is Ellipsis:
            out.append(k)
        else:
            return None
    return tuple(out)


def host_key(key):
    """The key with its DTensors gathered (every rank needs the whole index): a 0-d one
    becomes a Python int, others numpy arrays.  A collective when the key holds DTensors."""
    parts = key if isinstance(key, tuple) else (key,)
    if not any(type(k) is DTensor for k in parts):
        return key
    out = []
    for k in parts:
        if type(k) is DTensor:
            k = asnumpy(k)
            if k.ndim == 0 and k.dtype.kind in "iu":
                k = int(k)
        out.append(k)
    return tuple(out)


def _same_shape_mask(target, key):
    if type(key) is DTensor and key.dtype == np.bool_ and key.shape == target.shape:
        check_same_mesh("setitem", target.device_mesh, key.device_mesh)
        return key
    return None


def _fill_where(target, mask, value) -> None:
    """``x[mask] = scalar`` with a mask laid out like ``x``: each rank writes its own block."""
    mask = relayout(mask, reduced(target.placements))
    if target._view is not None:
        views.sync(target)
    value = _constant_term(target, value)
    modes.effect("setitem", _put_mask, target._local, mask._local, value)
    views.wrote(target)


def _put_mask(block, mask, value):
    block[mask] = value


def assign(target: DTensor, entries, value, casting=None, op: str = "setitem",
           at=None) -> None:
    """Write ``value`` into ``target[entries]`` in ``target``'s layout; ``casting`` checks the
    value's dtype as numpy's out= and ``copyto`` do (None: setitem's unsafe cast).  With
    ``at`` (a ufunc), apply ``at.at`` there instead of assigning (``values`` may be None)."""
    if entries is WHOLE:
        entries = _whole_entries(target.shape)
    if casting is not None:
        check_cast(op, value, target.dtype, casting)
    if target._view is not None:
        views.sync(target)
    advanced = is_advanced(entries)
    plan = (_plan.__wrapped__ if advanced else _plan)(target._spec, entries)
    region, want, block_key, region_key, offsets = plan
    if value is None and at is not None:
        local = offsets = None
    elif type(value) is DTensor:
        check_same_mesh(op, target.device_mesh, value.device_mesh)
        local, offsets = _value_block(value, region, want, op, target, entries, offsets)
    else:
        value = device.to_device(value if device.is_block(value) else np.asarray(value),
                                 target.device_mesh.device_type)
        shape = check_value_shape(op, value.shape, region)
        local = np.broadcast_to(_constant_term(target, value.reshape(shape)), region)
        offsets = None
    # recorded on every rank, writing or not: a compiled step's schedule must be the same
    value_key = None if local is None or block_key is None else region_index(region_key,
                                                                              offsets)
    modes.effect(op, _put if at is None else _at(at), target._local, block_key, local,
                   value_key)
    views.wrote(target)


def _put(block, block_key, value, value_key):
    if block_key is not None:
        block[block_key] = value[value_key]


def _at(ufunc):
    def apply(block, block_key, value, value_key):
        if block_key is None:
            return
        if value is None:
            device.ufunc_at(ufunc, block, block_key)
        else:
            device.ufunc_at(ufunc, block, block_key, value[value_key])
    return apply


@lru_cache(maxsize=1024)
def _whole_entries(shape) -> tuple:
    return normalize_index(Ellipsis, shape)


@lru_cache(maxsize=4096)
def _plan(spec, entries):
    """(region shape, the value's placements, this rank's block key and region key, the
    value block's offsets): everything a write decides from the specs and the key alone."""
    mesh = spec.mesh
    region, _, _ = region_layout(entries, spec.shape)
    want = value_placements(entries, spec.shape, spec.placements)
    bounds = local_bounds(spec.shape, mesh.shape, spec.placements, mesh.coordinate)
    plan = block_plan(entries, spec.shape, bounds)
    block_key, region_key = plan if plan is not None else (None, None)
    offsets = local_offset(region, mesh.shape, want, mesh.coordinate)
    return region, want, block_key, region_key, offsets


def _value_block(value: DTensor, region, want, op: str, target, entries, offsets):
    """The value broadcast to the region and laid out as ``want`` (or read through windows
    where the key slices a split dim: :mod:`.windows`): (this rank's block, its offsets)."""
    shape = check_value_shape(op, value.shape, region)
    if shape != value.shape:
        value = dispatch("reshape", (value,), (shape,))
    if value.shape != tuple(region):
        value = dispatch("broadcast_to", (value,), (tuple(region),))
    if value._view is not None:
        views.sync(value)
    plan = windowed_value(target, entries, value, want, offsets)
    if plan is None:
        return relayout(value, want)._local, offsets
    want, windows, offsets = plan
    return window_block(relayout(value, tuple(want)), want, windows), tuple(offsets)


def _constant_term(target, value):
    """What this rank writes of a constant into a Partial target: the value, except the
    reduction's identity off coordinate 0 of a summed mesh dim (the terms must add up)."""
    partial = [(m, p) for m, p in enumerate(target.placements) if isinstance(p, Partial)]
    if not partial:
        return value
    if len({p.reduce_op for _, p in partial}) > 1:
        raise TypeError(f"setitem: target placements {fmt_placements(target.placements)} mix reductions; "
                        f"redistribute the target to one Partial kind or Replicate() first")
    coord = target.device_mesh.coordinate
    if any(not p.op.idempotent and coord[m] != 0 for m, p in partial):
        return np.full_like(value, partial[0][1].op.identity(target.dtype), target.dtype)
    return value


def _is_view_at(value, target, entries) -> bool:
    view = value._view if type(value) is DTensor else None
    return (view is not None and view.attached and view.parent is target
            and not is_advanced(entries) and view.op == ("getitem", (entries,)))


def check_cast(op: str, value, dtype, casting: str) -> None:
    if isinstance(value, (bool, int, float, complex)):   # weak Python scalars (NEP 50)
        src = np.dtype(type(value))
        ok = _KINDS.index(src.kind) <= _KINDS.index(np.dtype(dtype).kind.replace("u", "i"))
    else:
        src = value.dtype if type(value) is DTensor else np.asarray(value).dtype
        ok = np.can_cast(src, dtype, casting)
    if not ok:
        raise TypeError(f"{op}: cannot cast the result from dtype('{src}') to dtype('{dtype}') "
                        f"with casting rule '{casting}' (numpy's rule for in-place and out=)")
