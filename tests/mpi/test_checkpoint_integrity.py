"""A committed checkpoint whose chunk files are not all the ones its save wrote is refused:
each chunk file removed in turn, and each replaced by the same chunk of another save at the
same path, makes ``load(path, like=)`` raise ``CheckpointError`` naming the leaf and the
chunk on every rank (the one rank whose block holds the chunk included), and the
one-process ``load(path)`` likewise; restored, the checkpoint loads the saved values."""
import os
import shutil

import numpy as np
import pytest

pytest.importorskip("zarr")

from mpi_helpers import WORLD, assert_all_ranks, host, mesh_shapes, random_array  # noqa: E402

import mtensor as mt  # noqa: E402
from mtensor import checkpoint as ck  # noqa: E402
from mtensor.placement import Replicate, Shard  # noqa: E402

R = Replicate()
WHERE = {"params.0": "['params'][0]", "params.1": "['params'][1]", "params.2": "['params'][2]",
         "table": "['table']", "step": "['step']"}




def fulls(seed):
    return [random_array((7, 5), seed=seed), random_array((5,), np.float32, seed=seed + 1),
            random_array((6, 4), np.int32, seed=seed + 2), random_array((2, 3), seed=seed + 3)]


def state(mesh, seed):
    """Uneven rows on the first mesh dim, a replicated vector, a leaf split on every mesh
    dim, a numpy table and a Python number: each leaf's chunk files come from other ranks."""
    w, b, e, table = fulls(seed)
    rest = [R] * (mesh.ndim - 1)
    both = [Shard(0), Shard(1)] + rest[1:] if mesh.ndim > 1 else [Shard(1)]
    return {"params": [mt.distribute_tensor(w, mesh, [Shard(0)] + rest),
                       mt.distribute_tensor(b, mesh, [R] * mesh.ndim),
                       mt.distribute_tensor(e, mesh, both)],
            "table": table, "step": seed}


def template(mesh):
    """Other layouts than the save's: a chunk may be read by one rank only."""
    rest = [R] * (mesh.ndim - 1)
    return {"params": [mt.zeros((7, 5), mesh=mesh, placements=[Shard(1)] + rest),
                       mt.zeros((5,), np.float32, mesh=mesh, placements=[Shard(0)] + rest),
                       mt.zeros((6, 4), np.int32, mesh=mesh, placements=[R] * mesh.ndim)],
            "table": np.zeros((2, 3)), "step": 0}


def chunk_files(path):
    """Every chunk file of the checkpoint, relative to it (``leaf/c/i/j``), from rank 0."""
    files = None
    if WORLD.rank == 0:
        files = []
        for dirpath, _, names in os.walk(path):
            for name in names:
                parts = os.path.relpath(os.path.join(dirpath, name), path).split(os.sep)
                if len(parts) >= 2 and parts[1] == "c":
                    files.append("/".join(parts))
    return WORLD.bcast(sorted(files) if files is not None else None)


def refusal(fn):
    """The CheckpointError's text, or None when ``fn`` did not raise one."""
    try:
        fn()
    except ck.CheckpointError as e:
        return str(e)
    return None


def loads_seed(path, mesh, seed):
    out = ck.load(path, like=template(mesh))
    got = [host(x) for x in out["params"]] + [out["table"]]
    return out["step"] == seed and all(
        g.dtype == f.dtype and np.array_equal(g, f) for g, f in zip(got, fulls(seed)))


def check_refused(path, mesh, rel, why):
    """What is wrong with the refusals of the checkpoint as it is now (empty: all right)."""
    leaf, key = rel.split("/", 1)
    wanted = f"leaf {WHERE[leaf]}: chunk {key}"
    bad = []
    text = refusal(lambda: ck.load(path, like=template(mesh)))
    if text is None or wanted not in text or why not in text:
        bad.append(f"{rel} like=: {text}")
    if WORLD.rank == 0:
        text = refusal(lambda: ck.load(path))
        if text is None or wanted not in text or why not in text:
            bad.append(f"{rel} load(path): {text}")
    return bad


@pytest.mark.mpi
def test_each_missing_chunk_is_refused_on_every_rank(ckdir):
    mesh = mt.init_device_mesh(mesh_shapes()[-1])
    path = os.path.join(ckdir, "ck")
    ck.save(path, state(mesh, 1))
    files = chunk_files(path)
    bad = [] if loads_seed(path, mesh, 1) else ["the intact checkpoint did not load"]
    leaves = {rel.split("/")[0] for rel in files}
    if leaves != set(WHERE):
        bad.append(f"chunk files of {sorted(leaves)} only")
    for rel in files:
        if WORLD.rank == 0:
            os.rename(os.path.join(path, rel), os.path.join(ckdir, "aside"))
        WORLD.Barrier()
        bad += check_refused(path, mesh, rel, "is missing")
        WORLD.Barrier()
        if WORLD.rank == 0:
            os.rename(os.path.join(ckdir, "aside"), os.path.join(path, rel))
        WORLD.Barrier()
    if not loads_seed(path, mesh, 1):
        bad.append("the restored checkpoint did not load")
    assert_all_ranks(not bad, f"{len(bad)} of {len(files)} chunks: {bad[:4]}")


@pytest.mark.mpi
def test_a_chunk_of_another_save_is_refused(ckdir):
    mesh = mt.init_device_mesh(mesh_shapes()[-1])
    path, other = os.path.join(ckdir, "ck"), os.path.join(ckdir, "earlier")
    ck.save(path, state(mesh, 1))
    if WORLD.rank == 0:
        shutil.copytree(path, other)             # the earlier save's files, kept aside
    WORLD.Barrier()
    ck.save(path, state(mesh, 2))                # a new save at the same path
    files, bad = chunk_files(path), []
    for rel in files:
        mine = None
        if WORLD.rank == 0:
            with open(os.path.join(path, rel), "rb") as f:
                mine = f.read()
            shutil.copyfile(os.path.join(other, rel), os.path.join(path, rel))
        WORLD.Barrier()
        bad += check_refused(path, mesh, rel, "is not the one this save wrote")
        WORLD.Barrier()
        if WORLD.rank == 0:
            with open(os.path.join(path, rel), "wb") as f:
                f.write(mine)
        WORLD.Barrier()
    if not loads_seed(path, mesh, 2):
        bad.append("the restored checkpoint did not load")
    assert_all_ranks(not bad, f"{len(bad)} of {len(files)} chunks: {bad[:4]}")
