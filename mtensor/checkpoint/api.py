"""``save`` and ``load``: who writes and reads what, and how every rank learns of an error.

Each call alternates local work and one small ``allgather_object`` of an error text (or
None): every rank checks and does what it can, then all ranks see every rank's outcome and
raise the same ``CheckpointError`` together.  So a rank that cannot read a chunk or write a
file never leaves the others waiting in a collective: the only collectives are these
agreements and the reduction of Partial leaves, and each is reached by every rank.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil

import numpy as np

from ..dtensor import DTensor, guarded
from ..mesh import mpi_running, world_mesh
from ..version import __version__
from ..placement import Partial, local_slices, reduced
from ..pytree import flatten
from . import layout, store


class CheckpointError(RuntimeError):
    """A save or load failed; raised on every rank, with what each rank saw."""


class _Group:
    """The ranks that call together: the DTensor leaves' mesh, else every rank when MPI is
    running (never loaded here if it is not), else this process alone."""

    def __init__(self, leaves):
        meshes = {x.device_mesh for x in leaves if isinstance(x, DTensor)}
        self.mesh = max(meshes, key=lambda m: m.size(), default=None)
        if self.mesh is not None:
            ranks = set(self.mesh._world_ranks)
            if any(set(m._world_ranks) != ranks for m in meshes):
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


def _attempt(fn):
    """Run one rank's share of a phase; the error text (None if it went well)."""
    try:
        fn()
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def _raise_if_any(op: str, errors) -> None:
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


def _agree(group: _Group, op: str, error, cleanup=None) -> None:
    errors = group.allgather(error)
    if any(errors) and cleanup and group.rank == 0:
        shutil.rmtree(cleanup, ignore_errors=True)
    _raise_if_any(op, errors)


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


def _write_blocks(group, tmp, entries, blocks, durable) -> None:
    """This rank's share of the data: its DTensor blocks where it is the one writer of a
    replicated block, the numpy leaves on rank 0; then fsync of the chunk files."""
    root, written = store.open_group(tmp, mode="r+"), []
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
            region, block = tuple(slice(0, s) for s in x.shape), np.asarray(x)
        else:
            continue
        if block.size:
            store.write_region(root, name, region, block)
            written += store.chunk_files(tmp, name, region, entry["chunks"])
    if durable:
        store.fsync(written)                   # metadata and directories: rank 0, at commit


def save(path, state, keep=None, *, durable: bool = True) -> None:
    """Save the pytree ``state`` to the directory ``path``; every rank calls it (collective).

    Leaves: DTensors (each rank writes its own block's chunks; a replicated block once, a
    Partial one reduced first), numpy arrays and scalars (the same on every rank: rank 0
    writes them), Python ``int``/``float``/``str``/``bool``/``None``.  The data goes to
    ``path.tmp-*``; ``path`` appears (or is replaced) only once all of it is written and
    ``COMMITTED``.  ``keep=N``: ``path`` ends with a step number (``run/step-00010``);
    after the commit, only the N highest-numbered committed siblings with the same prefix
    stay.  ``durable``: fsync data, metadata and directories before publishing.
    """
    path = os.path.abspath(os.fspath(path))
    leaves, paths = layout.leaf_paths(state)
    group, plan = _Group(leaves), {}

    def prepare():      # every rank describes the leaves; rank 0 makes the temp root group
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

    gathered = group.allgather((_attempt(prepare), plan.get("digest"), plan.get("tmp")))
    errors, tmp = [g[0] for g in gathered], gathered[0][2]
    if not any(errors) and len({g[1] for g in gathered}) > 1:
        errors = ["ranks disagree on the state's leaves, their shapes, dtypes or layouts"]
    if any(errors) and group.rank == 0 and tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    _raise_if_any("save", errors)

    arrays = [(n, e) for n, e in plan["entries"].items() if e["kind"] == "array"]
    mine = arrays[group.rank::group.size]      # array metadata: shared out over the ranks
    _agree(group, "save", _attempt(lambda: store.create_arrays(tmp, mine)), cleanup=tmp)
    blocks = [x.redistribute(x.device_mesh, reduced(x.placements))
              if isinstance(x, DTensor) and any(isinstance(p, Partial) for p in x.placements)
              else x for x in leaves]           # collective: every rank, in leaf order
    _agree(group, "save", _attempt(lambda: _write_blocks(group, tmp, plan["entries"], blocks,
                                                         durable)), cleanup=tmp)
    error = None
    if group.rank == 0:
        error = _attempt(lambda: store.commit(tmp, path, keep, durable))
    _agree(group, "save", error and f"{error} (the written data stays in {tmp})")


def _mismatch(leaf, entry, where):
    """Why the stored leaf cannot fill the template leaf (None: it can)."""
    if entry is None:
        return f"leaf {where} is not in the checkpoint"
    array_like = isinstance(leaf, (DTensor, np.ndarray, np.generic))
    if entry["kind"] != ("array" if array_like else "scalar"):
        return f"leaf {where}: the template holds {type(leaf).__name__}, the checkpoint a " \
               f"{'n array' if entry['kind'] == 'array' else 'scalar'}"
    if array_like:
        mine = (tuple(np.shape(leaf)), np.dtype(leaf.dtype))
        stored = (tuple(entry["shape"]), np.dtype(entry["dtype"]))
        if mine != stored:
            return f"leaf {where}: the template has shape {mine[0]} {mine[1]}, the checkpoint " \
                   f"{stored[0]} {stored[1]}"
    return None


def load(path, like=None):
    """The checkpoint at ``path`` as a pytree shaped like the template ``like``.

    DTensor leaves come back on the template leaf's mesh and placements (any mesh, any
    rank count: each rank reads only the chunks that overlap its block; Partial targets
    are filled as distribute_tensor does); numpy leaves whole; scalars as stored.  A
    collective over the template's ranks.  ``like=None``: no collective, every array whole
    as numpy, in the saved structure (for one plain process).
    """
    path = os.path.abspath(os.fspath(path))
    if like is None:
        group, manifest = store.open_checkpoint(path)
        values = {n: layout.decode_scalar(e["value"]) if e["kind"] == "scalar"
                  else _read_whole(group, n, e) for n, e in manifest["leaves"].items()}
        return layout.decode_structure(manifest["structure"], values)
    leaves, rebuild = flatten(like)
    _, paths = layout.leaf_paths(like)
    group = _Group(leaves)
    error, entries = None, []
    try:
        names = layout.unique_names(paths)
        root, manifest = store.open_checkpoint(path)
        entries = [manifest["leaves"].get(n) for n in names]
        problems = [_mismatch(x, e, layout.path_text(p)) for x, p, e in zip(leaves, paths, entries)]
        if any(problems):
            raise ValueError("; ".join(filter(None, problems)))
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    _agree(group, "load", error)

    error, values = None, []
    try:
        for leaf, name, entry in zip(leaves, names, entries):
            if isinstance(leaf, DTensor):
                mesh, target = leaf.device_mesh, reduced(leaf.placements)
                region = local_slices(leaf.shape, mesh.shape, target, mesh.coordinate)
                values.append(_native(root[name][region]))
            elif entry["kind"] == "array":
                values.append(_read_whole(root, name, entry))
            else:
                values.append(layout.decode_scalar(entry["value"]))
    except Exception as e:
        where = layout.path_text(paths[len(values)])
        error = f"{type(e).__name__}: {e} (reading leaf {where} of {path})"
    _agree(group, "load", error)
    out = []
    for leaf, value in zip(leaves, values):
        if isinstance(leaf, DTensor):
            target = reduced(leaf.placements)
            value = DTensor.from_local(value, leaf.device_mesh, target, shape=leaf.shape)
            if target != tuple(leaf.placements):
                value = value._redistribute(tuple(leaf.placements))   # local R -> P
        out.append(value)
    return rebuild(out)


def _read_whole(group, name, entry):
    value = _native(group[name][...])
    return value[()] if entry.get("source") == "numpy_scalar" else value


def _native(block):
    """zarr hands back explicitly little-endian dtypes ('<i8'); MPI needs the native one
    ('int64'), or a reduction of the block finds its send and receive types differ."""
    return np.require(block, dtype=block.dtype.newbyteorder("="), requirements="C")
