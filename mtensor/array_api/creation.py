"""The array API's creation functions on a mesh.

Layout of a new array (the choice, documented in ``docs/guide/array_api.md``): an array made
from another (``asarray`` of a DTensor, ``*_like``, ``tril``/``triu``) keeps that array's
layout.  One made from values every rank holds (``asarray`` of a list or numpy array,
``zeros``, ``empty``, ``arange``, ``eye``, ...) is replicated when small and split by rows
over every mesh dim when it holds at least ``split_bytes()`` (1 MiB) and has a row per rank:
the small ones are a model's coefficients, the large ones a sample's rows (scikit-learn
fills ``xp.empty((n_samples, k))`` column by column from a row-split ``X``), and neither
layout costs communication to make.  Every function also takes ``placements=`` for a
layout of your own (each rank then allocates or cuts only its block).
"""
from __future__ import annotations

import math

import numpy as np

from ..dtensor import DTensor, distribute_tensor
from ..numpy import creation as mt
from ..numpy.diagonal import tril, triu
from ..placement import Replicate, Shard
from .devices import mesh_for

__all__ = ["arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full",
           "full_like", "linspace", "meshgrid", "ones", "ones_like", "split_bytes", "tril", "triu",
           "zeros", "zeros_like"]


_SPLIT_BYTES = [1 << 20]


def split_bytes(n: int = None) -> int:
    """The size from which a new array is split by rows (the old value; ``n`` sets it)."""
    old = _SPLIT_BYTES[0]
    if n is not None:
        _SPLIT_BYTES[0] = int(n)
    return old


def default_layout(mesh, shape, dtype) -> tuple:
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    if shape and nbytes >= _SPLIT_BYTES[0] and shape[0] >= mesh.size():
        return (Shard(0),) * mesh.ndim
    return (Replicate(),) * mesh.ndim


def _has_dtensor(obj) -> bool:
    if type(obj) is DTensor:
        return True
    return isinstance(obj, (list, tuple)) and any(_has_dtensor(o) for o in obj)


def asarray(obj, /, *, dtype=None, device=None, copy=None, placements=None):
    """A DTensor as it is (``copy=True``: a copy; a new ``dtype``: a cast, refused with
    ``copy=False``); nested sequences holding DTensors are stacked; anything else is made
    by numpy on every rank and laid out without communication (replicated by default)."""
    if type(obj) is DTensor:
        mesh_for("asarray", device, obj)
        if device is not None and device != obj.device_mesh:
            raise ValueError(f"asarray: a DTensor on {obj.device_mesh!r} cannot be made on "
                             f"{device!r}")
        recast = dtype is not None and np.dtype(dtype) != obj.dtype
        if recast and copy is False:
            raise ValueError("asarray: copy=False, but a new dtype needs a copy")
        out = obj.astype(dtype) if recast else obj.copy() if copy else obj
        return out if placements is None else out.redistribute(placements=placements)
    if _has_dtensor(obj):
        parts = [asarray(o, dtype=dtype, device=device) for o in obj]
        out = np.stack(parts) if parts else asarray([], dtype=dtype, device=device)
        return out if placements is None else out.redistribute(placements=placements)
    values = np.asarray(obj, dtype=dtype, copy=copy)
    if copy is False and mesh_for("asarray", device).device_type != "cpu":
        raise ValueError("asarray: copy=False, but host values need a copy to a device mesh")
    return _placed("asarray", values, device, placements)


def _where(op, device, placements, shape, dtype):
    """The mesh of a new array (``device``, or the default) and its placements (given, or
    :func:`default_layout`'s)."""
    mesh = mesh_for(op, device)
    return mesh, default_layout(mesh, shape, dtype) if placements is None else placements


def _placed(op, values, device, placements):
    """Host values every rank holds, cut to this rank's block (no communication)."""
    mesh, placements = _where(op, device, placements, values.shape, values.dtype)
    return distribute_tensor(values, mesh, placements, src_data_rank=None)


def zeros(shape, *, dtype=None, device=None, placements=None):
    mesh, placements = _where("zeros", device, placements, shape, dtype or float)
    return mt.zeros(shape, dtype or float, mesh=mesh, placements=placements)


def ones(shape, *, dtype=None, device=None, placements=None):
    mesh, placements = _where("ones", device, placements, shape, dtype or float)
    return mt.ones(shape, dtype or float, mesh=mesh, placements=placements)


def empty(shape, *, dtype=None, device=None, placements=None):
    mesh, placements = _where("empty", device, placements, shape, dtype or float)
    return mt.empty(shape, dtype or float, mesh=mesh, placements=placements)


def full(shape, fill_value, *, dtype=None, device=None, placements=None):
    if type(fill_value) is DTensor:
        fill_value = fill_value.item()
    dtype = np.asarray(fill_value).dtype if dtype is None else dtype
    mesh, placements = _where("full", device, placements, shape, dtype)
    return mt.full(shape, fill_value, dtype, mesh=mesh, placements=placements)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None, placements=None):
    lo, hi = (0, start) if stop is None else (start, stop)
    n = max(0, math.ceil((hi - lo) / step))
    mesh, placements = _where("arange", device, placements, (n,),
                              dtype or np.result_type(start, stop or 0, step))
    return mt.arange(start, stop, step, dtype, mesh=mesh, placements=placements)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None, placements=None):
    shape = (n_rows, n_rows if n_cols is None else n_cols)
    mesh, placements = _where("eye", device, placements, shape, dtype or float)
    return mt.eye(n_rows, n_cols, k, dtype or float, mesh=mesh, placements=placements)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True, placements=None):
    values = np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)
    return _placed("linspace", values, device, placements)


def _like(op, x, fill=(), dtype=None, device=None, placements=None):
    """``x``'s shape and layout on its own mesh; on another ``device``, that mesh's default
    layout (``mt.zeros``/``ones``/``empty``/``full`` there)."""
    mesh_for(op, device, x)
    if device is not None and device != x.device_mesh:
        mesh, placements = _where(op, device, placements, x.shape, dtype or x.dtype)
        return getattr(mt, op[:-len("_like")])(x.shape, *fill, dtype or x.dtype, mesh=mesh,
                                               placements=placements)
    out = getattr(mt, op)(x, *fill, dtype=dtype)
    return out if placements is None else out.redistribute(placements=placements)


def zeros_like(x, /, *, dtype=None, device=None, placements=None):
    return _like("zeros_like", x, dtype=dtype, device=device, placements=placements)


def ones_like(x, /, *, dtype=None, device=None, placements=None):
    return _like("ones_like", x, dtype=dtype, device=device, placements=placements)


def empty_like(x, /, *, dtype=None, device=None, placements=None):
    return _like("empty_like", x, dtype=dtype, device=device, placements=placements)


def full_like(x, /, fill_value, *, dtype=None, device=None, placements=None):
    if type(fill_value) is DTensor:
        fill_value = fill_value.item()
    return _like("full_like", x, (fill_value,), dtype=dtype, device=device,
                 placements=placements)


def meshgrid(*arrays, indexing="xy"):
    """A list, as the 2024.12 standard asks (numpy 2 returns a tuple)."""
    return list(mt.meshgrid(*arrays, indexing=indexing))


def from_dlpack(x, /, *, device=None, copy=None):
    """A DLPack producer's array laid out on ``device`` as ``asarray`` lays host values out
    (every rank must pass the same values); a replicated DTensor is a producer too."""
    return asarray(np.from_dlpack(x, copy=copy), device=device)
