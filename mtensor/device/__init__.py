"""The device layer: the array module of a block (numpy or CuPy), allocation, the buffer
pool, host/device copies and stream synchronisation (``arrays``), the caching allocator
collectives write into (``buffers``), generated kernels (``kernels``) and the host heap's
policy (``heap``: freed memory kept for the next step, set when mtensor is imported).  The
only place CuPy is imported, lazily."""
from .arrays import (
    DEVICES,
    array_module,
    as_block,
    bind,
    contiguous,
    cuda_api,
    empty,
    empty_on,
    is_block,
    like,
    on_device,
    set_module,
    synchronize,
    through_host,
    to_device,
    to_host,
    ufunc_at,
    xp,
)

__all__ = [
    "DEVICES", "array_module", "as_block", "bind", "contiguous", "cuda_api", "empty",
    "empty_on", "is_block", "like", "on_device", "set_module", "synchronize", "through_host",
    "to_device", "to_host", "ufunc_at", "xp",
]

from . import heap  # noqa: F401,E402  (sets the heap's policy at import)
