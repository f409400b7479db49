"""mtensor as a Python array API namespace (standard 2024.12, with ``linalg`` and ``fft``).

``x.__array_namespace__()`` of a DTensor returns this module, so code written against the
standard (scikit-learn with ``array_api_dispatch=True``, array-api-extra, SciPy's array API
paths) runs on DTensors: each call reaches the same sharding rules as numpy code does.
Most functions are numpy 2's own (their signatures are the standard's; they reach DTensors
through ``__array_ufunc__``/``__array_function__``); ``functions`` and ``creation`` hold the
ones whose signatures or semantics differ.  A DTensor's ``device`` is its mesh; creation
functions take ``device=`` (a mesh), default to the innermost ``with mesh:`` block and lay
new arrays out as ``creation`` says.  Installs ``__array_namespace__``, ``device``,
``to_device``, ``__dlpack__`` and ``__dlpack_device__`` (a replicated DTensor's block; a
split one refuses) on DTensor.
"""
from __future__ import annotations

import sys

import numpy as np

from ..dtensor import DTensor
from . import fft, linalg
from .creation import (
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    split_bytes,
    tril,
    triu,
    zeros,
    zeros_like,
)
from .devices import device_of, dlpack, dlpack_device, to_device
from .functions import (
    argsort,
    astype,
    broadcast_arrays,
    clip,
    concat,
    expand_dims,
    isin,
    nonzero,
    reshape,
    searchsorted,
    sort,
    take,
    where,
)
from .info import __array_namespace_info__

__array_api_version__ = "2024.12"
SUPPORTED_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")

# numpy 2's functions whose signatures and semantics are the standard's
NUMPY_FUNCTIONS = (
    "abs acos acosh add all any argmax argmin asin asinh atan atan2 atanh bitwise_and "
    "bitwise_invert bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor "
    "broadcast_shapes broadcast_to can_cast ceil conj copysign cos cosh count_nonzero "
    "cumulative_prod cumulative_sum diff divide equal exp expm1 finfo flip floor floor_divide "
    "greater greater_equal hypot iinfo imag isdtype isfinite isinf isnan less less_equal log "
    "log10 log1p log2 logaddexp logical_and logical_not logical_or logical_xor matmul "
    "matrix_transpose max maximum mean min minimum moveaxis multiply negative nextafter "
    "not_equal permute_dims positive pow prod real reciprocal remainder repeat result_type "
    "roll round sign signbit sin sinh sqrt square squeeze stack std subtract sum "
    "take_along_axis tan tanh tensordot tile trunc unique_all unique_counts unique_inverse "
    "unique_values unstack var vecdot").split()
DTYPES = ("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 "
          "complex128").split()
CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")

_module = sys.modules[__name__]
for _name in NUMPY_FUNCTIONS + DTYPES + list(CONSTANTS):
    setattr(_module, _name, getattr(np, _name))


def __array_namespace__(self, /, *, api_version=None):
    if api_version is not None and api_version not in SUPPORTED_VERSIONS:
        raise ValueError(f"__array_namespace__: api_version={api_version!r} is not supported; "
                         f"mtensor implements {__array_api_version__} "
                         f"(and the earlier {', '.join(SUPPORTED_VERSIONS[:-1])})")
    return _module


DTensor.__array_namespace__ = __array_namespace__
DTensor.device = property(device_of)
DTensor.to_device = to_device
DTensor.__dlpack__ = dlpack
DTensor.__dlpack_device__ = dlpack_device

__all__ = sorted(["__array_api_version__", "__array_namespace_info__", "arange", "argsort",
                  "asarray", "astype", "broadcast_arrays", "clip", "concat", "empty",
                  "empty_like", "expand_dims", "eye", "fft", "from_dlpack", "full", "full_like",
                  "isin", "linalg", "linspace", "meshgrid", "nonzero", "ones", "ones_like",
                  "reshape", "searchsorted", "sort", "split_bytes", "take", "tril", "triu", "where", "zeros",
                  "zeros_like", *NUMPY_FUNCTIONS, *DTYPES, *CONSTANTS])
