"""What the reliability guards cost per collective: check mode and the timeout watchdog.

    mpiexec -n 2 python benchmarks/guards_cost.py [--reps 40] [--json PATH]

Times ``x.full_tensor()`` for x Shard(0) (one all-gather) and for x Partial (one all-reduce),
for a small (64x64 float64 per rank) and a large (1024x1024) tensor, with
the guards off, with ``set_checks(True)``, and with ``set_timeout(60)``; the settings take
turns inside each repetition, so machine noise hits all alike.  Prints medians (slowest
rank) and the added microseconds.
"""
import argparse
import time

import numpy as np
from mpi4py import MPI
from tables import emit

import mtensor as mt

SETTINGS = {"off": (False, None), "checks": (True, None), "timeout": (False, 60.0)}


def cases(mesh, n):
    out = {}
    for rows in (64, 1024):
        x = mt.distribute_tensor(np.ones((rows * n, rows)), mesh, [mt.Shard(0)])
        out[f"all_gather {rows}x{rows}/rank"] = lambda x=x: x.full_tensor()
        p = mt.DTensor.from_local(np.ones((rows, rows)), mesh, [mt.Partial()])
        out[f"all_reduce {rows}x{rows}"] = lambda p=p: p.full_tensor()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--json", help="also write the table and numbers here (rank 0)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((comm.size,))
    times = {}
    for label, fn in cases(mesh, comm.size).items():
        batch = 50 if "64x" in label else 3
        for rep in range(args.reps):
            names = list(SETTINGS)[rep % 3:] + list(SETTINGS)[:rep % 3]
            for name in names:
                checks, timeout = SETTINGS[name]
                mt.set_checks(checks)
                mt.set_timeout(timeout)
                fn()
                comm.Barrier()
                start = time.perf_counter()
                for _ in range(batch):
                    fn()
                times.setdefault((label, name), []).append((time.perf_counter() - start) / batch)
    mt.set_checks(False)
    mt.set_timeout(None)
    medians = {k: comm.allreduce(float(np.median(v)), op=MPI.MAX) for k, v in times.items()}
    if comm.rank == 0:
        lines = [f"{comm.size} ranks, us per call (median, slowest rank)", "",
                 "| case | off | checks | added | timeout | added |",
                 "|---|---:|---:|---:|---:|---:|"]
        added = {}
        for label in dict.fromkeys(k[0] for k in medians):
            off, chk, tmo = (medians[(label, s)] * 1e6 for s in SETTINGS)
            added[label] = {"checks_us": chk - off, "timeout_us": tmo - off}
            lines.append(f"| {label} | {off:.1f} | {chk:.1f} | {chk - off:+.1f} | {tmo:.1f} | "
                         f"{tmo - off:+.1f} |")
        emit(args.json, lines, {"ranks": comm.size, "added": added})

if __name__ == "__main__":
    main()
