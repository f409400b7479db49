"""Two "nodes" of 2 ranks each: where the tensor-parallel dim sits, and hierarchical all-reduce.

Run by ``run_two_nodes.py`` (4 ranks: 2 in network namespace ``mtnet0``, 2 in ``mtnet1``,
hydra told they are two hosts, so MPICH uses shared memory inside a namespace and TCP over
the rate-limited veth between them; mtensor learns the nodes from ``COMM_TYPE_SHARED``).
Any 4-rank launch on two real nodes, 2 ranks each, works too:

    mpiexec -n 4 -ppn 2 python benchmarks/netbed/two_nodes.py [--batch 4096 --d 256]

1. The Megatron MLP step of ``train_step_vs_handwritten.py`` (two blocks, column- then
   row-parallel, float32), eager and ``mt.compile``-d, on a (2, 2) mesh laid out by node:
   named ``("dp", "tp")`` the tp groups stay inside a node (the layout mtensor picks) and the
   per-block activation all-reduces use shared memory; named ``("tp", "dp")`` (``heavy=()``
   silences the warning) they cross the link, and the gradients' dp all-reduce stays inside.
2. Sum all-reduce, all-gather and sum reduce-scatter of 1-64 MiB float32 (the whole buffer)
   over the 4 ranks: raw mpi4py (MPI's own algorithm), mtensor's ``redistribute`` (P -> R,
   S(0) -> R, P -> S(0)) on a 1-D mesh told it is one node (``MTENSOR_NODE_OF_RANK=0,0,0,0``:
   flat), and on the real layout (two levels, ``comm.hierarchical``).

Every side is checked against the others (same loss, same sums) before it is timed; times
are medians of interleaved reps, the slowest rank's.  ``--json PATH``: rank 0 writes them.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mtensor_side import mtensor_side, time_sides  # noqa: E402
from train_step_vs_handwritten import mlp_loss  # noqa: E402

import mtensor as mt  # noqa: E402
from mtensor import Partial, Replicate, Shard  # noqa: E402
from mtensor.mesh.device_mesh import FAKE_NODES  # noqa: E402


def placed(mesh, **by_name):
    """Placements of ``mesh`` from mesh dim names (Replicate where not named)."""
    return [by_name.get(name, Replicate()) for name in mesh.mesh_dim_names]


def megatron_sides(names, p, x, t):
    """Eager and compiled steps on a (2, 2) mesh whose dims are called ``names``."""
    mesh = mt.init_device_mesh((2, 2), mesh_dim_names=names, heavy=())
    P = {k: mt.distribute_tensor(v, mesh, placed(mesh, tp=Shard(1 if k[0] == "a" else 0)))
         for k, v in p.items()}
    X, T = (mt.distribute_tensor(v, mesh, placed(mesh, dp=Shard(0))) for v in (x, t))
    return mesh, {"eager": mtensor_side(mlp_loss, (P, X, T)),
                  "compiled": mtensor_side(mlp_loss, (P, X, T), compiled=True)}


def megatron(args, world):
    rng = np.random.default_rng(0)
    d = args.d
    x, t = (rng.standard_normal((2, args.batch, d))).astype(np.float32)
    p = {k: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) for k, s in
         [("a1", (d, 4 * d)), ("b1", (4 * d, d)), ("a2", (d, 4 * d)), ("b2", (4 * d, d))]}
    sides, layouts = {}, {}
    for label, names in (("tp inside", ("dp", "tp")), ("tp across", ("tp", "dp"))):
        mesh, steps = megatron_sides(names, p, x, t)
        layouts[label] = repr(mesh)
        sides.update({f"{label} {k}": v for k, v in steps.items()})
    losses = {k: run()[0] for k, run in sides.items()}
    first = next(iter(losses.values()))
    if not all(np.isclose(v, first, rtol=1e-4) for v in losses.values()):
        raise AssertionError(f"the layouts disagree on the loss: {losses}")
    return {"layouts": layouts, "loss": first,
            "median_s": time_sides(sides, args.reps, world)}


# kind -> (source placement, target placement): what mtensor's redistribute runs
LAYOUTS = {"all_reduce": (Partial(), Replicate()), "all_gather": (Shard(0), Replicate()),
           "reduce_scatter": (Partial(), Shard(0))}


def collective_sides(kind, full, flat_mesh, hier_mesh, world):
    """Raw mpi4py, mtensor flat and mtensor two-level callables for ``kind`` of ``full``
    (float32, the whole buffer: all-gather's gathered one, the others' input)."""
    n, me = world.size, world.rank
    piece = full.size // n
    src, dst = LAYOUTS[kind]
    block = full[me * piece:(me + 1) * piece] if kind == "all_gather" else full
    out = np.empty(piece if kind == "reduce_scatter" else full.size, np.float32)
    raw = {"all_reduce": lambda: world.Allreduce(block, out, op=MPI.SUM),
           "all_gather": lambda: world.Allgather(block, out),
           "reduce_scatter": lambda: world.Reduce_scatter_block(block, out, op=MPI.SUM)}[kind]

    def through(mesh):
        x = mt.DTensor.from_local(block, mesh, [src], shape=full.shape)
        return lambda: x.redistribute(mesh, [dst]).to_local()
    return {"raw mpi4py (flat)": lambda: raw() or out, "mtensor flat": through(flat_mesh),
            "mtensor two-level": through(hier_mesh)}


def _flat_mesh(world):
    """A 1-D mesh told all ranks sit on one node (so its collectives stay flat)."""
    told = os.environ.get(FAKE_NODES)
    os.environ[FAKE_NODES] = ",".join("0" * world.size)
    try:
        return mt.init_device_mesh((world.size,), mesh_dim_names=("w",))
    finally:
        if told is None:
            del os.environ[FAKE_NODES]
        else:
            os.environ[FAKE_NODES] = told


def collectives(args, world):
    flat_mesh = _flat_mesh(world)
    hier_mesh = mt.init_device_mesh((world.size,), mesh_dim_names=("w",))
    if len(set(hier_mesh.nodes)) != 2:
        raise SystemExit(f"two_nodes.py: expected 2 nodes, mtensor sees {hier_mesh.nodes}")
    crossover = hier_mesh.communicator(0).crossover
    backends = {"mtensor flat": flat_mesh.backends[0],
                "mtensor two-level": hier_mesh.backends[0],
                "crossover_bytes": crossover}
    rows = {}
    for kind in args.kinds:
        rows[kind] = {}
        for mib in args.sizes:
            full = np.full(mib * 2**20 // 4, world.rank + 1, np.float32)
            if kind == "all_gather":
                full = np.arange(full.size, dtype=np.float32)
            want = full if kind == "all_gather" else world.size * (world.size + 1) / 2
            for name, run in collective_sides(kind, full, flat_mesh, hier_mesh, world).items():
                got = run().reshape(-1)
                if not np.all(got == (want if kind != "all_gather" else want[:got.size])):
                    raise AssertionError(f"{name} {kind} of {mib} MiB gave a wrong result")
            sides = collective_sides(kind, full, flat_mesh, hier_mesh, world)
            rows[kind][mib] = time_sides(sides, args.collective_reps, world)
            if world.rank == 0:
                print(f"{kind} {mib} MiB: " + ", ".join(
                    f"{k} {1e3 * v:.1f} ms" for k, v in rows[kind][mib].items()), flush=True)
    return {"backends": backends, "median_s": rows, "nodes": list(hier_mesh.nodes)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4096, help="global batch (rows, tokens)")
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--reps", type=int, default=10, help="timed Megatron steps per side")
    ap.add_argument("--sizes", default="1,4,16,64", help="collective sizes in MiB")
    ap.add_argument("--kinds", default="all_reduce,all_gather,reduce_scatter")
    ap.add_argument("--collective-reps", type=int, default=5)
    ap.add_argument("--no-megatron", action="store_true", help="the collectives only")
    ap.add_argument("--json", help="rank 0 writes the results here")
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.kinds = args.kinds.split(",")
    world = MPI.COMM_WORLD
    if world.size != 4:
        raise SystemExit("two_nodes.py: run on exactly 4 ranks, 2 per node")
    start = time.perf_counter()
    result = {"config": {k: v for k, v in vars(args).items() if k != "json"},
              "collectives": collectives(args, world)}
    if not args.no_megatron:
        result["megatron"] = megatron(args, world)
    result["seconds"] = time.perf_counter() - start
    if world.rank == 0:
        print(json.dumps(result.get("megatron"), indent=1), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
