"""A caching allocator for the large buffers that collectives write.

A fresh large numpy array comes from ``mmap``: the kernel faults in and zeroes every page on
first write, which costs about 3 ms per 16 MiB here, a third of a 16 MiB all-reduce on two
ranks.  Like PyTorch's caching allocator, this pool keeps large buffers and hands them out
again once nothing uses them.

How it knows: every array handed out is a view of a pooled ``uint8`` buffer, and numpy views
(and views of views, memoryviews, MPI requests) all hold a reference to that buffer.  So a
buffer whose reference count is back to the pool's own is free.  Checking that is one
``sys.getrefcount`` call, much cheaper than a finalizer per array.  On interpreters without
reference counts (PyPy) the pool is off.  Small buffers (below ``MIN_BYTES``) come from numpy
directly; at most ``MTENSOR_BUFFER_CACHE_MB`` (default 1024) are pooled, and a full pool
drops unused buffers to make room for a new size.  Besides collectives' outputs, the pool
serves large elementwise results and halo windows (a stencil step makes dozens of them).
"""
from __future__ import annotations

import math
import os
import platform
import sys

import numpy as np

from .heap import KEPT, MMAP_THRESHOLD

# glibc's malloc serves requests below its mmap threshold from the heap without fresh page
# faults, faster than the pool's lookup (0.16 us against 0.69 us at 64 KiB): 128 KiB by
# default, 32 MiB where mtensor's heap policy holds (``heap``)
MIN_BYTES = MMAP_THRESHOLD if KEPT else 1 << 17
_ENABLED = platform.python_implementation() == "CPython"
_cap = int(os.environ.get("MTENSOR_BUFFER_CACHE_MB", "1024")) << 20
_pools: dict = {}
_pooled_bytes = [0]


def _unused_refcount() -> int:
    """References to a pooled buffer that nobody else holds: its list slot, the loop name
    and getrefcount's own argument.  Measured, not assumed, so it follows the interpreter."""
    probe = [np.empty(1, np.uint8)]
    for raw in probe:
        return sys.getrefcount(raw)
    return 0


_UNUSED = _unused_refcount()


def empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array, on a pooled buffer when a free one fits exactly."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or not _ENABLED:
        return np.empty(shape, dtype)
    pool = _pools.setdefault(nbytes, [])
    for raw in pool:
        if sys.getrefcount(raw) == _UNUSED:
            return np.ndarray(shape, dtype, raw)      # a view of raw: it holds raw
    raw = np.empty(nbytes, np.uint8)
    if _pooled_bytes[0] + nbytes > _cap:
        _release(_pooled_bytes[0] + nbytes - _cap)
    if _pooled_bytes[0] + nbytes <= _cap:
        pool.append(raw)
        _pooled_bytes[0] += nbytes
    return np.ndarray(shape, dtype, raw)


def _release(wanted: int) -> None:
    """Forget unused buffers of any size until ``wanted`` bytes are released (or none is
    left unused): a full pool makes room for the sizes in use now, so sizes a program has
    stopped using do not hold the cap for good."""
    for nbytes, pool in _pools.items():
        keep = []
        for raw in pool:
            if wanted > 0 and sys.getrefcount(raw) == _UNUSED:
                _pooled_bytes[0] -= nbytes
                wanted -= nbytes
            else:
                keep.append(raw)
        pool[:] = keep
        if wanted <= 0:
            return


def empty_cache() -> int:
    """Forget every pooled buffer that is not in use; returns the bytes released."""
    released = 0
    for nbytes, pool in _pools.items():
        keep = [raw for raw in pool if sys.getrefcount(raw) > _UNUSED]
        released += nbytes * (len(pool) - len(keep))
        pool[:] = keep
    _pooled_bytes[0] -= released
    return released
