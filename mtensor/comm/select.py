"""Which backend a mesh dim of a GPU mesh gets.

``auto`` (the default) asks, never tries (a non-CUDA-aware MPI segfaults on a device
pointer): NCCL when every rank of the group holds a distinct GPU (NCCL refuses two ranks on
one GPU) and ``cupy.cuda.nccl`` loads; else CUDA-aware MPI when every rank's MPI says it is
(the MPI-4.1 info key ``mpi_memory_alloc_kinds`` naming ``cuda``, or MPICH/Open MPI's
``MPIX_Query_cuda_support``); else ``staged``.  The answers are gathered over the group, so
every rank picks the same.  ``MTENSOR_GPU_COMM=auto|nccl|cuda-aware|staged`` replaces the
default; ``init_device_mesh(..., backend=...)`` names it outright.
"""
from __future__ import annotations

import ctypes
import os
import socket

from ..device import arrays as device

GPU_CHOICES = ("auto", "nccl", "cuda-aware", "staged")


def default_backend(device_type: str) -> str:
    if device_type == "cpu":
        return "mpi"
    choice = os.environ.get("MTENSOR_GPU_COMM", "auto")
    if choice not in GPU_CHOICES:
        raise ValueError(f"MTENSOR_GPU_COMM={choice!r}: use one of {GPU_CHOICES}")
    return choice


def _libmpi():
    """The loaded MPI library (mpi4py loads it privately, so ask the process map)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "libmpi" in line})
    except OSError:
        paths = []
    return ctypes.CDLL(paths[0]) if paths else ctypes.CDLL(None)


def mpi_cuda_aware() -> bool:
    """Whether this rank's MPI says it takes CUDA device pointers."""
    from mpi4py import MPI
    info = MPI.COMM_WORLD.Get_info()
    kinds = info.Get("mpi_memory_alloc_kinds") or ""
    info.Free()
    if "cuda" in kinds:
        return True
    query = getattr(_libmpi(), "MPIX_Query_cuda_support", None)
    if query is None:
        return False
    query.restype = ctypes.c_int
    return bool(query())


def _nccl_loads(device_type: str) -> bool:
    """Whether ``cupy.cuda.nccl`` is there and its library answers (CuPy loads libnccl on
    first use: the ``nvidia-nccl-cu*`` wheel of the cuda extras, or the system's)."""
    try:
        device.array_module(device_type).cuda.nccl.get_version()
    except Exception:             # no NCCL module, no library, no driver: all mean "no NCCL"
        return False
    return True


def _where(device_type: str) -> tuple:
    cuda = device.array_module(device_type).cuda
    return (socket.gethostname(), cuda.Device().id, _nccl_loads(device_type),
            mpi_cuda_aware())


def choose(device_type: str, raw) -> str:
    """The ``auto`` backend of the group ``raw`` (a collective over it)."""
    return decide(raw.allgather(_where(device_type)))


def decide(ranks) -> str:
    """The backend for a group whose ranks report ``(host, gpu, nccl loads, MPI is
    CUDA-aware)``."""
    gpus = {(host, gpu) for host, gpu, _, _ in ranks}
    if len(gpus) == len(ranks) and all(nccl for _, _, nccl, _ in ranks):
        return "nccl"
    if all(aware for *_, aware in ranks):
        return "cuda-aware"
    return "staged"


def runnable(device_type: str, raw) -> tuple:
    """The GPU backends a job can run over the group ``raw`` (a collective; the GPU check
    and the tests try each): staged always; CUDA-aware where every rank's MPI says so; NCCL
    where no node holds more of the group's ranks than it has GPUs and NCCL loads on all."""
    from mpi4py import MPI
    gpus = device.array_module(device_type).cuda.runtime.getDeviceCount()
    local = raw.Split_type(MPI.COMM_TYPE_SHARED)
    fits = local.size <= gpus
    local.Free()
    reports = raw.allgather((fits and _nccl_loads(device_type), mpi_cuda_aware()))
    return (("staged",) + (("cuda-aware",) if all(aware for _, aware in reports) else ())
            + (("nccl",) if all(nccl for nccl, _ in reports) else ()))
