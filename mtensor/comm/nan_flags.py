"""NaN through a built-in max/min.  MPI's and NCCL's built-in MAX/MIN on floats may drop a
NaN (DESIGN.md, facts for the GPU layer), numpy's ``maximum``/``minimum`` keep it, and a
Python MPI op cannot read device memory.  So a float max/min on device buffers also reduces
a one-byte ``isnan`` flag per element with MAX and puts NaN where any rank had one."""
from __future__ import annotations

import numpy as np

from ..device import arrays as device


def needs_flags(op, dtype) -> bool:
    return op in ("max", "min") and np.dtype(dtype).kind == "f"


def flags_of(send):
    """The per-element NaN flags of ``send`` (uint8, contiguous, on its device)."""
    return device.xp(send).isnan(send).view(np.uint8)


def restore(recv, flags) -> None:
    """Write NaN into ``recv`` wherever the reduced ``flags`` are set."""
    np.copyto(recv, np.nan, where=flags.view(np.bool_))


def reduce_keeping_nan(run, send, recv, counts, op, ready=None) -> None:
    """``run(send, recv, counts, op)`` (a blocking all-reduce or reduce-scatter with built-in
    ops), with NaN carried as numpy's ``maximum``/``minimum`` carry it.  ``ready(send)``
    runs once the flags are computed, before the first ``run`` (a stream synchronise where
    MPI reads device memory)."""
    flags = flags_of(send)
    reduced = device.empty(recv.shape, np.uint8, like=recv)
    if ready is not None:
        ready(send)
    run(send, recv, counts, op)
    run(flags, reduced, counts, "max")
    restore(recv, reduced)
