"""Loading without a full template: ``load(path, mesh=, placements=)`` (one list for all,
a pytree of lists, prefixes of it) and an abstract template of ``DTensorSpec`` leaves give
numpy's values on several meshes and placements, uneven shards included; Python numbers come
back as the same Python types and are 0-d arrays of numbers to a plain zarr reader, while
a checkpoint of the earlier format (numbers as strings in the manifest) still loads."""
import json
import math
import os
import shutil

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

from mpi_helpers import WORLD, assert_all_ranks, host, mesh_shapes, random_array  # noqa: E402

import mtensor as mt  # noqa: E402
from mtensor import checkpoint as ck  # noqa: E402
from mtensor.checkpoint import layout, store  # noqa: E402
from mtensor.placement import Partial, Replicate, Shard  # noqa: E402

R = Replicate()
SPECS = {"a": ((7, 5), np.float64), "b": ((5,), np.float32), "c": ((3, 4, 5), np.float32),
         "d": ((12, 9), np.int32)}




def fulls():
    return {k: random_array(s, d, seed=i) for i, (k, (s, d)) in enumerate(SPECS.items())}


def save_state(mesh, path):
    f = fulls()
    first = [Shard(0)] + [R] * (mesh.ndim - 1)
    ck.save(path, {"params": [mt.distribute_tensor(f["a"], mesh, first),
                              mt.distribute_tensor(f["b"], mesh, [R] * mesh.ndim)],
                   "opt": {"c": mt.distribute_tensor(f["c"], mesh, [Shard(2)] * mesh.ndim),
                           "d": mt.distribute_tensor(f["d"], mesh, first[::-1])},
                   "table": np.arange(6.0), "step": 3})


def leaves(out):
    return {"a": out["params"][0], "b": out["params"][1], "c": out["opt"]["c"],
            "d": out["opt"]["d"]}


def check(out, mesh, wanted):
    """``wanted``: leaf -> placements (None: a numpy array); what differs from that."""
    bad, f = [], fulls()
    for k, x in leaves(out).items():
        p = wanted[k]
        if p is None:
            if not isinstance(x, np.ndarray) or not np.array_equal(x, f[k]):
                bad.append(f"{k}: not the numpy value")
            continue
        if not isinstance(x, mt.DTensor) or x.device_mesh != mesh or x.placements != p:
            bad.append(f"{k}: {type(x).__name__} {getattr(x, 'placements', '')}, wanted {p}")
        elif host(x).dtype != f[k].dtype or not np.array_equal(host(x), f[k]):
            bad.append(f"{k} {p}: values")
    if out["step"] != 3 or type(out["step"]) is not int:
        bad.append(f"step {out['step']!r}")
    return bad


def targets(mesh):
    """(placements argument, leaf -> expected placements) pairs for ``mesh``."""
    n, rest = mesh.ndim, [R] * (mesh.ndim - 1)
    one = tuple([Shard(0)] + rest)
    cases = [(list(one), dict.fromkeys(SPECS, one)),
             ([R] * n, dict.fromkeys(SPECS, (R,) * n))]
    tree = {"params": [[Shard(1)] + rest, None], "opt": [Shard(1)] * n,   # opt: a prefix
            "table": None, "step": None}
    cases.append((tree, {"a": (Shard(1), *rest), "b": None, "c": (Shard(1),) * n,
                         "d": (Shard(1),) * n}))
    if n == 2:
        cases.append(([Shard(0), Shard(0)], dict.fromkeys(SPECS, (Shard(0), Shard(0)))))
    return cases


@pytest.mark.mpi
def test_load_onto_a_mesh_with_placements(ckdir):
    bad = []
    for save_shape in mesh_shapes():
        path = os.path.join(ckdir, "x".join(map(str, save_shape)))
        save_state(mt.init_device_mesh(save_shape), path)
        for load_shape in mesh_shapes():
            mesh = mt.init_device_mesh(load_shape)
            for placements, wanted in targets(mesh):
                out = ck.load(path, mesh=mesh, placements=placements)
                bad += [f"{save_shape} -> {load_shape} {placements}: {b}"
                        for b in check(out, mesh, wanted)]
                if not isinstance(out["table"], np.ndarray):
                    bad.append("table is not numpy")
    assert_all_ranks(not bad, f"{len(bad)} bad, e.g. {bad[:4]}")


@pytest.mark.mpi
def test_abstract_template_of_dtensor_specs(ckdir):
    bad = []
    for save_shape in mesh_shapes():
        path = os.path.join(ckdir, "x".join(map(str, save_shape)))
        save_state(mt.init_device_mesh(save_shape), path)
        for load_shape in mesh_shapes():
            mesh = mt.init_device_mesh(load_shape)
            n, rest = mesh.ndim, (R,) * (mesh.ndim - 1)
            wanted = {"a": (Shard(1),) + rest, "b": (Partial(),) + rest,
                      "c": (Shard(0),) * n, "d": (R,) * n}
            spec = {k: mt.DTensorSpec(mesh, wanted[k], s, np.dtype(d))
                    for k, (s, d) in SPECS.items()}
            like = {"params": [spec["a"], spec["b"]], "opt": {"c": spec["c"], "d": spec["d"]},
                    "table": np.zeros(6), "step": 0}
            out = ck.load(path, like=like)
            bad += [f"{save_shape} -> {load_shape}: {b}" for b in check(out, mesh, wanted)]
    assert_all_ranks(not bad, f"{len(bad)} bad, e.g. {bad[:4]}")


@pytest.mark.mpi
def test_bad_placements_are_refused_on_every_rank(ckdir):
    mesh = mt.init_device_mesh(mesh_shapes()[-1])
    path = os.path.join(ckdir, "ck")
    save_state(mesh, path)
    n, texts = mesh.ndim, []
    for placements, match in [
            ({"params": [None, None], "opt": None, "table": None, "step": [R] * n},
             r"leaf \['step'\]: placements .* scalar"),
            ([Shard(2)] * n, r"placements= at leaf \['opt'\]\['d'\]: .*shard tensor dim 2"),
            ({"params": None}, "neither one list of placements nor a pytree"),
            ({"params": [Shard(0), None], "opt": None, "table": None, "step": None},
             "where a list of placements or None belongs")]:
        with pytest.raises(ck.CheckpointError, match=match):
            ck.load(path, mesh=mesh, placements=placements)
        texts.append(match)
    with pytest.raises(ValueError, match="go together"):
        ck.load(path, mesh=mesh)
    assert_all_ranks(len(texts) == 4, "a refusal was missed")


NUMBERS = {"step": 7, "zero": 0, "lr": 0.1 + 0.2, "neg": -0.0, "inf": float("inf"),
           "flag": True, "off": False}
OTHERS = {"big": 2 ** 70, "name": "adam", "none": None}


def same_scalars(got):
    want = {**NUMBERS, **OTHERS}
    return [k for k, v in want.items() if type(got[k]) is not type(v) or got[k] != v
            or (isinstance(v, float) and math.copysign(1, got[k]) != math.copysign(1, v))]


def to_format_1(path):
    """Rewrite a checkpoint as the earlier format stored it: numbers as strings in the
    manifest (no arrays), no chunk record, all-zero chunks never written."""
    group = zarr.open_group(path, mode="r+")
    manifest = dict(group.attrs[store.MANIFEST])
    for k, v in NUMBERS.items():
        manifest["leaves"][k] = {"path": [repr(k)], "kind": "scalar",
                                 "value": layout.encode_scalar(v)}
        shutil.rmtree(os.path.join(path, k))
    group.attrs[store.MANIFEST] = dict(manifest, format=1)
    shutil.rmtree(os.path.join(path, "zeros", "c"))
    with open(os.path.join(path, layout.MARKER), "w") as f:
        json.dump({"time": 0.0}, f)


@pytest.mark.mpi
def test_python_numbers_round_trip_and_are_numbers_to_zarr(ckdir):
    mesh = mt.init_device_mesh(mesh_shapes()[-1])
    path = os.path.join(ckdir, "ck")
    zeros = mt.zeros((5, 3), mesh=mesh, placements=[Shard(0)] + [R] * (mesh.ndim - 1))
    ck.save(path, {**NUMBERS, **OTHERS, "zeros": zeros})
    like = {**{k: type(v)() for k, v in NUMBERS.items()}, **OTHERS, "zeros": zeros}
    bad = [f"like=: {k}" for k in same_scalars(ck.load(path, like=like))]
    bad += [f"mesh=: {k}" for k in same_scalars(ck.load(path, mesh=mesh, placements=[R] *
                                                        mesh.ndim))]
    if WORLD.rank == 0:
        bad += [f"load(path): {k}" for k in same_scalars(ck.load(path))]
        group = zarr.open_group(path, mode="r")
        for k, v in NUMBERS.items():
            a = group[k]
            if not isinstance(a, zarr.Array) or a.ndim or a.dtype.kind not in "bif" or (
                    a[()] != v):
                bad.append(f"zarr {k}: {a}")
        to_format_1(path)
    WORLD.Barrier()
    out = ck.load(path, like=like)
    bad += [f"format 1: {k}" for k in same_scalars(out)]
    if not np.array_equal(host(out["zeros"]), np.zeros((5, 3))):
        bad.append("format 1: zeros")
    assert_all_ranks(not bad, f"{bad}")
