"""What a write to a DTensor costs against the same write in numpy on the local block.

    mpiexec -n 2 python benchmarks/writes.py [--reps 30] [--n 4096] [--json PATH]

Cases (none communicates): ``x += y`` on a 64x64 block per rank; ``x[mask] = 0`` with a
bool DTensor mask and ``x[:, c] -= v`` with ``v`` a DTensor column, on an ``n`` x ``n``
float64 array split by rows.  numpy runs the same statement on this rank's blocks.  The two
sides take turns inside every repetition, so machine noise hits both alike; the table gives
medians (slowest rank), the difference and the ratio.
"""
import argparse
import time

import numpy as np
from mpi4py import MPI
from tables import emit

import mtensor as mt


def cases(mesh, n, size):
    rng = np.random.default_rng(0)
    small = [mt.distribute_tensor(rng.random((64 * size, 64)), mesh, [mt.Shard(0)])
             for _ in range(2)]
    a, b = (t.to_local().copy() for t in small)
    x, y = small
    big = mt.distribute_tensor(rng.random((n, n)), mesh, [mt.Shard(0)])
    mask = big > 0.5
    col = mt.distribute_tensor(rng.random(n), mesh, [mt.Shard(0)])
    big_l, mask_l, col_l = big.to_local().copy(), mask.to_local(), col.to_local()

    def iadd_mt():
        nonlocal x
        x += y

    def iadd_np():
        nonlocal a
        a += b

    def mask_mt():
        big[mask] = 0.0

    def mask_np():
        big_l[mask_l] = 0.0

    def column_mt():
        big[:, 7] -= col

    def column_np():
        big_l[:, 7] -= col_l

    return {"x += y (64x64 per rank)": (iadd_mt, iadd_np, 2000),
            f"x[mask] = 0 ({n}x{n} S(0))": (mask_mt, mask_np, 2),
            f"x[:, c] -= v ({n}x{n} S(0))": (column_mt, column_np, 200)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--json", help="also write the table and numbers here (rank 0)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((comm.size,))
    times = {}
    for label, (ours, theirs, batch) in cases(mesh, args.n, comm.size).items():
        for rep in range(args.reps):
            sides = [("mtensor", ours), ("numpy", theirs)]
            for side, fn in sides[rep % 2:] + sides[:rep % 2]:
                fn()
                start = time.perf_counter()
                for _ in range(batch):
                    fn()
                times.setdefault((label, side), []).append((time.perf_counter() - start) / batch)
    medians = {k: comm.allreduce(float(np.median(v)), op=MPI.MAX) for k, v in times.items()}
    if comm.rank == 0:
        lines = [f"{comm.size} ranks, us per call (median, slowest rank)", "",
                 "| write | numpy (local block) | mtensor | added | ratio |",
                 "|---|---:|---:|---:|---:|"]
        rows = {}
        for label in dict.fromkeys(k[0] for k in medians):
            ours, theirs = medians[(label, "mtensor")] * 1e6, medians[(label, "numpy")] * 1e6
            rows[label] = {"added_us": ours - theirs, "ratio": ours / theirs}
            lines.append(f"| {label} | {theirs:.1f} | {ours:.1f} | {ours - theirs:+.1f} | "
                         f"{ours / theirs:.2f} |")
        emit(args.json, lines, {"ranks": comm.size, "rows": rows})

if __name__ == "__main__":
    main()
