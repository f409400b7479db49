"""What a checkpoint every step costs a training loop: blocking save vs background save.

    mpiexec -n 2 python benchmarks/checkpoint_background.py [--mib 64] [--k 1024] [--steps 4]
        [--reps 3] [--dir /dev/shm] [--json PATH]

The state: ``--leaves`` float32 DTensors of ``(rows, 1024)`` split by rows, ``--mib`` MiB
per rank.  One step, training-like: for each leaf ``w``, ``g = w @ h`` and
``w -= lr * (g @ h.T)`` (``h``: a replicated ``(1024, --k)`` matrix; two local matmuls of
4 * local rows * 1024 * k flops, then an in-place update of the leaf), and the loss read on
every rank (one all-reduce), as a loop that logs it does.  ``--k`` sets the compute per step.
Three sides, each ``--steps`` steps:

- ``no save``: the steps alone;
- ``blocking save``: ``mt.save(step path, state, keep=2)`` after every step;
- ``background save``: ``mt.save(..., keep=2, blocking=False)`` after every step; the next
  save waits for it, and the last one is waited for inside the timing.

The sides take turns inside every repetition (machine noise hits all alike).  The table
gives the slowest rank's time per step: its median over ``--reps`` and that median's ratio
to the no-save loop's, the median of the ratios within one repetition, and the fastest
repetition's time and ratio (the last two are steadier where other jobs share the machine:
they only ever add time).  Saves go to ``--dir`` (default ``/dev/shm``, a tmpfs, where it
exists: the writes then cost CPU, not disk waits, the harder case for hiding them).  One
BLAS thread per rank: OMP/OPENBLAS/MKL_NUM_THREADS default to 1 before numpy is imported.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402
from tables import emit  # noqa: E402

import mtensor as mt  # noqa: E402

WORLD = MPI.COMM_WORLD
COLS = 1024


def make_state(mesh, mib, leaves):
    rows = max(1, mib * 2 ** 20 // 4 // COLS // leaves) * WORLD.size
    rng = mt.random.default_rng(0)
    return {"params": [(rng.standard_normal((rows, COLS), mesh=mesh, placements=[mt.Shard(0)])
                        * 0.01).astype(np.float32) for _ in range(leaves)], "step": 0}, rows


def step(state, h, lr=1e-4):
    loss = 0.0
    for w in state["params"]:
        g = w @ h
        w -= lr * (g @ h.T)                    # in place: the saved copy must not see it
        loss = loss + (g * g).mean()
    state["step"] += 1
    return float(np.asarray(loss))             # every rank reads it: one all-reduce


def run_side(side, state, h, steps, root):
    """Seconds per step of one side (slowest rank), its last save waited for."""
    handle = None
    WORLD.Barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step(state, h)
        path = os.path.join(root, f"step-{state['step']:06d}")
        if side == "blocking save":
            mt.save(path, state, keep=2)
        elif side == "background save":
            handle = mt.save(path, state, keep=2, blocking=False)
    if handle is not None:
        handle.wait()
    elapsed = time.perf_counter() - start
    return WORLD.allreduce(elapsed, op=MPI.MAX) / steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64, help="state per rank, MiB")
    parser.add_argument("--leaves", type=int, default=8)
    parser.add_argument("--k", type=int, default=1024, help="matmul width: compute per step")
    parser.add_argument("--steps", type=int, default=4, help="steps per side and repetition")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed first repetitions")
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    parser.add_argument("--json", help="also write the table and numbers here (rank 0)")
    args = parser.parse_args()
    mesh = mt.init_device_mesh((WORLD.size,))
    state, rows = make_state(mesh, args.mib, args.leaves)
    h = mt.distribute_tensor(np.random.default_rng(1).standard_normal((COLS, args.k))
                             .astype(np.float32) * 0.03, mesh, [mt.Replicate()])
    root = WORLD.bcast(tempfile.mkdtemp(prefix="mtensor-ckpt-bg-", dir=args.dir)
                       if WORLD.rank == 0 else None)
    sides = ["no save", "blocking save", "background save"]
    times = {s: [] for s in sides}
    try:
        for rep in range(args.warmup + args.reps):
            for side in sides[rep % 3:] + sides[:rep % 3]:      # the order turns too
                t = run_side(side, state, h, args.steps, os.path.join(root, side.split()[0]))
                if rep >= args.warmup:
                    times[side].append(t)
    finally:
        WORLD.Barrier()
        if WORLD.rank == 0:
            shutil.rmtree(root, ignore_errors=True)
    if WORLD.rank == 0:
        med = {s: statistics.median(t) for s, t in times.items()}
        base = med["no save"]
        per_rank = sum(x.to_local().nbytes for x in state["params"]) / 2 ** 20
        lines = [f"{WORLD.size} ranks, {args.leaves} float32 leaves of ({rows}, {COLS}) split "
                 f"by rows ({per_rank:.0f} MiB a rank), h ({COLS}, {args.k}), saves in "
                 f"{args.dir or tempfile.gettempdir()}; median of {args.reps} x {args.steps} "
                 f"steps, slowest rank", "",
                 "| side | s / step | vs no save | median of per-repetition ratios | "
                 "fastest s / step | fastest vs fastest no save |", "|---|---|---|---|---|---|"]
        ratio = {s: statistics.median(t / b for t, b in zip(times[s], times["no save"]))
                 for s in sides}               # within one repetition: drift cancels
        best = {s: min(t) for s, t in times.items()}   # other jobs only ever add time
        lines += [f"| {s} | {med[s]:.3f} | {med[s] / base:.2f}x | {ratio[s]:.2f}x | "
                  f"{best[s]:.3f} | {best[s] / best['no save']:.2f}x |" for s in sides]
        emit(args.json, lines, {"ranks": WORLD.size, "mib_per_rank": per_rank, "k": args.k,
                                "s_per_step": med, "ratio_per_rep": ratio, "fastest": best,
                                "all": times})


if __name__ == "__main__":
    main()
