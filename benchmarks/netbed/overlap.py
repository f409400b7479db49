"""How much of a data-parallel step's gradient all-reduce ``mt.compile`` hides behind compute.

Run by ``run.py`` as 2 ranks, one per network namespace, MPICH over TCP on a rate-limited veth
link (see ``netns.py``: in shared memory overlap cannot show, since the same cores copy and
compute).  Any 2-rank launch works too, it just measures another link:

    mpiexec -n 2 python benchmarks/netbed/overlap.py [--layers 8 --d 1024 --batch 1536]

Workload: an MLP of ``--layers`` tanh layers of ``d x d`` float32 weights, replicated over a
1-D mesh of the 2 ranks, the batch sharded, loss = mean squared error, gradients from
``mt.value_and_grad``, update with ``mt.optim.sgd``.  Sides, interleaved in one launch (the
order rotates every rep; a side's time is the slower rank's):

- ``eager``: the step uncompiled (each gradient all-reduced, blocking, as it completes);
- ``compiled[cap]``: ``mt.compile(step, bucket_cap_mb=cap, overlap=True)``; cap ``auto`` is
  the default (``mt.compile(step)``), which chooses the buckets from the calibrated model;
- ``blocking[cap]``: the same buckets with ``overlap=False``;
- ``compute_eager`` / ``compute_compiled``: the same step, eager and compiled, on each rank's
  half batch over a 1-rank mesh on ``COMM_SELF`` (no communication at all);
- ``comm[cap]``: blocking mpi4py ``Allreduce`` calls of exactly the compiled step's bucket sizes.

hidden = 1 - (t_step - t_compute) / t_comm, the compiled step against ``compute_compiled``
and eager against ``compute_eager``; the same ``t_comm`` per cap for both.  It also charges
the step for waiting on the slower rank at every blocking collective (the compute baseline
runs each rank alone), so ``blocking`` reads below 0; saved = (t_blocking - t_compiled) /
t_comm compares the same buckets with and without overlap.
"""
import argparse
import json
import os
import time

import numpy as np
from mpi4py import MPI

import mtensor as mt


def loss(params, x, y):
    h = x
    for i in range(len(params)):
        h = np.tanh(h @ params[f"w{i}"])
    return ((h - y) ** 2).mean()


def _cap(text):
    return text if text == "auto" else float(text)


def make_params(mesh, weights):
    return {f"w{i}": mt.distribute_tensor(w.copy(), mesh, [mt.Replicate()])
            for i, w in enumerate(weights)}


def make_step(lr):
    vg = mt.value_and_grad(loss)

    def step(p, x, y):
        value, g = vg(p, x, y)
        mt.optim.sgd(p, g, lr)
        return value
    return step


def check_compiled_matches_eager(mesh, weights, x, y, lr, cap):
    """Three steps eager and compiled from the same weights: the same losses and weights."""
    pe, pc = make_params(mesh, weights), make_params(mesh, weights)
    step = make_step(lr)
    compiled = mt.compile(step, bucket_cap_mb=cap)
    for _ in range(3):
        le, lc = float(step(pe, x, y)), float(compiled(pc, x, y))
        if not np.isclose(le, lc, rtol=1e-5):
            raise AssertionError(f"compiled loss {lc} != eager loss {le}")
    for k in pe:
        if not np.allclose(pe[k].to_local(), pc[k].to_local(), rtol=1e-4, atol=1e-6):
            raise AssertionError(f"compiled weights {k} differ from eager ones")


def link_check(world, mb=16, reps=5):
    """Median seconds of a raw mpi4py Allreduce of ``mb`` MiB float32 (is the link limited?)."""
    a = np.ones(mb * 2**20 // 4, np.float32)
    b = np.empty_like(a)
    world.Allreduce(a, b)
    times = []
    for _ in range(reps):
        world.Barrier()
        start = time.perf_counter()
        world.Allreduce(a, b)
        times.append(world.allreduce(time.perf_counter() - start, op=MPI.MAX))
    if not np.all(b == 2):
        raise AssertionError("raw Allreduce over the link gave a wrong sum")
    return float(np.median(times))


def outside_compute(spans) -> float:
    """Seconds of a replay spent outside compute nodes: starting, waiting, blocking."""
    wall = max(s[3] for s in spans) - min(s[2] for s in spans)
    return wall - sum(s[3] - s[2] for s in spans if s[1] == "compute")


def busy_split(fn, call, world, reps=5):
    """[rank] -> (median ms in compute nodes, median ms in the rest) of ``fn``'s replays, from
    the spans ``export_trace`` writes: whether overlap loses to waiting or to slower compute."""
    rows = []
    for _ in range(reps):
        world.Barrier()
        call()
        spans = fn.traced.replay.spans
        compute = sum(s[3] - s[2] for s in spans if s[1] == "compute")
        rows.append((1e3 * compute, 1e3 * outside_compute(spans)))
    mine = tuple(float(v) for v in np.median(rows, axis=0))
    return world.allgather(mine)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1536, help="global batch (half per rank)")
    ap.add_argument("--caps", default="auto,1,2,4,8,25",
                    help="bucket caps in MB or auto (the default), comma separated")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--json", help="rank 0 writes the results here")
    ap.add_argument("--trace", help="Chrome trace of the last compiled[first cap] replay")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    load_before = os.getloadavg()
    if world.size != 2:
        raise SystemExit("overlap.py: run on exactly 2 ranks")
    caps = args.caps.split(",")
    raw16 = link_check(world)
    if world.rank == 0:
        print(f"raw Allreduce 16 MiB float32: {1e3 * raw16:.1f} ms", flush=True)
    rng = np.random.default_rng(0)
    weights = [(rng.standard_normal((args.d, args.d)) / np.sqrt(args.d)).astype(np.float32)
               for _ in range(args.layers)]
    x_all = rng.standard_normal((args.batch, args.d)).astype(np.float32)
    y_all = np.tanh(rng.standard_normal((args.batch, args.d))).astype(np.float32)
    half = slice(world.rank * args.batch // 2, (world.rank + 1) * args.batch // 2)

    mesh = mt.init_device_mesh((2,))
    link = mt.calibrate(mesh, repeats=25)   # the link's cost and overlap: auto buckets, explain
    solo = mt.init_device_mesh((1,), comm=MPI.COMM_SELF)
    x, y = (mt.distribute_tensor(a, mesh, [mt.Shard(0)]) for a in (x_all, y_all))
    xs, ys = (mt.distribute_tensor(a[half].copy(), solo, [mt.Shard(0)]) for a in (x_all, y_all))

    check_compiled_matches_eager(mesh, weights, x, y, args.lr, _cap(caps[0]))

    step = make_step(args.lr)
    sides, plans, compiled = {}, {}, {}
    p = make_params(mesh, weights)
    sides["eager"] = lambda: step(p, x, y)
    ps = make_params(solo, weights)
    sides["compute_eager"] = lambda: step(ps, xs, ys)
    pcs, solo_step = make_params(solo, weights), mt.compile(step)
    sides["compute_compiled"] = lambda: solo_step(pcs, xs, ys)
    for cap in caps:
        for overlap, name in ((True, "compiled"), (False, "blocking")):
            pc, fn = make_params(mesh, weights), mt.compile(step, bucket_cap_mb=_cap(cap),
                                                          overlap=overlap)
            explanation = mt.explain(fn, pc, x, y)           # traces (first call)
            sides[f"{name}[{cap}]"] = (lambda fn=fn, pc=pc: fn(pc, x, y))
            if name == "compiled":
                plans[cap] = explanation
                compiled[cap] = (fn, pc)
                if cap == caps[0]:
                    traced_fn = fn
        sizes = [r["bytes"] for r in plans[cap].rows]
        bufs = [(np.ones(n // 4, np.float32), np.empty(n // 4, np.float32)) for n in sizes]
        sides[f"comm[{cap}]"] = (lambda bufs=bufs: [world.Allreduce(s, r) for s, r in bufs])

    times = {k: [] for k in sides}
    names = list(sides)
    for fn in sides.values():       # warm up every side once
        world.Barrier()
        fn()
    waited = {cap: [] for cap in caps}     # this rank's ms outside compute nodes, per rep
    for rep in range(args.reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            world.Barrier()
            start = time.perf_counter()
            sides[name]()
            mine = time.perf_counter() - start
            times[name].append(world.allreduce(mine, op=MPI.MAX))
            if name.startswith("compiled["):
                cap = name[len("compiled["):-1]
                waited[cap].append(outside_compute(compiled[cap][0].traced.replay.spans))
    # explain again after the reps: the same buckets, compute timed in the latest replay
    plans = {cap: mt.explain(fn, pc, x, y) for cap, (fn, pc) in compiled.items()}
    split = {"compute_compiled": busy_split(solo_step, sides["compute_compiled"], world),
             f"compiled[{caps[0]}]": busy_split(traced_fn, sides[f"compiled[{caps[0]}]"],
                                                world)}
    if args.trace:
        traced_fn(p_trace := make_params(mesh, weights), x, y)
        traced_fn(p_trace, x, y)
        traced_fn.export_trace(args.trace)

    med = {k: float(np.median(v)) for k, v in times.items()}
    paired = {cap: float(np.median([1 - (t - c) / m for t, c, m in zip(
        times[f"compiled[{cap}]"], times["compute_compiled"], times[f"comm[{cap}]"])]))
        for cap in caps}
    waiting = {cap: max(world.allgather(float(np.median(v)))) for cap, v in waited.items()}
    low = {k: float(np.min(v)) for k, v in times.items()}
    hidden, hidden_min = {}, {}
    for cap in caps:
        c = cap
        for t, out in ((med, hidden), (low, hidden_min)):
            comm = t[f"comm[{c}]"]
            out[f"compiled[{c}]"] = 1 - (t[f"compiled[{c}]"] - t["compute_compiled"]) / comm
            out[f"blocking[{c}]"] = 1 - (t[f"blocking[{c}]"] - t["compute_compiled"]) / comm
            out[f"saved[{c}]"] = (t[f"blocking[{c}]"] - t[f"compiled[{c}]"]) / comm
            out[f"eager (vs comm[{c}])"] = 1 - (t["eager"] - t["compute_eager"]) / comm
    if world.rank == 0:
        result = dict(
            config=dict(vars(args), grad_mb=args.layers * args.d * args.d * 4 / 2**20,
                        async_progress=os.environ.get("MPIR_CVAR_ASYNC_PROGRESS", "0"),
                        iface=os.environ.get("FI_TCP_IFACE", "")),
            times={k: dict(median=med[k], min=float(np.min(v)), max=float(np.max(v)))
                   for k, v in times.items()},
            raw_allreduce_16mib_s=raw16,
            hidden=hidden, hidden_from_min=hidden_min,
            busy_split=split,
            loadavg_before=load_before, loadavg_after=os.getloadavg(),
            calibrated=dict(alpha_s=link.alpha, beta_bytes_per_s=link.beta,
                            overlap_rate=float(link.overlap_rate),
                            overlap_slowdown=float(link.overlap_slowdown)),
            predicted={cap: plans[cap].hidden_fraction for cap in caps},
            waiting=waiting, hidden_paired=paired,
            hidden_by_waits={cap: 1 - waiting[cap] / med[f"comm[{cap}]"] for cap in caps},
            predicted_by_waits={cap: 1 - plans[cap].exposed_s / plans[cap].comm_s
                                for cap in caps},
            buckets={cap: [r["bytes"] for r in plans[cap].rows] for cap in caps},
            plans={cap: str(plans[cap]) for cap in caps})
        for k, v in result["times"].items():
            print(f"{k:>20}: {1e3 * v['median']:8.1f} ms  [{1e3 * v['min']:.1f}, "
                  f"{1e3 * v['max']:.1f}]")
        for k, v in hidden.items():
            print(f"hidden {k}: {100 * v:.0f}% (from min times: {100 * hidden_min[k]:.0f}%)")
        for k, v in split.items():
            print(f"{k}: per rank (ms in compute nodes, ms elsewhere): {v}")
        print(plans[caps[0]])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
