"""numpy's operators, methods and protocols on DTensor, installed by ``install(DTensor)``.

Operators go straight to dispatch (no trip through numpy's override machinery); numpy's
own functions reach the same handlers through ``__array_ufunc__``/``__array_function__``.
Scalars and plain arrays mixed with DTensors are used as replicated values: they must hold
the same value on every rank.
"""
from __future__ import annotations

import numpy as np

from . import numpy_api as api
from . import numpy_shapes as shapes
from . import inplace, writes
from .dispatch import dispatch

_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARE = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
            "eq": "equal", "ne": "not_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}


def _binary(op):
    return lambda self, other: dispatch(op, (self, other))


def _inplace(op):
    return lambda self, other: inplace.inplace(op, self, other)


def _reflected(op):
    return lambda self, other: dispatch(op, (other, self))


def _unary(op):
    return lambda self: dispatch(op, (self,))


def _scalar(convert):
    def to_python(self):
        if self.size != 1:
            raise TypeError(f"only a DTensor with one element converts to a Python scalar; "
                            f"this one has shape {self.shape}")
        return convert(self.full_tensor().reshape(()))
    to_python.__doc__ = "A collective: every rank must call it (the value is gathered)."
    return to_python


def _array_function(self, func, types, args, kwargs):
    handler = api.HANDLED.get(func)
    if handler is None:
        raise TypeError(f"{func.__module__}.{func.__name__}: mtensor has no sharding rule for "
                        f"this function; call full_tensor() to compute on the whole array, or "
                        f"to_local() for this rank's block")
    return handler(*args, **kwargs)


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    return api.apply_ufunc(ufunc, method, inputs, kwargs)


def _shape_args(args):
    """``x.reshape(2, 3)`` and ``x.reshape((2, 3))`` alike."""
    return args[0] if len(args) == 1 and not isinstance(args[0], (int, np.integer)) else args


METHODS = {
    "__array_function__": _array_function,
    "__array_ufunc__": _array_ufunc,
    "__matmul__": lambda self, other: api.matmul(self, other),
    "__rmatmul__": lambda self, other: api.matmul(other, self),
    "__getitem__": shapes.getitem,
    "__setitem__": writes.setitem,
    "__imatmul__": inplace.inplace_matmul,
    "fill": lambda self, value: writes.assign(self, writes.WHOLE, value),
    "__len__": lambda self: self.shape[0] if self.shape else _unsized(),
    "__iter__": lambda self: (self[i] for i in range(len(self))),
    "__divmod__": lambda self, other: dispatch("divmod", (self, other)),
    "__rdivmod__": lambda self, other: dispatch("divmod", (other, self)),
    "__float__": _scalar(float),
    "__int__": _scalar(int),
    "__complex__": _scalar(complex),
    "__bool__": _scalar(bool),
    "__hash__": None,
    "T": property(lambda self: shapes.transpose(self)),
    "mT": property(lambda self: shapes.swapaxes(self, -1, -2)),
    "reshape": lambda self, *shape, order="C": shapes.reshape(self, _shape_args(shape), order),
    "transpose": lambda self, *axes: shapes.transpose(self, _shape_args(axes) if axes else None),
    "swapaxes": shapes.swapaxes,
    "squeeze": shapes.squeeze,
    "ravel": shapes.ravel,
    "flatten": lambda self: api.copy(shapes.ravel(self)),
    "astype": lambda self, dtype, copy=True: api.astype(self, dtype),
    "copy": api.copy,
    "clip": api.clip,
    "dot": api.dot,
}
for _name in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "any", "all", "var",
              "std"):
    METHODS[_name] = getattr(api, _name)


def _unsized():
    raise TypeError("len() of a 0-d DTensor")


def install(cls) -> None:
    """Give ``cls`` (DTensor) numpy's operators, methods and protocols."""
    for name, op in _BINARY.items():
        setattr(cls, f"__{name}__", _binary(op))
        setattr(cls, f"__r{name}__", _reflected(op))
        setattr(cls, f"__i{name}__", _inplace(op))
    for name, op in _COMPARE.items():
        setattr(cls, f"__{name}__", _binary(op))
    for name, op in _UNARY.items():
        setattr(cls, f"__{name}__", _unary(op))
    for name, method in METHODS.items():
        setattr(cls, name, method)
