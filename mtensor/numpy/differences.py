"""``np.diff``, ``np.ediff1d``, ``np.gradient`` and ``np.convolve`` on DTensors: one op,
``halo_apply`` (``ops.halo``), in which each rank computes its output block from the rows
its block reads; along a split axis a halo exchange brings the few rows past the block's
ends (the axis is gathered whole where a block is narrower than the rows it must lend).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from ..device import arrays as device
from ..dtensor import DTensor, asnumpy
from ..placement import Replicate
from .joins import concatenate
from .shapes import broadcast_to, ravel
from .util import as_array, implements, run

# --- differences: the rows each block reads ------------------------------------------------

def _halo(kind, a, axis, params, extras=(), roles=()):
    """``halo_apply`` of ``a`` along ``axis`` (its rule reads the rows through windows)."""
    return run("halo_apply", (a, *extras), (kind, axis, ("a", *roles), params))


def _numeric(name, *arrays):
    for x in arrays:
        if np.dtype(x.dtype).kind not in "biufc":
            raise TypeError(f"{name}: dtype {x.dtype} is not supported on DTensors; call "
                            f"full_tensor() or to_local() and use numpy directly")


def _end_rows(value, a, axis):
    """diff's prepend/append as rows of ``a``'s shape (a scalar broadcast to one row)."""
    row = a.shape[:axis] + (1,) + a.shape[axis + 1:]
    if type(value) is not DTensor:
        value = np.asanyarray(value)
        return np.broadcast_to(value, row) if value.ndim == 0 else value
    return broadcast_to(value, row) if value.ndim == 0 else value


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """numpy's ``diff``; a split axis exchanges ``n`` (plus prepended/appended) rows."""
    if n == 0:
        return a
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    if type(a) is not DTensor:
        raise TypeError("diff: the array is not a DTensor; pass a DTensor (prepend and "
                        "append may be DTensors or plain values)")
    if a.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = normalize_axis_index(axis, a.ndim)
    extras, roles, rows = [], [], [0, 0]
    for i, (role, value) in enumerate((("prepend", prepend), ("append", append))):
        if value is not np._NoValue:
            value = _end_rows(value, a, axis)
            if value.ndim != a.ndim or any(s != t for d, (s, t) in enumerate(
                    zip(value.shape, a.shape)) if d != axis):
                raise ValueError(f"diff: {role} of shape {value.shape} does not join {a.shape} "
                                 f"along axis {axis}")
            extras.append(value)
            roles.append(role)
            rows[i] = value.shape[axis]
    _numeric("diff", a, *extras)
    return _halo("diff", a, axis, (int(n), *rows), extras, tuple(roles))


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    """numpy's ``correlate``: ``convolve`` with the kernel reversed (and conjugated)."""
    kernel = np.flip(v)
    kernel = np.conj(kernel) if np.iscomplexobj(kernel) else kernel
    return convolve(a, kernel, mode)


@implements(np.convolve)
def convolve(a, v, mode="full"):
    """numpy's ``convolve`` of a split ``a`` with a kernel ``v`` used whole (a DTensor ``v``
    is gathered): a halo exchange of ``len(v) - 1`` rows, each rank convolving its window
    ('valid' over the rows the mode's zero padding extends).  A kernel longer than ``a``
    (numpy swaps them) gathers ``a``."""
    if type(a) is not DTensor:
        a, v = v, a                       # convolution commutes
    kernel = asnumpy(v)
    if a.ndim != 1 or kernel.ndim != 1:
        raise ValueError("object too deep for desired array")
    if a.shape[0] == 0:
        raise ValueError("a cannot be empty")
    if kernel.size == 0:
        raise ValueError("v cannot be empty")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"mode must be one of 'full', 'same', or 'valid' (got {mode!r})")
    _numeric("convolve", a, kernel)
    m = kernel.size
    if m > a.shape[0]:
        whole = a.full_tensor()
        out = np.convolve(whole, device.like(kernel, whole), mode)
        mesh = a.device_mesh
        return DTensor.from_local(out, mesh, (Replicate(),) * mesh.ndim, shape=out.shape)
    before, after = {"full": (m - 1, m - 1), "same": (m - 1 - (m - 1) // 2, (m - 1) // 2),
                     "valid": (0, 0)}[mode]
    extras, roles = [], []
    for role, rows in (("prepend", before), ("append", after)):
        if rows:
            extras.append(np.zeros(rows, a.dtype))
            roles.append(role)
    params = (m - 1, before, after, kernel.dtype.str, tuple(kernel.tolist()))
    return _halo("convolve", a, 0, params, extras, tuple(roles))


@implements(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    """numpy's ``ediff1d``: the flattened differences (a halo exchange), then the given
    ends joined on (a join along the split axis)."""
    if type(ary) is not DTensor:
        raise TypeError("ediff1d: the array is not a DTensor")
    if ary.dtype == np.bool_:
        raise TypeError("numpy boolean subtract, the `-` operator, is not supported, use the "
                        "bitwise_xor, the `^` operator, or the logical_xor function instead.")
    d = diff(ravel(ary))
    ends = [(name, end) for name, end in (("to_begin", to_begin), ("to_end", to_end))
            if end is not None]
    if not ends:
        return d
    parts = {}
    for name, end in ends:
        if not np.can_cast(end.dtype if type(end) is DTensor else np.asanyarray(end),
                           ary.dtype, casting="same_kind"):
            raise TypeError(f"dtype of `{name}` must be compatible with input `ary` under the "
                            f"`same_kind` rule.")
        end = ravel(end)
        parts[name] = end.astype(ary.dtype)
    return concatenate([p for p in (parts.get("to_begin"), d, parts.get("to_end"))
                        if p is not None])


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """numpy's ``gradient``: each split axis exchanges ``edge_order`` rows each side;
    coordinate arrays (plain or DTensor) are used whole."""
    if type(f) is not DTensor:
        raise TypeError("gradient: the array is not a DTensor")
    axes = tuple(range(f.ndim)) if axis is None else normalize_axis_tuple(axis, f.ndim)
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    _numeric("gradient", f)
    out = []
    for ax, spacing in zip(axes, spacings):
        if np.ndim(spacing) not in (0, 1):
            raise ValueError("distances must be either scalars or 1d")
        if np.ndim(spacing) == 1 and np.shape(spacing)[0] != f.shape[ax]:
            raise ValueError("when 1d, distances must match the length of the corresponding "
                             "dimension")
        if f.shape[ax] < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, at "
                             "least (edge_order + 1) elements are required.")
        if np.ndim(spacing) == 0:
            if type(spacing) is DTensor:
                raise TypeError("gradient: a 0-d DTensor spacing is not supported; pass a "
                                "number")
            step = spacing[()] if isinstance(spacing, np.ndarray) else spacing
            out.append(_halo("gradient", f, ax, (int(edge_order), step)))
        else:
            coords = as_array(spacing)
            out.append(_halo("gradient", f, ax, (int(edge_order), None), (coords,),
                             ("coords",)))
    return out[0] if len(out) == 1 else tuple(out)
