"""Helpers the numpy sections share: the table behind ``__array_function__`` (``HANDLED``,
``implements``), refusals of arguments DTensors cannot honour (``refuse``, ``unsupported``,
``refuse_dtensor_args``), running an op through dispatch (``run``), numpy's ``out=``
(``into_out``), argument normalisation and an agreed boolean read (``agreed``).
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dispatch as _dispatch
from .. import modes
from ..dtensor import DTensor, asnumpy
from ..ops import user_rules
from .writes import inplace

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


def run(name, operands, params=()):
    return _dispatch.dispatch(name, tuple(operands), params)


def temporary_count(where: str, told_at) -> int:
    """The reference count at which an operator or ufunc tells an operand that nothing but
    the call holds (a temporary, whose block may take the result) from a named one:
    the first ``count`` at which ``told_at(count)`` (which sets its module's count, makes
    the call on a temporary probe and then on a named one, and returns what each was told)
    is ``[True, False]``.  Measured, since interpreters count a call's references
    differently."""
    for count in range(1, 16):
        if told_at(count) == [True, False]:
            return count
    raise RuntimeError(f"{where}: cannot tell a temporary operand on this interpreter")


def axis_arg(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def dtype_arg(dtype):
    return None if dtype is None else np.dtype(dtype)


def is_dtensor(x) -> bool:
    return type(x) is DTensor


def as_array(x):
    """A DTensor as it is; anything else as a numpy array (a constant)."""
    return x if type(x) is DTensor else np.asarray(x)


def host_value(value):
    """A value every rank needs whole (an index, a condition): DTensors are gathered."""
    return asnumpy(value) if type(value) is DTensor else value


def into_out(result, out, casting="unsafe"):
    """numpy's ``out=`` (reductions and functions cast unsafely into it, as numpy does)."""
    return result if out is None else inplace.write_out(result, out, casting)



def agreed(name, flag) -> bool:
    """A DTensor flag read as a Python bool: one all-reduce, the same answer everywhere."""
    if not is_dtensor(flag):
        return builtins.bool(flag)
    modes.refuse_while_tracing(name)
    return builtins.bool(flag)


def unsupported(name: str, arg: str, why: str):
    raise TypeError(f"{name}: argument {arg} {why} is not supported on DTensors; call "
                    f"full_tensor() or to_local() and use numpy directly")


def refuse_dtensor_args(name: str, **args) -> None:
    """Counts, widths and shifts steer the computation: they must be plain values."""
    for arg, value in args.items():
        if is_dtensor(value) or (isinstance(value, (list, tuple)) and any(is_dtensor(v) for v in value)):
            unsupported(name, arg, "given as a DTensor")


SCALARS = (int, float, complex)
