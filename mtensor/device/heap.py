"""The host heap's policy: freed memory stays in the process for the next step.

glibc's malloc gives a freed block back to the kernel when the free space at the top of its
heap passes a threshold (twice the size of the largest block it has handed out by ``mmap``),
and serves blocks larger than its ``mmap`` threshold from fresh mappings.  A step of array
code allocates and frees the same large arrays every iteration (a GPT step's activations,
kept for its backward, then freed), so the heap shrinks after each backward and every page
is faulted in and zeroed again at the next forward: about 3 ms per 16 MiB here.  As
PyTorch's caching allocator does for device memory (and jemalloc or tcmalloc, which
``LD_PRELOAD`` gives CPU training jobs), mtensor keeps it: blocks up to 32 MiB come from the
heap, and the heap is never trimmed.  Measured on the GPT step of ``examples/lm_model.py``
at one rank, launches alternating with ``MTENSOR_MALLOC=system`` (which also brings the
buffer pool back down to 128 KiB): eager / hand-written 1.45-1.49 -> 1.35-1.36, the compiled
step within noise (1.04-1.07 either way; ``benchmarks/lm_step_vs_handwritten.py --reps 15``,
``OMP_NUM_THREADS=1``).  The process keeps its peak
heap; ``MTENSOR_MALLOC=system`` leaves glibc's defaults.  Elsewhere than glibc nothing is
changed.  Where the heap keeps blocks, the buffer pool (``buffers``) serves only larger ones.
"""
from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20      # glibc's largest allowed on 64-bit: HEAP_MAX_SIZE / 2
TRIM_THRESHOLD = (1 << 31) - 1   # mallopt takes an int: 2 GiB of free heap top, in effect never


def keep_freed_memory() -> bool:
    """Set glibc's thresholds (see the module docstring); False where nothing was set."""
    if os.environ.get("MTENSOR_MALLOC", "keep") == "system":
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


KEPT = keep_freed_memory()   # at import: before the first large array
