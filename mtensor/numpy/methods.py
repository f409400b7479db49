"""numpy's array methods, attributes and scalar conversions on DTensor, installed by
``install(DTensor)`` with the operators.  Methods that are numpy functions of the array call
them; the in-place ones (``sort``, ``fill``, ``flat[k] = v``) write in the DTensor's own
layout; reading values (``item``, ``tolist``, ``int(x)``) is a collective.
"""
from __future__ import annotations

import operator

import numpy as np

from .. import modes
from ..decide import decision_for
from ..dispatch import dispatch, run_decision
from ..dtensor import asnumpy
from ..ops.plans.indexing import is_scalar_key
from ..placement import reduced
from . import elementwise, reductions, shapes
from .linalg import products
from .operators import install_operators
from .protocols import array_function, array_ufunc
from .writes import inplace
from .writes import setitem as writes


def _shape_args(args):
    """``x.reshape(2, 3)`` and ``x.reshape((2, 3))`` alike."""
    return args[0] if len(args) == 1 and not isinstance(args[0], (int, np.integer)) else args


# --- reading values: collectives, the same Python value on every rank --------------------

def _getitem(self, key):
    """``x[key]``; any basic key but one integer per dim (``x[..., 2]`` too) gives a view.
    One integer per dim is numpy's scalar read: a 0-d copy, its partial terms reduced (one
    all-reduce of one element), so no later write to ``x`` or to it reaches the other and
    every later op sees the exact value."""
    if not is_scalar_key(key, self.ndim):
        return shapes.getitem(self, key)
    entries, _ = writes.entries_for(key, self.shape, "getitem")
    picked = (dispatch("getitem", (self,), (entries,)),)
    return run_decision("copy", picked, (), decision_for("copy", picked, (),
                                                          reduced(picked[0].placements)))


def item(self, *args):
    """numpy's ``item``: one element (of a size-1 DTensor, at a flat index, or at one index
    per dim) as a Python scalar on every rank.  A collective: only that element travels."""
    modes.refuse_while_tracing("DTensor.item() (or int, float, bool, operator.index)")
    key = _element(self, args[0] if len(args) == 1 and isinstance(args[0], tuple) else args)
    value = _getitem(self, key) if key else self
    return value.full_tensor().item()


def _element(a, args) -> tuple:
    """The index, one int per dim, of the element ``a.item(*args)`` reads."""
    if not args:
        if a.size != 1:
            raise ValueError(f"item: can only convert a DTensor of size 1 to a Python scalar; "
                             f"this one has shape {a.shape}")
        return (0,) * a.ndim
    if len(args) == 1:
        i = operator.index(args[0])
        if not -a.size <= i < a.size:
            raise IndexError(f"item: index {i} is out of bounds for size {a.size}")
        return tuple(int(k) for k in np.unravel_index(i % a.size, a.shape))
    if len(args) != a.ndim:
        raise ValueError(f"item: {len(args)} indices given for a DTensor of shape {a.shape}; "
                         f"give one flat index or one per dim")
    return tuple(operator.index(k) for k in args)


def _scalar(convert):
    def to_python(self):
        if self.ndim:
            raise TypeError(f"only 0-dimensional DTensors can be converted to Python "
                            f"scalars (as numpy's arrays); this one has shape {self.shape}")
        return convert(item(self))
    to_python.__doc__ = "A collective: every rank must call it (the value is gathered)."
    return to_python


def _bool(self):
    if self.size != 1:
        raise ValueError(f"the truth value of a DTensor of shape {self.shape} is ambiguous; "
                         f"use x.any() or x.all()")
    return bool(item(self))


def _index(self):
    """``operator.index(x)`` (``range(x.argmax())``): 0-d integer DTensors only, as numpy."""
    if self.ndim or self.dtype.kind not in "iu":
        raise TypeError(f"only integer scalar DTensors can be converted to a scalar index; "
                        f"this one has shape {self.shape} and dtype {self.dtype}")
    return item(self)


class FlatIter:
    """``x.flat``.  Reading ``x.flat[k]`` gives what ``x.ravel()[k]`` holds, as a copy (a
    DTensor, 0-d for an int ``k``); ``x.flat[k] = v`` is ``np.put(x, positions, v)`` at the
    flat positions ``k`` picks (``v`` repeated as needed), written in ``x``'s own layout;
    iterating gathers the whole array (a collective) and yields numpy scalars."""

    __slots__ = ("base",)

    def __init__(self, base):
        self.base = base

    def __len__(self):
        return self.base.size

    def __getitem__(self, key):
        flat = shapes.ravel(self.base)
        return _getitem(flat, key) if is_scalar_key(key, 1) else elementwise.copy(flat[key])

    def __setitem__(self, key, value):
        np.put(self.base, _flat_positions(key, self.base.size), value)

    def __iter__(self):
        return iter(asnumpy(self.base).ravel())


def _flat_positions(key, size):
    if key is Ellipsis:
        key = slice(None)
    if isinstance(key, slice):
        return np.arange(size)[key]
    key = np.asarray(key)         # a DTensor key is gathered: every rank needs all of it
    return np.flatnonzero(key) if key.dtype == np.bool_ else key


def _set_flat(self, value):
    FlatIter(self)[:] = value


# --- writing in place: the result goes back into the DTensor's own layout -----------------

def _in_place(name):
    fn = getattr(np, name)

    def method(self, *args, **kwargs):
        writes.check_write(name, self)
        writes.assign(self, writes.WHOLE, fn(self, *args, **kwargs), op=name)
    method.__name__ = name
    method.__doc__ = (f"numpy's in-place ``{name}``: ``np.{name}`` of the DTensor written back "
                      f"into it (views of it see the change); returns None.")
    return method


def _fill(self, value):
    writes.check_write("fill", self, value)
    writes.assign(self, writes.WHOLE, value, op="fill")


# --- methods that are numpy functions of the array ----------------------------------------

def _numpy(name):
    """``x.name(...)`` as ``np.name(x, ...)``: numpy's dispatch finds the handler, or raises
    the TypeError of a function mtensor has no rule for."""
    fn = getattr(np, name)

    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = name
    return method


def _astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
    dtype = np.dtype(dtype)
    if not np.can_cast(self.dtype, dtype, casting):
        raise TypeError(f"astype: cannot cast DTensor data from {self.dtype!r} to {dtype!r} "
                        f"according to the rule {casting!r}")
    return self if not copy and dtype == self.dtype else elementwise.astype(self, dtype)


def _real(self):
    """numpy's ``x.real``: a view of ``x`` for real dtypes; for complex ones the real parts
    as a copy (numpy's is a view: writing to it does not reach ``x`` here)."""
    if self.dtype.kind != "c":
        return shapes.getitem(self, Ellipsis)
    return dispatch("real", (self,))


def _imag(self):
    """numpy's ``x.imag``: zeros for real dtypes, the imaginary parts (a copy) for complex."""
    if self.dtype.kind != "c":
        return np.zeros_like(self)
    return dispatch("imag", (self,))


def _hash(self):
    """A 0-d DTensor hashes as its value (numpy's scalars do, so ``set(x)`` of a 1-D DTensor
    works; a read, the same on every rank); arrays are unhashable, as numpy's."""
    if self.ndim:
        raise TypeError("unhashable type: 'DTensor' (only a 0-d DTensor hashes, as its value)")
    return hash(self.item())


def _matrix_transpose(self):
    if self.ndim < 2:
        raise ValueError(f"mT: matrix transpose of a DTensor of shape {self.shape} (ndim < 2) "
                         f"is undefined")
    return shapes.swapaxes(self, -1, -2)


_NDARRAY_NAMES = frozenset(n for n in dir(np.ndarray) if not n.startswith("_"))


class NoRuleAttributeError(AttributeError, TypeError):
    """A numpy array attribute DTensors lack: an AttributeError, so ``hasattr(x, "flags")``
    and ``getattr(x, "device", None)`` work, and a TypeError like a numpy function without
    a rule."""


def _missing(self, name):
    """A name numpy arrays have and DTensors lack raises as a numpy function without a rule
    does (with the way out named); any other (a ``__getstate__`` probe, a typo) raises a
    plain AttributeError; both are AttributeErrors, which ``hasattr``, ``getattr(x, name,
    default)``, ``copy`` and ``pickle`` rely on."""
    if name in _NDARRAY_NAMES:
        raise NoRuleAttributeError(f"numpy.ndarray.{name}: mtensor has no sharding rule for this "
                        f"attribute; call full_tensor() to compute on the whole array, or "
                        f"to_local() for this rank's block")
    raise AttributeError(f"'DTensor' object has no attribute {name!r}")


METHODS = {
    "__array_function__": array_function,
    "__array_ufunc__": array_ufunc,
    "__getattr__": _missing,
    "__matmul__": lambda self, other: products.matmul(self, other),
    "__rmatmul__": lambda self, other: products.matmul(other, self),
    "__getitem__": _getitem,
    "__setitem__": writes.setitem,
    "__imatmul__": inplace.inplace_matmul,
    "__len__": lambda self: self.shape[0] if self.shape else _unsized(),
    "__iter__": lambda self: (self[i] for i in range(len(self))),
    "__contains__": lambda self, value: bool(reductions.any(self == value)),
    "__divmod__": lambda self, other: dispatch("divmod", (self, other)),
    "__rdivmod__": lambda self, other: dispatch("divmod", (other, self)),
    "__float__": _scalar(float),
    "__int__": _scalar(int),
    "__complex__": _scalar(complex),
    "__bool__": _bool,
    "__index__": _index,
    "__hash__": _hash,
    "item": item,
    "tolist": lambda self: asnumpy(self).tolist(),
    "tobytes": lambda self, order="C": asnumpy(self).tobytes(order),
    "flat": property(FlatIter, _set_flat),
    "real": property(_real),
    "imag": property(_imag),
    "T": property(lambda self: shapes.transpose(self)),
    "mT": property(_matrix_transpose),
    "reshape": lambda self, *shape, order="C": shapes.reshape(self, _shape_args(shape), order),
    "transpose": lambda self, *axes: shapes.transpose(self, _shape_args(axes) if axes else None),
    "swapaxes": shapes.swapaxes,
    "squeeze": shapes.squeeze,
    "ravel": shapes.ravel,
    "flatten": lambda self, order="C": elementwise.copy(shapes.ravel(self, order)),
    "astype": _astype,
    "copy": elementwise.copy,
    "clip": elementwise.clip,
    "dot": products.dot,
    "compress": lambda self, condition, axis=None, out=None: np.compress(condition, self,
                                                                         axis, out),
    "fill": _fill,
    "sort": _in_place("sort"),
    "partition": _in_place("partition"),
}
for _name in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "any", "all", "var",
              "std"):
    METHODS[_name] = getattr(reductions, _name)
for _name in ("argsort", "argpartition", "choose", "conj", "conjugate", "cumprod", "cumsum",
              "diagonal", "nonzero", "ptp", "put", "repeat", "round", "searchsorted", "take",
              "trace"):
    METHODS[_name] = _numpy(_name)


def _unsized():
    raise TypeError("len() of a 0-d DTensor")

def install(cls) -> None:
    """Give ``cls`` (DTensor) numpy's operators, methods and protocols."""
    install_operators(cls)
    for name, method in METHODS.items():
        setattr(cls, name, method)
