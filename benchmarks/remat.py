"""Rematerialisation: the GPT step of ``examples/lm_model.py`` with ``mt.remat`` on every
transformer block against the same step without it.

    mpiexec -n 2 python benchmarks/remat.py [--layers 4 --d-model 128 --seq 64 --batch 16]

Per side (eager and ``mt.compile``d, with and without remat), in one launch:

- ``tape MiB``: what the gradient tape holds for the backward pass when the forward ends
  (``mt.debug.tape_bytes()``, the parameters' own blocks not counted), eager;
- ``peak MiB``: the step's peak of traced memory above what was alive before it
  (``tracemalloc``, numpy's allocations; the buffer pool emptied first, so its buffers are
  counted when they are made): the activations at their peak, plus the gradients;
- ``ms``: the step's time, median over ``--reps`` interleaved runs, the slower rank;
- ``collectives``: per step (CommDebugMode): remat runs each block's forward collectives
  again in the backward.

The gradients of every side equal those of eager without remat (to 1e-12, checked).
"""
import argparse
import json
import sys
import tracemalloc
from pathlib import Path

import numpy as np
from mpi4py import MPI

import mtensor as mt
from mtensor.debug import region
from mtensor.device import buffers

sys.path[:0] = [str(Path(__file__).resolve().parent),
                str(Path(__file__).resolve().parents[1] / "examples")]
import lm_model as lm  # noqa: E402
from mtensor_side import step_mesh, time_sides  # noqa: E402

BLOCK = ["ln1_g", "ln1_b", "wq", "wk", "wv", "wo", "ln2_g", "ln2_b", "w1", "b1", "w2", "b2"]


def block(p, h):
    """One transformer block of ``lm_model.hidden``."""
    with region("attention"):
        h = h + lm.attention(lm.layer_norm(h, p["ln1_g"], p["ln1_b"]),
                             p["wq"], p["wk"], p["wv"], p["wo"])
    with region("mlp"):
        return h + lm.mlp(lm.layer_norm(h, p["ln2_g"], p["ln2_b"]),
                          p["w1"], p["b1"], p["w2"], p["b2"])


def make_loss(remat, held):
    """``lm_model.loss`` with its blocks through ``mt.remat`` when ``remat``."""
    run = mt.remat(block) if remat else block

    def loss(params, x, y):
        with region("embedding"):
            h = x @ params["wte"] + params["wpe"][: x.shape[1]]
        for i in range(lm.layers_of(params)):
            with region(f"block{i}"):
                h = run({k: params[f"{k}{i}"] for k in BLOCK}, h)
        with region("head"):
            z = lm.layer_norm(h, params["lnf_g"], params["lnf_b"]) @ params["head"]
        with region("loss"):
            top = mt.stop_gradient(z.max(axis=-1, keepdims=True))
            log_sum = np.log(np.exp(z - top).sum(axis=-1, keepdims=True)) + top
            out = (log_sum - (z * y).sum(axis=-1, keepdims=True)).mean()
        held.append(mt.debug.tape_bytes())
        return out
    return loss


def peak_bytes(step, world):
    """The step's peak of traced memory above what was alive before it (slower rank)."""
    buffers.empty_cache()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    out = step()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    del out
    return world.allreduce(peak, op=MPI.MAX)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    mesh = step_mesh(world.size)
    params = lm.init_params(mesh, args.layers, args.d_model, args.heads, args.seq)
    ids = np.random.default_rng(0).integers(0, lm.VOCAB, (args.batch, args.seq + 1))
    x, y = lm.distribute(lm.one_hot(ids), mesh)
    sides, held, counts, grads = {}, {}, {}, {}
    for compiled in (False, True):
        for remat in (False, True):
            name = f"{'compiled' if compiled else 'eager'}, {'remat' if remat else 'no remat'}"
            held[name] = []
            step = mt.value_and_grad(make_loss(remat, held[name]))
            step = mt.compile(step) if compiled else step
            _, grads[name] = step(params, x, y)          # compiled: the trace
            with mt.CommDebugMode() as comm:
                step(params, x, y)
            counts[name] = comm.get_total_counts()
            sides[name] = (lambda step=step: step(params, x, y))
    base = grads["eager, no remat"]
    for name, g in grads.items():
        bad = [k for k in g if not np.allclose(mt.asnumpy(g[k]), mt.asnumpy(base[k]),
                                               rtol=1e-12, atol=1e-15)]
        if bad:
            raise AssertionError(f"{name}: gradients differ from eager without remat: {bad}")
    peaks = {name: peak_bytes(run, world) for name, run in sides.items()}
    med = time_sides(sides, args.reps, world)
    tape = {name: world.allreduce(h[0], op=MPI.MAX) for name, h in held.items()}
    if world.rank == 0:
        mib = 1 / 2 ** 20
        print(f"{world.size} ranks, mesh {tuple(mesh.shape)} (dp, tp); GPT of {args.layers} "
              f"layers, d_model {args.d_model}, {args.heads} heads, seq {args.seq}, batch "
              f"{args.batch}; {args.reps} reps (median of the slower rank)")
        print("| side | tape MiB | peak MiB | ms per step | collectives per step |")
        print("|---|---|---|---|---|")
        for name in sides:
            print(f"| {name} | {tape[name] * mib:.2f} | {peaks[name] * mib:.2f} | "
                  f"{1e3 * med[name]:.1f} | {counts[name]} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(config=vars(args), tape_bytes=tape, peak_bytes=peaks,
                               median_s=med, collectives=counts), f, indent=1)


if __name__ == "__main__":
    main()
