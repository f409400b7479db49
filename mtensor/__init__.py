"""mtensor: eager distributed tensors over MPI, in the spirit of PyTorch's DTensor."""
from . import checkpoint, optim, random
from .autodiff import vjps as _vjps  # noqa: F401  (registers the gradient rules)
from .autodiff.api import grad, value_and_grad
from .comm import guard as _guard
from .comm.abort import set_abort_on_error
from .comm.guard import CollectiveMismatchError, set_checks, set_timeout
from .checkpoint import load, save
from .creation import arange, empty, empty_like, full, full_like, ones, ones_like, zeros, zeros_like
from .debug import CommDebugMode, visualize_sharding
from .array_methods import install as _install_array_methods
from .dtensor import DTensor, distribute_tensor
from .mesh import DeviceMesh, init_device_mesh
from .numpy_api import (
    all, any, argmax, argmin, astype, clip, copy, dot, einsum, matmul, max, mean, min, prod,
    std, sum, tensordot, var, where,
)
from . import numpy_joins as _numpy_joins  # noqa: F401  (registers vstack, pad, diag, ...)
from . import numpy_scans as _numpy_scans  # noqa: F401  (ufunc outer/reduce/accumulate, cumsum)
from . import numpy_writes as _numpy_writes  # noqa: F401  (registers copyto, put, ...)
from .numpy_shapes import (
    broadcast_to, concatenate, expand_dims, moveaxis, ravel, reshape, squeeze, stack, swapaxes,
    transpose,
)
from .placement import Partial, Replicate, Shard
from .redistribute.calibrate import calibrate
from .redistribute.cost import CostModel, get_cost_model, set_cost_model
from .trace_compile.compile import compile, explain

__all__ = [
    "CollectiveMismatchError", "CommDebugMode", "CostModel", "DTensor", "DeviceMesh", "Partial", "Replicate", "Shard", "all", "any",
    "arange", "argmax", "argmin", "astype", "broadcast_to", "calibrate", "clip", "compile", "concatenate", "copy", "dot",
    "einsum", "empty", "empty_like", "expand_dims", "explain", "full", "full_like", "distribute_tensor", "get_cost_model", "grad",
    "init_device_mesh", "load", "matmul", "optim", "max", "mean", "min", "moveaxis", "ones", "ones_like", "prod",
    "random", "ravel", "reshape", "save", "set_abort_on_error", "set_checks", "set_cost_model", "set_timeout", "squeeze", "stack", "std", "sum", "swapaxes", "tensordot",
    "transpose", "value_and_grad", "var", "visualize_sharding", "where", "zeros", "zeros_like",
]
from .version import __version__

_install_array_methods(DTensor)   # numpy's operators and methods on DTensor
_guard.configure_from_env()
