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
2. Sum all-reduce of 1-64 MiB float32 over the 4 ranks: raw mpi4py ``Allreduce`` (MPICH's
   own algorithm, flat), mtensor's ``redistribute`` Partial -> Replicate on a 1-D mesh told
   it is one node (``MTENSOR_NODE_OF_RANK=0,0,0,0``: flat), and on the real layout
   (two-level: reduce-scatter inside the nodes, all-reduce across, all-gather inside).

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
import mtensor as mt  # noqa: E402
from mtensor import Partial, Replicate, Shard  # noqa: E402
from mtensor.mesh import FAKE_NODES  # noqa: E402
from mtensor_side import mtensor_side, time_sides  # noqa: E402
from train_step_vs_handwritten import mlp_loss  # noqa: E402


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


def allreduce_sides(block, flat_mesh, hier_mesh, world):
    out = np.empty_like(block)

    def raw():
        world.Allreduce(block, out, op=MPI.SUM)
        return out

    def through(mesh):
        partial = mt.DTensor.from_local(block, mesh, [Partial()], shape=block.shape)
        return lambda: partial.redistribute(mesh, [Replicate()]).to_local()
    return {"raw mpi4py (flat)": raw, "mtensor flat": through(flat_mesh),
            "mtensor two-level": through(hier_mesh)}


def allreduce(args, world):
    told = os.environ.get(FAKE_NODES)
    os.environ[FAKE_NODES] = ",".join("0" * world.size)
    flat_mesh = mt.init_device_mesh((world.size,), mesh_dim_names=("w",))
    if told is None:
        del os.environ[FAKE_NODES]
    else:
        os.environ[FAKE_NODES] = told
    hier_mesh = mt.init_device_mesh((world.size,), mesh_dim_names=("w",))
    if len(set(hier_mesh.nodes)) != 2:
        raise SystemExit(f"two_nodes.py: expected 2 nodes, mtensor sees {hier_mesh.nodes}")
    backends = {"mtensor flat": flat_mesh.backends[0],
                "mtensor two-level": hier_mesh.backends[0],
                "crossover_bytes": hier_mesh.communicator(0).crossover}
    rows = {}
    for mib in args.sizes:
        block = np.full(mib * 2**20 // 4, world.rank + 1, np.float32)
        sides = allreduce_sides(block, flat_mesh, hier_mesh, world)
        want = world.size * (world.size + 1) / 2
        for name, run in sides.items():
            if not np.all(run() == want):
                raise AssertionError(f"{name} all-reduce of {mib} MiB gave a wrong sum")
        rows[mib] = time_sides(sides, args.allreduce_reps, world)
        if world.rank == 0:
            print(f"all-reduce {mib} MiB: " + ", ".join(
                f"{k} {1e3 * v:.1f} ms" for k, v in rows[mib].items()), flush=True)
    return {"backends": backends, "median_s": rows, "nodes": list(hier_mesh.nodes)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4096, help="global batch (rows, tokens)")
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--reps", type=int, default=10, help="timed Megatron steps per side")
    ap.add_argument("--sizes", default="1,4,16,64", help="all-reduce sizes in MiB")
    ap.add_argument("--allreduce-reps", type=int, default=5)
    ap.add_argument("--no-megatron", action="store_true", help="the all-reduce part only")
    ap.add_argument("--json", help="rank 0 writes the results here")
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    world = MPI.COMM_WORLD
    if world.size != 4:
        raise SystemExit("two_nodes.py: run on exactly 4 ranks, 2 per node")
    start = time.perf_counter()
    result = {"config": {k: v for k, v in vars(args).items() if k != "json"},
              "allreduce": allreduce(args, world)}
    if not args.no_megatron:
        result["megatron"] = megatron(args, world)
    result["seconds"] = time.perf_counter() - start
    if world.rank == 0:
        print(json.dumps(result.get("megatron"), indent=1), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
