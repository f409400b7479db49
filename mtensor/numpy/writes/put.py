"""numpy's writing functions on DTensors: ``copyto``, ``put``, ``place``, ``putmask``,
``fill_diagonal``, each expressed as an item assignment (:mod:`writes`) so it keeps the
target's layout and communicates only where the value's layout requires."""
from __future__ import annotations

import numpy as np

from ...dtensor import DTensor
from ..util import host_value, implements, run
from .setitem import WHOLE, assign, check_cast, check_write, setitem


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    """``dst[...] = src`` with numpy's casting check; ``where`` keeps ``dst`` elsewhere."""
    if type(dst) is not DTensor:
        np.copyto(dst, host_value(src), casting=casting, where=host_value(where))
        return
    check_write("copyto", dst, src)
    check_cast("copyto", src, dst.dtype, casting)
    if where is not True:
        src = run("where", (where, src, dst))
    assign(dst, WHOLE, src, None, "copyto")


def _flat_key(a, ind, mode):
    """Flat indices (numpy's ``put`` modes) as a tuple of index arrays into ``a``."""
    ind = np.asarray(host_value(ind), dtype=np.intp).ravel()
    if mode == "wrap":
        ind = ind % a.size
    elif mode == "clip":
        ind = np.clip(ind, 0, a.size - 1)
    elif mode != "raise":
        raise ValueError(f"put: mode must be 'raise', 'wrap' or 'clip', not {mode!r}")
    bad = ind[(ind < -a.size) | (ind >= a.size)]
    if bad.size:
        raise IndexError(f"put: index {int(bad[0])} is out of bounds for size {a.size}")
    return np.unravel_index(ind % a.size if a.size else ind, a.shape), ind.size


@implements(np.put)
def put(a, ind, v, mode="raise"):
    """``a.flat[ind] = v``, ``v`` repeated as needed (a later repeat of an index wins)."""
    if type(a) is not DTensor:
        np.put(a, host_value(ind), host_value(v), mode=mode)
        return
    key, count = _flat_key(a, ind, mode)
    if count:
        setitem(a, key, np.resize(np.asarray(host_value(v), dtype=a.dtype), count))


@implements(np.place)
def place(arr, mask, vals):
    """``arr[mask] = vals``, ``vals`` cycled over the True positions."""
    mask = np.asarray(host_value(mask), dtype=bool)
    vals = np.asarray(host_value(vals), dtype=arr.dtype).ravel()
    count = int(mask.sum())
    if count and not vals.size:
        raise ValueError("place: cannot insert from an empty array")
    if count:
        setitem(arr, mask.reshape(arr.shape), np.resize(vals, count))


@implements(np.putmask)
def putmask(a, mask, values):
    """``a[mask] = values[mask]``, ``values`` repeated to ``a``'s size."""
    if type(values) is not DTensor or values.shape != a.shape:
        values = np.resize(np.asarray(host_value(values), dtype=a.dtype), a.shape)
    check_write("putmask", a, values)
    assign(a, WHOLE, run("where", (mask, values, a)), None, "putmask")


@implements(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    """numpy's flat-stride walk down the main diagonal (``wrap`` restarts it in a tall
    matrix), written as an item assignment."""
    if a.ndim < 2:
        raise ValueError("fill_diagonal: array must be at least 2-d")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError("fill_diagonal: all dimensions of input must be of equal length")
    if a.ndim == 2:
        step = a.shape[1] + 1
        end = a.size if wrap else min(a.shape[1] * a.shape[1], a.size)
    else:
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
        end = a.size
    flat = np.arange(0, end, step)
    if flat.size:
        key = np.unravel_index(flat, a.shape)
        setitem(a, key, np.resize(np.asarray(host_value(val), dtype=a.dtype), flat.size))
