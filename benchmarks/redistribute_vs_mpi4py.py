"""Redistribute through mtensor vs the same collective written with raw mpi4py.

    python benchmarks/redistribute_vs_mpi4py.py --ranks 2,4,8
    python benchmarks/redistribute_vs_mpi4py.py --ranks 2 --max-kib 64 --rounds 5 --reps 400

launches itself under mpiexec at each size and prints one table per size: for each collective
and buffer size (1 KiB .. 64 MiB, the full tensor), the median time of mtensor's
``redistribute`` and of the raw mpi4py calls on the same local buffers, their ratio, and the
added microseconds.  The two sides run interleaved, each call after a barrier, so machine
noise hits both alike.  The raw side is what an expert writes: preallocated output buffers,
one upper-case mpi4py call (plus the one packing copy an all-to-all of dim 1 needs).
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB
KINDS = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]


def _raw(kind, comm, local, out):
    """The hand-written mpi4py version of each redistribution, on preallocated buffers."""
    from mpi4py import MPI

    if kind == "all_reduce":
        comm.Allreduce(local, out, MPI.SUM)
    elif kind == "all_gather":
        comm.Allgather(local, out)
    elif kind == "reduce_scatter":
        comm.Reduce_scatter_block(local, out, MPI.SUM)
    else:  # S(0) -> S(1): pack column blocks contiguously, exchange, rows arrive in order
        comm.Alltoall(pack_columns(local, comm.size), out)


def pack_columns(local, n):
    """The n column blocks of ``local`` one after another: an all-to-all's send buffer."""
    rows, cols = local.shape
    return np.ascontiguousarray(local.reshape(rows, n, cols // n).transpose(1, 0, 2))


def _layouts(kind):
    import mtensor as mt

    return {
        "all_reduce": ([mt.Partial()], [mt.Replicate()]),
        "all_gather": ([mt.Shard(0)], [mt.Replicate()]),
        "reduce_scatter": ([mt.Partial()], [mt.Shard(0)]),
        "all_to_all": ([mt.Shard(0)], [mt.Shard(1)]),
    }[kind]


def _case(kind, nbytes, mesh, comm, buffers=None):
    """(mtensor callable, raw callable) for one collective on a float32 tensor of nbytes.

    ``buffers``, a dict if given, receives the raw side's local input and output arrays."""
    import mtensor as mt

    n = comm.size
    cols = 64 * n
    rows = max(n, nbytes // 4 // cols) // n * n
    src, dst = _layouts(kind)
    full_shape = (rows, cols)
    block = np.ones(_local_shape(full_shape, mesh, src), dtype=np.float32)
    x = mt.DTensor.from_local(block, mesh, src, shape=full_shape)
    local = block
    out_shape = _local_shape(full_shape, mesh, dst)
    if kind == "all_to_all":
        out_shape = (rows, cols // n)
    out = np.empty(out_shape, dtype=np.float32)
    if buffers is not None:
        buffers.update(local=local, out=out)
    return (lambda: x.redistribute(mesh, dst)), (lambda: _raw(kind, comm, local, out))


def _local_shape(shape, mesh, placements):
    from mtensor.placement import local_shape

    return local_shape(shape, mesh.shape, placements, mesh.coordinate)


def median_sides(fns, comm, reps):
    """Median seconds per call of each callable in ``fns``, interleaved, each after a barrier."""
    times = [[] for _ in fns]
    for rep in range(reps):  # rotate which side goes first
        first = rep % len(fns)
        for i in list(range(first, len(fns))) + list(range(first)):
            comm.Barrier()
            t0 = time.perf_counter()
            fns[i]()
            times[i].append(time.perf_counter() - t0)
    # every rank reports the slowest rank's median: a collective ends when its last rank does
    return [comm.allreduce(float(np.median(t)), op=_max()) for t in times]


def size_label(nbytes):
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def reps_for(nbytes):
    return int(min(200, max(5, (64 << 20) // nbytes // 4)))


def _max():
    from mpi4py import MPI

    return MPI.MAX


def worker(max_bytes, rounds, reps):
    """``rounds`` > 1: each cell is the median of that many rounds (and the table says the
    spread of the added time over them)."""
    from mpi4py import MPI

    import mtensor as mt

    comm = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((comm.size,))
    rows = []
    for kind in KINDS:
        for nbytes in (s for s in SIZES if s <= max_bytes):
            ours, raw = _case(kind, nbytes, mesh, comm)
            ours(), raw()  # warm-up: plan cache, MPI connections
            runs = [median_sides([ours, raw], comm, reps or reps_for(nbytes))
                    for _ in range(rounds)]
            t_ours, t_raw = (float(np.median(v)) for v in zip(*runs))
            added = [1e6 * (a - b) for a, b in runs]
            rows.append((kind, nbytes, t_ours, t_raw, min(added), max(added)))
    if comm.rank == 0:
        print(f"\n### {comm.size} ranks ({os.cpu_count()} cores), float32, median of "
              f"interleaved runs\n")
        print("| collective | size | mtensor | mpi4py | ratio | added | added, rounds' range |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for kind, nbytes, t_ours, t_raw, low, high in rows:
            print(f"| {kind} | {size_label(nbytes)} | {t_ours * 1e6:.1f} us | "
                  f"{t_raw * 1e6:.1f} us | {t_ours / t_raw:.3f} | "
                  f"{(t_ours - t_raw) * 1e6:+.1f} us | {low:+.1f} to {high:+.1f} us |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="2,4,8", help="comma-separated world sizes")
    parser.add_argument("--max-kib", type=int, default=SIZES[-1] >> 10,
                        help="largest size in KiB (small collectives: 64)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat each cell, take medians")
    parser.add_argument("--reps", type=int, default=0, help="calls per round (0: by size)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.max_kib << 10, args.rounds, args.reps)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = mpiexec if os.path.exists(mpiexec) else "mpiexec"
    for n in args.ranks.split(","):
        subprocess.run([mpiexec, "-n", n, sys.executable, __file__, "--worker", "--max-kib",
                        str(args.max_kib), "--rounds", str(args.rounds), "--reps",
                        str(args.reps)], check=True)


if __name__ == "__main__":
    main()
