"""numpy's distributed algorithms on DTensors against numpy on the whole array in one process.

    mpiexec -n 4 python benchmarks/algorithms.py [--log2n 24] [--rows 262144] [--cols 32]
                                                 [--reps 3] [--json PATH]

Cases, each on an array split ``Shard(0)`` over every rank:

- ``np.sort`` of ``2**log2n`` float64 values: the sample sort (local sorts, an all-gather of
  samples, an all-to-all of the buckets, an all-to-all back to balanced blocks);
- ``np.cumsum`` of the same array: local scans, an all-gather of one total per block;
- ``np.diff``: a halo of one value per block;
- ``np.linalg.qr`` of a ``rows x cols`` matrix: TSQR (local qr, an all-gather of the
  ``cols x cols`` R factors, one small qr, a local product).

In the same launch rank 0 runs numpy on the whole array while the other ranks wait without
spinning (an ``Ibarrier`` polled with sleeps), so numpy has the cores to itself; the two sides
take turns in every repetition.  Medians over ``reps`` (mtensor: the slowest rank); the ratio
is one-process time over distributed time (above 1: distributed is faster).  With more ranks
than cores the ranks share the cores.
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
    n = 2 ** args.log2n
    rng = mt.random.default_rng(0)
    x = rng.standard_normal((n,), mesh=mesh, placements=[mt.Shard(0)])
    a = rng.standard_normal((args.rows, args.cols), mesh=mesh, placements=[mt.Shard(0)])
    whole_x, whole_a = x.full_tensor(), a.full_tensor()

    def same_r(got, want):   # TSQR's R has diag >= 0; numpy's signs may differ
        r = got[1].full_tensor()
        return want is None or np.allclose(np.abs(r), np.abs(want[1]), atol=1e-8)

    def same(got, want):
        got = got.full_tensor()
        return want is None or np.allclose(got, want, rtol=1e-9, atol=1e-6)

    return {
        f"sort (2^{args.log2n} float64)": (lambda: np.sort(x), lambda: np.sort(whole_x), same),
        f"cumsum (2^{args.log2n} float64)": (lambda: np.cumsum(x), lambda: np.cumsum(whole_x),
                                             same),
        f"diff (2^{args.log2n} float64)": (lambda: np.diff(x), lambda: np.diff(whole_x), same),
        f"qr ({args.rows} x {args.cols} float64)": (lambda: np.linalg.qr(a),
                                                    lambda: np.linalg.qr(whole_a), same_r),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--rows", type=int, default=2 ** 18)
    parser.add_argument("--cols", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", help="also write the results here (rank 0)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((comm.size,))
    rows = []
    for name, (ours, theirs, check) in cases(mesh, args).items():
        ours()                                    # warm-up: plans, pools
        times = {"mtensor": [], "numpy": []}
        for rep in range(args.reps):
            sides = [("mtensor", distributed, ours), ("numpy", alone, theirs)]
            for side, how, fn in sides[rep % 2:] + sides[:rep % 2]:
                took, result = how(comm, fn)
                times[side].append(took)
                if side == "mtensor":
                    got = result
                else:
                    want = result
        ok = comm.bcast(bool(check(got, want)))   # a collective; rank 0 holds numpy's
        ours_s, theirs_s = (float(np.median(times[k])) for k in ("mtensor", "numpy"))
        rows.append({"case": name, "mtensor_s": ours_s, "numpy_s": theirs_s,
                     "ratio": theirs_s / ours_s, "correct": bool(ok)})
    if comm.rank == 0:
        print(f"\n{comm.size} ranks on {os.cpu_count()} cores, median of {args.reps}\n")
        print("| case | numpy, one process (s) | mtensor, split (s) | numpy / mtensor | equal |")
        print("|---|---:|---:|---:|---|")
        for r in rows:
            print(f"| {r['case']} | {r['numpy_s']:.4f} | {r['mtensor_s']:.4f} | "
                  f"{r['ratio']:.2f} | {r['correct']} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": comm.size, "cores": os.cpu_count(), "reps": args.reps,
                           "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
