"""ufunc methods on DTensors beyond ``__call__``: ``outer``, ``reduce`` of any binary ufunc,
``accumulate`` (a distributed scan), ``reduceat`` (the axis gathered), and ``np.cumsum``,
``np.cumprod``, ``np.nancumsum``, ``np.nancumprod``.  ``apply_ufunc`` in :mod:`numpy_api`
finds the methods in ``HANDLED`` under ``("ufunc", method)``, registered here (so numpy_api
need not import this module).

The scan along a split axis, for associative ufuncs (``ops.ufunc_methods.SCANNABLE``)::

    local   = ufunc_accumulate(a)           each rank scans its own block (no communication)
    totals  = scan_totals(local)            each block's last slice: (nblocks, ...) sharded
    totals  = totals.redistribute(gathered) the planner's all-gather of those small totals
    result  = scan_apply(local, totals)     block k: fold(totals[j], j < k) op local

Only the totals move: one slice per block, never the blocks themselves.
"""
from __future__ import annotations

import numpy as np

from .dtensor import DTensor
from .numpy_api import _axis, _dtype, _out, _run, implements, refuse
from .ops.ufunc_methods import gathered, scan_mesh_dims


def _tensor(x):
    return x if type(x) is DTensor else np.asarray(x)


def outer(ufunc, inputs, kwargs):
    """``ufunc.outer(a, b)``: ``ufunc(a[..., None, ..., None], b)``, sharded pointwise."""
    from .numpy_api import apply_ufunc
    from .numpy_shapes import expand_dims
    if ufunc.nin != 2:
        raise ValueError(f"{ufunc.__name__}.outer: outer product only supported for binary "
                         f"functions")
    if ufunc.signature is not None:
        raise TypeError(f"{ufunc.__name__}.outer: not supported on DTensors; call "
                        f"full_tensor() or to_local() and use numpy directly")
    a, b = (_tensor(x) for x in inputs)
    new = tuple(range(a.ndim, a.ndim + b.ndim))
    if new:
        a = expand_dims(a, new) if type(a) is DTensor else a.reshape(a.shape + (1,) * b.ndim)
    return apply_ufunc(ufunc, "__call__", (a, b), kwargs)


def reduce(ufunc, inputs, kwargs):
    """``ufunc.reduce`` for any binary ufunc: the reduced dims are gathered, each rank
    reduces its block with numpy."""
    (a,) = inputs
    axis = kwargs.pop("axis", 0)
    dtype = _dtype(kwargs.pop("dtype", None))
    keepdims = bool(kwargs.pop("keepdims", False))
    initial = kwargs.pop("initial", np._NoValue)
    refuse(f"{ufunc.__name__}.reduce", initial=initial, **kwargs)
    return _run("ufunc_reduce", (a,), (ufunc.__name__, _axis(axis), keepdims, dtype))


def accumulate(ufunc, inputs, kwargs):
    """``ufunc.accumulate(a, axis=0, dtype=None)``: a distributed scan where the axis is
    split (associative ufuncs), else a scan of the gathered axis."""
    (a,) = inputs
    axis = kwargs.pop("axis", 0)
    dtype = _dtype(kwargs.pop("dtype", None))
    refuse(f"{ufunc.__name__}.accumulate", **kwargs)
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{ufunc.__name__}.accumulate: axis must be an int, got {axis!r}")
    return scan(ufunc.__name__, a, int(axis), dtype)


def scan(name, a, axis, dtype):
    local = _run("ufunc_accumulate", (a,), (name, axis, dtype))
    axis %= max(local.ndim, 1)
    mesh = local.device_mesh
    dims = scan_mesh_dims(local.placements, axis)
    if all(mesh.shape[i] == 1 for i in dims):
        return local
    totals = _run("scan_totals", (local,), (axis,))
    totals = totals.redistribute(mesh, gathered(totals.placements, axis))
    return _run("scan_apply", (local, totals), (name, axis))


def reduceat(ufunc, inputs, kwargs):
    """``ufunc.reduceat(a, indices, axis=0, dtype=None)`` with plain integer indices: the
    axis is gathered and each rank reduces its block's slices with numpy."""
    a, indices = inputs
    axis = kwargs.pop("axis", 0)
    dtype = _dtype(kwargs.pop("dtype", None))
    refuse(f"{ufunc.__name__}.reduceat", **kwargs)
    if type(indices) is DTensor:
        raise TypeError(f"{ufunc.__name__}.reduceat: DTensor indices are not supported; "
                        f"pass a list or numpy array of ints")
    if type(a) is not DTensor:
        raise TypeError(f"{ufunc.__name__}.reduceat: the array is not a DTensor")
    indices = tuple(int(i) for i in np.asarray(indices).ravel())
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{ufunc.__name__}.reduceat: axis must be an int, got {axis!r}")
    return _run("ufunc_reduceat", (a,), (ufunc.__name__, indices, int(axis), dtype))


# apply_ufunc looks these up by ("ufunc", method) once this module is imported
for _method, _handler in (("outer", outer), ("reduce", reduce), ("accumulate", accumulate),
                          ("reduceat", reduceat)):
    implements(("ufunc", _method))(_handler)


def _cumulative(name, ufunc, skip_nan=False):
    def cumulate(a, axis=None, dtype=None, out=None):
        if skip_nan and a.dtype.kind in "fc":
            a = _run("where", (_run("isnan", (a,)), 0 if ufunc is np.add else 1, a))
        if axis is None:
            from .numpy_shapes import ravel
            a, axis = ravel(a), 0
        return _out(scan(ufunc.__name__, a, axis, _dtype(dtype)), out)
    cumulate.__name__ = name
    return cumulate


cumsum = implements(np.cumsum)(_cumulative("cumsum", np.add))
cumprod = implements(np.cumprod)(_cumulative("cumprod", np.multiply))
nancumsum = implements(np.nancumsum)(_cumulative("nancumsum", np.add, skip_nan=True))
nancumprod = implements(np.nancumprod)(_cumulative("nancumprod", np.multiply, skip_nan=True))

__all__ = ["accumulate", "cumprod", "cumsum", "nancumprod", "nancumsum", "outer", "reduce",
           "reduceat"]
