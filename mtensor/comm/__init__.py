"""The communication layer: the ``Communicator`` protocol and its backends (the only MPI
calls), chosen per mesh dim when a mesh is built (``select`` for GPU meshes); guards (abort, check mode, timeout).

Backends are imported when a mesh first asks for one, so importing mtensor (and its pure
planning code) does not load libmpi.  A new backend is one file plus one line here (or a
``register_backend`` call from user code)."""
from __future__ import annotations

import importlib

from .protocol import Communicator

# name -> "module:class"; the class is called with the library communicator of a mesh dim
BACKENDS = {
    "mpi": "mtensor.comm.mpi_host:MPIHost",            # host buffers
    "staged": "mtensor.comm.staged:Staged",            # device buffers via pinned host copies
    "cuda-aware": "mtensor.comm.cuda_aware:CudaAware",  # device pointers to a CUDA-aware MPI
    "nccl": "mtensor.comm.nccl:NCCL",                  # cupy.cuda.nccl
}


def register_backend(name: str, factory) -> None:
    """Make ``init_device_mesh(..., backend=name)`` build ``factory(raw_comm)`` per mesh
    dim (``factory``: a class or function; or a "module:attribute" string)."""
    BACKENDS[name] = factory


def backend(name: str):
    """The factory of backend ``name``."""
    factory = BACKENDS.get(name)
    if factory is None:
        raise ValueError(f"init_device_mesh: unknown communication backend {name!r}; "
                         f"use one of {sorted(BACKENDS)} or comm.register_backend(...)")
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = BACKENDS[name] = getattr(importlib.import_module(module), attr)
    return factory


__all__ = ["BACKENDS", "Communicator", "backend", "register_backend"]
