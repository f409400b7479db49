"""``load``: a checkpoint onto a template, onto a mesh and placements, or whole.

The three forms share one path.  Each leaf gets a target: a ``DTensorSpec`` (this rank
reads the chunks that overlap its block of that layout and wraps them) or None (read whole:
numpy arrays, Python numbers, every array of the template-free form).  Before reading a
chunk, ``integrity.verify`` checks it is the one the save wrote.  Under MPI each phase ends
in ``agree``, so an error on one rank (a missing chunk in its block) is raised on all.
"""
from __future__ import annotations

import os

import numpy as np
import optree

from ..device import arrays as device
from ..dtensor import DTensor, relayout
from ..placement import Partial, Replicate, Shard, local_slices, reduced
from ..pytree import NAMESPACE, flatten
from ..spec import DTensorSpec, check_placements
from . import background, integrity, layout, store
from .agree import CheckpointError, Group, agree, attempt

OP = "mtensor.checkpoint.load"


def load(path, like=None, *, mesh=None, placements=None):
    """The checkpoint at ``path``, in one of three forms.

    ``like=template``: a pytree shaped like the template.  A DTensor leaf, or its abstract
    twin ``DTensorSpec(mesh, placements, shape, dtype)`` (``x.spec``; no memory, so a large
    state loads without a second one allocated first), comes back on that mesh and those
    placements (any mesh, any rank count: each rank reads only the chunks that overlap its
    block; Partial targets are filled as distribute_tensor does); numpy leaves whole;
    scalars as stored.  A collective over the template's ranks.

    ``mesh=, placements=``: no template; the saved structure (as ``load(path)`` gives it),
    its leaves saved from DTensors as DTensors on ``mesh``.  ``placements`` is one list for
    all of them, or a pytree shaped like the saved state with a list of placements (or None:
    numpy, whole) at each leaf or above a subtree; a list at a numpy leaf loads it as a
    DTensor too, a list above a subtree covers the leaves saved from DTensors.  A collective
    over the mesh's ranks.

    Neither: no collective, every array whole as numpy, in the saved structure (for one
    plain process).  Every form refuses a chunk file that is missing or was not written by
    this save with ``CheckpointError`` naming the leaf and the chunk.  A background save
    of ``path`` still in flight is finished first: waited for (collective, raising its
    error) by the two collective forms on the save's ranks; joined on this rank only by
    the form without a template (on rank 0 that includes the commit).
    """
    path = os.path.abspath(os.fspath(path))
    if like is not None and mesh is not None:
        raise ValueError(f"{OP}: pass like= or mesh= with placements=, not both")
    if (mesh is None) != (placements is None):
        raise ValueError(f"{OP}: mesh= and placements= go together (got "
                         f"{'mesh' if placements is None else 'placements'} alone)")
    if like is None and mesh is None:
        background.settle(None, path)         # this rank's part of a save in flight
        return _load_whole(path)
    if like is not None:
        leaves, rebuild = flatten(like)
        group = Group(x.device_mesh if isinstance(x, DTensor) else x.mesh
                      for x in leaves if isinstance(x, (DTensor, DTensorSpec)))
        plan = lambda: _plan_like(path, like, leaves, rebuild)          # noqa: E731
    else:
        group = Group([mesh])
        plan = lambda: _plan_mesh(path, mesh, placements)               # noqa: E731
    background.settle(group, path)            # a background save of path: committed first
    found = []
    agree(group, "load", attempt(lambda: found.extend(plan())))
    root, record, items, finish = found
    values = []
    try:
        for name, entry, target, where in items:
            values.append(_read(path, root, name, entry, target, where, record))
    except Exception as e:
        text = "" if isinstance(e, CheckpointError) else \
            f" (reading leaf {items[len(values)][3]} of {path})"
        error = f"{type(e).__name__}: {e}{text}"
    else:
        error = None
    agree(group, "load", error)
    return finish([_wrap(v, item[2]) for v, item in zip(values, items)])


def _load_whole(path):
    root, manifest, record = store.open_checkpoint(path)
    values = {}
    for name, entry in manifest["leaves"].items():
        try:
            values[name] = _read(path, root, name, entry, None,
                                 layout.stored_path_text(entry), record)
        except CheckpointError as e:
            raise CheckpointError(f"{OP}: {e}") from None
    return layout.decode_structure(manifest["structure"], values)


def _plan_like(path, like, leaves, rebuild):
    _, paths = layout.leaf_paths(like)
    names = layout.unique_names(paths)
    root, manifest, record = store.open_checkpoint(path)
    entries = [manifest["leaves"].get(n) for n in names]
    wheres = [layout.path_text(p) for p in paths]
    problems = [_mismatch(x, e, w) for x, e, w in zip(leaves, entries, wheres)]
    if any(problems):
        raise ValueError("; ".join(filter(None, problems)))
    targets = [_target(x, w) for x, w in zip(leaves, wheres)]
    return root, record, list(zip(names, entries, targets, wheres)), rebuild


def _target(leaf, where):
    """The layout a template leaf asks for (None: read whole)."""
    if isinstance(leaf, DTensor):
        return leaf.spec
    if isinstance(leaf, DTensorSpec):
        shape = tuple(int(s) for s in leaf.shape)
        return DTensorSpec(leaf.mesh, check_placements(
            f"like= at leaf {where}", leaf.placements, leaf.mesh, shape),
                           shape, np.dtype(leaf.dtype))
    return None


def _stores_array(entry) -> bool:
    return entry["kind"] == "array" and entry.get("source") != "python"


def _mismatch(leaf, entry, where):
    """Why the stored leaf cannot fill the template leaf (None: it can)."""
    if entry is None:
        return f"leaf {where} is not in the checkpoint"
    array_like = isinstance(leaf, (DTensor, DTensorSpec, np.ndarray, np.generic))
    if array_like != _stores_array(entry):
        return f"leaf {where}: the template holds {type(leaf).__name__}, the checkpoint " \
               f"{'an array' if _stores_array(entry) else 'a scalar'}"
    if array_like:
        mine = (tuple(leaf.shape), np.dtype(leaf.dtype))
        stored = (tuple(entry["shape"]), np.dtype(entry["dtype"]))
        if mine != stored:
            return f"leaf {where}: the template has shape {mine[0]} {mine[1]}, the checkpoint " \
                   f"{stored[0]} {stored[1]}"
    return None


def _plan_mesh(path, mesh, placements):
    root, manifest, record = store.open_checkpoint(path)
    chosen = _placements_by_name(manifest, placements)
    items = []
    for name in manifest["order"]:
        entry = manifest["leaves"][name]
        where, target = layout.stored_path_text(entry), None
        if name in chosen:
            if not _stores_array(entry):
                raise ValueError(f"leaf {where}: placements {list(chosen[name])} given for a "
                                 f"scalar; put None there")
            shape = tuple(entry["shape"])
            target = DTensorSpec(mesh, check_placements(f"placements= at leaf {where}",
                                                        chosen[name], mesh, shape),
                                 shape, np.dtype(entry["dtype"]).newbyteorder("="))
        items.append((name, entry, target, where))

    def finish(values):
        return layout.decode_structure(manifest["structure"],
                                       {item[0]: v for item, v in zip(items, values)})
    return root, record, items, finish


def _is_placements(x) -> bool:
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(
        isinstance(p, (Shard, Replicate, Partial)) for p in x)


def _placements_by_name(manifest, placements) -> dict:
    """``{leaf name: placements}`` for the leaves that load as DTensors (see ``load``)."""
    entries = manifest["leaves"]
    names = layout.decode_structure(manifest["structure"], {n: n for n in entries})
    stop = dict(is_leaf=lambda x: x is None or _is_placements(x), none_is_leaf=True,
                namespace=NAMESPACE)
    try:
        given, spec = optree.tree_flatten(placements, **stop)
        covered = spec.flatten_up_to(names)
    except (ValueError, TypeError) as e:
        raise ValueError(f"placements= is neither one list of placements nor a pytree shaped "
                         f"like the saved state (load(path) shows it): {e}") from None
    chosen = {}
    for p, sub in zip(given, covered):
        if p is None:
            continue
        if not _is_placements(p):
            raise ValueError(f"placements= holds {p!r} where a list of placements or None "
                             f"belongs (e.g. [Shard(0)])")
        if isinstance(sub, str):
            chosen[sub] = tuple(p)
        else:
            chosen.update((n, tuple(p)) for n in optree.tree_leaves(sub, none_is_leaf=True,
                                                                    namespace=NAMESPACE)
                          if entries[n].get("source") == "dtensor")
    return chosen


def _read(path, root, name, entry, target, where, record):
    """One leaf: this rank's block of ``target`` (a DTensorSpec), or the whole value."""
    if entry["kind"] == "scalar":
        return layout.decode_scalar(entry["value"])
    if target is None:
        region = tuple(slice(0, s) for s in entry["shape"])
    else:
        region = local_slices(target.shape, target.mesh.shape, reduced(target.placements),
                              target.mesh.coordinate)
    integrity.verify(path, name, where, region, entry["chunks"], record)
    block = _native(root[name][region])
    if target is not None:
        return block
    if entry.get("source") == "python":
        return layout.from_number(block, entry["type"])
    return block[()] if entry.get("source") == "numpy_scalar" else block


def _wrap(value, target):
    if target is None:
        return value
    stored = reduced(target.placements)
    value = device.to_device(value, target.mesh.device_type)      # a GPU mesh's blocks
    out = DTensor.from_local(value, target.mesh, stored, shape=target.shape)
    if stored != tuple(target.placements):
        out = relayout(out, tuple(target.placements))        # local R -> P
    return out


def _native(block):
    """zarr hands back explicitly little-endian dtypes ('<i8'); MPI needs the native one
    ('int64'), or a reduction of the block finds its send and receive types differ."""
    return np.require(block, dtype=block.dtype.newbyteorder("="), requirements="C")
