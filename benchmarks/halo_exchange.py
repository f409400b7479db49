"""Halo exchange on a periodic ring: four ways to send the edge slabs with mpi4py.

    mpiexec -n N python benchmarks/halo_exchange.py [--reps R] [--json PATH]

Each rank sends one slab to its previous rank and one to its next (rank 0's previous is
N-1) and receives one from each, on the same numpy buffers, by

  neighbor_alltoallv   ``Neighbor_alltoallv`` on ``COMM_WORLD.Create_cart([N], periods=[True])``
  ineighbor_alltoallv  ``Ineighbor_alltoallv`` on that cart, then ``Wait``
  sendrecv_x2          two ``Sendrecv``: to next / from previous, then the reverse
  isend_irecv_waitall  two ``Irecv`` and two ``Isend``, then ``MPI.Request.Waitall``

The send buffer is [slab to the negative neighbour, slab to the positive one], the receive
buffer [from negative, from positive]; the neighbour collectives count and displace in bytes
(MPI.BYTE).  Slabs: a row of a 512-wide float64 array (4 KiB), a row of 4096 float64
(32 KiB), 2 rows of 4096 (64 KiB), a 256x256 float64 plane (512 KiB).  Per size, each method
is checked once against the neighbours' rank-dependent data (abort on a mismatch), warmed up
20 times, then timed R times (default 200), the methods interleaved rep by rep, a Barrier
before each timed rep.  Rank 0 prints a markdown table of the median and 90th percentile in
microseconds (each the max over ranks of the rank's own), the launch line, and the load
average before and after.
"""
import argparse
import json
import os
import sys

import numpy as np
from mpi4py import MPI

WARMUP = 20
SLABS = [  # (label, float64 elements per slab)
    ("1x512", 512),
    ("1x4096", 4096),
    ("2x4096", 2 * 4096),
    ("256x256", 256 * 256),
]
METHODS = ("neighbor_alltoallv", "ineighbor_alltoallv", "sendrecv_x2", "isend_irecv_waitall")
TAG_UP, TAG_DOWN = 11, 12  # moving towards the next rank / towards the previous rank


def make_buffers(rank, n):
    """Send buffer [to negative, to positive] with rank- and direction-dependent values."""
    base = np.arange(n, dtype=np.float64)
    sbuf = np.empty(2 * n, dtype=np.float64)
    sbuf[:n] = base + rank * 1e7 + 0.25  # to the previous rank
    sbuf[n:] = base + rank * 1e7 + 0.5  # to the next rank
    rbuf = np.full(2 * n, -1.0)
    return sbuf, rbuf


def expected(prev, nxt, n):
    """What the previous rank sent up and the next rank sent down."""
    base = np.arange(n, dtype=np.float64)
    return np.concatenate([base + prev * 1e7 + 0.5, base + nxt * 1e7 + 0.25])


def make_calls(world, cart, prev, nxt, sbuf, rbuf, n):
    """One zero-argument callable per method, with every buffer spec built up front."""
    nbytes = n * 8
    counts, displs = [nbytes, nbytes], [0, nbytes]
    sspec = [sbuf, (counts, displs), MPI.BYTE]
    rspec = [rbuf, (counts, displs), MPI.BYTE]
    s_neg, s_pos = sbuf[:n], sbuf[n:]
    r_neg, r_pos = rbuf[:n], rbuf[n:]

    def neighbor():
        cart.Neighbor_alltoallv(sspec, rspec)

    def ineighbor():
        cart.Ineighbor_alltoallv(sspec, rspec).Wait()

    def sendrecv():
        world.Sendrecv(s_pos, nxt, TAG_UP, r_neg, prev, TAG_UP)
        world.Sendrecv(s_neg, prev, TAG_DOWN, r_pos, nxt, TAG_DOWN)

    def isend_irecv():
        reqs = [world.Irecv(r_neg, prev, TAG_UP), world.Irecv(r_pos, nxt, TAG_DOWN),
                world.Isend(s_pos, nxt, TAG_UP), world.Isend(s_neg, prev, TAG_DOWN)]
        MPI.Request.Waitall(reqs)

    return dict(zip(METHODS, (neighbor, ineighbor, sendrecv, isend_irecv)))


def verify(world, name, label, call, rbuf, want):
    """Run the method once on a poisoned receive buffer; abort everywhere on a mismatch."""
    rbuf.fill(-1.0)
    world.Barrier()
    call()
    ok = bool(np.array_equal(rbuf, want))
    if not ok:
        n = want.size // 2
        bad = np.flatnonzero(rbuf != want)
        side = "negative (previous)" if bad[0] < n else "positive (next)"
        print(f"rank {world.rank}: {name} with {label} slabs received wrong data from its "
              f"{side} neighbour: {bad.size} of {want.size} values differ, first at index "
              f"{bad[0]}: got {float(rbuf[bad[0]])}, expected {float(want[bad[0]])}",
              file=sys.stderr, flush=True)
    if not world.allreduce(ok, op=MPI.LAND):
        if world.rank == 0:
            print(f"ABORT: halo exchange verification failed for {name}, {label}",
                  file=sys.stderr, flush=True)
        world.Barrier()
        world.Abort(1)


def time_size(world, calls, reps):
    """Warm up, then time each method reps times, interleaved, Barrier before each rep."""
    for call in calls.values():
        for _ in range(WARMUP):
            call()
    times = {name: np.empty(reps) for name in calls}
    for i in range(reps):
        for name, call in calls.items():
            world.Barrier()
            t0 = MPI.Wtime()
            call()
            times[name][i] = MPI.Wtime() - t0
    stats = {}
    for name, t in times.items():
        med = world.allreduce(float(np.median(t)) * 1e6, op=MPI.MAX)
        p90 = world.allreduce(float(np.percentile(t, 90)) * 1e6, op=MPI.MAX)
        stats[name] = (med, p90)
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="timed reps per method and size")
    ap.add_argument("--json", metavar="PATH", help="write the rows here (rank 0)")
    args = ap.parse_args()

    world = MPI.COMM_WORLD
    rank, size = world.rank, world.size
    load_before = os.getloadavg()
    cart = world.Create_cart([size], periods=[True])
    prev, nxt = cart.Shift(0, 1)
    if world.allreduce(cart.rank != rank, op=MPI.LOR):
        if rank == 0:
            print("ABORT: cart ranks differ from COMM_WORLD ranks", file=sys.stderr, flush=True)
        world.Abort(1)

    rows = []
    for label, n in SLABS:
        sbuf, rbuf = make_buffers(rank, n)
        calls = make_calls(world, cart, prev, nxt, sbuf, rbuf, n)
        want = expected(prev, nxt, n)
        for name, call in calls.items():
            verify(world, name, label, call, rbuf, want)
        stats = time_size(world, calls, args.reps)
        for name in METHODS:
            med, p90 = stats[name]
            rows.append(dict(method=name, slab=label, slab_bytes=n * 8,
                             median_us=round(med, 2), p90_us=round(p90, 2)))
    load_after = os.getloadavg()
    cart.Free()

    if rank != 0:
        return
    launch = f"mpiexec -n {size} python {' '.join(sys.argv)}"
    lib = " ".join(MPI.Get_library_version().splitlines()[0].split())
    cores = os.cpu_count()
    print(f"`{launch}`  ({size} ranks on {cores} cores"
          f"{', oversubscribed' if size > (cores or size) else ''}; {lib}; "
          f"{args.reps} reps after {WARMUP} warm-up)")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}")
    print()
    print("| method | slab bytes | median us | p90 us |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['method']} | {r['slab_bytes']} | {r['median_us']:.1f} | {r['p90_us']:.1f} |")
    print()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load_after)}")
    if args.json:
        meta = dict(ranks=size, cores=cores, reps=args.reps, warmup=WARMUP, launch=launch,
                    mpi=lib, loadavg_before=load_before, loadavg_after=load_after)
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
