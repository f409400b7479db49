"""numpy functions that look at an array rather than compute on it: printing
(``array_str``, ``array_repr``, ``array2string``: of the whole value, gathered, as printing
asks), dtype questions (``iscomplexobj``, ``isrealobj``, ``min_scalar_type``,
``common_type``) and memory (``shares_memory``, ``may_share_memory``: of the blocks, agreed).
"""
from __future__ import annotations

import numpy as np

from ..dtensor import DTensor, asnumpy
from ..placement import Partial
from .util import agreed, implements


def _host(a):
    return asnumpy(a) if type(a) is DTensor else a


@implements(np.array_str)
def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    return np.array_str(_host(a), max_line_width, precision, suppress_small)


@implements(np.array_repr)
def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    return np.array_repr(_host(arr), max_line_width, precision, suppress_small)


@implements(np.array2string)
def array2string(a, *args, **kwargs):
    return np.array2string(_host(a), *args, **kwargs)


def _dtype(x):
    return x.dtype if type(x) is DTensor else np.asarray(x).dtype


@implements(np.iscomplexobj)
def iscomplexobj(x):
    return _dtype(x).kind == "c"


@implements(np.isrealobj)
def isrealobj(x):
    return _dtype(x).kind != "c"


@implements(np.min_scalar_type)
def min_scalar_type(a):
    """An array's own dtype (numpy's rule for non-scalars); a 0-d DTensor's value's."""
    if type(a) is DTensor and a.ndim == 0:
        return np.min_scalar_type(a.item())
    return np.min_scalar_type(a) if type(a) is not DTensor else a.dtype


@implements(np.common_type)
def common_type(*arrays):
    return np.common_type(*(np.empty(0, _dtype(a)) for a in arrays))


def _blocks_share(name, fn, a, b, max_work):
    """Whether the two share memory on any rank: each rank asks of its blocks, and the
    answers meet in one all-reduce (a Partial max read as a bool)."""
    blocks = [x._block() if type(x) is DTensor else x for x in (a, b)]
    mine = fn(*blocks) if max_work is None else fn(*blocks, max_work=max_work)
    mesh = next(x.device_mesh for x in (a, b) if type(x) is DTensor)
    flag = DTensor.from_local(np.asarray(int(mine)), mesh, [Partial("max")] * mesh.ndim,
                              shape=())
    return agreed(name, flag)


@implements(np.shares_memory)
def shares_memory(a, b, max_work=None):
    return _blocks_share("shares_memory", np.shares_memory, a, b, max_work)


@implements(np.may_share_memory)
def may_share_memory(a, b, max_work=None):
    return _blocks_share("may_share_memory", np.may_share_memory, a, b, max_work)
