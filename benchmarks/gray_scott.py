"""Gray-Scott on DTensors split by rows against numpy in one process, in one launch.

    OMP_NUM_THREADS=1 mpiexec -n 2 python benchmarks/gray_scott.py --size 4096 --steps 5

``examples/gray_scott.py``'s ``step`` (numpy code: shifted slices, in-place updates through
slice views) runs three ways, interleaved rep by rep: numpy on rank 0 alone (the other ranks
wait at a barrier), mtensor eager on every rank, and ``mt.compile`` of it.  Each side's time
is the median over reps of ``--steps`` steps; the mtensor sides' values are checked against
numpy's bit for bit, and the collectives of one step are counted.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

import mtensor as mt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from gray_scott import initial, step  # noqa: E402


def timed(fn, world, steps):
    world.Barrier()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    world.Barrier()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((world.size,))
    u0, v0 = initial(args.size)
    load = os.getloadavg()[0]
    u, v = (u0.copy(), v0.copy()) if world.rank == 0 else (None, None)
    U, V = (mt.distribute_tensor(a, mesh, [mt.Shard(0)]) for a in (u0, v0))
    Uc, Vc = (mt.distribute_tensor(a, mesh, [mt.Shard(0)]) for a in (u0, v0))
    compiled = mt.compile(step)
    with mt.CommDebugMode() as comm:
        step(U, V)
    compiled(Uc, Vc)                    # traces: both sides are a step ahead of numpy
    if world.rank == 0:
        step(u, v)
    times = {"numpy (1 process)": [], "mtensor eager": [], "mtensor compiled": []}
    for _ in range(args.reps):
        times["numpy (1 process)"].append(timed(
            (lambda: step(u, v)) if world.rank == 0 else (lambda: None), world, args.steps))
        times["mtensor eager"].append(timed(lambda: step(U, V), world, args.steps))
        times["mtensor compiled"].append(timed(lambda: compiled(Uc, Vc), world, args.steps))
    got = [np.asarray(a) for a in (U, V, Uc, Vc)]
    if world.rank != 0:
        return
    same = all(np.array_equal(g, w) for g, w in zip(got, (u, v, u, v)))
    base = statistics.median(times["numpy (1 process)"])
    rows = [dict(side=k, seconds_per_step=statistics.median(t) / args.steps,
                 speedup=base / statistics.median(t)) for k, t in times.items()]
    print(f"# Gray-Scott {args.size}x{args.size} float64, {world.size} ranks, "
          f"{args.steps} steps x {args.reps} reps; load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"collectives per eager step: {comm.get_comm_counts()}, bytes "
          f"{comm.get_comm_bytes()}; equal to numpy bit for bit: {same}")
    print("| side | s/step | speed vs numpy |\n|---|---:|---:|")
    for r in rows:
        print(f"| {r['side']} | {r['seconds_per_step']:.3f} | {r['speedup']:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(rows=rows, same=same), indent=1))
    if not same:
        sys.exit("gray_scott: mtensor's values differ from numpy's")


if __name__ == "__main__":
    main()
