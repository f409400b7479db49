"""Where the array API's arrays live: a DTensor's ``device`` is its ``DeviceMesh`` (which names
its ranks and, in ``device_type``, the kind of device each holds).  A creation call's
``device=`` is a mesh; without one, the mesh of the innermost ``with mesh:`` block, and
outside every block the default device: a 1-D host mesh of all ranks, made by the first call
that needs it (every rank makes that call, as every rank makes every mtensor call).
"""
from __future__ import annotations

from .. import modes
from ..dtensor import DTensor
from ..mesh import DeviceMesh
from ..mesh.device_mesh import world_mesh
from ..placement import Replicate


def default_device() -> DeviceMesh:
    """The innermost ``with mesh:`` block's mesh, else the 1-D mesh of every rank."""
    return modes.active.meshes[-1] if modes.active.meshes else world_mesh()


def mesh_for(op: str, device=None, like=None) -> DeviceMesh:
    """The mesh a new array goes on: ``device``, else ``like``'s mesh, else the default
    device; a TypeError naming ``op`` for anything that is not a mesh."""
    if device is None and type(like) is DTensor:
        return like.device_mesh
    mesh = default_device() if device is None else device
    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"array_api.{op}: device={device!r} is not a DeviceMesh; an mtensor "
                        f"array's device is the mesh it is laid out on (x.device)")
    return mesh


def device_of(x: DTensor) -> DeviceMesh:
    return x.device_mesh


def to_device(x: DTensor, device, /, *, stream=None) -> DTensor:
    """``x`` on ``device``: its own mesh (or an equal one) returns ``x``; moving to another
    mesh is refused (redistribute within a mesh; build the array on the other mesh)."""
    if stream is not None:
        raise ValueError("to_device: streams are not supported on DTensors")
    if device == x.device_mesh:
        return x
    raise ValueError(f"to_device: a DTensor on {x.device_mesh!r} cannot move to {device!r}; "
                     f"moving between meshes is not supported (mt.asnumpy(x) gives every rank "
                     f"the whole array, and distribute_tensor places it on another mesh)")


def _whole_block(x: DTensor, op: str):
    """This rank's block when it is the whole value (every mesh dim of more than one rank
    replicates ``x``); a BufferError naming the layout otherwise: a split or partial array
    has no single buffer to hand over."""
    if all(isinstance(p, Replicate) or n == 1 for p, n in zip(x.placements, x.device_mesh.shape)):
        return x._block()
    raise BufferError(f"{op}: a DTensor {list(x.placements)} of shape {x.shape} has no single "
                      f"buffer on this rank (its values are spread over the mesh); use "
                      f"x.to_local() for this rank's block or mt.asnumpy(x) for the whole array")


def dlpack(x: DTensor, /, *, stream=None, max_version=None, dl_device=None, copy=None):
    """DLPack of a replicated DTensor: its block, which is the whole value, zero-copy."""
    return _whole_block(x, "__dlpack__").__dlpack__(
        stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)


def dlpack_device(x: DTensor, /):
    return _whole_block(x, "__dlpack_device__").__dlpack_device__()
