"""The device layer: which array module holds a block, allocation by shape, type checks,
host/device copies, stream synchronisation and GPU binding; the one module that may import
CuPy.

A device type names a numpy-compatible array module (``DEVICES``), imported the first time
a mesh or block of that type needs it, so CPU installs never import CuPy.  numpy functions
applied to blocks (``np.copyto``, ``np.full_like``, ufuncs) reach the block's own module
through numpy's protocols (NEP 13 and 18), so the hot paths come here only to allocate from
a shape (which has no block to dispatch on), to make a block contiguous (``np.asarray`` and
``np.ascontiguousarray`` convert instead of dispatching), to ask whether a value is a block,
and to cross between host and device.  A new device is one line in ``DEVICES``.

``"cuda"`` is CuPy, or whatever module ``MTENSOR_CUDA_MODULE`` names: the test suite points
it at ``mtensor.testing.fakecupy``, a strict numpy-backed stand-in with CuPy's rules, so the
whole GPU path (binding, staging, NCCL calls, synchronisation) runs where no GPU is.
"""
from __future__ import annotations

import importlib
import os
import sys

import numpy as np

from . import buffers

# device type -> the array module holding its blocks
DEVICES = {"cpu": "numpy", "cuda": os.environ.get("MTENSOR_CUDA_MODULE", "cupy")}
_modules = {"cpu": np}
_by_type = {np.ndarray: np}       # block type -> its module, for the devices loaded so far


def array_module(device_type: str):
    """The array module of ``device_type`` (imported on first use)."""
    module = _modules.get(device_type)
    if module is None:
        if device_type not in DEVICES:
            raise ValueError(f"device_type {device_type!r} is not supported; use one of "
                             f"{tuple(DEVICES)}")
        try:
            module = importlib.import_module(DEVICES[device_type])
        except ImportError as e:
            raise ImportError(
                f"device_type {device_type!r} needs the {DEVICES[device_type]!r} module "
                f"({e}); install mtensor with the cuda12 or cuda13 extra") from e
        _modules[device_type] = module
        _by_type[module.ndarray] = module
    return module


def xp(block):
    """The array module of ``block`` (numpy for anything that is not a loaded device's)."""
    return _by_type.get(type(block), np)


def is_block(value) -> bool:
    """Whether ``value`` is an array of a loaded device (what DTensors wrap)."""
    return type(value) in _by_type


def on_device(block) -> bool:
    """Whether ``block`` lives in device memory (a block of a loaded device other than numpy)."""
    return type(block) is not np.ndarray and type(block) in _by_type


def empty(shape, dtype, like=None):
    """An uninitialised C-contiguous block on ``like``'s device (host: from the buffer pool)."""
    if like is None or type(like) is np.ndarray:
        return buffers.empty(shape, dtype)
    return xp(like).empty(shape, dtype)


def empty_on(device_type: str, shape, dtype):
    """An uninitialised C-contiguous block on ``device_type``."""
    if device_type == "cpu":
        return buffers.empty(shape, dtype)
    return array_module(device_type).empty(shape, dtype)


def owns_memory(block) -> bool:
    """Whether ``block``'s memory is its own to write a result into (once nothing holds
    ``block`` itself): it owns it, or it is a C-contiguous, writeable view (each element
    its own memory) of a host array that nothing but the view holds, as a kernel's
    reshaped result is.  A device view answers no."""
    base = block.base
    return base is None or (type(base) is np.ndarray and base.base is None
                            and block.flags.c_contiguous and block.flags.writeable
                            and sys.getrefcount(base) == _BASE_ALONE)


def _base_alone() -> int:
    """What ``owns_memory`` reads for a base only its view holds: the first count at which it
    tells that view from one whose base a name holds too."""
    global _BASE_ALONE
    alone, base = np.empty(4).reshape(2, 2), np.empty(4)
    shared = base.reshape(2, 2)
    for _BASE_ALONE in range(1, 16):
        if owns_memory(alone) and not owns_memory(shared):
            return _BASE_ALONE
    raise RuntimeError("device: cannot count an array's holders on this interpreter")


def contiguous(block):
    """``block`` C-contiguous on its own device (no copy when it is already)."""
    if type(block) is np.ndarray:
        return np.ascontiguousarray(block)
    return xp(block).ascontiguousarray(block)


def to_host(block) -> np.ndarray:
    """``block`` as a numpy array (a device-to-host copy off the host)."""
    return block if type(block) is np.ndarray else xp(block).asnumpy(block)


def as_block(value):
    """``value`` as it is when it is a block of a loaded device, else as a numpy array (a
    kernel's scalar result)."""
    return value if type(value) in _by_type else np.asarray(value)


def like(value, block):
    """Host ``value`` (an array) on ``block``'s device, for kernels that mix a small
    constant (a convolution kernel, a NaN row) into a block; unchanged on the host."""
    return xp(block).asarray(value) if on_device(block) else value


def to_device(value, device_type: str):
    """``value`` (a numpy array, scalar or block of any device) as a block of ``device_type``:
    the explicit host-to-device copy CuPy asks for; no copy when it is there already."""
    module = array_module(device_type)
    if type(value) is module.ndarray:
        return value
    if module is np:
        return np.asarray(to_host(value))
    return module.asarray(to_host(value) if on_device(value) else np.asarray(value))


def synchronize(block) -> None:
    """Wait until the work queued on the current stream of ``block``'s device (the stream
    that produced it) is done, before a library outside the stream (MPI) touches its memory.
    A no-op on the host."""
    if on_device(block):
        xp(block).cuda.get_current_stream().synchronize()


def cuda_api(block):
    """The ``cuda`` namespace (streams, events, pinned memory, NCCL) of ``block``'s module."""
    return xp(block).cuda


def bind(device_type: str, local_rank: int) -> int:
    """Make GPU ``local_rank % count`` this process's current device (``CUDA_VISIBLE_DEVICES``
    decides what is counted); returns its id.  The host has a single device, 0."""
    if device_type == "cpu":
        return 0
    cuda = array_module(device_type).cuda
    count = cuda.runtime.getDeviceCount()
    if count < 1:
        raise RuntimeError(f"init_device_mesh: device_type {device_type!r} but no GPU is "
                           f"visible to this process (CUDA_VISIBLE_DEVICES="
                           f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    ident = local_rank % count
    cuda.Device(ident).use()
    return ident


def through_host(kernel):
    """``kernel`` (a numpy kernel) made to accept device blocks too: they are copied down,
    the kernel runs on the host and array results are copied up.  For the few kernels CuPy
    lacks (ufunc methods other than add/multiply reductions); numpy blocks pay one type
    check."""
    def run(*args, **kwargs):
        device = next((a for a in args if on_device(a)), None)
        if device is None:
            return kernel(*args, **kwargs)
        out = kernel(*(to_host(a) if on_device(a) else a for a in args), **kwargs)
        return xp(device).asarray(out) if isinstance(out, (np.ndarray, np.generic)) else out
    return run


# the ufuncs CuPy's ``ufunc.at`` supports
_AT_ON_DEVICE = frozenset({"add", "subtract", "maximum", "minimum", "bitwise_and",
                           "bitwise_or", "bitwise_xor"})


def ufunc_at(ufunc, block, key, *values) -> None:
    """``ufunc.at(block, key, *values)``, in place; on a device, ufuncs CuPy lacks run on a
    host copy that is written back."""
    if not on_device(block) or ufunc.__name__ in _AT_ON_DEVICE:
        ufunc.at(block, key, *values)
        return
    host = to_host(block)
    ufunc.at(host, to_host(key) if on_device(key) else key,
             *(to_host(v) if on_device(v) else v for v in values))
    block[...] = xp(block).asarray(host)


def set_module(device_type: str, module_name: str) -> None:
    """Point ``device_type`` at another array module (tests: the fake CuPy).  Call it before
    the first block or mesh of that type is made."""
    old = _modules.pop(device_type, None)
    if old is not None:
        _by_type.pop(old.ndarray, None)
    DEVICES[device_type] = module_name


_BASE_ALONE = 0
_BASE_ALONE = _base_alone()
