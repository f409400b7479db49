"""mtensor: eager distributed tensors over MPI, in the spirit of PyTorch's DTensor.

The public names, by layer (``docs/design.md`` has the layout of the package)."""
# numpy's API (every section in mt.numpy; the most used ones here too)
# programs: gradients and escape hatches, optimizers, compile, auto_shard, checkpoints
from . import array_api, numpy, optim, pipeline, random, testing
from .autodiff.api import grad, stop_gradient, value_and_grad
from .autodiff.custom_vjp import custom_vjp
from .autodiff.local_map import local_map
from .autodiff.remat import remat
from .autoshard import auto_shard, shard_hint
from .checkpoint import load, save

# reliability
from .comm import guard as _guard
from .comm.abort import set_abort_on_error
from .comm.guard import CollectiveMismatchError, set_checks, set_timeout

# meshes and the cost model
from .cost import CostModel, get_cost_model, set_cost_model
from .debug import CommDebugMode, visualize_sharding

# the tensor
from .dtensor import DTensor, asnumpy, distribute_tensor
from .halo import halo
from .mesh import DeviceMesh, calibrate, init_device_mesh
from .numpy import (
    all,
    any,
    arange,
    argmax,
    argmin,
    astype,
    broadcast_to,
    clip,
    concatenate,
    copy,
    dot,
    einsum,
    empty,
    empty_like,
    expand_dims,
    full,
    full_like,
    matmul,
    max,
    mean,
    min,
    moveaxis,
    ones,
    ones_like,
    prod,
    ravel,
    reshape,
    squeeze,
    stack,
    std,
    sum,
    swapaxes,
    tensordot,
    transpose,
    var,
    where,
    zeros,
    zeros_like,
)
from .ops.user_rules import register_sharding

# values: placements and specs
from .placement import Partial, Replicate, Shard
from .spec import DTensorSpec  # an abstract leaf for mt.load(path, like=...)
from .trace_compile.compile import compile, explain
from .version import __version__

__all__ = [
    "CollectiveMismatchError", "CommDebugMode", "CostModel", "DTensor", "DTensorSpec",
    "DeviceMesh", "Partial", "Replicate", "Shard", "__version__", "all", "any", "arange", "array_api",
    "argmax", "argmin", "asnumpy", "astype", "auto_shard", "broadcast_to", "calibrate",
    "clip", "compile", "concatenate", "copy", "custom_vjp", "distribute_tensor", "dot",
    "einsum", "empty", "empty_like", "expand_dims", "explain", "full", "full_like",
    "get_cost_model", "grad", "halo", "init_device_mesh", "load", "local_map", "matmul", "max",
    "mean", "min", "moveaxis", "numpy", "ones", "ones_like", "optim", "pipeline", "prod",
    "random",
    "ravel", "register_sharding", "remat", "reshape", "save", "set_abort_on_error", "set_checks",
    "set_cost_model", "set_timeout", "shard_hint", "squeeze", "stack", "std",
    "stop_gradient", "sum", "swapaxes", "tensordot", "testing", "transpose",
    "value_and_grad", "var", "visualize_sharding", "where", "zeros", "zeros_like",
]

_guard.configure_from_env()
