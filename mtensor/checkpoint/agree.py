"""How every rank of a save or load learns of every rank's error, and raises it together.

Each phase runs one rank's share of the work (``attempt``), then one small
``allgather_object`` of the error text (or None) and of anything the ranks must pool (the
digests of the chunks each one wrote): so a rank that cannot read a chunk or write a file
never leaves the others waiting in a collective.
"""
from __future__ import annotations

import shutil

import numpy as np

from ..dtensor import guarded
from ..mesh.device_mesh import mpi_running, world_mesh


class CheckpointError(RuntimeError):
    """A save or load failed (a missing, stale or corrupt chunk, a template that does not fit,
    a file that cannot be written); raised on every rank, with what each rank saw."""


class Group:
    """The ranks that call together: the meshes' ranks, else every rank when MPI is running
    (never loaded here if it is not), else this process alone."""

    def __init__(self, meshes):
        meshes = set(meshes)
        self.mesh = max(meshes, key=lambda m: m.size(), default=None)
        if self.mesh is not None:
            ranks = set(self.mesh.world_ranks)
            if any(set(m.world_ranks) != ranks for m in meshes):
                raise ValueError("mtensor.checkpoint: DTensor leaves live on meshes over "
                                 "different ranks; every leaf's mesh must span the same "
                                 "ranks (sub-meshes: save from the whole mesh)")
        elif mpi_running():
            self.mesh = world_mesh()
        self.rank = 0 if self.mesh is None else self.mesh.comm.rank
        self.size = 1 if self.mesh is None else self.mesh.size()

    def allgather(self, obj) -> list:
        if self.mesh is None:
            return [obj]
        with guarded("checkpoint", "allgather", (), np.uint8, self.mesh):
            return self.mesh.communicator().allgather_object(obj)


def attempt(fn):
    """Run one rank's share of a phase; the error text (None if it went well)."""
    try:
        fn()
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def raise_if_any(op: str, errors) -> None:
    """Raise on this rank if any rank failed, naming the ranks of each distinct error."""
    by_text = {}
    for r, e in enumerate(errors):
        if e:
            by_text.setdefault(e, []).append(r)
    if len(by_text) == 1 and len(next(iter(by_text.values()))) == len(errors):
        raise CheckpointError(f"mtensor.checkpoint.{op}: {next(iter(by_text))} (on every rank)")
    if by_text:
        raise CheckpointError(f"mtensor.checkpoint.{op}: " + "; ".join(
            f"rank{'s' * (len(r) > 1)} {', '.join(map(str, r))}: {e}" for e, r in by_text.items()))


def agree(group: Group, op: str, error, cleanup=None, pooled=None) -> list:
    """Every rank's ``pooled`` value, once no rank reported an error; else the same
    ``CheckpointError`` on every rank (rank 0 first removes ``cleanup``, a temp directory)."""
    gathered = group.allgather((error, pooled))
    errors = [g[0] for g in gathered]
    if any(errors) and cleanup and group.rank == 0:
        shutil.rmtree(cleanup, ignore_errors=True)
    raise_if_any(op, errors)
    return [g[1] for g in gathered]
