"""Collectives over a whole mesh for numpy's data-dependent algorithms (sample sort,
``nonzero``, ``unique``): each is announced to the check mode and the timeout (``guarded``)
and counted by ``CommDebugMode`` in the bus-bytes convention, as the planner's are.
``name`` is the numpy function, for the guards' messages."""
from __future__ import annotations

import numpy as np

from .. import modes
from ..cost.model import bus_bytes
from ..device import arrays as device
from ..dtensor import guarded

_INT = np.dtype(np.int64)


def sum_ints(mesh, name: str, values) -> np.ndarray:
    """The element-wise sum of every rank's int64 ``values`` (one small all-reduce)."""
    values = np.asarray(values, _INT)
    with guarded(name, "all_reduce", values.shape, _INT, mesh):
        out = np.asarray(mesh.communicator().sum_ints(values.reshape(-1))).reshape(values.shape)
    modes.count_collective("all_reduce", -1, out.shape, _INT,
                           bus_bytes("all_reduce", mesh.size(), out.nbytes), mesh.whole_backend)
    return out


def all_gather(mesh, name: str, block, counts) -> np.ndarray:
    """Every rank's 1-D ``block`` (``counts[r]`` elements from rank r), in rank order."""
    out = device.empty((int(np.sum(counts)),), block.dtype, like=block)
    with guarded(name, "all_gather", out.shape, block.dtype, mesh):
        mesh.communicator().all_gather(device.contiguous(block), out,
                                       [int(c) for c in counts], None)
    modes.count_collective("all_gather", -1, out.shape, out.dtype,
                           bus_bytes("all_gather", mesh.size(), out.nbytes), mesh.whole_backend)
    return out


def all_to_all(mesh, name: str, block, send, recv, total: int) -> np.ndarray:
    """``send[r]`` elements of 1-D ``block`` (in order) to rank r, ``recv[r]`` from it;
    ``total``: the elements moved over the whole mesh (for the guards' messages)."""
    block = device.contiguous(block)
    out = device.empty((int(np.sum(recv)),), block.dtype, like=block)
    with guarded(name, "all_to_all", (int(total),), block.dtype, mesh):
        mesh.communicator().all_to_all(block, out, ([int(c) for c in send],
                                                    [int(c) for c in recv]), None)
    modes.count_collective("all_to_all", -1, out.shape, block.dtype,
                           bus_bytes("all_to_all", mesh.size(), block.nbytes), mesh.whole_backend)
    return out
