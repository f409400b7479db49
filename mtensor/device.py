"""The device layer: which array module holds a block, allocation by shape, type checks
and transfers to the host; the one module that may import CuPy.

A device type names a numpy-compatible array module (``DEVICES``), imported the first time
a mesh or block of that type needs it, so CPU installs never import CuPy.  numpy functions
applied to blocks (``np.copyto``, ``np.full_like``, ``np.ascontiguousarray``, ufuncs) reach
the block's own module through numpy's protocols (NEP 13 and 18), so the hot paths come here
only to allocate from a shape (which has no block to dispatch on), to ask whether a value is
a block, and to cross to the host.  A new device is one line in ``DEVICES``.
"""
from __future__ import annotations

import importlib

import numpy as np

from . import buffers

# device type -> the array module holding its blocks ("cuda" comes with the GPU backends)
DEVICES = {"cpu": "numpy"}
_modules = {"cpu": np}
_by_type = {np.ndarray: np}       # block type -> its module, for the devices loaded so far


def array_module(device_type: str):
    """The array module of ``device_type`` (imported on first use)."""
    module = _modules.get(device_type)
    if module is None:
        if device_type not in DEVICES:
            raise ValueError(f"device_type {device_type!r} is not supported; use one of "
                             f"{tuple(DEVICES)}")
        module = _modules[device_type] = importlib.import_module(DEVICES[device_type])
        _by_type[module.ndarray] = module
    return module


def xp(block):
    """The array module of ``block`` (numpy for anything that is not a loaded device's)."""
    return _by_type.get(type(block), np)


def is_block(value) -> bool:
    """Whether ``value`` is an array of a loaded device (what DTensors wrap)."""
    return type(value) in _by_type


def empty(shape, dtype, like=None):
    """An uninitialised C-contiguous block on ``like``'s device (host: from the buffer pool)."""
    module = np if like is None else xp(like)
    if module is np:
        return buffers.empty(shape, dtype)
    return module.empty(shape, dtype)


def to_host(block) -> np.ndarray:
    """``block`` as a numpy array (a device-to-host copy off the host)."""
    return block if type(block) is np.ndarray else xp(block).asnumpy(block)
