"""numpy's statistics on DTensors: ``count_nonzero``, ``ptp``, ``average``, ``cov``,
``corrcoef`` from DTensor ops, and ``quantile``, ``percentile``, ``median`` and their nan
variants with the reduced axes gathered.
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..device import arrays as device
from ..dtensor import DTensor
from ..placement import Replicate, Shard, local_shape
from .creation import full_like, ones_like
from .diagonal import diag
from .elementwise import astype, where
from .joins import concatenate
from .linalg.products import dot
from .mathematical import imag, real
from .reductions import max, mean, min, sum
from .shapes import getitem, reshape, squeeze, transpose
from .sorting import prepare, wrap_block
from .util import agreed, axis_arg, implements, into_out, is_dtensor, refuse

# --- counts, ranges, averages ------------------------------------------------------------

@implements(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    """A 0-d DTensor for ``axis=None`` (numpy's int, without reading the value)."""
    flags = a if a.dtype == np.bool_ else astype(a, bool)
    return sum(flags, axis_arg(axis), dtype=np.intp, keepdims=keepdims)


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    axis = axis_arg(axis)
    return into_out(np.subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims)),
                out)


def _weights(weights, a, axis):
    """numpy's check of ``weights``, then their shape made to broadcast along ``axis``."""
    w = weights if is_dtensor(weights) else np.asanyarray(weights)
    if a.shape == w.shape:
        return w
    if axis is None:
        raise TypeError("Axis must be specified when shapes of a and weights differ.")
    if w.shape != tuple(a.shape[ax] for ax in axis):
        raise ValueError("Shape of weights must be consistent with shape of a along "
                         "specified axis.")
    order = tuple(int(i) for i in np.argsort(axis))
    shape = tuple(s if ax in axis else 1 for ax, s in enumerate(a.shape))
    return reshape(transpose(w, order), shape) if is_dtensor(w) else w.transpose(order).reshape(shape)


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=np._NoValue):
    if axis is not None:
        axis = normalize_axis_tuple(axis, np.ndim(a), argname="axis")
    keep = builtins.bool(keepdims) if keepdims is not np._NoValue else False
    if weights is None:
        avg = mean(a, axis, keepdims=keep)
        scl = avg.dtype.type(a.size / builtins.max(avg.size, 1))
    else:
        w = _weights(weights, a, axis)
        extra = ("f8",) if np.dtype(a.dtype).kind in "iub" else ()
        dtype = np.result_type(a.dtype, w.dtype, *extra)
        scl = w.sum(axis=axis, dtype=dtype, keepdims=keep)
        if agreed("np.average (its check for weights that sum to zero)", np.any(scl == 0.0)):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = sum(np.multiply(a, w, dtype=dtype), axis, keepdims=keep) / scl
    if not returned or (is_dtensor(scl) and scl.shape == avg.shape):
        return (avg, scl) if returned else avg
    if np.ndim(scl) == 0 and not is_dtensor(scl):       # numpy's scale, laid out like the average
        return avg, full_like(avg, scl, dtype=np.result_type(scl))
    return avg, ones_like(avg, dtype=scl.dtype) * scl


# --- covariance --------------------------------------------------------------------------

def _rows(m, dtype, flip):
    """numpy's ``array(m, ndmin=2, dtype=dtype)``, transposed where ``flip(rows)``."""
    if not is_dtensor(m):
        x = np.array(m, ndmin=2, dtype=dtype)
        return x.T if flip(x) else x
    x = m if m.dtype == dtype else astype(m, dtype)
    x = reshape(x, (1, m.shape[0])) if m.ndim == 1 else x
    return transpose(x) if flip(x) else x


def _sample_weights(weights, name, count):
    if weights is None:
        return None
    w = astype(weights, np.float64) if is_dtensor(weights) else np.asarray(weights, dtype=float)
    if w.ndim > 1:
        raise RuntimeError(f"cannot handle multidimensional {name}")
    if w.shape[0] != count:
        raise RuntimeError(f"incompatible numbers of samples and {name}")
    if name == "fweights" and not agreed("np.cov", np.all(w == np.around(w))):
        raise TypeError("fweights must be integer")
    if agreed("np.cov", np.any(w < 0)):
        raise ValueError(f"{name} cannot be negative")
    return w


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """numpy's covariance: weighted means (``average``), then one ``dot`` of the centred
    rows, which contracts the split samples into partial terms."""
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if dtype is None:
        dtype = np.result_type(*[v.dtype if is_dtensor(v) else np.asarray(v)
                                 for v in (m, y) if v is not None], np.float64)
    for name, v in (("m", m), ("y", y)):
        if np.ndim(v) > 2:
            raise ValueError(f"{name} has more than 2 dimensions")
    x = _rows(m, dtype, lambda x: not rowvar and np.ndim(m) != 1)
    if x.shape[0] == 0:
        return np.array([]).reshape(0, 0)
    if y is not None:
        x = concatenate((x, _rows(y, dtype, lambda y: not rowvar and y.shape[0] != 1)), axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    f = _sample_weights(fweights, "fweights", x.shape[1])
    aw = _sample_weights(aweights, "aweights", x.shape[1])
    w = f if aw is None else aw if f is None else f * aw
    avg, w_sum = average(x, axis=1, weights=w, returned=True)
    w_sum = getitem(w_sum, 0)
    if w is None:
        fact = x.shape[1] - ddof
    elif ddof == 0:
        fact = w_sum
    elif aw is None:
        fact = w_sum - ddof
    else:
        fact = w_sum - ddof * np.sum(w * aw) / w_sum
    if agreed("np.cov", fact <= 0):
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        fact = 0.0
    x = x - getitem(avg, (slice(None), None))
    x_t = transpose(x if w is None else x * w)
    c = dot(x, np.conjugate(x_t))
    with np.errstate(divide="ignore", invalid="ignore"):
        c = c * np.true_divide(1, fact)
    return squeeze(c)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if not is_dtensor(c):
        return c
    with np.errstate(divide="ignore", invalid="ignore"):
        if c.ndim == 0:
            return c / c
        stddev = np.sqrt(real(diag(c)))
        c = c / getitem(stddev, (slice(None), None))
        c = c / getitem(stddev, (None, slice(None)))
    if c.dtype.kind != "c":
        return np.clip(c, -1, 1)
    re, im = real(c), imag(c)
    outside = (np.abs(re) > 1) | (np.abs(im) > 1)
    return where(outside, np.clip(re, -1, 1) + np.clip(im, -1, 1) * 1j, c)


# --- quantiles: the reduced axes gathered ------------------------------------------------

def _quantile_like(name, fn, a, q, axis, keepdims, **kwargs):
    """numpy's ``fn`` on blocks holding the reduced axes whole; the other dims keep their
    splits (shifted past ``q``'s dims)."""
    refuse(name, **{k: v for k, v in kwargs.items() if k in ("out", "weights")})
    kwargs = {k: v for k, v in kwargs.items() if k == "method"}
    if type(q) is DTensor:
        raise TypeError(f"np.{name}: q given as a DTensor is not supported; pass numbers")
    a = prepare(name, a)
    axes = tuple(range(a.ndim)) if axis is None else normalize_axis_tuple(axis, a.ndim)
    whole = tuple(Replicate() if isinstance(p, Shard) and p.dim in axes else p
                  for p in a.placements)
    if keepdims is not np._NoValue:
        kwargs["keepdims"] = bool(keepdims)
    args = () if q is None else (q,)
    block = a.redistribute(placements=whole)._block()
    local = fn(block, *args, axis=axis, **kwargs)
    kept = [d for d in range(a.ndim) if kwargs.get("keepdims") or d not in axes]
    lead = np.ndim(q)
    shape = np.shape(q) + tuple(1 if d in axes else a.shape[d] for d in kept)
    placements = tuple(Shard(lead + kept.index(p.dim)) if isinstance(p, Shard) else p
                       for p in whole)
    # the dtype from a one-element probe, the same on every rank (numpy's errors too): the
    # nan* quantiles answer an empty block with nanmean's shape and dtype
    dtype = np.asarray(fn(np.zeros((1,) * a.ndim, a.dtype), *args, axis=axis, **kwargs)).dtype
    if a.size and not block.size:
        mesh = a.device_mesh
        local = device.empty_on(mesh.device_type,
                                local_shape(shape, mesh.shape, placements, mesh.coordinate), dtype)
    local = local if device.is_block(local) else np.asarray(local)
    return wrap_block(local.astype(dtype, copy=False), a.device_mesh, placements, shape)


def _quantiles(name, fn):
    def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                 keepdims=np._NoValue, *, weights=None):
        return _quantile_like(name, fn, a, q, axis, keepdims, out=out, weights=weights,
                              method=method)
    quantile.__name__ = name
    return quantile


def _medians(name, fn):
    def median(a, axis=None, out=None, overwrite_input=False, keepdims=np._NoValue):
        return _quantile_like(name, fn, a, None, axis, keepdims, out=out)
    median.__name__ = name
    return median


quantile = implements(np.quantile)(_quantiles("quantile", np.quantile))
percentile = implements(np.percentile)(_quantiles("percentile", np.percentile))
nanquantile = implements(np.nanquantile)(_quantiles("nanquantile", np.nanquantile))
nanpercentile = implements(np.nanpercentile)(_quantiles("nanpercentile", np.nanpercentile))
median = implements(np.median)(_medians("median", np.median))
nanmedian = implements(np.nanmedian)(_medians("nanmedian", np.nanmedian))
