"""DTensorSpec (mesh, placements, global shape, dtype) and the one place specs are validated.

Every check here reads rank-independent data only, so every rank raises the same error
before any collective starts and no rank is left waiting.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence, Tuple

import numpy as np

from .placement import Partial, Placement, Replicate, Shard, local_shape, mesh_coords


@dataclass(frozen=True)
class DTensorSpec:
    mesh: object
    placements: Tuple[Placement, ...]
    shape: Tuple[int, ...]
    dtype: np.dtype
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        # Specs key every dispatch cache: hash once, not field by field on each lookup.
        object.__setattr__(self, "_hash", hash((self.mesh, self.placements, self.shape,
                                                self.dtype)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def device(self) -> str:
        """The device type of the blocks (the mesh's: a mesh holds one kind of block, so
        operands on different devices live on different meshes, which ops refuse)."""
        return self.mesh.device_type

    def __repr__(self) -> str:
        return f"Spec({list(self.placements)}, shape={self.shape}, dtype={self.dtype})"


def fmt_placements(placements) -> str:
    return "[" + ", ".join(repr(p) for p in placements) + "]"


def check_placements(
    op: str, placements: Sequence[Placement], mesh, shape: Tuple[int, ...]
) -> Tuple[Placement, ...]:
    """Validate ``placements`` for a tensor of ``shape`` on ``mesh``; Shard(-1) becomes Shard(ndim-1)."""
    return _check_placements(op, tuple(placements), mesh.shape, tuple(shape))


@lru_cache(maxsize=4096)
def _check_placements(op, placements, mesh_shape, shape):
    bad = [p for p in placements if not isinstance(p, (Shard, Replicate, Partial))]
    if bad:
        raise TypeError(
            f"{op}: placements must be Shard(dim), Replicate() or Partial(op); got {bad[0]!r}"
        )
    if len(placements) != len(mesh_shape):
        raise ValueError(
            f"{op}: placements {fmt_placements(placements)} have {len(placements)} entries but the mesh "
            f"{mesh_shape} has {len(mesh_shape)} dims; give one placement per mesh dim"
        )
    ndim = len(shape)
    out = []
    for p in placements:
        if isinstance(p, Shard):
            if not -ndim <= p.dim < ndim:
                raise ValueError(
                    f"{op}: placements {fmt_placements(placements)} shard tensor dim {p.dim} but the tensor "
                    f"has shape {tuple(shape)} ({ndim} dims); shard a dim in "
                    f"range(-{ndim}, {ndim}) or use Replicate()"
                )
            p = Shard(p.dim % ndim)
        out.append(p)
    return tuple(out)


def check_dtype(op: str, dtype) -> None:
    """Structured dtypes are refused up front: ops, reductions and collectives on records
    have no meaning mtensor can keep, and a field read would fail later and unclearly."""
    if dtype.fields is not None:
        raise TypeError(
            f"{op}: the structured dtype {dtype} is not supported; distribute each field as "
            f"its own DTensor (e.g. data['{next(iter(dtype.fields))}'] of the numpy array)")


def check_shape(op: str, shape, ndim: int) -> Tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if len(shape) != ndim or any(s < 0 for s in shape):
        raise ValueError(
            f"{op}: shape {shape} does not fit a {ndim}-D local block; give {ndim} sizes >= 0"
        )
    return shape


def check_same_mesh(op: str, mesh_a, mesh_b) -> None:
    if mesh_a != mesh_b:
        devices = (f" and devices ({mesh_a.device_type} and {mesh_b.device_type})"
                   if mesh_a.device_type != mesh_b.device_type else "")
        raise ValueError(
            f"{op}: operands live on different meshes ({mesh_a} and {mesh_b}){devices}; "
            f"redistribute one onto the other's mesh first"
        )


def check_no_partial_target(op: str, placements) -> None:
    if any(isinstance(p, Partial) for p in placements):
        raise ValueError(
            f"{op}: target placements {fmt_placements(placements)} contain Partial; a Partial layout can "
            f"only come out of an op, redistribute to Replicate() or Shard(dim) instead"
        )


def check_target_placements(op: str, placements: Sequence[Placement], mesh,
                            shape: Tuple[int, ...]) -> Tuple[Placement, ...]:
    """``check_placements`` for a layout a user asks for (Partial refused), cached: an
    eager redistribute in a loop checks the same request over and over."""
    return _check_target(op, tuple(placements), mesh.shape, tuple(shape))


@lru_cache(maxsize=4096)
def _check_target(op, placements, mesh_shape, shape):
    out = _check_placements(op, placements, mesh_shape, shape)
    check_no_partial_target(op, out)
    return out


def infer_global_shape(blocks, mesh_shape, placements) -> Tuple[int, ...]:
    """Global shape from every rank's ``(local shape, dtype)``: along a sharded tensor dim, add
    the blocks of the ranks at coordinate 0 on every mesh dim that does not shard it."""
    shape = list(blocks[0][0])
    for d in range(len(shape)):
        sharding = {i for i, p in enumerate(placements) if p == Shard(d)}
        if sharding:
            shape[d] = sum(
                block[0][d] if len(block[0]) > d else 0
                for block, c in zip(blocks, mesh_coords(mesh_shape))
                if all(c[i] == 0 for i in range(len(c)) if i not in sharding)
            )
    return tuple(shape)


def check_local_shapes(blocks, mesh_shape, placements, shape) -> None:
    """Every rank's block must have the dtype of rank 0 and the array_split shape of ``shape``.

    ``blocks`` holds every rank's ``(local shape, dtype)``, so all ranks raise alike.
    """
    dtypes = [np.dtype(b[1]) for b in blocks]
    for rank, dtype in enumerate(dtypes):
        if dtype != dtypes[0]:
            raise ValueError(
                f"from_local: rank {rank} holds dtype {dtype} but rank 0 holds {dtypes[0]}; "
                f"every rank must pass blocks of one dtype"
            )
    for rank, (block, c) in enumerate(zip(blocks, mesh_coords(mesh_shape))):
        want = local_shape(shape, mesh_shape, placements, c)
        if tuple(block[0]) != want:
            raise ValueError(
                f"from_local: rank {rank} (mesh coordinate {list(c)}) holds a block of shape "
                f"{tuple(block[0])} but placements {fmt_placements(placements)} of global shape {shape} "
                f"give it {want} (numpy.array_split layout); pass blocks split that way, or "
                f"the right shape="
            )
