"""numpy's NaN-skipping reductions on DTensors: ``nansum``, ``nanprod``, ``nanmean``,
``nanmax``, ``nanmin``, ``nanargmax``, ``nanargmin``, ``nanvar``, ``nanstd``.

Each is numpy's own formula written with DTensor ops (``sum(where(isnan(a), 0, a))``), so a
reduction of a split dim leaves partial terms that the next consumer reduces.  All-NaN
slices give numpy's values without its warnings (a warning would cost a collective on every
call); ``nanargmax``/``nanargmin`` read one flag to raise numpy's error on every rank.
"""
from __future__ import annotations

import numpy as np

from .elementwise import astype, where
from .mathematical import real
from .reductions import all, any, argmax, argmin, max, mean, min, prod, sum, var
from .shapes import squeeze
from .util import agreed, axis_arg, implements, into_out, refuse, run


def _replace_nan(a, value):
    """(``a`` with NaNs made ``value``, the NaN mask), or (``a``, None) for exact dtypes."""
    if np.dtype(a.dtype).kind not in "fc":
        return a, None
    mask = np.isnan(a)
    return where(mask, value, a), mask


def _divide(total, count):
    """numpy's ``_divide_by_count``: the quotient in the dividend's dtype."""
    q = total / count
    return q if q.dtype == total.dtype else astype(q, total.dtype)


def _check_inexact(dtype):
    if dtype is not None and not np.issubdtype(dtype, np.inexact):
        raise TypeError("If a is inexact, then dtype must be inexact")


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
           where=np._NoValue):
    refuse("nansum", initial=initial, where=where)
    return sum(_replace_nan(a, 0)[0], axis_arg(axis), dtype=dtype, out=out, keepdims=keepdims)


@implements(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
            where=np._NoValue):
    refuse("nanprod", initial=initial, where=where)
    return prod(_replace_nan(a, 1)[0], axis_arg(axis), dtype=dtype, out=out, keepdims=keepdims)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=np._NoValue):
    refuse("nanmean", where=where)
    arr, mask = _replace_nan(a, 0)
    axis = axis_arg(axis)
    if mask is None:
        return mean(arr, axis, dtype=dtype, out=out, keepdims=keepdims)
    _check_inexact(dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        count = sum(~mask, axis, dtype=np.intp, keepdims=keepdims)
        return into_out(_divide(sum(arr, axis, dtype=dtype, keepdims=keepdims), count), out)


def _nan_extreme(name, reduce, fill):
    def extreme(a, axis=None, out=None, keepdims=False, initial=np._NoValue,
                where=np._NoValue):
        refuse(name, initial=initial, where=where)
        axis = axis_arg(axis)
        kind = np.dtype(a.dtype).kind
        if kind == "c":     # numpy's complex order: the axis whole, fmax/fmin on each rank
            ufunc = "fmax" if reduce is max else "fmin"
            return into_out(run("ufunc_reduce", (a,), (ufunc, axis, keepdims, None)), out)
        if kind != "f":
            return reduce(a, axis, out=out, keepdims=keepdims)
        mask = np.isnan(a)
        found = reduce(np.where(mask, fill, a), axis, keepdims=keepdims)
        return into_out(np.where(all(mask, axis, keepdims=keepdims), np.nan, found), out)
    extreme.__name__ = name
    return extreme


nanmax = implements(np.nanmax)(_nan_extreme("nanmax", max, -np.inf))
nanmin = implements(np.nanmin)(_nan_extreme("nanmin", min, np.inf))


def _nan_arg(name, pick, fill):
    def arg(a, axis=None, out=None, *, keepdims=np._NoValue):
        arr, mask = _replace_nan(a, fill)
        if mask is not None and a.size:
            if agreed(f"np.{name}", any(all(mask, axis))):
                raise ValueError("All-NaN slice encountered")
        keep = False if keepdims is np._NoValue else keepdims
        return into_out(pick(arr, axis, keepdims=keep), out)
    arg.__name__ = name
    return arg


nanargmax = implements(np.nanargmax)(_nan_arg("nanargmax", argmax, -np.inf))
nanargmin = implements(np.nanargmin)(_nan_arg("nanargmin", argmin, np.inf))


@implements(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=np._NoValue,
           mean=np._NoValue, correction=np._NoValue):
    """numpy's two passes over the non-NaN values; ``dof <= 0`` slices give NaN."""
    refuse("nanvar", where=where, mean=mean, correction=correction)
    arr, mask = _replace_nan(a, 0)
    axis = axis_arg(axis)
    if mask is None:
        return var(arr, axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)
    _check_inexact(dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        count = sum(~mask, axis, dtype=np.intp, keepdims=True)
        avg = _divide(sum(arr, axis, dtype=dtype, keepdims=True), count)
        dev = arr - avg
        dev = np.where(mask, 0, dev if dev.dtype == arr.dtype else astype(dev, arr.dtype))
        square = real(dev * np.conjugate(dev)) if dev.dtype.kind == "c" else dev * dev
        total = sum(square, axis, dtype=dtype, keepdims=keepdims)
        if not keepdims:
            count = squeeze(count, axis)
        dof = count - ddof
        return into_out(np.where(dof <= 0, np.nan, _divide(total, dof)), out)


@implements(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=np._NoValue,
           mean=np._NoValue, correction=np._NoValue):
    refuse("nanstd", where=where, mean=mean, correction=correction)
    return into_out(np.sqrt(nanvar(a, axis, dtype=dtype, ddof=ddof, keepdims=keepdims)), out)
