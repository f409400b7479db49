"""``mt.halo``: a block with its neighbours' edges attached, for code that runs its own
stencil on the blocks (Heat's ``get_halo``; ``mt.local_map(..., halo=)`` hands such blocks
to ``fn``).  The exchange is the ``halo`` collective kind (``ops.windows`` plans it from
shapes alone, so every rank agrees, and under ``mt.compile`` it is a started collective of
the graph)."""
from __future__ import annotations

import numpy as np

from . import modes, views
from .dtensor import DTensor, relayout
from .ops.windows import Window, halo_plan, is_split_once
from .placement import Partial, Shard, reduced
from .redistribute.halo import bind_windows
from .spec import fmt_placements


def halo(x: DTensor, width: int, dim: int = 0, periodic: bool = False):
    """This rank's block of ``x`` with ``width`` slices along ``dim`` of the previous and
    the next rank's blocks attached before and after it (the array's first and last block
    get none on their outer side, unless ``periodic``: then the array wraps round, as
    ``np.roll`` does).  Where nothing is attached (a dim that is not split, or ``width``
    0) it is the block itself, as ``to_local()`` (a dim that is not split wrapped when
    ``periodic``).  Partial terms are reduced first (``x`` keeps its layout).  Raises on
    every rank when ``dim`` is split by two mesh dims or a neighbour's block is narrower
    than ``width``."""
    if type(x) is not DTensor:
        raise TypeError(f"halo: x must be a DTensor, got {type(x).__name__}")
    width, dim = int(width), int(dim)
    if width < 0 or not -x.ndim <= dim < x.ndim:
        raise ValueError(f"halo: width {width} must be >= 0 and dim {dim} a dim of shape "
                         f"{x.shape}")
    dim %= x.ndim
    if any(isinstance(p, Partial) for p in x.placements):
        x = relayout(x, reduced(x.placements))
    elif x._view is not None:
        views.sync(x)
    mesh = x.device_mesh
    split = [i for i, (p, n) in enumerate(zip(x.placements, mesh.shape))
             if p == Shard(dim) and n > 1]
    if not split:
        return _whole(x._local, width, dim, periodic)
    mesh_dim = is_split_once(x.placements, mesh.shape, dim)
    window = Window(0, mesh_dim if mesh_dim is not None else -1, dim, x.shape[dim], 0,
                    periodic=periodic, widen=width)
    if mesh_dim is None or halo_plan(window, x.shape[dim], mesh.shape[mesh_dim]) is None:
        raise ValueError(f"halo: x of shape {x.shape} laid out as {fmt_placements(x.placements)}"
                         f" on mesh {mesh.shape}: {width} slices of dim {dim} reach past a "
                         f"neighbour's block, or two mesh dims split it; use a smaller width "
                         f"or redistribute x")
    return bind_windows(mesh, x.shape, x.dtype, x.placements, (window,))(x._local)


def _whole(block, width, dim, periodic):
    if not periodic or width == 0:
        return block
    if width > block.shape[dim]:
        raise ValueError(f"halo: {width} slices of dim {dim} wrap past the block of shape "
                         f"{block.shape}")
    n = block.shape[dim]

    def rows(b, lo, hi):
        return b[(slice(None),) * dim + (slice(lo, hi),)]

    def take(b):
        return np.concatenate([rows(b, n - width, n), b, rows(b, 0, width)], axis=dim)
    if modes.active.tracer is None:
        return take(block)
    return modes.active.tracer.call("halo window", take, (block,))
