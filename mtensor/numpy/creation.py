"""Creation: ``mt.zeros/ones/full/empty/arange`` and ``*_like``, each rank allocating only its
own block (no communication); ``np.linspace`` of DTensor bounds."""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from .. import modes
from ..device.arrays import array_module, to_device, to_host
from ..dtensor import DTensor
from ..placement import Replicate, local_bounds, local_shape, reduced
from ..spec import DTensorSpec, check_target_placements
from .elementwise import copy as _copy
from .shapes import broadcast_to, reshape
from .util import implements, is_dtensor


def layout(op: str, shape, mesh, placements: Optional[Sequence] = None, dtype=None):
    """The spec of a new tensor (Replicate on every mesh dim by default), on ``mesh`` or,
    without one, the mesh of the enclosing ``with mesh:`` block."""
    mesh = modes.default_mesh(op, mesh)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    placements = (Replicate(),) * mesh.ndim if placements is None else placements
    placements = check_target_placements(op, placements, mesh, shape)
    return DTensorSpec(mesh, placements, shape, np.dtype(dtype))


def _filled(op, fill, shape, dtype, mesh, placements):
    spec = layout(op, shape, mesh, placements, dtype)
    mesh = spec.mesh
    mine = local_shape(spec.shape, mesh.shape, spec.placements, mesh.coordinate)
    return DTensor(fill(mine, spec.dtype, array_module(mesh.device_type)), spec)


def zeros(shape, dtype=float, *, mesh=None, placements=None) -> DTensor:
    return _filled("zeros", lambda s, d, xp: xp.zeros(s, d), shape, dtype, mesh, placements)


def ones(shape, dtype=float, *, mesh=None, placements=None) -> DTensor:
    return _filled("ones", lambda s, d, xp: xp.ones(s, d), shape, dtype, mesh, placements)


def empty(shape, dtype=float, *, mesh=None, placements=None) -> DTensor:
    return _filled("empty", lambda s, d, xp: xp.empty(s, d), shape, dtype, mesh, placements)


def full(shape, fill_value, dtype=None, *, mesh=None, placements=None) -> DTensor:
    dtype = np.asarray(fill_value).dtype if dtype is None else dtype
    return _filled("full", lambda s, d, xp: xp.full(s, fill_value, d), shape, dtype, mesh,
                   placements)


def arange(start, stop=None, step=1, dtype=None, *, mesh=None, placements=None) -> DTensor:
    """numpy's ``arange``; each rank computes ``start + step * i`` for its own indices."""
    if stop is None:
        start, stop = 0, start
    dtype = np.result_type(start, stop, step) if dtype is None else np.dtype(dtype)
    n = max(0, math.ceil((stop - start) / step))
    spec = layout("arange", (n,), mesh, placements, dtype)
    mesh = spec.mesh
    (lo, hi), = local_bounds(spec.shape, mesh.shape, spec.placements, mesh.coordinate)
    xp = array_module(mesh.device_type)
    return DTensor((start + step * xp.arange(lo, hi)).astype(dtype), spec)


def eye(N, M=None, k=0, dtype=float, *, mesh=None, placements=None) -> DTensor:
    """numpy's ``eye``; each rank fills only its own block (``j - i == k``)."""
    shape = (int(N), int(N if M is None else M))
    spec = layout("eye", shape, mesh, placements, dtype)
    mesh = spec.mesh
    (r0, r1), (c0, c1) = local_bounds(spec.shape, mesh.shape, spec.placements, mesh.coordinate)
    xp = array_module(mesh.device_type)
    block = (xp.arange(c0, c1)[None, :] - xp.arange(r0, r1)[:, None]) == int(k)
    return DTensor(block.astype(spec.dtype), spec)


def identity(n, dtype=float, *, mesh=None, placements=None) -> DTensor:
    return eye(n, dtype=dtype, mesh=mesh, placements=placements)


def _spaced(name, fn, bounds, retstep=False):
    """numpy's ``fn`` of DTensor bounds: the bounds are read (a collective, refused while
    tracing) and the samples replicated on their mesh."""
    modes.refuse_while_tracing(f"np.{name} of DTensor bounds")
    mesh = next(b.device_mesh for b in bounds if type(b) is DTensor)
    bounds = [to_host(b.full_tensor()) if type(b) is DTensor else b for b in bounds]
    out = fn(*bounds)
    return (replicated(out[0], mesh), out[1]) if retstep else replicated(out, mesh)


def replicated(values, mesh) -> DTensor:
    """Host values every rank holds, as a DTensor replicated on ``mesh`` (no communication)."""
    values = np.asarray(values)
    spec = DTensorSpec(mesh, (Replicate(),) * mesh.ndim, values.shape, values.dtype)
    return DTensor(to_device(values, mesh.device_type), spec)


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    return _spaced("linspace", lambda a, b: np.linspace(a, b, num, endpoint, retstep, dtype, axis),
                   (start, stop), retstep)


@implements(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    return _spaced("logspace", lambda a, b, c: np.logspace(a, b, num, endpoint, c, dtype, axis),
                   (start, stop, base))


@implements(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    return _spaced("geomspace", lambda a, b: np.geomspace(a, b, num, endpoint, dtype, axis),
                   (start, stop))


def _like_layout(a: DTensor):
    """A new tensor laid out like ``a``; Partial dims become Replicate (new values are whole)."""
    return reduced(a.placements)


def _like(a: DTensor, dtype, shape) -> dict:
    same = shape is None
    return dict(shape=a.shape if same else shape, dtype=a.dtype if dtype is None else dtype,
                mesh=a.device_mesh, placements=_like_layout(a) if same else None)


@implements(np.zeros_like)
def zeros_like(a, dtype=None, order="K", subok=True, shape=None):
    return zeros(**_like(a, dtype, shape))


@implements(np.ones_like)
def ones_like(a, dtype=None, order="K", subok=True, shape=None):
    return ones(**_like(a, dtype, shape))


@implements(np.empty_like)
def empty_like(a, dtype=None, order="K", subok=True, shape=None):
    return empty(**_like(a, dtype, shape))


@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    return full(fill_value=fill_value, **_like(a, dtype, shape))


# --- meshgrid and pad --------------------------------------------------------------------

@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    shapes = [[1] * nd for _ in xi]
    for i, x in enumerate(xi):
        shapes[i][i] = int(np.size(x))
    if indexing == "xy" and nd > 1:
        shapes[0][0], shapes[0][1] = 1, shapes[0][0]
        shapes[1][1], shapes[1][0] = 1, shapes[1][1]
    out = [reshape(x, tuple(s)) if is_dtensor(x) else np.asanyarray(x).reshape(s)
           for x, s in zip(xi, shapes)]
    if not sparse:
        full = np.broadcast_shapes(*(o.shape for o in out))
        out = [broadcast_to(o, full) if is_dtensor(o) else np.broadcast_to(o, full) for o in out]
    if copy:
        out = [_copy(o) if is_dtensor(o) else o.copy() for o in out]
    return tuple(out)


# numpy's creation functions with NEP 35's ``like=`` (a DTensor): the array numpy makes from
# the same arguments on every rank, replicated on ``like``'s mesh (no communication).
LIKE_FUNCTIONS = frozenset({np.array, np.asarray, np.asanyarray, np.ascontiguousarray,
                            np.zeros, np.ones, np.empty, np.full, np.arange, np.eye,
                            np.identity, np.tri, np.fromfunction, np.require, np.frombuffer,
                            np.fromiter, np.fromstring, np.loadtxt, np.genfromtxt})


def like(template: DTensor, func, args, kwargs) -> DTensor:
    return replicated(func(*args, **kwargs), template.device_mesh)
