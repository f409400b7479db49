"""mt.compile on a data-parallel step with many small gradients, and the replay's cost per op.

    mpiexec -n 8 python benchmarks/compile_dp.py [--params 100 --size 512 --reps 20]

1. Data parallelism on a 1-D mesh of every rank: ``--params`` parameter vectors of ``--size``
   float64 (100 x 4 KiB), replicated; a batch-sharded input; the gradients of
   ``sum_i mean(x * w_i)`` and an SGD update.  Eager runs one all-reduce per gradient;
   compiled runs the bucketed replay.  Reports collectives per step and median step times.
2. Replay overhead: a chain of 200 small elementwise ops on a 64x64 block (no
   communication), eager dispatch vs compiled replay vs the same numpy calls on the local
   block; microseconds added per op over numpy.

Sides alternate inside each repetition; medians of the slowest rank.  ``--json PATH`` also
writes the numbers from rank 0.
"""
import argparse
import time

import numpy as np
from mpi4py import MPI
from tables import emit

import mtensor as mt

COMM = MPI.COMM_WORLD


def dp_step(x):
    def loss(ps):
        total = (x * ps[0]).mean()
        for w in ps[1:]:
            total = total + (x * w).mean()
        return total
    vg = mt.value_and_grad(loss)

    def step(params):
        value, grads = vg(params)
        mt.optim.sgd(params, grads, 1e-3)
        return value
    return step


def chain(x, n_ops):
    for i in range(n_ops // 4):
        x = np.tanh(x * 0.5 + 0.25) - x / 3.0
    return x


def timed(sides, reps, batch=1):
    times = {name: [] for name in sides}
    for rep in range(reps):
        names = list(sides) if rep % 2 == 0 else list(sides)[::-1]
        for name in names:
            COMM.Barrier()
            start = time.perf_counter()
            for _ in range(batch):
                sides[name]()
            times[name].append((time.perf_counter() - start) / batch)
    return {k: COMM.allreduce(float(np.median(v)), op=MPI.MAX) for k, v in times.items()}


def counts(fn):
    with mt.CommDebugMode() as mode:
        fn()
    return mode.get_total_counts()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=100)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json")
    args = parser.parse_args()
    mesh = mt.init_device_mesh((COMM.size,))
    rng = np.random.default_rng(0)
    make = lambda: [mt.distribute_tensor(rng.standard_normal(args.size), mesh, [mt.Replicate()])
                    for _ in range(args.params)]
    x = mt.distribute_tensor(rng.standard_normal((4 * COMM.size, args.size)), mesh, [mt.Shard(0)])
    eager_params, compiled_params = make(), make()
    eager = dp_step(x)
    compiled = mt.compile(dp_step(x))
    compiled(compiled_params)
    dp = {"eager": lambda: eager(eager_params), "compiled": lambda: compiled(compiled_params)}
    n_coll = {name: counts(fn) for name, fn in dp.items()}
    dp_t = timed(dp, args.reps)

    n_ops = 200
    block = mt.distribute_tensor(rng.standard_normal((64 * COMM.size, 64)), mesh, [mt.Shard(0)])
    local = block.to_local().copy()
    replay = mt.compile(lambda b: chain(b, n_ops))
    replay(block)
    ops = {"numpy": lambda: chain(local, n_ops), "eager": lambda: chain(block, n_ops),
           "compiled": lambda: replay(block)}
    op_t = timed(ops, args.reps, batch=20)
    per_op = {k: (v - op_t["numpy"]) / n_ops * 1e6 for k, v in op_t.items() if k != "numpy"}
    if COMM.rank == 0:
        lines = [f"{COMM.size} ranks; {args.params} gradients of {args.size * 8} B; "
                 f"{args.reps} reps", "", "| data-parallel step | collectives | median ms |",
                 "|---|---:|---:|"]
        lines += [f"| {name} | {n_coll[name]} | {dp_t[name] * 1e3:.2f} |" for name in dp]
        lines += ["", f"eager / compiled: {dp_t['eager'] / dp_t['compiled']:.2f}x time, "
                  f"{n_coll['eager'] / max(n_coll['compiled'], 1):.0f}x collectives; "
                  f"replay: +{per_op['compiled']:.2f} us/op over numpy (eager dispatch "
                  f"+{per_op['eager']:.2f} us/op), {n_ops} ops on 64x64 float64"]
        emit(args.json, lines, {"ranks": COMM.size, "collectives": n_coll, "dp_s": dp_t,
                                "per_op_us": per_op})

if __name__ == "__main__":
    main()
