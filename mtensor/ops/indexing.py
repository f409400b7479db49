"""Basic indexing: ints, slices (any step), None and ``...`` on any dim.

A dim taken whole keeps its split.  A dim that is sliced or indexed is either gathered first
(Replicate) or, for numeric dtypes, left split: each rank writes the part of the result that
falls in its block into zeros, which makes ``P(sum)`` terms.  The cost model picks between
them (gathering the input versus reducing the result), and the result then goes wherever
the next op needs it: a later redistribution rebalances it into the array_split layout.
"""
from __future__ import annotations

import numpy as np

from ..placement import Partial, Shard, local_bounds, local_shape
from .registry import Choice, OpCall, Strategy, register, replicated, shard_along
from .views import dim_map_choices


def normalize_key(key, shape):
    """``x[key]`` as a hashable tuple: ("i", index), ("s", start, stop, step) per dim, ("n",)
    for each None.  Raises IndexError (alike on every rank) for a bad key."""
    key = key if isinstance(key, tuple) else (key,)
    if any(not isinstance(k, (int, np.integer, slice, type(None), type(Ellipsis))) or
           isinstance(k, bool) for k in key):
        raise TypeError(f"getitem: index {key!r} uses advanced indexing (arrays, lists or "
                        f"bools); DTensor supports ints, slices, None and ...; call "
                        f"full_tensor() or to_local() for the rest")
    used = sum(k is not None and k is not Ellipsis for k in key)
    if used > len(shape) or sum(k is Ellipsis for k in key) > 1:
        raise IndexError(f"getitem: index {key!r} has too many entries for shape {shape}")
    if Ellipsis not in key:
        key = key + (Ellipsis,)
    at = key.index(Ellipsis)
    key = key[:at] + (slice(None),) * (len(shape) - used) + key[at + 1:]
    out, d = [], 0
    for k in key:
        if k is None:
            out.append(("n",))
            continue
        size = shape[d]
        if isinstance(k, slice):
            out.append(("s",) + k.indices(size))
        elif -size <= k < size:
            out.append(("i", int(k) % size))
        else:
            raise IndexError(f"getitem: index {int(k)} is out of bounds for dim {d} of shape "
                             f"{shape} (size {size})")
        d += 1
    return tuple(out)


def _is_whole(entry, size) -> bool:
    return entry[0] == "s" and entry[1:] == (0, size, 1)


@register("getitem")
def getitem_rule(call: OpCall) -> Strategy:
    (key,) = call.params
    operand = call.operands[0]
    out_shape, in_to_out, picked, d = [], [], [], 0
    for entry in key:
        if entry[0] == "n":
            out_shape.append(1)
            continue
        whole = _is_whole(entry, operand.shape[d])
        in_to_out.append(len(out_shape) if whole else None)
        if not whole:
            picked.append(d)
        if entry[0] == "s":
            out_shape.append(len(range(*entry[1:])))
        d += 1
    choices = dim_map_choices(in_to_out)
    if operand.dtype.kind in "iufc":
        choices += [Choice((Shard(p),), Partial("sum")) for p in picked]

    def kernel_for(in_layouts, out_layout, mesh):
        bounds = local_bounds(operand.shape, mesh.shape, in_layouts[0], mesh.coordinate)
        filled = [p for p in picked if bounds[p] != (0, operand.shape[p])]
        if not filled:
            plain = tuple(_plain(entry) for entry in key)
            return lambda a: a[plain]
        mine = local_shape(tuple(out_shape), mesh.shape, out_layout, mesh.coordinate)
        return _fill_kernel(key, bounds, operand.shape, mine)

    return Strategy(tuple(out_shape), choices, kernel_for=kernel_for)


def _slice(start, stop, step) -> slice:
    """A slice from normalized bounds: a negative stop (stepping down past 0) means None, and
    an empty range stays empty (a negative start would count from the end)."""
    if not len(range(start, stop, step)):
        return slice(0, 0)
    return slice(start, None if stop < 0 else stop, step)


def _plain(entry):
    if entry[0] == "n":
        return None
    return entry[1] if entry[0] == "i" else _slice(*entry[1:])


def _fill_kernel(key, bounds, shape, out_shape):
    """This rank's terms: the part of ``x[key]`` inside its block, zeros elsewhere."""
    src, dst, owned, d = [], [], True, 0
    for entry in key:
        if entry[0] == "n":
            src.append(None)
            dst.append(slice(None))
            continue
        lo, hi = bounds[d]
        whole_here = (lo, hi) == (0, shape[d])
        if entry[0] == "i":
            owned &= lo <= entry[1] < hi
            src.append(entry[1] - lo)
        elif _is_whole(entry, shape[d]):
            src.append(slice(None))
            dst.append(slice(None))
        elif whole_here:
            src.append(_slice(*entry[1:]))
            dst.append(slice(None))
        else:
            rows = np.arange(*entry[1:])
            inside = np.nonzero((rows >= lo) & (rows < hi))[0]
            k0, k1 = (inside[0], inside[-1] + 1) if len(inside) else (0, 0)
            step = entry[3]
            stop = rows[k1 - 1] - lo + step if len(inside) else 0
            src.append(_slice(rows[k0] - lo if len(inside) else 0, stop, step))
            dst.append(slice(k0, k1))
        d += 1
    src, dst = tuple(src), tuple(dst)

    def fill(a):
        out = np.zeros(out_shape, a.dtype)
        if owned:
            out[dst] = a[src]
        return out
    return fill


@register("index_put")
def index_put_rule(call: OpCall) -> Strategy:
    """The adjoint of getitem: zeros of ``shape`` with the operand written at ``key``."""
    key, shape = call.params
    in_to_out, none_dims, pos = [], [], 0
    for entry in key:
        if entry[0] == "n":
            none_dims.append(pos)
            pos += 1
            continue
        d = len(in_to_out)
        in_to_out.append(pos if _is_whole(entry, shape[d]) else None)
        pos += entry[0] == "s"
    choices = [replicated(1)] + [shard_along([k], d) for d, k in enumerate(in_to_out)
                                 if k is not None]
    choices += [Choice((Partial(op),), Partial(op)) for op in ("sum", "avg")]
    plain = tuple(slice(None) if k is not None else _plain(entry)
                  for entry, k in zip([e for e in key if e[0] != "n"], in_to_out))

    def kernel_for(in_layouts, out_layout, mesh):
        mine = local_shape(tuple(shape), mesh.shape, out_layout, mesh.coordinate)

        def put(g):
            out = np.zeros(mine, g.dtype)
            out[plain] = np.squeeze(g, axis=tuple(none_dims)) if none_dims else g
            return out
        return put

    return Strategy(tuple(shape), choices, kernel_for=kernel_for)
