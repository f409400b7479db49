"""How much of a ZeRO-3 step's parameter gathers ``mt.compile``'s prefetch hides.

Run by ``run_zero3.py`` as 2 ranks in the bed's two network namespaces (any 2-rank launch
works, it just measures another link):

    mpiexec -n 2 python benchmarks/netbed/zero3.py [--layers 8 --d 768 --batch 4096]

Workload: an MLP of ``--layers`` tanh layers of ``d x d`` float32 weights laid out
``Shard(0)`` over the 2 ranks (ZeRO-3 / FSDP: each rank holds half of every weight), the
batch split too; each matmul gathers its weight (the cost model's choice for a batch this
size), the gradients are reduce-scattered back to the weights' layout, ``mt.optim.sgd``
updates.  Sides, interleaved in one launch, each compiled with ``overlap=True``:
``prefetch=0`` (each gather starts at its use), ``prefetch="auto"`` (the depth the cost
model chooses), both with and without ``reshard_after_forward``, and ``prefetch=2``; and ``comm``: blocking
mpi4py ``Allgather`` of every parameter gather's size.

Measured by the replay's own waiting time: the time its instructions spend waiting on (or
running) the gather buckets, the larger rank's median; hidden = 1 - that / t_comm, against
``mt.explain``'s prediction (1 - the model's waits on gather buckets / their transfer
times).  Every side's losses equal the eager step's.
"""
import argparse
import json
import os
import time

import numpy as np
from mpi4py import MPI

import mtensor as mt

SIDES = {"no prefetch": dict(prefetch=0), "prefetch": dict(prefetch="auto"),
         "prefetch depth 2": dict(prefetch=2),
         "no prefetch, reshard": dict(prefetch=0, reshard_after_forward=True),
         "prefetch, reshard": dict(prefetch="auto", reshard_after_forward=True)}


def loss(params, x):
    h = x
    for i in range(len(params)):
        h = np.tanh(h @ params[f"w{i}"])
    return (h * h).mean()


def make_step(lr):
    vg = mt.value_and_grad(loss)

    def step(p, x):
        value, g = vg(p, x)
        mt.optim.sgd(p, g, lr)
        return value
    return step


def gather_buckets(traced):
    return {k for k, b in enumerate(traced.replay.buckets) if b.kind == "all_gather"}


def gather_wait(traced) -> float:
    """Seconds the latest replay spent in instructions that wait on or run gather buckets."""
    marks, gathers = traced.replay.marks, gather_buckets(traced)
    return sum(marks[i + 1] - marks[i] for i, (what, k) in enumerate(traced.program)
               if what in ("wait", "run") and k in gathers)


def predicted_hidden(explanation, traced) -> float:
    gathers = gather_buckets(traced)
    t = explanation.timeline
    comm = sum(t.costs[k].seconds for k in gathers)
    return 1 - sum(t.exposed.get(k, 0.0) for k in gathers) / comm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", help="rank 0 writes the results here")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("zero3.py: run on exactly 2 ranks")
    rng = np.random.default_rng(0)
    weights = [(rng.standard_normal((args.d, args.d)) / np.sqrt(args.d)).astype(np.float32)
               for _ in range(args.layers)]
    x_all = rng.standard_normal((args.batch, args.d)).astype(np.float32)
    mesh = mt.init_device_mesh((2,))
    link = mt.calibrate(mesh, repeats=25)
    x = mt.distribute_tensor(x_all, mesh, [mt.Shard(0)])

    def params():
        return {f"w{i}": mt.distribute_tensor(w.copy(), mesh, [mt.Shard(0)])
                for i, w in enumerate(weights)}

    step, load_before = make_step(0.01), os.getloadavg()
    eager_p = params()
    eager = [float(step(eager_p, x)) for _ in range(3)]
    compiled, sides = {}, {}
    for name, options in SIDES.items():
        p, fn = params(), mt.compile(step, overlap=True, **options)
        got = [float(fn(p, x)) for _ in range(3)]
        if got != eager:
            raise AssertionError(f"{name}: losses {got} differ from eager {eager}")
        if fn.traced.prefetch.gathers < args.layers:
            raise SystemExit(f"zero3.py: the cost model did not gather the weights (batch "
                             f"{args.batch} is too small against d {args.d}: it moved the "
                             f"activations instead); pass a larger --batch")
        compiled[name] = (fn, p)
        sides[name] = (lambda fn=fn, p=p: fn(p, x))
    first = next(iter(compiled.values()))[0].traced
    sizes = [b.nbytes for k, b in enumerate(first.replay.buckets) if b.kind == "all_gather"]
    bufs = [(np.ones(n // 4, np.float32), np.empty(2 * (n // 4), np.float32)) for n in sizes]
    sides["comm"] = lambda: [world.Allgather(s, r) for s, r in bufs]

    times, waits, names = {k: [] for k in sides}, {k: [] for k in SIDES}, list(sides)
    for rep in range(args.reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            world.Barrier()
            start = time.perf_counter()
            sides[name]()
            times[name].append(world.allreduce(time.perf_counter() - start, op=MPI.MAX))
            if name in SIDES:
                waits[name].append(gather_wait(compiled[name][0].traced))
    med = {k: float(np.median(v)) for k, v in times.items()}
    rows = {}
    for name, (fn, p) in compiled.items():
        traced = fn.traced
        explanation = mt.explain(fn, p, x)
        comm = sum(b.nbytes for b in traced.replay.buckets if b.kind == "all_gather")
        t_comm = med["comm"] * comm / sum(sizes)          # the gathers' transfers alone
        wait = max(world.allgather(float(np.median(waits[name]))))
        rows[name] = dict(step_s=med[name], gathers=len(gather_buckets(traced)),
                          comm_s=t_comm, wait_s=wait, hidden=1 - wait / t_comm,
                          predicted=predicted_hidden(explanation, traced),
                          prefetch=str(traced.prefetch))
    if world.rank == 0:
        result = dict(config=vars(args), rows=rows, comm_s=med["comm"], loss=eager,
                      loadavg_before=load_before, loadavg_after=os.getloadavg(),
                      calibrated=dict(alpha_s=link.alpha, beta_bytes_per_s=link.beta,
                                      overlap_rate=float(link.overlap_rate)))
        for name, r in rows.items():
            print(f"{name:>22}: step {1e3 * r['step_s']:7.1f} ms, gathers {r['gathers']}, "
                  f"waiting {1e3 * r['wait_s']:6.1f} of {1e3 * r['comm_s']:6.1f} ms: hidden "
                  f"{100 * r['hidden']:.0f}% (predicted {100 * r['predicted']:.0f}%)  "
                  f"[{r['prefetch']}]")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
