"""Per-op dispatch cost of mtensor vs PyTorch DTensor, against numpy on the local block.

    mpiexec -n 2 python benchmarks/dispatch_vs_torch.py [--reps 60] [--quick]

Each rank holds a 64x64 float64 block of x and y (global (64n, 64), Shard(0)); w (64, 64) is
replicated.  Ops, none of which needs communication: ``x + y``, ``x * 2.0``, ``x @ w``,
``x.sum(axis=1)``, a reshape to (64n, 8, 8) that keeps the shard, the first ``x + y`` on a
new shape (a dispatch-cache miss: 65, 66, ... rows per rank), and a 512x512 matmul per rank
(x global (512n, 512) Shard(0) @ w (512, 512) Replicate).

Sides, all in this one process: numpy on the local blocks (the baseline), mtensor, plain torch
on the local blocks, and ``torch.distributed.tensor`` over gloo (env://).  They run
interleaved: each repetition times a batch of calls per side, rotating which side goes first;
rank 0 prints, per side, the median of the per-batch means (slowest rank), the microseconds
added over numpy, and the ratio to numpy.  torch is optional (``pip install torch==2.13.0
--index-url https://download.pytorch.org/whl/cpu``): without it, or with
MTENSOR_BENCH_NO_TORCH=1 in the environment, its columns read "n/a".  ``--json PATH`` also
writes the table (seconds per op, null where absent) from rank 0.

One thread per rank on every side: OMP/OPENBLAS/MKL_NUM_THREADS default to 1 below, before
numpy is imported (override with ``mpiexec -genv OMP_NUM_THREADS 2 ...``), and torch gets
``set_num_threads(1)``.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402  (the thread settings above must precede numpy)
import json  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import mtensor as mt  # noqa: E402

SIDES = ("numpy", "mtensor", "torch", "DTensor")
SMALL, LARGE = 64, 512
CASES = [  # label, rows and cols per rank block, op on (x, y, w) -- the same code for every side
    ("x + y", SMALL, lambda x, y, w: x + y),
    ("x * 2.0", SMALL, lambda x, y, w: x * 2.0),
    ("x @ w (w replicated)", SMALL, lambda x, y, w: x @ w),
    ("x.sum(axis=1)", SMALL, lambda x, y, w: x.sum(axis=1)),
    ("reshape (64n,64)->(64n,8,8)", SMALL, lambda x, y, w: x.reshape(x.shape[0], 8, 8)),
    ("512x512 matmul per rank", LARGE, lambda x, y, w: x @ w),
]
MISS_LABEL = "x + y, first call on a new shape"


def init_torch(comm, mesh_shape=None, mesh_dim_names=None):
    """(torch module, CPU device mesh over gloo, 1-D over all ranks unless ``mesh_shape``), or
    (None, None) when torch cannot be imported or MTENSOR_BENCH_NO_TORCH is set."""
    if os.environ.get("MTENSOR_BENCH_NO_TORCH"):
        if comm.rank == 0:
            print("note: MTENSOR_BENCH_NO_TORCH is set; torch columns skipped")
        return None, None
    try:
        import torch
        import torch.distributed as dist
        from torch.distributed.tensor import init_device_mesh
    except ImportError as exc:
        if comm.rank == 0:
            print(f"note: torch not importable ({exc}); torch columns skipped")
        return None, None
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    port = comm.bcast(_free_port() if comm.rank == 0 else None)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      RANK=str(comm.rank), WORLD_SIZE=str(comm.size))
    dist.init_process_group("gloo", init_method="env://")
    return torch, init_device_mesh("cpu", tuple(mesh_shape or (comm.size,)),
                                   mesh_dim_names=mesh_dim_names)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def operands(rows, cols, comm, mesh, torch, tmesh):
    """{side: (x, y, w)}: x, y global (rows*n, cols) Shard(0), w (cols, cols) Replicate.

    The full arrays come from a fixed seed, so every rank builds the same ones; sides
    without their library are left out."""
    rng = np.random.default_rng(rows)
    n, r = comm.size, comm.rank
    fx, fy = rng.standard_normal((2, rows * n, cols))
    fw = rng.standard_normal((cols, cols))
    block = slice(r * rows, (r + 1) * rows)
    local = (fx[block], fy[block], fw)
    sides = {
        "numpy": local,
        "mtensor": (mt.distribute_tensor(fx, mesh, [mt.Shard(0)]),
                    mt.distribute_tensor(fy, mesh, [mt.Shard(0)]),
                    mt.distribute_tensor(fw, mesh, [mt.Replicate()])),
    }
    if torch is not None:
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor

        sides["torch"] = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in local)
        sides["DTensor"] = (distribute_tensor(torch.from_numpy(fx), tmesh, [Shard(0)]),
                            distribute_tensor(torch.from_numpy(fy), tmesh, [Shard(0)]),
                            distribute_tensor(torch.from_numpy(fw), tmesh, [Replicate()]))
    return sides


def time_sides(make_calls, reps, batch):
    """{side: median over reps of the per-batch mean seconds per call}.

    ``make_calls(rep)`` gives {side: zero-argument callable} for that repetition (untimed);
    the sides take turns going first."""
    times = {}
    for rep in range(reps):
        calls = make_calls(rep)
        names = list(calls)
        start = rep % len(names)
        for side in names[start:] + names[:start]:
            fn = calls[side]
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            times.setdefault(side, []).append((time.perf_counter() - t0) / batch)
    return {side: float(np.median(t)) for side, t in times.items()}


def steady_case(op, rows, comm, mesh, torch, tmesh, reps, batch):
    """Cached dispatch: the same inputs every call, after one warm-up call per side."""
    sides = operands(rows, rows, comm, mesh, torch, tmesh)
    calls = {side: (lambda a=args: op(*a)) for side, args in sides.items()}
    for fn in calls.values():
        fn()
    comm.Barrier()
    return time_sides(lambda rep: calls, reps, batch)


def miss_case(comm, mesh, torch, tmesh, reps):
    """The first ``x + y`` on a shape not seen before (65, 66, ... rows per rank)."""
    def make_calls(rep):
        sides = operands(SMALL + 1 + rep, SMALL, comm, mesh, torch, tmesh)
        comm.Barrier()
        return {side: (lambda a=args: a[0] + a[1]) for side, args in sides.items()}

    return time_sides(make_calls, reps, batch=1)


def slowest_rank(results, comm):
    """The same table on rank 0 with each entry the max over ranks (nan where a side is absent)."""
    local = np.array([[res.get(side, np.nan) for side in SIDES] for res in results.values()])
    worst = np.empty_like(local)
    comm.Reduce(np.nan_to_num(local, nan=-1.0), worst, op=MPI.MAX, root=0)
    worst[worst < 0] = np.nan
    return dict(zip(results, worst))


def print_table(table, comm):
    def us(t):
        return f"{t * 1e6:.1f}" if np.isfinite(t) else "n/a"

    def added(t, base):
        return f"{(t - base) * 1e6:+.1f}" if np.isfinite(t) else "n/a"

    def ratio(t, base):
        return f"{t / base:.2f}" if np.isfinite(t) else "n/a"

    print(f"\n### {comm.size} rank(s), {os.cpu_count()} cores, float64, us per op: median of "
          f"per-batch means, slowest rank\n")
    print("| op | numpy | mtensor | mt added | mt / np | torch | DTensor | DT added | "
          "DT / np | DT - torch |")
    print("|---|" + "---:|" * 9)
    for label, (t_np, t_mt, t_th, t_dt) in table.items():
        print(f"| {label} | {us(t_np)} | {us(t_mt)} | {added(t_mt, t_np)} | "
              f"{ratio(t_mt, t_np)} | {us(t_th)} | "
              f"{us(t_dt)} | {added(t_dt, t_np)} | {ratio(t_dt, t_np)} | {added(t_dt, t_th)} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=60, help="repetitions (batches) per side")
    parser.add_argument("--quick", action="store_true", help="tiny run, for a smoke test")
    parser.add_argument("--json", help="also write the table here (rank 0)")
    args = parser.parse_args()
    reps = 3 if args.quick else args.reps
    small_batch, large_batch = (10, 1) if args.quick else (200, 3)

    comm = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((comm.size,))
    torch, tmesh = init_torch(comm)
    results = {}
    for label, rows, op in CASES:
        batch = large_batch if rows == LARGE else small_batch
        results[label] = steady_case(op, rows, comm, mesh, torch, tmesh, reps, batch)
    results[MISS_LABEL] = miss_case(comm, mesh, torch, tmesh, reps)
    table = slowest_rank(results, comm)
    if comm.rank == 0:
        print_table(table, comm)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": comm.size, "reps": reps, "sides": SIDES, "table": {
                    label: [float(t) if np.isfinite(t) else None for t in row]
                    for label, row in table.items()}}, f)
    if torch is not None:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
