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
    """Median seconds per step of each side (slowest rank), the sides rotating."""
    times = {name: [] for name in sides}
    for rep in range(reps):
        names = list(sides)[rep % len(sides):] + list(sides)[:rep % len(sides)]
        for name in (names if rep % 2 == 0 else names[::-1]):
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
