"""Gradients across the block boundary: the vector-Jacobian products of ``to_local`` and
``DTensor.from_local`` (DTensor's contract: each one's cotangent is the other, laid out as
the grad placements), and the check that a block declared replicated is the same block on
every rank.

A followed ``x.to_local()`` is a DTensor of the rank's one-rank mesh (``Tape.local_of``), so
numpy code on it is recorded like any other; ``from_local`` of such a block records the way
back.  Between the two, nothing waits on another rank.
"""
from __future__ import annotations

import zlib

import numpy as np

from .. import modes
from ..comm import guard
from ..device import arrays as device
from ..dtensor import DTensor, own_block, relayout
from ..placement import Replicate
from ..spec import DTensorSpec, fmt_placements
from .tape import VJPS


def _to_local_vjp(j, g, out, operands, params):
    """The block's cotangent, wrapped as ``x``'s: laid out as the grad placements."""
    x = operands[0]
    block = own_block(g, x.device_mesh)
    grad = DTensor.from_local(block, x.device_mesh, params[0], shape=x.shape)
    check_replicated(grad, "to_local (its gradient)")
    return grad


def _from_local_vjp(j, g, out, operands, params):
    """The global cotangent laid out as the grad placements, then this rank's block."""
    term = operands[0]
    laid = relayout(g, params[0])
    if modes.active.autoshard is not None:
        modes.active.autoshard.pinned(g, laid)
    block = laid._local
    if block.shape != term.shape:
        raise ValueError(
            f"from_local: grad_placements {fmt_placements(params[0])} give this rank a gradient block "
            f"of shape {block.shape}, but its local block had shape {term.shape}; pass grad "
            f"placements that split the tensor as its placements {fmt_placements(out.placements)} do")
    return DTensor(block, DTensorSpec(term.device_mesh, (Replicate(),), block.shape,
                                      block.dtype))


VJPS.update({"to_local": _to_local_vjp, "from_local": _from_local_vjp})


def check_replicated(x: DTensor, what: str) -> None:
    """Under ``MTENSOR_CHECK=1``: a tensor declared ``Replicate()`` on a mesh dim must hold
    the same block on every rank along it (JAX's ``check_vma``).  One allgather of a hash of
    each block over the mesh, so every rank sees every group and all raise together."""
    if not guard.state.checks:
        return
    mesh = x.device_mesh
    dims = [d for d, p in enumerate(x.placements) if p == Replicate()]
    if not dims or mesh.size() == 1:
        return
    digest = zlib.crc32(np.ascontiguousarray(device.to_host(x._local)).view(np.uint8))
    seen = mesh.communicator().allgather_object((tuple(mesh.coordinate), digest))
    for d in dims:
        groups = {}
        for coordinate, h in seen:
            groups.setdefault(coordinate[:d] + coordinate[d + 1:], set()).add(h)
        if any(len(hashes) > 1 for hashes in groups.values()):
            raise ValueError(
                f"{what}: a tensor of shape {x.shape} declared {fmt_placements(x.placements)} holds "
                f"different blocks on the ranks along mesh dim {d}, so Replicate() there is "
                f"not true; declare Partial() where each rank holds a term of a sum (the "
                f"gradient of a replicated input is one), or Shard(dim) where each holds "
                f"a piece")
