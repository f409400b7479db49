"""Where a collective's data sits in its buffers: MPI concatenates contiguous segments, so the
tensor dim a step gathers, scatters or exchanges moves to the front (contiguous), and an
all-to-all's send buffer holds its pieces for each peer one after another."""
from __future__ import annotations

import math

import numpy as np

from ..device import arrays as device
from ..device import buffers
from ..placement import shard_bounds


def same(a):
    return a


def front_shape(shape, dim):
    return (shape[dim],) + shape[:dim] + shape[dim + 1:]


def _front_axes(ndim, dim):
    """Transpose axes that move ``dim`` to the front (np.moveaxis, minus its overhead)."""
    return (dim,) + tuple(a for a in range(ndim) if a != dim)


def to_front(a: np.ndarray, dim: int) -> np.ndarray:
    """``a`` with ``dim`` moved to axis 0, C-contiguous (no copy when it already is)."""
    if dim == 0:
        return device.contiguous(a)
    out = device.empty(front_shape(a.shape, dim), a.dtype, like=a)
    np.copyto(out, a.transpose(_front_axes(a.ndim, dim)))
    return out


def _back_axes(ndim, dim):
    """Transpose axes that undo :func:`_front_axes`: axis 0 goes back to ``dim``."""
    return tuple(range(1, dim + 1)) + (0,) + tuple(range(dim + 1, ndim))


def from_front(a: np.ndarray, dim: int) -> np.ndarray:
    """Inverse of :func:`to_front`."""
    if dim == 0:
        return a
    moved = a.transpose(_back_axes(a.ndim, dim))
    out = device.empty(moved.shape, a.dtype, like=a)
    np.copyto(out, moved)
    return out


def moved(d):
    """(prepare, finish) of a collective over tensor dim ``d``: to the front and back, or
    no call at all for dim 0 (a small collective's added cost is its Python calls)."""
    if d == 0:
        return device.contiguous, same
    return (lambda local: to_front(local, d)), (lambda out: from_front(out, d))


def pack_even(shape, d, e, n, dtype):
    """Send buffer for an even split of dim e: one reshape, one strided copy."""
    small = math.prod(shape) * dtype.itemsize < buffers.MIN_BYTES
    split = shape[:e] + (n, shape[e] // n) + shape[e + 1:]
    moved_d = d if d < e else d + 1
    axes = (e, moved_d) + tuple(a for a in range(len(split)) if a not in (e, moved_d))

    def pack(local):
        chunks = local.reshape(split).transpose(axes)
        if small and type(local) is np.ndarray:     # numpy's own copy: no pool to look in
            return np.ascontiguousarray(chunks).reshape(-1)
        send = device.empty(chunks.shape, local.dtype, like=local)
        np.copyto(send, chunks)
        return send.reshape(-1)
    return pack


def pack_uneven(shape, d, e, n, counts):
    """Send buffer for an uneven split of dim e: chunk k (dim d first) copied to its slot."""
    index = [(slice(None),) * e + (slice(*shard_bounds(shape[e], n, k)),) for k in range(n)]
    offsets = np.cumsum((0,) + tuple(counts))

    axes = _front_axes(len(shape), d)

    def pack(local):
        send = device.empty((local.size,), local.dtype, like=local)
        for k in range(n):
            chunk = local[index[k]].transpose(axes)
            send[offsets[k]:offsets[k + 1]].reshape(chunk.shape)[...] = chunk
        return send
    return pack
