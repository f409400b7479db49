"""numpy's API on DTensors, by numpy's own sections.

Each section registers its handlers in the table behind ``__array_function__`` and
``__array_ufunc__`` (``util.HANDLED``), so ``np.sort(x)`` and ``mt.numpy.sort(x)`` run the
same code; importing this package installs numpy's operators, methods and protocols on
``DTensor`` (``methods.install``).  Helpers the sections share are in ``util``."""
from ..dtensor import DTensor

# linalg
from . import fft, linalg, methods, scimath
from .counting import bincount, digitize, histogram, histogram_bin_edges, searchsorted

# creation
from .creation import (
    arange,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    geomspace,
    identity,
    linspace,
    logspace,
    meshgrid,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from .diagonal import diag, diagflat, diagonal, trace, tril, triu
from .differences import convolve, correlate, diff, ediff1d, gradient

# elementwise
from .elementwise import astype, can_cast, clip, copy, result_type, where
from .indices import (
    choose,
    diag_indices_from,
    ix_,
    ravel_multi_index,
    tril_indices_from,
    triu_indices_from,
    unravel_index,
)
from .inspection import (
    array2string,
    array_repr,
    array_str,
    common_type,
    iscomplexobj,
    isrealobj,
    may_share_memory,
    min_scalar_type,
    shares_memory,
)
from .joins import append, block, column_stack, concatenate, dstack, hstack, stack, vstack
from .linalg import cross, dot, einsum, inner, kron, matmul, outer, tensordot, vdot
from .logic import allclose, array_equal, array_equiv, isclose, isneginf, isposinf
from .mathematical import (
    angle,
    fix,
    i0,
    imag,
    interp,
    iscomplex,
    isreal,
    nan_to_num,
    real,
    real_if_close,
    round,
    sinc,
    trapezoid,
)
from .nanfunctions import (
    nanargmax,
    nanargmin,
    nanmax,
    nanmean,
    nanmin,
    nanprod,
    nanstd,
    nansum,
    nanvar,
)
from .nonzero import argwhere, flatnonzero, nonzero
from .polynomials import (
    poly,
    polyadd,
    polyder,
    polydiv,
    polyfit,
    polyint,
    polymul,
    polysub,
    polyval,
    roots,
    vander,
)
from .rearrange import flip, fliplr, flipud, roll, rot90

# reductions
from .reductions import all, any, argmax, argmin, max, mean, min, prod, std, sum, var

# scans and differences (the ufunc methods: ufunc_methods.UFUNC_METHODS)
from .scans import cumprod, cumsum, cumulative_prod, cumulative_sum, nancumprod, nancumsum

# indexing and selection
from .selection import (
    compress,
    delete,
    extract,
    insert,
    piecewise,
    put_along_axis,
    resize,
    select,
    take,
    take_along_axis,
    trim_zeros,
)
from .sets import (
    intersect1d,
    isin,
    setdiff1d,
    setxor1d,
    union1d,
    unique,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)

# shapes, joins, rearranging, tiling, diagonals
from .shapes import (
    atleast_1d,
    atleast_2d,
    atleast_3d,
    broadcast_arrays,
    broadcast_to,
    expand_dims,
    matrix_transpose,
    moveaxis,
    ndim,
    ravel,
    reshape,
    rollaxis,
    shape,
    size,
    squeeze,
    swapaxes,
    transpose,
    unstack,
)

# sorting, counting, sets
from .sorting import argpartition, argsort, lexsort, partition, sort, sort_complex
from .splits import array_split, dsplit, hsplit, split, vsplit

# statistics
from .statistics import (
    average,
    corrcoef,
    count_nonzero,
    cov,
    median,
    nanmedian,
    nanpercentile,
    nanquantile,
    percentile,
    ptp,
    quantile,
)
from .tiling import pad, repeat, tile

# writes (item assignment and the in-place operators: writes.setitem, writes.inplace)
from .writes.put import copyto, fill_diagonal, place, put, putmask

methods.install(DTensor)   # numpy's operators, methods and protocols on DTensor
