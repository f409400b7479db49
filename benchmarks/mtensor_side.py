"""What the step benchmarks share: their (dp, tp) mesh, the mtensor side (one
forward+backward through ``mt.value_and_grad``, eager or through ``mt.compile``, reading the
loss as a float) and the interleaved timing of the sides."""
import time

import numpy as np
from mpi4py import MPI

import mtensor as mt


def step_mesh(n):
    """(2, n/2) = (dp, tp) where n is even and above 2, else (1, n)."""
    return mt.init_device_mesh((2, n // 2) if n % 2 == 0 and n > 2 else (1, n),
                               mesh_dim_names=("dp", "tp"))


def time_sides(sides, reps, comm):
    """Median seconds per step of each side (slowest rank), the sides in a fresh random
    order each rep (seeded: alike on every rank).  A fixed rotation let a side always follow
    the same one, whose freed memory it then met: the GPT's first compiled side read 2%
    slower than the same graph placed elsewhere."""
    times = {name: [] for name in sides}
    order = np.random.default_rng(0)
    for rep in range(reps):
        for name in order.permutation(list(sides)):
            comm.Barrier()
            start = time.perf_counter()
            sides[name]()
            times[name].append(time.perf_counter() - start)
    return {k: comm.allreduce(float(np.median(v)), op=MPI.MAX) for k, v in times.items()}


def mtensor_side(loss, args, compiled=False):
    """() -> (loss as a float, gradient DTensors) of ``loss(*args)``."""
    step = mt.value_and_grad(loss)
    if compiled:
        step = mt.compile(step)

    def run():
        value, grads = step(*args)
        return float(value), grads
    return run


def add_gpt_flags(parser, reps=10):
    """The GPT step benchmarks' sizes (``lm_model``'s byte-level GPT) and timing flags."""
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16, help="global batch (sequences)")
    parser.add_argument("--reps", type=int, default=reps)
    parser.add_argument("--json", help="also write the table and its numbers here (rank 0)")


def gpt_problem(args, mesh, lm_model):
    """(sizes, the batch's byte ids, the DTensor parameters, one-hot inputs and targets) of
    the flags ``add_gpt_flags`` reads, every rank drawing the same values."""
    sizes = (args.layers, args.d_model, args.heads, args.seq)
    ids = np.random.default_rng(1).integers(0, lm_model.VOCAB, (args.batch, args.seq + 1))
    x, y = lm_model.distribute(lm_model.one_hot(ids), mesh)
    return sizes, ids, lm_model.init_params(mesh, *sizes), x, y
