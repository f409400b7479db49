"""A strict fake of CuPy over numpy, so CI without a GPU fails where a GPU would.

``ndarray`` holds its data in a numpy array (``_a``) but refuses what CuPy refuses and
numpy allows: implicit conversion to numpy (``__array__``), numpy arrays as ufunc or
function operands, ufunc methods CuPy lacks (``reduce`` beyond add/multiply, ``initial=``),
host arrays assigned into device arrays, kernels on arrays of another device.  Reductions
return 0-d arrays, as CuPy's do, and ``empty`` memory holds 0xFF bytes (NaN, -1), not zeros.

The GPU's asynchrony is kept observable through ``cuda.timeline``: every write stamps its
array with an epoch, ``__dlpack__`` and ``__cuda_array_interface__`` (how mpi4py reads a
device buffer) refuse an array written after the last synchronise, ``get(out=...,
blocking=False)`` fills its host buffer only at the next synchronise, and ``set`` reads its
host buffer only when the device next works.  Counters of syncs, copies and kernels are in
``stats``.  Any other numpy name is served by the module ``__getattr__`` under the same
rules; ``cuda`` holds the devices, streams and the timeline, ``cuda.nccl`` NCCL over MPI,
``fft`` the transforms.
"""
import functools
import sys

import numpy as np

from . import cuda, fft
from .core import Ufunc, from_host, ndarray, new_array, poison, run_kernel
from .cuda import stats
from .elementwise import ElementwiseKernel


def _method(name: str, kernel: bool):
    numpy_method = getattr(np.ndarray, name)

    def method(self, *args, **kwargs):
        return run_kernel(numpy_method, (self, *args), kwargs, kernel)
    method.__name__ = name
    method.__doc__ = f"numpy.ndarray.{name} on the device{'' if kernel else ' (a view)'}."
    return method


for _name in ("astype", "copy", "flatten", "sum", "prod", "mean", "var", "std", "max", "min",
              "any", "all", "argmax", "argmin", "cumsum", "cumprod", "dot", "conj", "conjugate",
              "nonzero", "repeat", "take", "clip", "round", "sort", "argsort", "diagonal",
              "trace", "searchsorted"):
    setattr(ndarray, _name, _method(_name, kernel=True))
for _name in ("reshape", "ravel", "transpose", "swapaxes", "squeeze"):
    setattr(ndarray, _name, _method(_name, kernel=False))


# --- module functions ----------------------------------------------------------------------

def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0):
    """A device array from host data (the explicit host-to-device copy) or device arrays."""
    kwargs = dict(dtype=dtype, copy=copy, order=order, ndmin=ndmin)
    if _holds_fake(obj):        # a device copy, from any device (CuPy copies across them)
        return run_kernel(np.array, (obj,), kwargs, kernel=False)
    return from_host(obj, dtype=dtype, order=order, ndmin=ndmin)


def asarray(a, dtype=None, order=None, *, blocking=False):
    """``a`` on the device: itself if already there (and of ``dtype``), else a copy."""
    return array(a, dtype=dtype, copy=None, order=order or "K")


def _holds_fake(obj) -> bool:
    if isinstance(obj, (list, tuple)):
        return any(_holds_fake(x) for x in obj)
    return isinstance(obj, ndarray)


def asnumpy(a, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
    """``a`` on the host (the explicit device-to-host copy); host input passes through."""
    if isinstance(a, ndarray):
        return a.get(stream=stream, order=order, out=out, blocking=blocking)
    if out is None:
        return np.asarray(a, order=order)
    out[...] = a
    return out


def empty(shape, dtype=float, order="C"):
    return new_array(poison(np.empty(shape, dtype, order)))


def empty_like(prototype, dtype=None, order="K", subok=None, shape=None):
    fake = run_kernel(np.empty_like, (prototype,), dict(dtype=dtype, order=order, shape=shape))
    poison(fake._a)
    return fake


def get_array_module(*args):
    return sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else np


def _function(func):
    """numpy's ``func`` under CuPy's rules (no numpy operands, fakes out)."""
    @functools.wraps(func)
    def call(*args, **kwargs):
        return run_kernel(func, args, kwargs)
    return call


def __getattr__(name):
    """Any other numpy name: ufuncs and functions wrapped, types and constants as they are."""
    if name.startswith("__") or not hasattr(np, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(np, name)
    if isinstance(value, np.ufunc):
        value = Ufunc(value)
    elif callable(value) and not isinstance(value, type):
        value = _function(value)
    globals()[name] = value
    return value
