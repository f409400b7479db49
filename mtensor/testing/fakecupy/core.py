"""The fake's device array: ``ndarray`` (numpy data, CuPy's refusals and asynchrony) and
the kernels that run numpy under CuPy's rules."""
import functools

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from . import cuda
from .cuda import stats

_SCALARS = (bool, int, float, complex, np.generic)
# numpy functions that write into their first argument
_IN_PLACE = {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis,
             np.ndarray.sort, np.ndarray.__setitem__}
# ufunc method -> the ufuncs CuPy implements it for (None: all) and the keywords it takes
_UFUNC_METHODS = {
    "__call__": (None, None), "outer": (None, None),
    "reduce": ({"add", "multiply"}, {"axis", "dtype", "out", "keepdims"}),
    "accumulate": ({"add", "multiply"}, {"axis", "dtype", "out"}),
    "reduceat": ({"add"}, {"axis", "dtype", "out"}),
    "at": ({"add", "subtract", "maximum", "minimum", "bitwise_and", "bitwise_or",
            "bitwise_xor"}, set()),
}


def _host_error(value) -> TypeError:
    return TypeError(f"Unsupported type {type(value)}")


def _unwrap(obj, found: list):
    """``obj`` with fakes replaced by their numpy data (collected in ``found``); a numpy
    array anywhere inside is an implicit host-to-device copy, which CuPy refuses."""
    if isinstance(obj, ndarray):
        found.append(obj)
        return obj._a
    if isinstance(obj, _Index):
        return obj.key
    if isinstance(obj, np.ndarray):
        raise _host_error(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unwrap(x, found) for x in obj)
    if isinstance(obj, dict):
        return {k: _unwrap(v, found) for k, v in obj.items()}
    return obj


def _index(key):
    """An index with fakes unwrapped; numpy index arrays pass (CuPy converts them)."""
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    return key._a if isinstance(key, ndarray) else key


def _wrap(result, sources):
    """numpy results as fakes: an input's own data as that input, a view of one as a view
    of it, scalars as 0-d arrays (what CuPy returns), anything else unchanged."""
    if isinstance(result, np.ndarray):
        source = next((s for s in sources if s._a is result), None)
        if source is not None:
            return source
        base = next((s for s in sources if np.may_share_memory(result, s._a) or (  # or empty
            result.base is not None and _owner(result) is _owner(s._a))), None)
        return new_array(result, base)
    if isinstance(result, np.generic):
        return new_array(np.asarray(result))
    if isinstance(result, (list, tuple)):
        items = [_wrap(r, sources) for r in result]
        return type(result)(*items) if hasattr(result, "_fields") else type(result)(items)
    return result


def _owner(a: np.ndarray) -> np.ndarray:
    """The array owning ``a``'s memory, where numpy points a view's base (empty views too)."""
    return _owner(a.base) if isinstance(a.base, np.ndarray) else a


def new_array(a: np.ndarray, base=None) -> "ndarray":
    fake = ndarray.__new__(ndarray)
    fake._adopt(a, base)
    return fake


def _host_scalar(value):
    """A 0-d numpy array as its scalar (CuPy takes those as values); anything else as is."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def poison(a: np.ndarray) -> np.ndarray:
    """Fill fresh memory with 0xFF bytes (NaN, -1): what reading uninitialised memory shows."""
    np.ravel(a, order="K").view(np.uint8).fill(0xFF)
    return a


def _launch(fakes) -> None:
    """Start a kernel: after the deferred uploads, on the current device's arrays only."""
    cuda.timeline.flush_uploads()
    stats.kernels += 1
    current = cuda.runtime.getDevice()
    for fake in fakes:
        if fake._owner._device != current:
            raise ValueError(
                f"The device where the array resides ({fake._owner._device}) is different "
                f"from the current device ({current}). Peer access is unavailable between "
                f"these devices.")


def run_kernel(func, args, kwargs, kernel=True):
    """``func`` on the numpy data of fake arguments, with CuPy's rules, results as fakes."""
    fakes = []
    host_args, host_kwargs = _unwrap(args, fakes), _unwrap(kwargs, fakes)
    if kernel:
        _launch(fakes)
    else:
        cuda.timeline.flush_uploads()
    result = func(*host_args, **host_kwargs)
    out = kwargs.get("out")
    written = list(out) if isinstance(out, tuple) else [out]
    written += [args[0]] if func in _IN_PLACE else []
    for fake in written:
        if isinstance(fake, ndarray):
            fake._touch()
    return _wrap(result, fakes)


def _apply_ufunc(ufunc, method, inputs, kwargs):
    """``ufunc``'s ``method`` as CuPy runs it (NotImplemented for operands it does not know)."""
    if method not in _UFUNC_METHODS:
        return NotImplemented
    names, keywords = _UFUNC_METHODS[method]
    if names is not None and ufunc.__name__ not in names:
        raise NotImplementedError(f"`cupy_{ufunc.__name__}.{method}` is not supported yet")
    unexpected = sorted(set(kwargs) - keywords) if keywords is not None else []
    if unexpected:
        raise TypeError(f"{method}() got an unexpected keyword argument {unexpected[0]!r}")
    out = kwargs.get("out", ())
    out = out if isinstance(out, tuple) else (out,)
    if len(out) > 1:
        raise ValueError("The 'out' parameter must have exactly one array value")
    operands = (inputs[:1] + inputs[2:] if method == "at" else inputs) + out
    for x in operands:
        if isinstance(x, np.ndarray):
            raise _host_error(x)
        if not isinstance(x, (ndarray,) + _SCALARS):
            return NotImplemented
    if method == "at":
        a, indices, *rest = inputs
        run_kernel(ufunc.at, (a, _Index(indices), *rest), {})
        a._touch()
        return None
    kwargs = dict(kwargs, out=out) if out else kwargs
    return run_kernel(getattr(ufunc, method), inputs, kwargs)


class _Index:
    """An index argument let through ``_unwrap`` as is (numpy index arrays allowed)."""

    def __init__(self, key):
        self.key = _index(key)


class Ufunc:
    """A numpy ufunc called the CuPy way, its methods included (``fakecupy.add.reduce``)."""

    def __init__(self, ufunc):
        self._ufunc = ufunc
        functools.update_wrapper(self, ufunc)

    def __call__(self, *inputs, **kwargs):
        return self._method("__call__")(*inputs, **kwargs)

    def _method(self, method):
        def call(*inputs, **kwargs):
            result = _apply_ufunc(self._ufunc, method, inputs, kwargs)
            if result is NotImplemented:
                raise TypeError(f"Unsupported type {[type(x) for x in inputs]}")
            return result
        return call

    def __getattr__(self, name):
        return self._method(name) if name in _UFUNC_METHODS else getattr(self._ufunc, name)


class _Flags:
    def __init__(self, fake):
        self.c_contiguous = fake._a.flags.c_contiguous
        self.f_contiguous = fake._a.flags.f_contiguous
        self.owndata = fake._base is None


class _MemoryPointer:
    """What ``ndarray.data`` is in CuPy: a device address (``ptr``) on a device."""

    def __init__(self, fake):
        self.ptr = fake._a.__array_interface__["data"][0]
        self.device_id = fake._owner._device
        self.device = cuda.Device(self.device_id)


class ndarray(NDArrayOperatorsMixin):
    """A device array of the fake: numpy data behind CuPy's stricter interface."""

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is not None or strides is not None:
            raise NotImplementedError("fakecupy.ndarray: memptr and strides are not mimicked")
        self._adopt(poison(np.empty(shape, dtype, order)), None)

    def _adopt(self, a: np.ndarray, base) -> None:
        """Hold ``a``: as a view of the fake ``base``, or as new device memory."""
        self._a, self._base = a, base
        self._root = None if base is None else base._owner   # no self-reference: the
        # refcount of a fresh array stays CuPy's (the replay's buffer reuse reads it)
        if base is None:
            self._device = cuda.runtime.getDevice()
            cuda._allocations[id(self)] = self
            self._touch()

    @property
    def _owner(self) -> "ndarray":
        """The array owning this one's device memory (itself, or the base of a view)."""
        return self if self._root is None else self._root

    def _touch(self) -> None:
        """Record a device write to this array's memory."""
        self._owner._epoch = cuda.timeline.tick()

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(_Flags)
    data = property(_MemoryPointer)
    base = property(lambda self: self._base)
    device = property(lambda self: cuda.Device(self._owner._device))
    T = property(lambda self: run_kernel(np.transpose, (self,), {}, kernel=False))
    real = property(lambda self: run_kernel(np.real, (self,), {}, kernel=False))
    imag = property(lambda self: run_kernel(np.imag, (self,), {}, kernel=False))

    def _check_synchronised(self) -> None:
        if self._owner._epoch > cuda.timeline.synced:
            raise RuntimeError(
                f"fakecupy: {self.shape} {self.dtype} array handed to a foreign library (MPI) "
                f"with device writes not synchronised: synchronise the producing stream first")

    @property
    def __cuda_array_interface__(self) -> dict:
        """The device buffer for a foreign library: refused while writes are unsynchronised."""
        self._check_synchronised()
        return {"version": 3, "shape": self.shape, "typestr": self.dtype.str,
                "descr": self.dtype.descr, "stream": None,
                "data": (self.data.ptr if self.size else 0, False),
                "strides": None if self._a.flags.c_contiguous else self.strides}

    def __dlpack_device__(self) -> tuple:
        return (2, self._owner._device)         # kDLCUDA, as CuPy says

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack, which mpi4py tries before the interface above (with ``stream=-1``: no
        ordering, the caller has synchronised): refused while writes are unsynchronised."""
        self._check_synchronised()
        return self._a.__dlpack__(max_version=max_version, copy=copy)

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if not all(issubclass(t, (ndarray, np.ndarray)) for t in types):
            return NotImplemented       # another array type: let it answer, as CuPy does
        return run_kernel(func, args, kwargs)

    # --- transfers ---------------------------------------------------------------------

    def get(self, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
        """A host copy; with ``blocking=False`` it lands in ``out`` at the next synchronise."""
        cuda.timeline.flush_uploads()
        host = self._host_buffer(order) if out is None else self._check_out(out)
        stats.device_to_host += 1
        if blocking:
            np.copyto(host, self._a)
            cuda.timeline.synchronize()
        else:
            snapshot = self._a.copy()
            cuda.timeline.defer("download", lambda: np.copyto(host, snapshot))
        return host

    def _host_buffer(self, order: str) -> np.ndarray:
        order = order.upper()
        if order == "A":
            order = "F" if self._a.flags.f_contiguous and not self._a.flags.c_contiguous else "C"
        return poison(np.empty(self.shape, self.dtype, order))

    def _check_out(self, out) -> np.ndarray:
        if not isinstance(out, np.ndarray):
            raise TypeError("Only numpy.ndarray can be obtained from cupy.ndarray")
        if out.dtype != self.dtype:
            raise TypeError(f"{out.dtype} array cannot be obtained from {self.dtype} array")
        if out.shape != self.shape:
            raise ValueError(f"Shape mismatch. Expected shape: {self.shape}, "
                             f"actual shape: {out.shape}")
        if not (out.flags.c_contiguous or out.flags.f_contiguous):
            raise RuntimeError("`out` cannot be specified when copying to non-contiguous "
                               "ndarray")
        return out

    def set(self, arr, stream=None) -> None:
        """Copy host ``arr`` in, asynchronously: ``arr`` is read when the device next works."""
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if arr.dtype != self.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
        if arr.shape != self.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {arr.shape}")
        if not self._a.flags.c_contiguous:
            raise RuntimeError("Cannot set to non-contiguous array")
        source = np.ascontiguousarray(arr)      # a copy now only if arr is not contiguous
        stats.host_to_device += 1
        self._owner._epoch = cuda.timeline.defer("upload", lambda: np.copyto(self._a, source))

    # --- methods -----------------------------------------------------------------------

    def view(self, dtype=None):
        return run_kernel(np.ndarray.view, (self,) if dtype is None else (self, dtype), {}, False)

    def fill(self, value) -> None:
        if np.ndim(value._a if isinstance(value, ndarray) else value) != 0:
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        run_kernel(np.copyto, (self, _host_scalar(value)), {"casting": "unsafe"})

    def item(self):
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return self.get().item()

    def tolist(self):
        return self.get().tolist()

    def __getitem__(self, key):
        return run_kernel(lambda a: a[_index(key)], (self,), {}, kernel=False)

    def __setitem__(self, key, value) -> None:
        value = _host_scalar(value)
        if not isinstance(value, (ndarray,) + _SCALARS):
            raise TypeError(f"fakecupy: cannot assign a {type(value).__name__} into a device "
                            f"array (CuPy refuses implicit host-to-device copies): "
                            f"fakecupy.asarray(value) first")
        run_kernel(np.ndarray.__setitem__, (self, _Index(key), value), {})

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self):
        return bool(self.get())

    def __int__(self):
        return int(self.get())

    def __float__(self):
        return float(self.get())

    def __complex__(self):
        return complex(self.get())

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return from_host, (self.get(order="A"),)

    def __repr__(self):
        """The memory as it stands, deferred copies left pending: printing changes nothing."""
        prefix = "fakecupy.ndarray("
        data = np.array2string(self._a, separator=", ", prefix=prefix)
        return f"{prefix}{data}, dtype={self.dtype})"

    def __str__(self):
        return str(self._a)


def from_host(host, **kwargs) -> ndarray:
    """A device copy of host data (the explicit host-to-device copy; unpickling): numpy's
    ``array`` keywords (``dtype``, ``order``, ``ndmin``) apply to the copy."""
    stats.host_to_device += 1
    return new_array(np.array(host, **kwargs, copy=True))
