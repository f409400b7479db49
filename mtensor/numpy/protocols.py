"""numpy's protocols on DTensors: ``__array_ufunc__`` (``apply_ufunc``: elementwise calls,
``out=``, reductions, ``at`` and the ufunc methods of ``ufunc_methods``) and
``__array_function__`` (the handlers of ``util.HANDLED``).
"""
from __future__ import annotations

import builtins
import sys

import numpy as np

from .. import dispatch as _dispatch
from ..dispatch import dispatch
from ..dtensor import DTensor
from ..ops import user_rules
from . import coverage, creation, util
from .linalg.products import matmul, vecdot
from .ufunc_methods import UFUNC_METHODS
from .util import axis_arg, dtype_arg, refuse, run, temporary_count
from .writes import inplace

# --- ufuncs ------------------------------------------------------------------------------

_UFUNC_REDUCTIONS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
                     "logical_or": "any", "logical_and": "all"}


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
                kwargs["dtype"] = dtype_arg(kwargs["dtype"])
            return inplace.call_into(ufunc.__name__, inputs, tuple(sorted(kwargs.items())),
                                    out[0], ufunc)
        return inplace.write_out(apply_ufunc(ufunc, method, inputs, kwargs), out, casting)
    if method == "reduce" and ufunc.__name__ in _UFUNC_REDUCTIONS:
        axis = kwargs.pop("axis", 0)
        refuse(f"{ufunc.__name__}.reduce", **{k: v for k, v in kwargs.items()
                                              if k not in ("dtype", "keepdims")})
        name = _UFUNC_REDUCTIONS[ufunc.__name__]
        dtype = dtype_arg(kwargs.get("dtype")) if name in ("sum", "prod") else None
        return run(name, inputs, (axis_arg(axis), bool(kwargs.get("keepdims", False)), dtype))
    handler = UFUNC_METHODS.get(method)   # outer, reduce, accumulate, reduceat
    if handler is not None:                     # of any binary ufunc (numpy_scans)
        return handler(ufunc, inputs, kwargs)
    if method != "__call__":
        raise TypeError(f"{ufunc.__name__}.{method}: not supported on DTensors; call "
                        f"full_tensor() or to_local() and use numpy directly")
    if ufunc is np.matmul:
        refuse("matmul", **kwargs)
        return matmul(*inputs)
    if ufunc is np.vecdot:
        axis = kwargs.pop("axis", -1)
        refuse("vecdot", **kwargs)
        return vecdot(*inputs, axis=axis)
    if ufunc.signature is not None:
        raise TypeError(f"{ufunc.__name__}: mtensor has no sharding rule for this op; call "
                        f"full_tensor() or to_local() and use numpy directly")
    if "dtype" in kwargs:
        kwargs["dtype"] = dtype_arg(kwargs["dtype"])
    return run(ufunc.__name__, inputs, tuple(sorted(kwargs.items())))


def array_function(self, func, types, args, kwargs):
    route = user_rules.ROUTES.get(func)   # an op taught by mt.register_sharding
    if route is not None:
        return dispatch(*route.split(args, kwargs))   # name, operands, params, cache
    handler = util.HANDLED.get(func)
    if handler is None and func in creation.LIKE_FUNCTIONS:   # np.zeros(3, like=x)
        return creation.like(self, func, args, kwargs)
    if handler is None:
        name = f"{func.__module__}.{func.__name__}"
        why = coverage.refusal(name, func)
        raise TypeError(f"{name}: mtensor has no sharding rule for this function"
                        f"{f' ({why})' if why else ''}; call full_tensor() to compute on the "
                        f"whole array, or to_local() for this rank's block")
    return handler(*args, **kwargs)


def _ufunc(ufunc, method, inputs, kwargs):
    route = user_rules.ROUTES.get(ufunc) if method == "__call__" else None
    if route is not None:
        return dispatch(*route.split(inputs, kwargs))   # name, operands, params, cache
    return apply_ufunc(ufunc, method, inputs, kwargs)


def _array_ufunc(run, other=_ufunc):
    def array_ufunc(self, ufunc, method, *inputs, **kwargs):
        # np.exp(a - m): the operand is a temporary, whose block may take the result
        # (``dispatch``'s temporary elision; ``_TEMPORARY`` is this path's count, measured)
        if (len(inputs) == 1 and method == "__call__" and not kwargs and ufunc.nout == 1
                and ufunc not in user_rules.ROUTES and sys.getrefcount(self) == _TEMPORARY):
            return run(ufunc.__name__, inputs, temporary=self)
        return other(ufunc, method, inputs, kwargs)
    return array_ufunc


def _told_at(count) -> list:
    """What ``array_ufunc`` tells ``np.negative(Probe())`` and a named probe with ``count``
    as the temporary's reference count (``util.temporary_count``)."""
    global _TEMPORARY
    _TEMPORARY, told = count, []

    class Probe:
        __array_ufunc__ = _array_ufunc(lambda name, inputs, temporary: told.append(True),
                                       lambda ufunc, method, inputs, kwargs: told.append(False))

    named = Probe()
    np.negative(Probe())
    np.negative(named)
    return told


_TEMPORARY = temporary_count("numpy.protocols", _told_at)
array_ufunc = _array_ufunc(dispatch)
