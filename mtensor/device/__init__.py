"""The device layer: the array module of a block (numpy or CuPy), allocation, the buffer
pool, host/device copies and stream synchronisation (``arrays``), and the caching allocator
collectives write into (``buffers``).  The only place CuPy is imported, lazily."""
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
