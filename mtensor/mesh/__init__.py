"""Meshes bound to ranks: ``DeviceMesh`` and ``init_device_mesh`` (``device_mesh``), which
node each rank sits on and the rank order that keeps mesh dims inside nodes (``topology``,
``nodes``), and measuring a mesh's links (``calibrate``)."""
from .calibrate import calibrate
from .device_mesh import DeviceMesh, init_device_mesh, local_mesh, mpi_running, world_mesh

__all__ = ["DeviceMesh", "calibrate", "init_device_mesh", "local_mesh", "mpi_running",
           "world_mesh"]
