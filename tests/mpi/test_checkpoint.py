"""Checkpoints under MPI: save on one mesh and layout, load on another, bit for bit; a plain
process reads what N ranks wrote; an interrupted save leaves the previous checkpoint; every
error is raised on every rank; keep=N rotation."""
import glob
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("zarr")

from mpi_helpers import (
    WORLD,
    assert_all_ranks,
    dtensor_of,
    expected_block,
    host,  # noqa: E402
    mesh_shapes,
    random_array,
)

import mtensor as mt  # noqa: E402
from mtensor import checkpoint as ck  # noqa: E402
from mtensor.checkpoint import store  # noqa: E402
from mtensor.placement import Partial, Replicate, Shard  # noqa: E402

# (shape, dtype): uneven, smaller than the mesh (empty shards), 1-D, 3-D, 0-d
SPECS = [((7, 5), np.float64), ((2, 3), np.float32), ((12, 8), np.int32), ((5,), np.float64),
         ((3, 4, 5), np.float32), ((), np.float64)]
R, P = Replicate(), Partial()
LAYOUTS = {  # per mesh ndim, cycled over the leaves (invalid ones for a leaf's ndim skipped)
    1: [(Shard(0),), (Shard(1),), (R,), (P,), (Partial("max"),)],
    2: [(Shard(0), Shard(1)), (Shard(1), Shard(0)), (Shard(0), Shard(0)), (R, Shard(1)),
        (P, Shard(0)), (R, R)],
    3: [(Shard(0), Shard(1), R), (Shard(1), Shard(0), Shard(0)), (P, R, Shard(1)), (R, R, R)],
}




def fits(placements, ndim):
    return all(not isinstance(p, Shard) or p.dim < ndim for p in placements) and (
        ndim or all(p == R for p in placements))


def leaf_layouts(mesh, shift):
    """One layout per SPECS entry, shifted so that a second call gives other layouts."""
    options = LAYOUTS[mesh.ndim]
    out = []
    for i, (shape, _) in enumerate(SPECS):
        valid = [p for p in options if fits(p, len(shape))] or [(R,) * mesh.ndim]
        out.append(valid[(i + shift) % len(valid)])
    return out


def fulls():
    return [random_array(shape, dtype, seed=i) for i, (shape, dtype) in enumerate(SPECS)]


def state_on(mesh, shift):
    tensors = [dtensor_of(f, mesh, p) for f, p in zip(fulls(), leaf_layouts(mesh, shift))]
    return {"params": tensors[:3], "opt": {"m": tensors[3:], "step": 7, "lr": 0.1 + 0.2,
                                          "name": "adam", "none": None},
            "table": np.arange(6, dtype=np.int16).reshape(2, 3)}


def template_on(mesh, shift):
    tensors = [mt.DTensor.from_local(np.zeros(expected_block(np.zeros(s, d), mesh, p).shape, d),
                                     mesh, p, shape=s)
               for (s, d), p in zip(SPECS, leaf_layouts(mesh, shift))]
    return {"params": tensors[:3], "opt": {"m": tensors[3:], "step": 0, "lr": 0.0, "name": "",
                                          "none": None},
            "table": np.zeros((2, 3), np.int16)}


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def check_loaded(out, template):
    """Every DTensor leaf on the template's mesh and placements with the saved values."""
    bad = []
    got = out["params"] + out["opt"]["m"]
    want = template["params"] + template["opt"]["m"]
    for i, (x, t, full) in enumerate(zip(got, want, fulls())):
        if x.device_mesh != t.device_mesh or x.placements != t.placements:
            bad.append(f"leaf {i}: layout {x.placements}")
        if not any(isinstance(p, Partial) for p in t.placements) and not same_bits(
                x.to_local(), expected_block(full, t.device_mesh, t.placements)):
            bad.append(f"leaf {i}: block")
        if not same_bits(host(x), full):
            bad.append(f"leaf {i} {t.placements}: values")
    if out["opt"]["step"] != 7 or out["opt"]["lr"] != 0.1 + 0.2 or out["opt"]["name"] != "adam":
        bad.append(f"scalars {out['opt']}")
    table = np.arange(6, dtype=np.int16).reshape(2, 3)
    if out["opt"]["none"] is not None or not same_bits(out["table"], table):
        bad.append("table or None")
    return bad


@pytest.mark.mpi
def test_load_on_other_meshes_and_layouts(ckdir):
    bad = []
    for save_shape in mesh_shapes():
        save_mesh = mt.init_device_mesh(save_shape)
        path = os.path.join(ckdir, "x".join(map(str, save_shape)))
        ck.save(path, state_on(save_mesh, 0))
        for load_shape in mesh_shapes():
            template = template_on(mt.init_device_mesh(load_shape), 1)
            bad += [f"{save_shape} -> {load_shape}: {b}"
                    for b in check_loaded(ck.load(path, like=template), template)]
    assert_all_ranks(not bad, f"{len(bad)} bad, e.g. {bad[:4]}")


CHILD = """
import pickle, sys
import numpy as np, zarr
from mtensor import checkpoint as ck
path, out = sys.argv[1], sys.argv[2]
tree = ck.load(path)
group = zarr.open_group(path, mode="r")
arrays = {name: np.asarray(a[...]) for name, a in group.arrays()}
assert "mpi4py.MPI" not in sys.modules, "load(path) loaded MPI"
with open(out, "wb") as f:
    pickle.dump((tree, arrays, dict(group.attrs)), f)
"""


@pytest.mark.mpi
def test_plain_process_reads_what_n_ranks_wrote(ckdir):
    mesh = mt.init_device_mesh(mesh_shapes()[-1])
    path = os.path.join(ckdir, "ck")
    ck.save(path, state_on(mesh, 0))
    bad = []
    if WORLD.rank == 0:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "MPIR_", "OMPI_"))}
        out = os.path.join(ckdir, "child.pkl")
        result = subprocess.run([sys.executable, "-c", CHILD, path, out], env=env,
                                capture_output=True, text=True, timeout=120)
        if result.returncode:
            bad.append(result.stderr[-3000:])
        else:
            with open(out, "rb") as f:
                tree, arrays, attrs = pickle.load(f)
            full = fulls()
            got = tree["params"] + tree["opt"]["m"]
            bad += [f"load leaf {i}" for i, (g, w) in enumerate(zip(got, full))
                    if not same_bits(g, w)]
            names = ["params.0", "params.1", "params.2", "opt.m.0", "opt.m.1", "opt.m.2"]
            bad += [f"zarr {n}" for n, w in zip(names, full) if not same_bits(arrays[n], w)]
            scalars = {k: v for k, v in tree["opt"].items() if k != "m"}
            if scalars != {"step": 7, "lr": 0.1 + 0.2, "name": "adam", "none": None}:
                bad.append(f"scalars {scalars}")
            if not same_bits(tree["table"], np.arange(6, dtype=np.int16).reshape(2, 3)):
                bad.append("table")
            if "mtensor_checkpoint" not in attrs:
                bad.append("no manifest")
    assert_all_ranks(not bad, f"{bad}")


def small_state(mesh, value=0):
    full = random_array((7, 5), seed=value)
    return {"w": mt.distribute_tensor(full, mesh, [Shard(0)] + [R] * (mesh.ndim - 1)),
            "step": value}, full


def small_template(mesh, shape=(7, 5), dtype=np.float64, extra=False):
    tree = {"w": mt.zeros(shape, dtype, mesh=mesh, placements=[R] * mesh.ndim), "step": 0}
    if extra:
        tree["extra"] = np.zeros(3)
    return tree


def raises_everywhere(match, fn, *args, **kwargs):
    with pytest.raises(ck.CheckpointError, match=match) as info:
        fn(*args, **kwargs)
    return str(info.value)


@pytest.mark.mpi
def test_interrupted_save_keeps_the_previous_checkpoint(ckdir, monkeypatch):
    mesh = mt.init_device_mesh((WORLD.size,))
    path = os.path.join(ckdir, "ck")
    old, old_full = small_state(mesh, 1)
    ck.save(path, old)

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash before commit")
    monkeypatch.setattr(store, "commit", crash)
    new, new_full = small_state(mesh, 2)
    raises_everywhere("simulated crash", ck.save, path, new)
    monkeypatch.undo()

    out = ck.load(path, like=small_template(mesh))
    ok = same_bits(host(out["w"]), old_full) and out["step"] == 1
    temps = sorted(glob.glob(path + ".tmp-*"))
    ok &= len(temps) == 1
    message = raises_everywhere("not a committed checkpoint", ck.load, temps[0],
                                like=small_template(mesh))
    ok &= temps[0] in message
    ck.save(path, new)                                   # succeeds; clears the leftovers
    out = ck.load(path, like=small_template(mesh))
    ok &= same_bits(host(out["w"]), new_full) and out["step"] == 2
    WORLD.Barrier()
    ok &= os.listdir(ckdir) == ["ck"]
    assert_all_ranks(ok, "previous checkpoint lost, or the temp directory not refused/cleared")


@pytest.mark.mpi
def test_errors_are_raised_on_every_rank(ckdir, monkeypatch):
    mesh = mt.init_device_mesh((WORLD.size,))
    path = os.path.join(ckdir, "ck")
    state, _ = small_state(mesh, 3)
    ck.save(path, state)
    texts = [
        raises_everywhere("does not exist", ck.load, path + "-missing", like=small_template(mesh)),
        raises_everywhere(r"\['w'\].*shape \(7, 6\) float64.*\(7, 5\) float64", ck.load, path,
                          like=small_template(mesh, shape=(7, 6))),
        raises_everywhere(r"\['w'\].*float32.*float64", ck.load, path,
                          like=small_template(mesh, dtype=np.float32)),
        raises_everywhere(r"\['extra'\] is not in the checkpoint", ck.load, path,
                          like=small_template(mesh, extra=True)),
    ]
    afile = os.path.join(ckdir, "afile")
    if WORLD.rank == 0:
        open(afile, "w").close()
    WORLD.Barrier()
    texts.append(raises_everywhere("afile", ck.save, os.path.join(afile, "ck"), state))

    # one rank cannot write: every rank raises, the temp dir is removed, path is untouched
    last = min(WORLD.size, 7) - 1        # the last rank that holds rows of (7, 5)
    real = store.write_region

    def refuse(*args):
        if WORLD.rank == last:
            raise PermissionError("simulated: no space left on this rank's disk")
        return real(*args)
    monkeypatch.setattr(store, "write_region", refuse)
    text = raises_everywhere("PermissionError: simulated", ck.save, path,
                             small_state(mesh, 4)[0])
    texts.append(WORLD.size == 1 or f"rank {last}: PermissionError" in text)
    monkeypatch.undo()
    WORLD.Barrier()
    ok = sorted(os.listdir(ckdir)) == ["afile", "ck"]
    ok &= ck.load(path, like=small_template(mesh))["step"] == 3
    assert_all_ranks(ok, f"failed save left {os.listdir(ckdir)}")

    # a corrupted chunk (only rank 0's region holds it on > 1 rank): every rank raises
    if WORLD.rank == 0:
        chunk = os.path.join(path, "w", "c", "0", "0")
        data = bytearray(open(chunk, "rb").read())
        data[0] ^= 0xFF
        open(chunk, "wb").write(bytes(data))
    WORLD.Barrier()
    sharded = {"w": mt.zeros((7, 5), mesh=mesh, placements=[Shard(0)]), "step": 0}
    texts.append(raises_everywhere(r"checksum.*\['w'\]", ck.load, path, like=sharded))
    assert_all_ranks(all(texts), "an error had no message")


@pytest.mark.mpi
def test_ranks_with_different_states_are_refused(ckdir):
    if WORLD.size == 1:
        pytest.skip("needs two ranks")
    mesh = mt.init_device_mesh((WORLD.size,))
    state, _ = small_state(mesh)
    if WORLD.rank == 1:
        state["extra"] = 1
    raises_everywhere("disagree", ck.save, os.path.join(ckdir, "ck"), state)
    WORLD.Barrier()
    assert_all_ranks(os.listdir(ckdir) == [], "temp dir left behind")


@pytest.mark.mpi
def test_keep_rotates_numbered_siblings(ckdir):
    mesh = mt.init_device_mesh(mesh_shapes()[-1])
    state, _ = small_state(mesh, 5)
    for step in (1, 2, 3, 10, 4):
        ck.save(os.path.join(ckdir, f"step-{step:05d}"), state, keep=2)
    ck.save(os.path.join(ckdir, "other-00001"), state, keep=1)
    WORLD.Barrier()
    left = sorted(os.listdir(ckdir))
    ok = left == ["other-00001", "step-00004", "step-00010"]
    raises_everywhere("step number", ck.save, os.path.join(ckdir, "final"), state, keep=2)
    raises_everywhere("keep=0", ck.save, os.path.join(ckdir, "step-00011"), state, keep=0)
    assert_all_ranks(ok and sorted(os.listdir(ckdir)) == left, f"left {os.listdir(ckdir)}")
