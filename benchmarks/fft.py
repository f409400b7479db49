"""The distributed FFT (``np.fft`` on DTensors) against numpy's FFT on the whole array in one
process.

    mpiexec -n 2 python benchmarks/fft.py [--n2 2048] [--n3 128] [--nr 4096] [--reps 5]
                                          [--json PATH]

Cases, each on an array split ``Shard(0)`` over every rank (a 1-D mesh: slabs):

- ``np.fft.fft2`` of an ``n2 x n2`` complex128 array: the rows' transforms where they lie,
  one all-to-all (S(0) -> S(1)), the columns' transforms; the result stays column-split;
- ``np.fft.fftn`` of an ``n3**3`` complex128 array: the same with a 2-D transform per slab;
- ``np.fft.rfft2`` of an ``nr x nr`` float64 array: the real transform of the rows, the
  all-to-all of the half spectrum, the columns' complex transforms.

In the same launch rank 0 runs numpy on the whole array while the other ranks wait without
spinning (an ``Ibarrier`` polled with sleeps), so numpy has the cores to itself; the two sides
take turns in every repetition.  Medians over ``reps`` (mtensor: the slowest rank); the ratio
is one-process time over distributed time (above 1: distributed is faster).  The column
"all-to-all (s)" is the median time of the redistribution alone on the same array.  With
more ranks than cores the ranks share the cores.
"""
import argparse
import json
import os
import time

import numpy as np
from mpi4py import MPI

import mtensor as mt


def idle_wait(comm):
    """Wait for every rank without busy-polling MPI, which would take a core from rank 0."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(0.002)


def distributed(comm, fn):
    idle_wait(comm)
    start = time.perf_counter()
    out = fn()
    return comm.allreduce(time.perf_counter() - start, op=MPI.MAX), out


def alone(comm, fn):
    idle_wait(comm)
    took, out = None, None
    if comm.rank == 0:
        start = time.perf_counter()
        out = fn()
        took = time.perf_counter() - start
    idle_wait(comm)
    return comm.bcast(took), out


def cases(mesh, args):
    rng = mt.random.default_rng(0)
    split = [mt.Shard(0)]

    def complex_array(shape):
        return (rng.standard_normal(shape, mesh=mesh, placements=split)
                + 1j * rng.standard_normal(shape, mesh=mesh, placements=split))

    z2 = complex_array((args.n2, args.n2))
    z3 = complex_array((args.n3,) * 3)
    r2 = rng.standard_normal((args.nr, args.nr), mesh=mesh, placements=split)
    return {
        f"fft2 ({args.n2}x{args.n2} complex128)": (np.fft.fft2, z2),
        f"fftn ({args.n3}^3 complex128)": (np.fft.fftn, z3),
        f"rfft2 ({args.nr}x{args.nr} float64)": (np.fft.rfft2, r2),
    }


def measure(comm, fn, x, reps):
    whole = x.full_tensor()                       # a collective: every rank gathers
    with mt.CommDebugMode() as debug:
        got = fn(x)                               # warm-up: plans, pools
    moved = np.fft.fft(x, axis=1) if x.dtype.kind == "c" else np.fft.rfft(x, axis=1)
    target = got.placements
    times = {"mtensor": [], "numpy": [], "all_to_all": []}
    want = None
    for rep in range(reps):
        sides = [("mtensor", distributed, lambda: fn(x)),
                 ("numpy", alone, lambda: fn(whole) if comm.rank == 0 else None)]
        for side, how, run in sides[rep % 2:] + sides[:rep % 2]:
            took, result = how(comm, run)
            times[side].append(took)
            if side == "numpy":
                want = result
        times["all_to_all"].append(distributed(comm, lambda: moved.redistribute(
            placements=target))[0])
    full = fn(x).full_tensor()
    ok = comm.bcast(bool(np.allclose(full, want, rtol=1e-10, atol=1e-8))
                    if comm.rank == 0 else None)
    medians = {k: float(np.median(v)) for k, v in times.items()}
    return {"mtensor_s": medians["mtensor"], "numpy_s": medians["numpy"],
            "all_to_all_s": medians["all_to_all"], "ratio": medians["numpy"] / medians["mtensor"],
            "collectives": debug.get_comm_counts(), "out": str(target), "correct": ok}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n2", type=int, default=2048)
    parser.add_argument("--n3", type=int, default=128)
    parser.add_argument("--nr", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", help="also write the results here (rank 0)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((comm.size,))
    rows = [{"case": name, **measure(comm, fn, x, args.reps)}
            for name, (fn, x) in cases(mesh, args).items()]
    if comm.rank == 0:
        print(f"\n{comm.size} ranks on {os.cpu_count()} cores, median of {args.reps}\n")
        print("| case | numpy, one process (s) | mtensor, S(0) (s) | numpy / mtensor | "
              "all-to-all (s) | collectives | output | equal |")
        print("|---|---:|---:|---:|---:|---|---|---|")
        for r in rows:
            print(f"| {r['case']} | {r['numpy_s']:.4f} | {r['mtensor_s']:.4f} | "
                  f"{r['ratio']:.2f} | {r['all_to_all_s']:.4f} | {r['collectives']} | "
                  f"{r['out']} | {r['correct']} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": comm.size, "cores": os.cpu_count(), "reps": args.reps,
                           "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
