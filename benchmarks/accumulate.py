"""Gradient accumulation: K microbatches reduced once per step against reduced K times.

    mpiexec -n 2 python benchmarks/accumulate.py [--layers 8 --d 512 --batch 2048 --k 4]

A data-parallel MLP (``--layers`` tanh layers of ``d x d`` float64, replicated; the batch
split), one step = K microbatches of batch/K then Adam.  Sides, interleaved in one launch,
the slower rank's median:

- ``reduce each``: ``mt.value_and_grad`` per microbatch (each gradient all-reduced K times),
  the gradients summed;
- ``reduce once``: ``value_and_grad(reduce=False)`` + ``mt.optim.accumulate``; Adam reduces
  each gradient once;
- both compiled; and ``clip``: ``reduce once`` followed by ``clip_by_global_norm``.

Reports ms per step, the all-reduces per step (CommDebugMode) and the ratio to ``reduce
each``; every side's parameters equal ``reduce each``'s to 1e-12.
"""
import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import mtensor as mt


def loss(p, x, k):
    h = x
    for i in range(len(p)):
        h = np.tanh(h @ p[f"w{i}"])
    return (h * h).mean() / k


def make_step(k, pending, clip=None):
    each = mt.value_and_grad(loss)
    once = mt.value_and_grad(loss, reduce=False)

    def step(p, state, xs):
        grads = None
        for x in xs:
            _, g = (once if pending else each)(p, x, k)
            grads = mt.optim.accumulate(grads, g) if pending else (
                g if grads is None else {n: grads[n] + g[n] for n in g})
        if clip:
            grads, _ = mt.optim.clip_by_global_norm(grads, clip)
        mt.optim.adam(p, grads, state, lr=1e-4)
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((world.size,))
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((args.d, args.d)) / np.sqrt(args.d) for _ in range(args.layers)]
    xs = [mt.distribute_tensor(part, mesh, [mt.Shard(0)]) for part in
          np.split(rng.standard_normal((args.batch, args.d)), args.k)]

    def params():
        return {f"w{i}": mt.distribute_tensor(w, mesh, [mt.Replicate()])
                for i, w in enumerate(weights)}

    specs = {"reduce each": (False, None, False), "reduce once": (True, None, False),
             "reduce each, compiled": (False, None, True),
             "reduce once, compiled": (True, None, True), "reduce once + clip": (True, 1e9, False)}
    sides, states, counts = {}, {}, {}
    for name, (pending, clip, compiled) in specs.items():
        p = params()
        state = mt.optim.adam_init(p)
        step = make_step(args.k, pending, clip)
        step = mt.compile(step) if compiled else step
        step(p, state, xs)
        with mt.CommDebugMode() as comm:
            step(p, state, xs)
        counts[name] = comm.get_comm_counts()
        states[name] = p
        sides[name] = (lambda step=step, p=p, state=state: step(p, state, xs))
    times, names = {k: [] for k in sides}, list(sides)
    for rep in range(args.reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            world.Barrier()
            start = time.perf_counter()
            sides[name]()
            times[name].append(world.allreduce(time.perf_counter() - start, op=MPI.MAX))
    base = {k: mt.asnumpy(v) for k, v in states["reduce each"].items()}
    for name in names:       # every side ran the same steps from the same weights
        if not all(np.allclose(mt.asnumpy(states[name][k]), base[k], rtol=1e-10, atol=1e-12)
                   for k in base):
            raise AssertionError(f"{name}: parameters differ from reduce each's")
    med = {k: float(np.median(v)) for k, v in times.items()}
    if world.rank == 0:
        print(f"{world.size} ranks, {args.layers} layers of {args.d}x{args.d} float64, batch "
              f"{args.batch} in {args.k} microbatches, {args.reps} reps (median of the slower rank)")
        print("| side | ms per step | collectives per step | / reduce each |")
        print("|---|---|---|---|")
        for name in names:
            print(f"| {name} | {1e3 * med[name]:.1f} | {counts[name]} | "
                  f"{med[name] / med['reduce each']:.2f} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(config=vars(args), median_s=med, counts=counts), f, indent=1)


if __name__ == "__main__":
    main()
