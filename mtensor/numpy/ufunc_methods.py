"""ufunc methods beyond ``__call__`` (``UFUNC_METHODS``): ``outer``, ``reduce`` of any binary
ufunc, ``accumulate`` and ``reduceat``.  ``accumulate`` along a split axis is a distributed
scan: each rank scans its block, the blocks' totals (one slice each) are all-gathered, and
block k folds in the totals before it.
"""
from __future__ import annotations

import numpy as np

from ..dtensor import DTensor
from ..ops.ufunc_methods import gathered, scan_mesh_dims
from .shapes import expand_dims
from .util import as_array, axis_arg, dtype_arg, refuse, run


def outer(ufunc, inputs, kwargs):
    """``ufunc.outer(a, b)``: ``ufunc(a[..., None, ..., None], b)``, sharded pointwise."""
    if ufunc.nin != 2:
        raise ValueError(f"{ufunc.__name__}.outer: outer product only supported for binary "
                         f"functions")
    if ufunc.signature is not None:
        raise TypeError(f"{ufunc.__name__}.outer: not supported on DTensors; call "
                        f"full_tensor() or to_local() and use numpy directly")
    a, b = (as_array(x) for x in inputs)
    new = tuple(range(a.ndim, a.ndim + b.ndim))
    if new:
        a = expand_dims(a, new) if type(a) is DTensor else a.reshape(a.shape + (1,) * b.ndim)
    return ufunc(a, b, **kwargs)     # a DTensor is among them: back through __array_ufunc__


def reduce(ufunc, inputs, kwargs):
    """``ufunc.reduce`` for any binary ufunc: the reduced dims are gathered, each rank
    reduces its block with numpy."""
    (a,) = inputs
    axis = kwargs.pop("axis", 0)
    dtype = dtype_arg(kwargs.pop("dtype", None))
    keepdims = bool(kwargs.pop("keepdims", False))
    initial = kwargs.pop("initial", np._NoValue)
    refuse(f"{ufunc.__name__}.reduce", initial=initial, **kwargs)
    return run("ufunc_reduce", (a,), (ufunc.__name__, axis_arg(axis), keepdims, dtype))


def accumulate(ufunc, inputs, kwargs):
    """``ufunc.accumulate(a, axis=0, dtype=None)``: a distributed scan where the axis is
    split (associative ufuncs), else a scan of the gathered axis."""
    (a,) = inputs
    axis = kwargs.pop("axis", 0)
    dtype = dtype_arg(kwargs.pop("dtype", None))
    refuse(f"{ufunc.__name__}.accumulate", **kwargs)
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{ufunc.__name__}.accumulate: axis must be an int, got {axis!r}")
    return scan(ufunc.__name__, a, int(axis), dtype)


def scan(name, a, axis, dtype):
    local = run("ufunc_accumulate", (a,), (name, axis, dtype))
    axis %= max(local.ndim, 1)
    mesh = local.device_mesh
    dims = scan_mesh_dims(local.placements, axis)
    if all(mesh.shape[i] == 1 for i in dims):
        return local
    totals = run("scan_totals", (local,), (axis,))
    totals = totals.redistribute(mesh, gathered(totals.placements, axis))
    return run("scan_apply", (local, totals), (name, axis))


def reduceat(ufunc, inputs, kwargs):
    """``ufunc.reduceat(a, indices, axis=0, dtype=None)`` with plain integer indices: the
    axis is gathered and each rank reduces its block's slices with numpy."""
    a, indices = inputs
    axis = kwargs.pop("axis", 0)
    dtype = dtype_arg(kwargs.pop("dtype", None))
    refuse(f"{ufunc.__name__}.reduceat", **kwargs)
    if type(indices) is DTensor:
        raise TypeError(f"{ufunc.__name__}.reduceat: DTensor indices are not supported; "
                        f"pass a list or numpy array of ints")
    if type(a) is not DTensor:
        raise TypeError(f"{ufunc.__name__}.reduceat: the array is not a DTensor")
    indices = tuple(int(i) for i in np.asarray(indices).ravel())
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{ufunc.__name__}.reduceat: axis must be an int, got {axis!r}")
    return run("ufunc_reduceat", (a,), (ufunc.__name__, indices, int(axis), dtype))


# the ufunc methods beyond __call__, by name: ``protocols.apply_ufunc`` looks them up
UFUNC_METHODS = {"outer": outer, "reduce": reduce, "accumulate": accumulate,
                 "reduceat": reduceat}
