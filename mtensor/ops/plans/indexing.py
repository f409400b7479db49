"""numpy indexing as data, and which part of an index falls in one rank's block.

A key is normalized to one entry per key position: ``("n",)`` for None, ``("i", k)`` for an
int, ``("s", start, stop, step)`` for a slice, ``("a", array)`` for an integer array (bool
masks become their ``nonzero()`` arrays, as numpy does; once any array is present, ints count
as 0-d arrays, as in numpy).  The *region* is ``x[key]``: its shape follows numpy's rule for
where the broadcast array dims go (at the first array's place when no slice separates the
arrays, else in front).

``block_plan`` answers, for a block with global ``bounds``, which elements of the region it
holds: ``block[block_key]`` and ``region[region_key]`` are the same elements in the same
order.  Getitem (the fill strategy), setitem and ``ufunc.at`` all run on that answer.
Nothing here talks to MPI.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from ...placement import Partial, Replicate, Shard


def _is_int(k) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _as_index_array(k, op: str):
    """A list or array index as an integer array (bool masks stay bool)."""
    arr = np.asarray(k)
    if arr.size == 0 and not isinstance(k, np.ndarray):
        arr = arr.astype(np.intp)   # numpy reads an empty list or tuple as no integers
    if arr.dtype == object or arr.dtype.kind not in "biu":
        raise IndexError(f"{op}: only integers, slices, None, ..., and integer or boolean "
                         f"arrays are valid indices; got {type(k).__name__} of dtype "
                         f"{arr.dtype}")
    return arr


def normalize_index(key, shape, op: str = "getitem") -> tuple:
    """``x[key]`` for ``x`` of ``shape`` as a tuple of entries (see the module docstring).

    Raises IndexError (alike on every rank: the key is the same everywhere) for a bad key."""
    key = key if isinstance(key, tuple) else (key,)
    expanded = []
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, slice) or _is_int(k):
            expanded.append(k)
        elif isinstance(k, (bool, np.bool_)):
            raise IndexError(f"{op}: a bare bool index ({k!r}) is not supported on DTensors; "
                             f"index with a boolean array of the indexed dims' shape")
        else:
            arr = _as_index_array(k, op)
            if arr.dtype.kind == "b":
                expanded.append(("mask", arr))
            else:
                expanded.append(("a", arr))
    used = sum(e[1].ndim if isinstance(e, tuple) and e[0] == "mask" else
               0 if e is None or e is Ellipsis else 1 for e in expanded)
    if used > len(shape):
        raise IndexError(f"{op}: index {key!r} has too many entries for shape {tuple(shape)}")
    if sum(e is Ellipsis for e in expanded) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    if Ellipsis not in expanded:
        expanded.append(Ellipsis)
    at = expanded.index(Ellipsis)
    expanded[at:at + 1] = [slice(None)] * (len(shape) - used)
    fancy = any(isinstance(e, tuple) for e in expanded)
    out, d = [], 0
    for e in expanded:
        if e is None:
            out.append(("n",))
            continue
        if isinstance(e, tuple) and e[0] == "mask":
            mask = e[1]
            if mask.shape != tuple(shape[d:d + mask.ndim]):
                raise IndexError(f"{op}: boolean index of shape {mask.shape} does not match "
                                 f"dims {d}..{d + mask.ndim - 1} of shape {tuple(shape)}")
            out.extend(("a", idx) for idx in np.nonzero(mask))
            d += mask.ndim
            continue
        size = shape[d]
        if isinstance(e, slice):
            out.append(("s",) + e.indices(size))
        elif isinstance(e, tuple):
            arr = e[1]
            if arr.size and (arr.min() < -size or arr.max() >= size):
                bad = arr.min() if arr.min() < -size else arr.max()
                raise IndexError(f"{op}: index {int(bad)} is out of bounds for dim {d} of "
                                 f"shape {tuple(shape)} (size {size})")
            out.append(("a", np.where(arr < 0, arr + size, arr).astype(np.intp)))
        elif -size <= e < size:
            k = int(e) % size
            out.append(("a", np.array(k, np.intp)) if fancy else ("i", k))
        else:
            raise IndexError(f"{op}: index {int(e)} is out of bounds for dim {d} of shape "
                             f"{tuple(shape)} (size {size})")
        d += 1
    return tuple(out)


def is_scalar_key(key, ndim: int) -> bool:
    """Whether ``x[key]`` is numpy's scalar read: one integer per dim and nothing else (no
    ``...``, None, slice or array), which numpy answers with a copy, never a view."""
    key = key if isinstance(key, tuple) else (key,)
    return len(key) == ndim and all(_is_int(k) for k in key)


def is_advanced(entries) -> bool:
    return any(e[0] == "a" for e in entries)


def indexed_dims(entries):
    """``(position in the key, entry, tensor dim, result dim)`` of each entry that indexes a
    dim (None entries make a result dim and index none; an int's result dim is where the
    next one goes)."""
    dim, pos = -1, -1
    for at, entry in enumerate(entries):
        pos += entry[0] in "ns"
        if entry[0] != "n":
            dim += 1
            yield at, entry, dim, pos


def is_whole(entry, size) -> bool:
    return entry[0] == "s" and entry[1:] == (0, size, 1)


def _fancy_shape(entries) -> Tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*[e[1].shape for e in entries if e[0] == "a"]))
    except ValueError:
        shapes = " ".join(str(e[1].shape) for e in entries if e[0] == "a")
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together "
                         f"with shapes {shapes}") from None


def _fancy_position(entries) -> int:
    """Where the broadcast array dims go in the region: at the first array when no slice or
    None lies between the arrays, else in front (numpy's rule)."""
    at = [j for j, e in enumerate(entries) if e[0] == "a"]
    if any(entries[j][0] in "sn" for j in range(at[0], at[-1])):
        return 0
    return sum(e[0] in "sn" for e in entries[:at[0]])


def region_layout(entries, shape) -> Tuple[Tuple[int, ...], List[Optional[int]], tuple]:
    """(region shape, the region dim each target dim maps to when taken whole, the broadcast
    array shape).  Only whole slices map: any other entry picks elements, so the region dim it
    makes has no counterpart to stay split along."""
    regular, whole_to, d = [], [None] * len(shape), 0
    for e in entries:
        if e[0] == "n":
            regular.append(1)
            continue
        if e[0] == "s":
            if is_whole(e, shape[d]):
                whole_to[d] = len(regular)
            regular.append(len(range(*e[1:])))
        d += 1
    if not is_advanced(entries):
        return tuple(regular), whole_to, ()
    fancy = _fancy_shape(entries)
    at = _fancy_position(entries)
    region = tuple(regular[:at]) + fancy + tuple(regular[at:])
    whole_to = [None if r is None else r + (len(fancy) if r >= at else 0) for r in whole_to]
    return region, whole_to, fancy


def _slice(start, stop, step) -> slice:
    """A slice from normalized bounds: a negative stop (stepping down past 0) means None, and
    an empty range stays empty (a negative start would count from the end)."""
    if not len(range(start, stop, step)):
        return slice(0, 0)
    return slice(start, None if stop < 0 else stop, step)


def plain_key(entries) -> tuple:
    """The entries as a key numpy takes (used on a block that holds every picked element)."""
    return tuple(None if e[0] == "n" else e[1] if e[0] in "ia" else _slice(*e[1:])
                 for e in entries)


def _slice_part(entry, lo, hi):
    """The part of a slice entry inside ``[lo, hi)``: (slice of the block, range of the
    region dim)."""
    start, stop, step = entry[1:]
    n = len(range(start, stop, step))
    if step > 0:
        k0, k1 = -(-(lo - start) // step), -(-(hi - start) // step)
    else:
        k0, k1 = -(-(start - hi + 1) // -step), -(-(start - lo + 1) // -step)
    k0, k1 = min(max(k0, 0), n), min(max(k1, 0), n)
    return _slice(start + k0 * step - lo, start + k1 * step - lo, step), (k0, k1)


def block_plan(entries, shape, bounds):
    """(block_key, region_key) for the block with global ``bounds`` (one (lo, hi) per dim):
    ``block[block_key]`` and ``region[region_key]`` are the region's elements this block holds,
    in the same order; None when it holds none.  ``region_key`` holds ``(lo, hi)`` pairs for
    the regular region dims (global, so a caller can shift them into its own block) and index
    arrays for the broadcast array dims."""
    region, _, fancy = region_layout(entries, shape)
    block_key, regular, d = [], [], 0
    arrays = [(j, e[1]) for j, e in enumerate(entries) if e[0] == "a"]
    if arrays:
        grids = np.broadcast_arrays(*[a for _, a in arrays])
        keep = np.ones(fancy, bool)
        for (j, _), g in zip(arrays, grids):
            lo, hi = bounds[_target_dim(entries, j)]
            if (lo, hi) != (0, shape[_target_dim(entries, j)]):
                keep &= (g >= lo) & (g < hi)
        if not keep.any():
            return None
        picked = {j: (g[keep] if fancy else int(g)) - bounds[_target_dim(entries, j)][0]
                  for (j, _), g in zip(arrays, grids)}
    for j, e in enumerate(entries):
        if e[0] == "n":
            block_key.append(None)
            regular.append((0, 1))
            continue
        lo, hi = bounds[d]
        if e[0] == "i":
            if not lo <= e[1] < hi:
                return None
            block_key.append(e[1] - lo)
        elif e[0] == "a":
            block_key.append(picked[j])
        else:
            part, span = _slice_part(e, lo, hi)
            if span[0] == span[1] and len(range(*e[1:])):
                return None
            block_key.append(part)
            regular.append(span)
        d += 1
    if not arrays:
        return tuple(block_key), tuple(regular)
    at = _fancy_position(entries)
    where = tuple(np.nonzero(keep)) if fancy else ()
    region_key = tuple(regular[:at]) + where + tuple(regular[at:])
    return tuple(block_key), region_key


def _target_dim(entries, j) -> int:
    return sum(e[0] != "n" for e in entries[:j])


def region_index(region_key, offsets=None):
    """``region_key`` as a numpy key into a block of the region starting at ``offsets``
    (one per region dim; default 0): pairs become slices, arrays are used as they are."""
    out = []
    for r, k in enumerate(region_key):
        if isinstance(k, tuple):
            shift = 0 if offsets is None else offsets[r]
            out.append(slice(k[0] - shift, k[1] - shift))
        else:
            out.append(k)
    return tuple(out)


def value_placements(entries, shape, placements) -> tuple:
    """Where a value written to ``x[key]`` must be, per mesh dim, so each rank holds what
    it writes: split alike along a dim the key takes whole, whole where the key picks from a
    split dim, and as terms of the same reduction into a Partial target."""
    _, whole_to, _ = region_layout(entries, shape)
    out = []
    for p in placements:
        if isinstance(p, Shard) and whole_to[p.dim] is not None:
            out.append(Shard(whole_to[p.dim]))
        elif isinstance(p, Partial):
            out.append(p)
        else:
            out.append(Replicate())
    return tuple(out)


def check_value_shape(op: str, value_shape: Sequence[int], region) -> Tuple[int, ...]:
    """The value's shape with numpy's leading size-1 dims dropped, or numpy's error."""
    value_shape = tuple(value_shape)
    while len(value_shape) > len(region) and value_shape[0] == 1:
        value_shape = value_shape[1:]
    try:
        if np.broadcast_shapes(value_shape, region) == tuple(region):
            return value_shape
    except ValueError:
        pass
    raise ValueError(f"{op}: could not broadcast input array from shape {value_shape} into "
                     f"shape {tuple(region)}")
