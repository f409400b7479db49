"""The global norm of a gradient tree and clipping by it (optax's ``clip_by_global_norm``,
PyTorch's ``clip_grad_norm_``), over gradients of any layouts.

Each rank sums the squares of its blocks (a block replicated over a mesh dim counted once
there, by coordinate 0), so the whole tree's squared norm is one ``Partial`` scalar over
the mesh: one scalar all-reduce per mesh dim, whatever the number of gradients.  A
``Partial`` gradient (``value_and_grad(reduce=False)``) is reduced first, since the norm
of a sum is not a sum of norms: that is the reduction the optimizer would run anyway, and
the clipped gradient comes back reduced.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..autodiff.local_map import local_map
from ..device import arrays as device
from ..dtensor import DTensor, relayout
from ..placement import Partial, Replicate, Shard, reduced
from ..pytree import flatten


def _squares(counted, *blocks):
    """The sum of squares of the blocks this rank counts, as a 0-d float64 block on their
    device."""
    xp = device.xp(blocks[0])
    total = xp.zeros((), np.float64)
    for b, c in zip(blocks, counted):
        if c:
            total += xp.vdot(b, b).real.astype(np.float64)
    return total


def _reduced(grads):
    leaves, build = flatten(grads)
    out = [relayout(g, reduced(g.placements)) if type(g) is DTensor and any(
        isinstance(p, Partial) for p in g.placements) else g for g in leaves]
    return out, build


def _norm(leaves):
    arrays = [g for g in leaves if type(g) is DTensor]
    if not arrays:
        raise ValueError("global_norm: the gradient tree holds no DTensor")
    mesh = arrays[0].device_mesh
    if any(g.device_mesh != mesh for g in arrays):
        raise ValueError("global_norm: the gradients live on more than one mesh; take the "
                         "norm of each mesh's gradients and combine them")
    counted = [_counted(g.placements, mesh) for g in arrays]
    part = local_map(functools.partial(_squares, counted),
                     out_placements=[Partial()] * mesh.ndim)(*arrays)
    total = relayout(part, (Replicate(),) * mesh.ndim)
    return np.sqrt(total)


def _counted(placements, mesh) -> bool:
    """Whether this rank adds its block's squares to the sum over the whole mesh: a block
    replicated over a mesh dim is counted by the ranks at coordinate 0 there only."""
    return all(isinstance(p, Shard) or at == 0 for p, at in zip(placements, mesh.coordinate))


def global_norm(grads) -> DTensor:
    """The 2-norm of all the gradients together, as a replicated 0-d float64 DTensor."""
    return _norm(_reduced(grads)[0])


def clip_by_global_norm(grads, max_norm: float):
    """``(clipped, norm)``: the gradients scaled by ``max_norm / max(norm, max_norm)`` (so
    unchanged when their global norm is within ``max_norm``), each laid out as it was
    (Partial ones reduced), and the norm before clipping (a replicated 0-d DTensor, to
    log).  A non-finite norm gives non-finite gradients, as optax's does."""
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float, np.floating)) or (
            not math.isfinite(max_norm) or max_norm <= 0):
        raise ValueError(f"clip_by_global_norm: max_norm must be a finite number > 0, got "
                         f"{max_norm!r}")
    leaves, build = _reduced(grads)
    norm = _norm(leaves)
    scale = max_norm / np.maximum(norm, max_norm)
    clipped = [g * (scale if g.dtype == scale.dtype else scale.astype(g.dtype))
               if type(g) is DTensor else g for g in leaves]
    return build(clipped), norm
