"""numpy's functions on DTensors: the table behind ``__array_function__`` and
``__array_ufunc__`` (NEP 18, NEP 13), also exported as ``mt.sum``, ``mt.matmul``, ...

Each handler turns numpy's arguments into an op name, operands and hashable static params
and hands them to :func:`dispatch.dispatch`.  Arguments mtensor cannot honour (``out=``,
``where=``, advanced indexing) raise ``TypeError`` saying so; nothing is silently ignored.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from . import dispatch as _dispatch
from . import inplace
from .dtensor import DTensor, asnumpy
from .ops import user_rules
from .placement import reduced

HANDLED: dict = {}
user_rules.BUILT_IN.append(HANDLED)   # register_sharding asks override=True for these


def implements(*functions):
    """Register a handler for numpy functions (``np.sum`` -> :func:`sum`)."""
    def add(handler):
        for f in functions:
            HANDLED[f] = handler
        return handler
    return add


def refuse(name: str, **given) -> None:
    """Raise for numpy arguments that DTensors do not support, naming them."""
    bad = sorted(k for k, v in given.items() if v is not None and v is not np._NoValue)
    if bad:
        raise TypeError(f"{name}: argument(s) {', '.join(bad)} are not supported on DTensors; "
                        f"call full_tensor() or to_local() and use numpy directly")


def _run(name, operands, params=()):
    return _dispatch.dispatch(name, tuple(operands), params)


def _axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _dtype(dtype):
    return None if dtype is None else np.dtype(dtype)


def _dt(x) -> bool:
    return type(x) is DTensor


def _tensor(x):
    """A DTensor as it is; anything else as a numpy array (a constant)."""
    return x if type(x) is DTensor else np.asarray(x)


def _host(value):
    """A value every rank needs whole (an index, a condition): DTensors are gathered."""
    return asnumpy(value) if type(value) is DTensor else value


# --- ufuncs ------------------------------------------------------------------------------

_UFUNC_REDUCTIONS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
                     "logical_or": "any", "logical_and": "all"}


def _out(result, out, casting="unsafe"):
    """numpy's ``out=`` (reductions and functions cast unsafely into it, as numpy does)."""
    return result if out is None else inplace.write_out(result, out, casting)


def apply_ufunc(ufunc, method, inputs, kwargs):
    """``__array_ufunc__``: elementwise calls (``out=`` included), ``reduce`` for the
    reductions above, ``at``, and the methods :mod:`numpy_scans` registers."""
    if not kwargs and method == "__call__" and ufunc.signature is None:
        return _dispatch.dispatch(ufunc.__name__, inputs)
    if method == "at":
        return inplace.ufunc_at(ufunc, *inputs)
    out = kwargs.pop("out", None)
    if out is not None and builtins.all(o is None for o in out):
        out = None
    where = kwargs.pop("where", True)
    refuse(f"{ufunc.__name__}", where=None if where is True else where)
    if out is not None:
        casting = kwargs.pop("casting", "same_kind")
        if (method == "__call__" and ufunc.nout == 1 and ufunc.signature is None
                and type(out[0]) is DTensor and casting == "same_kind"):
            if "dtype" in kwargs:
                kwargs["dtype"] = _dtype(kwargs["dtype"])
            return inplace.call_into(ufunc.__name__, inputs, tuple(sorted(kwargs.items())),
                                    out[0], ufunc)
        return inplace.write_out(apply_ufunc(ufunc, method, inputs, kwargs), out, casting)
    if method == "reduce" and ufunc.__name__ in _UFUNC_REDUCTIONS:
        axis = kwargs.pop("axis", 0)
        refuse(f"{ufunc.__name__}.reduce", **{k: v for k, v in kwargs.items()
                                              if k not in ("dtype", "keepdims")})
        name = _UFUNC_REDUCTIONS[ufunc.__name__]
        dtype = _dtype(kwargs.get("dtype")) if name in ("sum", "prod") else None
        return _run(name, inputs, (_axis(axis), bool(kwargs.get("keepdims", False)), dtype))
    handler = HANDLED.get(("ufunc", method))   # outer, reduce, accumulate, reduceat
    if handler is not None:                     # of any binary ufunc (numpy_scans)
        return handler(ufunc, inputs, kwargs)
    if method != "__call__":
        raise TypeError(f"{ufunc.__name__}.{method}: not supported on DTensors; call "
                        f"full_tensor() or to_local() and use numpy directly")
    if ufunc is np.matmul:
        refuse("matmul", **kwargs)
        return matmul(*inputs)
    if ufunc.signature is not None:
        raise TypeError(f"{ufunc.__name__}: mtensor has no sharding rule for this op; call "
                        f"full_tensor() or to_local() and use numpy directly")
    if "dtype" in kwargs:
        kwargs["dtype"] = _dtype(kwargs["dtype"])
    return _run(ufunc.__name__, inputs, tuple(sorted(kwargs.items())))


@implements(np.where)
def where(condition, x=None, y=None):
    if x is None and y is None:
        return HANDLED[np.nonzero](condition)   # numpy_nonzero's
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y should be given")
    return _run("where", (condition, x, y))


@implements(np.clip)
def clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue,
         max=np._NoValue, **kwargs):
    refuse("clip", **kwargs)
    lo = min if a_min is np._NoValue else a_min
    hi = max if a_max is np._NoValue else a_max
    lo, hi = (None if v is np._NoValue else v for v in (lo, hi))
    if lo is None and hi is None:
        raise ValueError("clip: give a_min, a_max or both")
    if lo is None:
        return _out(_run("minimum", (a, hi)), out, "same_kind")
    if hi is None:
        return _out(_run("maximum", (a, lo)), out, "same_kind")
    return _out(_run("clip", (a, lo, hi)), out, "same_kind")


@implements(np.copy)
def copy(a, order="K", subok=False):
    return _run("copy", (a,))


def astype(a, dtype):
    return _run("astype", (a,), (np.dtype(dtype),))


# --- reductions --------------------------------------------------------------------------

def _reduction(name, with_dtype=True):
    def reduce(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        refuse(name, **kwargs)
        return _out(_run(name, (a,), (_axis(axis), bool(keepdims), _dtype(dtype))), out)

    def reduce_no_dtype(a, axis=None, out=None, keepdims=False, **kwargs):
        refuse(name, **kwargs)
        return _out(_run(name, (a,), (_axis(axis), bool(keepdims), None)), out)

    handler = reduce if with_dtype else reduce_no_dtype
    handler.__name__ = name
    return handler


sum = implements(np.sum)(_reduction("sum"))
prod = implements(np.prod)(_reduction("prod"))
mean = implements(np.mean)(_reduction("mean"))
max = implements(np.max, np.amax)(_reduction("max", with_dtype=False))
min = implements(np.min, np.amin)(_reduction("min", with_dtype=False))
any = implements(np.any)(_reduction("any", with_dtype=False))
all = implements(np.all)(_reduction("all", with_dtype=False))
argmax = implements(np.argmax)(_reduction("argmax", with_dtype=False))
argmin = implements(np.argmin)(_reduction("argmin", with_dtype=False))


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    """numpy's two-pass variance from DTensor ops: mean, deviations, mean of squares."""
    refuse("var", **kwargs)
    axis = _axis(axis)
    deviation = a - mean(a, axis, dtype=dtype, keepdims=True)
    squares = np.square(np.abs(deviation)) if deviation.dtype.kind == "c" else np.square(deviation)
    axes = range(a.ndim) if axis is None else np.atleast_1d(axis)
    count = math.prod(a.shape[d] for d in axes)
    total = sum(squares, axis, dtype=dtype, keepdims=keepdims)
    if count - ddof <= 0:  # numpy's inf/nan come from the whole sum, not from each term
        total = total.redistribute(placements=reduced(total.placements))
    return _out(total / builtins.max(count - ddof, 0), out)


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    refuse("std", **kwargs)
    return _out(np.sqrt(var(a, axis, dtype=dtype, ddof=ddof, keepdims=keepdims)), out)


# --- contractions ------------------------------------------------------------------------

def matmul(a, b):
    return _run("matmul", (a, b))


@implements(np.dot)
def dot(a, b, out=None):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return _out(_run("multiply", (a, b)), out, "same_kind")
    return _out(_run("dot", (a, b)), out, "same_kind")


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    if isinstance(axes, (int, np.integer)):
        pairs = (tuple(range(np.ndim(a) - axes, np.ndim(a))), tuple(range(axes)))
    else:
        pairs = tuple(tuple(np.atleast_1d(x).tolist()) for x in axes)
    pairs = tuple(tuple(int(i) % n for i in p) for p, n in zip(pairs, (np.ndim(a), np.ndim(b))))
    return _run("tensordot", (a, b), pairs)


@implements(np.einsum)
def einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    refuse("einsum", **kwargs)
    if not isinstance(subscripts, str):
        raise TypeError("einsum: give the subscripts as a string ('ij,jk->ik')")
    return _out(_run("einsum", operands, (subscripts,)), out, "same_kind")
