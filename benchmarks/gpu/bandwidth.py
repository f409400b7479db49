"""Host<->device copies and device collectives, against host MPI on the same sizes.

    mpiexec -n 2 python benchmarks/gpu/bandwidth.py [--sizes-mb 1,16,256] [--json PATH]

On rank 0: pinned and pageable host<->device copies (GB/s).  On every rank, for all-reduce
and all-gather of each size: each GPU backend this machine can run (staged always, NCCL where
every rank has its own GPU, CUDA-aware where MPI says so) on device buffers, through the
mesh dim's communicator as mtensor calls it, and host MPI (mpi4py) on numpy buffers of the
same size; medians of the slowest rank, bus bandwidth in the nccl-tests convention
(all-reduce 2(n-1)/n S/t, all-gather (n-1)/n S/t).  ``MTENSOR_CUDA_MODULE`` may name the
fake CuPy (a smoke run: its numbers mean nothing).
"""
import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import mtensor as mt
from mtensor.comm import select
from mtensor.device import arrays as device

WORLD = MPI.COMM_WORLD


def _median(fn, settle, reps):
    times = []
    for _ in range(reps):
        WORLD.Barrier()
        start = time.perf_counter()
        fn()
        settle()
        times.append(time.perf_counter() - start)
    return WORLD.allreduce(float(np.median(times)), op=MPI.MAX)


def copies(cp, nbytes, reps):
    """GB/s of (pinned H2D, pinned D2H, pageable H2D, pageable D2H) for ``nbytes``."""
    block = cp.empty(nbytes, np.uint8)
    pinned = np.frombuffer(cp.cuda.alloc_pinned_memory(nbytes), np.uint8, nbytes)
    pageable = np.empty(nbytes, np.uint8)
    stream = cp.cuda.get_current_stream()
    out = []
    for host in (pinned, pageable):
        for move in (lambda: block.set(host, stream=stream),
                     lambda: block.get(out=host, stream=stream, blocking=False)):
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                move()
                stream.synchronize()
                times.append(time.perf_counter() - start)
            out.append(nbytes / float(np.median(times)) / 1e9)
    return out


def bus(kind, n, nbytes, seconds):
    factor = 2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n
    return factor * nbytes / seconds / 1e9


def collectives(sizes, reps):
    n = WORLD.size
    cp = device.array_module("cuda")
    host_comm = mt.init_device_mesh((n,)).communicator(0)
    rows = []
    for name in select.runnable("cuda", WORLD):
        group = mt.init_device_mesh("cuda", (n,), backend=name).communicator(0)
        for nbytes in sizes:
            count = nbytes // 4
            for kind in ("all_reduce", "all_gather"):
                piece = count if kind == "all_reduce" else count // n
                total = piece if kind == "all_reduce" else piece * n
                counts = None if kind == "all_reduce" else [piece] * n
                op = "sum" if kind == "all_reduce" else None
                d_send, d_recv = cp.ones(piece, np.float32), cp.empty(total, np.float32)
                h_send, h_recv = np.ones(piece, np.float32), np.empty(total, np.float32)
                settle = cp.cuda.get_current_stream().synchronize
                run = getattr(group, kind)
                run(d_send, d_recv, counts, op)                                   # warm up
                t_dev = _median(lambda: run(d_send, d_recv, counts, op), settle, reps)
                t_host = _median(lambda: getattr(host_comm, kind)(h_send, h_recv, counts, op),
                                 lambda: None, reps)
                rows.append(dict(backend=name, kind=kind, mib=nbytes / (1 << 20), ranks=n,
                                 device_ms=t_dev * 1e3, host_ms=t_host * 1e3,
                                 device_busbw=bus(kind, n, nbytes, t_dev),
                                 host_busbw=bus(kind, n, nbytes, t_host)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="1,4,16,64,256")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    sizes = [int(float(s) * (1 << 20)) for s in args.sizes_mb.split(",")]
    cp = device.array_module("cuda")
    result = {"ranks": WORLD.size, "copies": [], "collectives": collectives(sizes, args.reps)}
    if WORLD.rank == 0:
        for nbytes in sizes:
            result["copies"].append([nbytes / (1 << 20), *copies(cp, nbytes, args.reps)])
        print("| MiB | pinned H2D GB/s | pinned D2H GB/s | pageable H2D GB/s | pageable D2H GB/s |")
        print("|---:|---:|---:|---:|---:|")
        for row in result["copies"]:
            print("| " + " | ".join([f"{row[0]:g}"] + [f"{v:.2f}" for v in row[1:]]) + " |")
        print(f"\n{WORLD.size} ranks: device collectives vs host MPI (mpi4py) on the same sizes")
        print("| backend | collective | MiB | device ms | host ms | device busbw GB/s "
              "| host busbw GB/s |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for r in result["collectives"]:
            print(f"| {r['backend']} | {r['kind']} | {r['mib']:g} | {r['device_ms']:.2f} | "
                  f"{r['host_ms']:.2f} | {r['device_busbw']:.2f} | {r['host_busbw']:.2f} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
