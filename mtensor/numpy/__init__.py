"""numpy's API on DTensors, by numpy's own sections.

Each section registers its handlers in the table behind ``__array_function__`` and
``__array_ufunc__`` (``util.HANDLED``), so ``np.sort(x)`` and ``mt.numpy.sort(x)`` run the
same code; importing this package installs numpy's operators, methods and protocols on
``DTensor`` (``methods.install``).  Helpers the sections share are in ``util``."""
from ..dtensor import DTensor
from . import methods

# creation
from .creation import (
    arange, empty, empty_like, full, full_like, linspace, meshgrid, ones, ones_like, zeros,
    zeros_like,
)
# elementwise
from .elementwise import astype, clip, copy, where
from .mathematical import angle, imag, interp, real, round
from .logic import allclose, array_equal, array_equiv, isclose
# reductions
from .reductions import all, any, argmax, argmin, max, mean, min, prod, std, sum, var
from .nanfunctions import (
    nanargmax, nanargmin, nanmax, nanmean, nanmin, nanprod, nanstd, nansum, nanvar,
)
# scans and differences (the ufunc methods: ufunc_methods.UFUNC_METHODS)
from .scans import cumprod, cumsum, nancumprod, nancumsum
from .differences import convolve, diff, ediff1d, gradient
# shapes, joins, rearranging, tiling, diagonals
from .shapes import (
    atleast_1d, atleast_2d, atleast_3d, broadcast_to, expand_dims, moveaxis, ndim, ravel,
    reshape, shape, size, squeeze, swapaxes, transpose,
)
from .joins import append, block, column_stack, concatenate, dstack, hstack, stack, vstack
from .rearrange import flip, fliplr, flipud, roll
from .tiling import pad, repeat, tile
from .diagonal import diag, diagonal, trace, tril, triu
# indexing and selection
from .selection import compress, delete, extract, insert, put_along_axis, take, take_along_axis
from .nonzero import argwhere, flatnonzero, nonzero
# writes (item assignment and the in-place operators: writes.setitem, writes.inplace)
from .writes.put import copyto, fill_diagonal, place, put, putmask
# sorting, counting, sets
from .sorting import argpartition, argsort, partition, sort
from .counting import bincount, digitize, histogram, searchsorted
from .sets import intersect1d, isin, setdiff1d, union1d, unique
# statistics
from .statistics import (
    average, corrcoef, count_nonzero, cov, median, nanmedian, nanpercentile, nanquantile,
    percentile, ptp, quantile,
)
# linalg
from . import linalg
from .linalg import cross, dot, einsum, inner, kron, matmul, outer, tensordot, vdot

methods.install(DTensor)   # numpy's operators, methods and protocols on DTensor
