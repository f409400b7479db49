"""``save``: who writes what, the record of the chunks written, and the commit.

Every rank describes the leaves (and all must agree), the ranks share out creating the
arrays' metadata, each rank writes the chunks of its own blocks and records their digests
(``integrity``), and rank 0 commits: the marker holding the pooled record, then the rename.
Each phase ends in ``agree``: an error on any rank is raised on every rank.  A background
save (``blocking=False``) runs the same phases, the writes and the commit in a thread
(``background``).
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil

import numpy as np

from .. import device
from ..device import buffers
from ..dtensor import DTensor
from ..placement import Partial, local_slices, reduced
from ..version import __version__
from . import background, integrity, layout, store
from .agree import Group, agree, attempt, raise_if_any


def _describe(leaf, path, version) -> dict:
    """What the manifest records for one leaf (and the zarr array's attributes)."""
    where = layout.path_text(path)
    entry = {"path": [repr(k) for k in path], "mtensor_version": version}
    if isinstance(leaf, DTensor):
        mesh = leaf.device_mesh
        entry.update(source="dtensor", mesh_shape=list(mesh.shape),
                     mesh_dim_names=None if mesh.mesh_dim_names is None else
                     list(mesh.mesh_dim_names),
                     placements=layout.placement_strings(leaf.placements),
                     written_as=layout.placement_strings(reduced(leaf.placements)))
        shape, dtype = leaf.shape, np.dtype(leaf.dtype)
        points = layout.split_points(shape, mesh.shape, leaf.placements)
    elif isinstance(leaf, (np.ndarray, np.generic)):
        entry["source"] = "numpy" if isinstance(leaf, np.ndarray) else "numpy_scalar"
        shape, dtype, points = leaf.shape, leaf.dtype, [[] for _ in leaf.shape]
    elif layout.number_dtype(leaf):            # a 0-d array: a number to plain zarr readers
        entry.update(source="python", type=type(leaf).__name__)
        shape, dtype, points = (), np.dtype(layout.number_dtype(leaf)), []
    elif isinstance(leaf, layout.SCALAR_TYPES):
        entry.update(kind="scalar", value=layout.encode_scalar(leaf))
        return entry
    else:
        raise TypeError(f"leaf {where}: {type(leaf).__name__} cannot be saved (DTensor, numpy "
                        f"array, numpy scalar, int, float, str, bool or None)")
    if dtype.hasobject:
        raise TypeError(f"leaf {where}: dtype {dtype} holds Python objects; not saved")
    entry.update(kind="array", shape=[int(s) for s in shape], dtype=dtype.str,
                 chunks=list(layout.chunk_shape(tuple(shape), dtype.itemsize, points)))
    return entry


def _stage(group, entries, blocks, copy: bool) -> list:
    """This rank's share of the data as ``(leaf name, region, block)``: its DTensor blocks
    where it is the one writer of a replicated block, the numpy leaves and Python numbers
    on rank 0, on the host (a GPU block copied there).  ``copy``: each block copied to a
    host buffer of its own (a background save: the caller may write its arrays in place as
    soon as ``save`` returns)."""
    out = []
    for (name, entry), x in zip(entries.items(), blocks):
        if entry["kind"] != "array":
            continue
        if isinstance(x, DTensor):
            mesh, placements = x.device_mesh, x.placements
            if not layout.writes_block(placements, mesh.coordinate):
                continue
            region = local_slices(x.shape, mesh.shape, placements, mesh.coordinate)
            block = x.to_local()
        elif group.rank == 0:
            block = np.asarray(x, dtype=entry["dtype"])
            region = tuple(slice(0, s) for s in block.shape)
        else:
            continue
        if block.size:
            out.append((name, region, _copy(block) if copy else device.to_host(block)))
    return out


def _copy(block) -> np.ndarray:
    if type(block) is not np.ndarray:          # a device block: the host copy is a new one
        return device.to_host(block)
    out = buffers.empty(block.shape, block.dtype)      # pooled: no fresh page faults
    np.copyto(out, block)
    return out


def _write(tmp, entries, staged, durable) -> dict:
    """Write the staged blocks, then fsync their chunk files.  Returns ``{leaf name: {chunk
    key: digest}}`` of the chunks written."""
    root, record = store.open_group(tmp, mode="r+"), {}
    for name, region, block in staged:
        store.write_region(root, name, region, block)
        record[name] = integrity.written(tmp, name, region, entries[name]["chunks"])
    if durable:                                # metadata and directories: rank 0, at commit
        store.fsync(os.path.join(tmp, name, *key.split("/"))
                    for name, chunks in record.items() for key in chunks)
    return record


def _pool(records) -> dict:
    """Every rank's record as one ``{leaf name: {chunk key: digest}}`` (for the marker)."""
    chunks = {}
    for part in records:
        for name, digests in part.items():
            chunks.setdefault(name, {}).update(digests)
    return chunks


def save(path, state, keep=None, *, durable: bool = True, blocking: bool = True):
    """Save the pytree ``state`` to the directory ``path``; every rank calls it (collective).

    Leaves: DTensors (each rank writes its own block's chunks; a replicated block once, a
    Partial one reduced first), numpy arrays and scalars (the same on every rank: rank 0
    writes them), Python ``int``/``float``/``str``/``bool``/``None`` (numbers as 0-d
    arrays, int64/float64/bool, which plain zarr readers see as numbers; str, None and
    ints beyond int64 in the manifest's JSON).  The data goes to
    ``path.tmp-*``; ``path`` appears (or is replaced) only once all of it is written and
    ``COMMITTED``.  ``keep=N``: ``path`` ends with a step number (``run/step-00010``);
    after the commit, only the N highest-numbered committed siblings with the same prefix
    stay.  ``durable``: fsync data, metadata and directories before publishing.

    ``blocking=False``: returns a ``SaveHandle`` as soon as the collective part is done
    and this rank's blocks are copied to staging buffers (the state may then be updated
    in place); a thread writes the chunks and rank 0's commits, with no MPI call.
    ``handle.wait()`` (collective) returns once the checkpoint is committed, or raises
    ``CheckpointError`` on every rank naming the path and the failing ranks; a later
    ``save`` (and a ``load`` of the same path) waits for a pending one first, and so raises
    its error if nobody waited.  Same files, checksums and atomic commit as a blocking
    save, which returns None.
    """
    path = os.path.abspath(os.fspath(path))
    leaves, paths = layout.leaf_paths(state)
    group = Group(x.device_mesh for x in leaves if isinstance(x, DTensor))
    background.settle(group)                   # a save in flight: finished first
    tmp, entries = _prepare(group, path, state, keep, leaves, paths)
    blocks = [x.redistribute(x.device_mesh, reduced(x.placements))
              if isinstance(x, DTensor) and any(isinstance(p, Partial) for p in x.placements)
              else x for x in leaves]           # collective: every rank, in leaf order
    staged = []
    error = attempt(lambda: staged.extend(_stage(group, entries, blocks, not blocking)))
    job = background.Job(group, path, tmp, write=lambda: _write(tmp, entries, staged, durable),
                         commit=lambda records: store.commit(tmp, path, keep, durable,
                                                             _pool(records)), error=error)
    if not blocking:
        return background.SaveHandle(job)
    record, error = job.write_share()
    records = agree(group, "save", error, cleanup=tmp, pooled=record)
    agree(group, "save", job.commit_share(records) if group.rank == 0 else None)
    return None


def _prepare(group, path, state, keep, leaves, paths):
    """Every rank describes the leaves (all must agree); rank 0 makes the temp directory
    with the root group, then the ranks share out creating the arrays' metadata.
    Returns ``(temp directory, {leaf name: manifest entry})``."""
    plan = {}

    def prepare():
        if keep is not None:
            if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
                raise ValueError(f"keep={keep!r}: pass a number of checkpoints >= 1, or None")
            layout.to_delete(os.path.basename(path), [], keep)      # checks the name
        names = layout.unique_names(paths)
        plan["entries"] = {n: _describe(x, p, __version__)
                           for n, x, p in zip(names, leaves, paths)}
        plan["digest"] = hashlib.sha1(repr((path, keep, plan["entries"])).encode()).hexdigest()
        if group.rank == 0:
            plan["tmp"] = f"{path}.tmp-{os.getpid()}-{secrets.token_hex(3)}"
            store.create_root(plan["tmp"], {
                "format": layout.FORMAT, "mtensor_version": __version__,
                "leaves": plan["entries"], "order": names,
                "structure": layout.encode_structure(state, iter(names))})

    gathered = group.allgather((attempt(prepare), plan.get("digest"), plan.get("tmp")))
    errors, tmp = [g[0] for g in gathered], gathered[0][2]
    if not any(errors) and len({g[1] for g in gathered}) > 1:
        errors = ["ranks disagree on the state's leaves, their shapes, dtypes or layouts"]
    if any(errors) and group.rank == 0 and tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    raise_if_any("save", errors)

    arrays = [(n, e) for n, e in plan["entries"].items() if e["kind"] == "array"]
    mine = arrays[group.rank::group.size]      # array metadata: shared out over the ranks
    agree(group, "save", attempt(lambda: store.create_arrays(tmp, mine)), cleanup=tmp)
    return tmp, plan["entries"]
