"""mtensor: eager distributed tensors over MPI, in the spirit of PyTorch's DTensor."""
from . import checkpoint, optim, random, testing
from .autodiff import vjps as _vjps  # noqa: F401  (registers the gradient rules)
from .autodiff.api import grad, stop_gradient, value_and_grad
from .autodiff.custom_vjp import custom_vjp
from .autodiff.local_map import local_map
from .autoshard import auto_shard, shard_hint
from .comm import guard as _guard
from .comm.abort import set_abort_on_error
from .comm.guard import CollectiveMismatchError, set_checks, set_timeout
from .checkpoint import load, save
from .creation import arange, empty, empty_like, full, full_like, ones, ones_like, zeros, zeros_like
from .debug import CommDebugMode, visualize_sharding
from .array_methods import install as _install_array_methods
from .dtensor import DTensor, asnumpy, distribute_tensor
from .mesh import DeviceMesh, init_device_mesh
from .numpy_api import (
    all, any, argmax, argmin, astype, clip, copy, dot, einsum, matmul, max, mean, min, prod,
    std, sum, tensordot, var, where,
)
from . import numpy_joins as _numpy_joins  # noqa: F401  (registers vstack, pad, diag, ...)
from . import numpy_scans as _numpy_scans  # noqa: F401  (ufunc methods, cumsum, diff, gradient)
from . import numpy_writes as _numpy_writes  # noqa: F401  (registers copyto, put, ...)
from . import numpy_linalg as _numpy_linalg  # noqa: F401  (qr by TSQR, svd, solve, ...)
from . import numpy_norms as _numpy_norms  # noqa: F401  (np.linalg.norm)
from . import numpy_products as _numpy_products  # noqa: F401  (outer, inner, kron, cross)
from . import numpy_select as _numpy_select  # noqa: F401  (take, nonzero, compress, ...)
from . import numpy_sort as _numpy_sort  # noqa: F401  (sort, unique, quantile, ...)
from . import numpy_counting as _numpy_counting  # noqa: F401  (searchsorted, bincount, histogram)
from . import numpy_sets as _numpy_sets  # noqa: F401  (isin, intersect1d, union1d, setdiff1d)
from . import numpy_block as _numpy_block  # noqa: F401  (np.block)
from . import numpy_stats as _numpy_stats  # noqa: F401  (isclose, round, cov, ...)
from . import numpy_nan as _numpy_nan  # noqa: F401  (nansum, nanmean, ...)
from .numpy_shapes import (
    broadcast_to, concatenate, expand_dims, moveaxis, ravel, reshape, squeeze, stack, swapaxes,
    transpose,
)
from .ops.user_rules import register_sharding
from .placement import Partial, Replicate, Shard
from .spec import DTensorSpec  # an abstract leaf for mt.load(path, like=...)
from .redistribute.calibrate import calibrate
from .redistribute.cost import CostModel, get_cost_model, set_cost_model
from .trace_compile.compile import compile, explain

__all__ = [
    "CollectiveMismatchError", "CommDebugMode", "custom_vjp", "local_map", "CostModel", "DTensor", "DeviceMesh", "Partial", "Replicate", "Shard", "all", "any",
    "arange", "auto_shard", "argmax", "argmin", "astype", "broadcast_to", "calibrate", "clip", "compile", "concatenate", "copy", "dot",
    "asnumpy", "einsum", "empty", "empty_like", "expand_dims", "explain", "full", "full_like", "distribute_tensor", "get_cost_model", "grad",
    "init_device_mesh", "load", "matmul", "optim", "max", "mean", "min", "moveaxis", "ones", "ones_like", "prod",
    "random", "ravel", "register_sharding", "reshape", "save", "set_abort_on_error", "set_checks", "set_cost_model", "set_timeout", "shard_hint", "squeeze", "stack", "std", "stop_gradient", "sum", "swapaxes", "tensordot",
    "transpose", "value_and_grad", "var", "visualize_sharding", "where", "zeros", "zeros_like",
]
from .version import __version__

_install_array_methods(DTensor)   # numpy's operators and methods on DTensor
_guard.configure_from_env()
