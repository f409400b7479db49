"""The four collectives three ways: mtensor ``redistribute``, raw mpi4py, torch.distributed (gloo).

    mpiexec -n 2 python benchmarks/collectives.py [--quick] [--json PATH]

Extends ``redistribute_vs_mpi4py.py`` (same cases, same buffers, same interleaved timing) with
a torch.distributed side over gloo on the raw side's numpy buffers (``torch.from_numpy``, no
copy; all-reduce, in place in torch, gets its own zero buffer of the same size; all-to-all
packs its column blocks like the raw side).  Prints, per collective and size, the medians
(slowest rank), the ratios to mpi4py and the bus bandwidth in the nccl-tests convention:
all-reduce 2(n-1)/n * S/t, the others (n-1)/n * S/t, with S the full tensor for all-reduce,
all-gather and reduce-scatter and each rank's buffer (S/n) for all-to-all.  torch is optional
(skipped, as is the whole side, without it or with MTENSOR_BENCH_NO_TORCH=1).  The
repetitions are redistribute_vs_mpi4py's (at least 11), capped so one case takes about
2 s (5 at least).
"""
import argparse
import json
import os

from dispatch_vs_torch import init_torch
from mpi4py import MPI
from redistribute_vs_mpi4py import (
    KINDS,
    SIZES,
    _case,
    median_sides,
    pack_columns,
    reps_for,
    size_label,
)

import mtensor as mt

QUICK_SIZES = [1 << 10, 1 << 14, 1 << 17]  # 1, 16, 128 KiB
SIDES = ("mtensor", "mpi4py", "gloo")
CASE_BUDGET_S = 2.0


def torch_call(kind, torch, local, out, n):
    """torch.distributed's version of the raw side, on the same numpy buffers."""
    import torch.distributed as dist

    if kind == "all_reduce":
        buf = torch.zeros(local.shape, dtype=torch.float32)
        return lambda: dist.all_reduce(buf)
    t_out = torch.from_numpy(out)
    if kind == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        t_in = torch.from_numpy(local)
        return lambda: gather(t_out, t_in)
    if kind == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        t_in = torch.from_numpy(local)
        return lambda: scatter(t_out, t_in)
    return lambda: dist.all_to_all_single(t_out, torch.from_numpy(pack_columns(local, n)))


def bus_bandwidth(kind, nbytes, n, seconds):
    """Bytes per second each link carries, nccl-tests style (see the module docstring)."""
    if kind == "all_reduce":
        return 2 * (n - 1) / n * nbytes / seconds
    size = nbytes / n if kind == "all_to_all" else nbytes
    return (n - 1) / n * size / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three small sizes, few reps")
    parser.add_argument("--json", help="also write the rows here (rank 0)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    n = comm.size
    mesh = mt.init_device_mesh((n,))
    torch, _ = init_torch(comm)
    rows = []
    for kind in KINDS:
        for nbytes in (QUICK_SIZES if args.quick else SIZES):
            bufs = {}
            fns = list(_case(kind, nbytes, mesh, comm, bufs))
            if torch is not None:
                fns.append(torch_call(kind, torch, bufs["local"], bufs["out"], n))
            for fn in fns:  # warm-up: plan cache, MPI and gloo connections
                fn()
            # as many reps as redistribute_vs_mpi4py, but at most ~CASE_BUDGET_S per case
            # (gloo on oversubscribed cores takes tens of ms even on tiny buffers)
            one_round = sum(median_sides(fns, comm, 1))
            reps = 3 if args.quick else min(max(11, reps_for(nbytes)),
                                            max(5, int(CASE_BUDGET_S / one_round)))
            times = median_sides(fns, comm, reps) + [None] * (len(SIDES) - len(fns))
            rows.append({"kind": kind, "bytes": nbytes, "reps": reps,
                         **dict(zip(SIDES, times)),
                         **{"busbw_" + s: bus_bandwidth(kind, nbytes, n, t) if t else None
                            for s, t in zip(SIDES, times)}})
    if comm.rank == 0:
        print_rows(rows, n)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": n, "cores": os.cpu_count(), "dtype": "float32",
                           "torch": torch is not None, "rows": rows}, f)
    if torch is not None:
        torch.distributed.destroy_process_group()


def print_rows(rows, n):
    def us(t):
        return f"{t * 1e6:.1f}" if t else "n/a"

    def ratio(t, base):
        return f"{t / base:.2f}" if t and base else "n/a"

    print(f"\n### {n} ranks ({os.cpu_count()} cores), float32, us (median, slowest rank), "
          f"bus bandwidth GB/s\n")
    print("| collective | size | mtensor | mpi4py | gloo | mt / mpi4py | mt / gloo | "
          "busbw mt | busbw mpi4py | busbw gloo |")
    print("|---|" + "---:|" * 9)
    for r in rows:
        bw = [f"{r['busbw_' + s] / 1e9:.2f}" if r["busbw_" + s] else "n/a" for s in SIDES]
        print(f"| {r['kind']} | {size_label(r['bytes'])} | {us(r['mtensor'])} | "
              f"{us(r['mpi4py'])} | {us(r['gloo'])} | {ratio(r['mtensor'], r['mpi4py'])} | "
              f"{ratio(r['mtensor'], r['gloo'])} | {' | '.join(bw)} |")


if __name__ == "__main__":
    main()
