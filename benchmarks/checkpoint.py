"""Checkpoint save and load throughput against two hand-written baselines.

    mpiexec -n 4 python benchmarks/checkpoint.py [--mib 256] [--reps 3] [--leaves 8] [--json PATH]

The state is ``--leaves`` float32 DTensors split by rows over ``(n,)``, ``--mib`` MiB in
all (the issue asks 1 GiB; the default is smaller for small machines).  Sides, each
flushing its data to disk (fsync) before the clock stops:

- ``mtensor.checkpoint``: ``save(path, state)`` (every rank writes its own chunks, atomic
  commit) and ``load(path, like=state)``;
- ``per-rank np.save``: each rank ``np.save`` of its own block, one file per rank and leaf,
  and ``np.load`` of it (no metadata, no atomicity: the floor of parallel I/O);
- ``gather + np.save``: ``Gatherv`` of every leaf to rank 0, one ``np.save`` per leaf, and
  for loading rank 0 ``np.load`` plus ``distribute_tensor`` (a scatter).

The sides take turns inside every repetition so machine noise hits all alike; the table
gives medians of the slowest rank.  Loads read files just written (warm page cache).
"""
import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
from mpi4py import MPI
from tables import emit

import mtensor as mt
from mtensor import checkpoint

WORLD = MPI.COMM_WORLD


def timed(fn):
    WORLD.Barrier()
    start = time.perf_counter()
    out = fn()
    WORLD.Barrier()
    return WORLD.allreduce(time.perf_counter() - start, op=MPI.MAX), out


def np_save(path, array):
    with open(path, "wb") as f:
        np.save(f, array)
        f.flush()
        os.fsync(f.fileno())


def sides(mesh, state, root):
    rank = WORLD.rank

    def mt_save(d):
        return lambda: checkpoint.save(os.path.join(d, "ck"), state)

    def mt_load(d):
        return lambda: checkpoint.load(os.path.join(d, "ck"), like=state)

    def rank_save(d):
        def run():
            for i, x in enumerate(state):
                np_save(os.path.join(d, f"leaf{i}-rank{rank}.npy"), x.to_local())
        return run

    def rank_load(d):
        return lambda: [np.load(os.path.join(d, f"leaf{i}-rank{rank}.npy"))
                        for i in range(len(state))]

    def gather_save(d):
        def run():
            for i, x in enumerate(state):
                local = x.to_local()
                counts = WORLD.gather(local.size)
                full = np.empty(x.shape, x.dtype) if rank == 0 else None
                WORLD.Gatherv(local, (full, counts) if rank == 0 else None, root=0)
                if rank == 0:
                    np_save(os.path.join(d, f"leaf{i}.npy"), full)
        return run

    def gather_load(d):
        def run():
            return [mt.distribute_tensor(np.load(os.path.join(d, f"leaf{i}.npy")) if rank == 0
                                         else np.empty(x.shape, x.dtype), mesh, x.placements)
                    for i, x in enumerate(state)]
        return run

    return {"mtensor.checkpoint": (mt_save, mt_load), "per-rank np.save": (rank_save, rank_load),
            "gather + np.save": (gather_save, gather_load)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed first repetitions")
    parser.add_argument("--leaves", type=int, default=8)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--json", help="also write the table and numbers here (rank 0)")
    args = parser.parse_args()
    n = WORLD.size
    mesh = mt.init_device_mesh((n,))
    cols = 1024
    rows = max(n, args.mib * 2 ** 20 // 4 // cols // args.leaves // n * n)
    state = [mt.random.default_rng(i).standard_normal((rows, cols), mesh=mesh,
                                                      placements=[mt.Shard(0)]).astype(np.float32)
             for i in range(args.leaves)]
    nbytes = sum(x.size * 4 for x in state)
    root = WORLD.bcast(tempfile.mkdtemp(prefix="mtensor-ckpt-bench-", dir=args.dir)
                       if WORLD.rank == 0 else None)
    cases = sides(mesh, state, root)
    times = {name: ([], []) for name in cases}
    for rep in range(args.warmup + args.reps):
        for name, (save, load) in cases.items():
            d = os.path.join(root, f"{rep}-{name.split()[0]}")
            if WORLD.rank == 0:
                os.makedirs(d)
            WORLD.Barrier()
            t_save, _ = timed(save(d))
            t_load, _ = timed(load(d))
            if rep >= args.warmup:
                times[name][0].append(t_save)
                times[name][1].append(t_load)
            WORLD.Barrier()
            if WORLD.rank == 0:
                shutil.rmtree(d)
    if WORLD.rank == 0:
        shutil.rmtree(root, ignore_errors=True)
        med = {k: (statistics.median(s), statistics.median(l)) for k, (s, l) in times.items()}
        mine = med["mtensor.checkpoint"]
        lines = [f"{n} ranks, {args.leaves} float32 leaves of ({rows}, {cols}) split by rows, "
                 f"{nbytes / 2 ** 20:.0f} MiB, median of {args.reps}", "",
                 "| side | save s | save MB/s | load s | load MB/s | save: side time / mtensor | "
                 "load: side time / mtensor |", "|---|---|---|---|---|---|---|"]
        for k, (s, l) in med.items():
            lines.append(f"| {k} | {s:.3f} | {nbytes / s / 1e6:.0f} | {l:.3f} | "
                         f"{nbytes / l / 1e6:.0f} | {s / mine[0]:.2f}x | {l / mine[1]:.2f}x |")
        emit(args.json, lines, {"ranks": n, "mib": nbytes / 2 ** 20, "median_s": med})

if __name__ == "__main__":
    main()
