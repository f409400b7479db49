"""One forward+backward of a two-block Megatron MLP: mtensor eager and compiled
(``mt.compile``) vs the same step written by hand with numpy and mpi4py on the same shards.

    mpiexec -n 4 python benchmarks/train_step_vs_handwritten.py [--batch 256 --d 512 --reps 15]

Mesh (2, n/2) = (dp, tp) (n = 2: (1, 2)).  X, T (batch, d) are batch-sharded on dp; A_i
(d, 4d) column-parallel and B_i (4d, d) row-parallel on tp.  The hand version is Megatron's:
local matmuls, an all-reduce on tp after each block's second matmul, the input-gradient
all-reduce on tp in the backward and one data-parallel all-reduce per weight gradient; both
sides also all-reduce the scalar loss.  A third side, PyTorch DTensor over gloo (when torch
imports and MTENSOR_BENCH_NO_TORCH is unset), runs the same ``mlp_loss`` on float64 DTensors
with the same placements and ``loss.backward()``, each gradient then redistributed to its
parameter's placements (the dp all-reduce).  The sides run in a random order each rep,
medians of the slowest rank; ``--json PATH`` also writes them from rank 0.
"""
import argparse
import json

import numpy as np
from mpi4py import MPI
from mtensor_side import mtensor_side, step_mesh, time_sides

import mtensor as mt
from mtensor import Replicate, Shard


def mlp_loss(params, x, t, tanh=np.tanh):
    h = x
    for i in ("1", "2"):
        h = tanh(h @ params["a" + i]) @ params["b" + i]
    return ((h - t) ** 2).mean()


def make_mtensor_step(p, x, t, mesh, compiled=False):
    col, row = [Replicate(), Shard(1)], [Replicate(), Shard(0)]
    P = {k: mt.distribute_tensor(v, mesh, col if k[0] == "a" else row) for k, v in p.items()}
    X, T = (mt.distribute_tensor(v, mesh, [Shard(0), Replicate()]) for v in (x, t))
    return mtensor_side(mlp_loss, (P, X, T), compiled)


def make_hand_step(p, x, t, mesh):
    dp, tp = mesh.get_group("dp"), mesh.get_group("tp")
    r_dp, r_tp = mesh.get_coordinate()
    rows = np.array_split(np.arange(x.shape[0]), dp.size)[r_dp]
    xl, tl = x[rows], t[rows]
    cols = lambda a: np.array_split(a, tp.size, axis=1)[r_tp].copy()  # noqa: E731
    lp = {k: cols(v) if k[0] == "a" else np.array_split(v, tp.size, axis=0)[r_tp].copy()
          for k, v in p.items()}
    n_total = t.size

    def allreduce(comm, a):
        comm.Allreduce(MPI.IN_PLACE, a, MPI.SUM)
        return a

    def run():
        acts, h = [], xl
        for i in ("1", "2"):
            z = np.tanh(h @ lp["a" + i])
            acts.append((h, z))
            h = allreduce(tp, z @ lp["b" + i])
        diff = h - tl
        loss = allreduce(dp, np.array([np.sum(diff * diff) / n_total]))[0]
        g, grads = 2 * diff / n_total, {}
        for i, (inp, z) in zip(("2", "1"), reversed(acts)):
            grads["b" + i] = allreduce(dp, z.T @ g)
            gz = (g @ lp["b" + i].T) * (1 - z * z)
            grads["a" + i] = allreduce(dp, inp.T @ gz)
            if i == "2":
                g = allreduce(tp, gz @ lp["a" + i].T)
        return loss, grads
    return run


def make_dtensor_step(p, x, t, mesh, comm):
    """The step in PyTorch DTensor on an identical (dp, tp) mesh, or None without torch."""
    from dispatch_vs_torch import init_torch

    torch, tmesh = init_torch(comm, mesh.shape, ("dp", "tp"))
    if torch is None:
        return None
    from torch.distributed.tensor import Replicate as TR
    from torch.distributed.tensor import Shard as TS
    from torch.distributed.tensor import distribute_tensor

    col, row = [TR(), TS(1)], [TR(), TS(0)]
    P = {k: distribute_tensor(torch.from_numpy(v), tmesh, col if k[0] == "a" else row)
         .requires_grad_() for k, v in p.items()}
    X, T = (distribute_tensor(torch.from_numpy(v), tmesh, [TS(0), TR()]) for v in (x, t))

    def run():
        for v in P.values():
            v.grad = None
        loss = mlp_loss(P, X, T, tanh=torch.tanh)
        loss.backward()
        grads = {k: v.grad.redistribute(tmesh, v.placements) for k, v in P.items()}
        return float(loss.detach().full_tensor()), grads
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256, help="global batch")
    parser.add_argument("--batch-per-dp", type=int,
                        help="weak scaling: global batch = this times the dp size")
    parser.add_argument("--d", type=int, default=512)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--json", help="also write the medians here (rank 0)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    n = comm.size
    mesh = step_mesh(n)
    if args.batch_per_dp:
        args.batch = args.batch_per_dp * mesh.shape[0]
    rng = np.random.default_rng(0)
    d = args.d
    x, t = rng.standard_normal((2, args.batch, d))
    p = {k: rng.standard_normal(s) / np.sqrt(s[0]) for k, s in
         [("a1", (d, 4 * d)), ("b1", (4 * d, d)), ("a2", (d, 4 * d)), ("b2", (4 * d, d))]}
    sides = {"mtensor": make_mtensor_step(p, x, t, mesh), "hand": make_hand_step(p, x, t, mesh),
             "compiled": make_mtensor_step(p, x, t, mesh, compiled=True)}
    dtensor = make_dtensor_step(p, x, t, mesh, comm)
    if dtensor is not None:
        sides["DTensor"] = dtensor
    losses = {name: run()[0] for name, run in sides.items()}
    med = time_sides(sides, args.reps, comm)
    if comm.rank == 0:
        print(f"mesh {mesh.shape} (dp, tp), batch {args.batch}, d {args.d}, hidden {4 * d}, "
              f"float64, {args.reps} reps")
        print(f"loss: mtensor {losses['mtensor']:.12f}  hand {losses['hand']:.12f}")
        print(f"step: mtensor {med['mtensor'] * 1e3:.2f} ms  hand {med['hand'] * 1e3:.2f} ms  "
              f"ratio {med['mtensor'] / med['hand']:.3f}")
        print(f"compiled: loss {losses['compiled']:.12f}  step {med['compiled'] * 1e3:.2f} ms  "
              f"compiled / hand {med['compiled'] / med['hand']:.3f}")
        if dtensor is not None:
            print(f"DTensor: loss {losses['DTensor']:.12f}  step {med['DTensor'] * 1e3:.2f} ms  "
                  f"mtensor / DTensor {med['mtensor'] / med['DTensor']:.3f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": n, "mesh": list(mesh.shape), "batch": args.batch,
                           "d": d, "reps": args.reps, "losses": losses, "median_s": med}, f)
    if dtensor is not None:
        import torch.distributed

        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
