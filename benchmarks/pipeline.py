"""Pipeline parallelism: the measured bubble against the schedule's prediction, and the step
time against the unpipelined step on the same ranks.

    mpiexec -n 2 python benchmarks/pipeline.py [--d 256 --layers-per-stage 2 --batch 512]
    mpiexec -n 4 python benchmarks/pipeline.py --microbatches 4,8,16 --schedules 1f1b,gpipe

The model is a residual tanh MLP of ``--layers-per-stage`` layers of ``d x d`` float64 per
stage (real numpy matmuls, so compute, not Python, fills each action) and a squared-error
loss; the pipeline runs on the mesh (P, 1, 1), P the ranks launched, for each schedule and
each number of micro-batches m.  Every side runs ``--reps`` times, interleaved rep by rep; per row, the medians (each
step's time is the slower rank's):

- ``step ms``: one pipelined step (forward and backward of every micro-batch);
- ``bubble``: measured, ``1 - sum(busy) / (P x longest span)`` from ``mt.pipeline.timelines``
  (busy: each rank's forward and backward compute);
- the prediction: ``(P - 1) / (m + P - 1)``; the schedule simulated with each action's
  compute time in the same step (``Timelines.predicted_bubble``: what the schedule leaves
  for the compute this step did, so the gap to the measurement is what messages and waits
  added); the schedule simulated with each stage's own forward and
  backward times measured alone (a side of its own: GPipe with one micro-batch runs one
  stage at a time; a micro-batch of m costs 1/m of that), on a core per rank and with the
  P ranks sharing this machine's cores (``simulate(..., cores=)``): what an oversubscribed
  launch can show.  The first stage's backward is the cheapest (no input gradient), so
  stages are not quite balanced;
- ``/ unpipelined``: the step time over that of ``mt.value_and_grad`` of the same model and
  batch on the same P ranks without a pipeline (the batch split over them, data parallel,
  the weights replicated).
"""
import argparse
import os
import time

import numpy as np
from mpi4py import MPI
from tables import emit

import mtensor as mt
from mtensor import Replicate, Shard
from mtensor.pipeline import schedules, simulation


def stage(p, x, where):
    for w in p["w"]:
        x = x + np.tanh(x @ w)
    return x


def loss(p, h, y):
    r = h - y
    return (r * r).mean()


def unpipelined(p, x, y):
    h = x
    for i in range(p["w"].shape[0]):
        h = h + np.tanh(h @ p["w"][i])
    return loss(p, h, y)


def timed(world, fn) -> float:
    """One call after a barrier: the slower rank's seconds."""
    world.Barrier()
    start = time.perf_counter()
    fn()
    return world.allreduce(time.perf_counter() - start, op=MPI.MAX)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--layers-per-stage", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--microbatches", default="4,8,16")
    ap.add_argument("--schedules", default="1f1b,gpipe")
    ap.add_argument("--modes", default="eager,compiled",
                    help="eager calls of the pipeline, and/or its mt.compile'd step")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    p, d = world.size, args.d
    layers = p * args.layers_per_stage
    rng = np.random.default_rng(0)
    w = rng.normal(size=(layers, d, d)) / (4 * np.sqrt(d))
    x, y = rng.normal(size=(args.batch, d)), rng.normal(size=(args.batch, d))
    cores = min(p, os.cpu_count() or 1)

    flat = mt.init_device_mesh((1, p, 1), mesh_dim_names=("pp", "dp", "tp"))
    whole = {"w": mt.distribute_tensor(w, flat, [Replicate()] * 3)}
    split = [Replicate(), Shard(0), Replicate()]
    xd, yd = (mt.distribute_tensor(a, flat, split) for a in (x, y))
    grad = mt.value_and_grad(unpipelined)
    mesh = mt.init_device_mesh((p, 1, 1), mesh_dim_names=("pp", "dp", "tp"))
    params = {"w": mt.distribute_tensor(w, mesh, [Shard(0), Replicate(), Replicate()])}
    rep = [Replicate()] * 3

    def batches(m):
        return ([mt.distribute_tensor(a, mesh, rep) for a in np.split(x, m)],
                [mt.distribute_tensor(a, mesh, rep) for a in np.split(y, m)])

    # sides: the unpipelined step; each stage's compute with nothing else running (GPipe
    # with one micro-batch runs one stage at a time, the whole batch: a micro-batch of m
    # costs about 1/m of it); every schedule at every m.  Interleaved rep by rep, so the
    # machine's noise hits them alike.
    sides = {"unpipelined": (lambda: float(grad(whole, xd, yd)[0]), None)}
    sides["alone"] = (mt.pipeline.value_and_grad(stage, loss, mesh, schedule="gpipe"), 1)
    for mode in args.modes.split(","):
        for name in args.schedules.split(","):
            for m in (int(v) for v in args.microbatches.split(",")):
                pipe = mt.pipeline.value_and_grad(stage, loss, mesh, schedule=name)
                if mode == "compiled":      # returning the gradients: none is dead code
                    pipe = mt.compile(lambda p, xs, ys, pipe=pipe: pipe(p, xs, ys))
                sides[(mode, name, m)] = (pipe, m)
    runs = {}
    for key, (pipe, m) in sides.items():
        if m is None:
            runs[key] = pipe
        else:
            xs, ys = batches(m)
            runs[key] = (lambda pipe=pipe, xs=xs, ys=ys: float(pipe(params, xs, ys)[0]))
        runs[key]()                                   # warm: traced shapes, page faults
    got = {key: [] for key in sides}
    order = list(sides)
    for r in range(args.reps):
        for key in order[r % len(order):] + order[:r % len(order)]:
            seconds = timed(world, runs[key])
            pipe, _ = sides[key]
            report = mt.pipeline.timelines(pipe) if key != "unpipelined" else None
            got[key].append((seconds, report))
    base = float(np.median([t for t, _ in got["unpipelined"]]))
    alone = [(np.median([rep.stages[k].mean("forward") for _, rep in got["alone"]]),
              np.median([rep.stages[k].mean("backward") for _, rep in got["alone"]]))
             for k in range(p)]
    rows = []
    for key in order[2:]:
        mode, name, m = key
        schedule = schedules.make(name, p, m)
        costs = [(f / m, b / m) for f, b in alone]
        rows.append(dict(
            mode=mode, schedule=name, m=m, step_s=float(np.median([t for t, _ in got[key]])),
            bubble=float(np.median([rep.measured_bubble for _, rep in got[key]])),
            closed_form=(p - 1) / (m + p - 1),
            own_times=float(np.median([rep.predicted_bubble() for _, rep in got[key]])),
            simulated=simulation.simulate(schedule, costs=costs).bubble,
            shared=simulation.simulate(schedule, costs=costs, cores=cores).bubble))
        rows[-1]["vs_unpipelined"] = rows[-1]["step_s"] / base
    if world.rank == 0:
        lines = [f"{p} ranks as {p} pipeline stages of {args.layers_per_stage} layers of {d}x{d} "
                 f"float64, batch {args.batch}, {os.cpu_count()} cores; medians of "
                 f"{args.reps} steps (slower rank); unpipelined (data parallel on the same "
                 f"ranks): {1e3 * base:.1f} ms",
                 "each stage alone, whole batch (forward, backward ms): "
                 + ", ".join(f"({1e3 * f:.1f}, {1e3 * b:.1f})" for f, b in alone),
                 "| mode | schedule | m | step ms | bubble measured | (p-1)/(m+p-1) | simulated, "
                 "the run's action times | simulated, stages alone | the same, "
                 f"{cores} cores shared | / unpipelined |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['mode']} | {r['schedule']} | {r['m']} | {1e3 * r['step_s']:.1f} | "
                  f"{100 * r['bubble']:.1f}% | {100 * r['closed_form']:.1f}% | "
                  f"{100 * r['own_times']:.1f}% | {100 * r['simulated']:.1f}% | "
                  f"{100 * r['shared']:.1f}% | {r['vs_unpipelined']:.2f} |" for r in rows]
        emit(args.json, lines, dict(config=vars(args), ranks=p, unpipelined_s=base, rows=rows))

if __name__ == "__main__":
    main()
