"""What the replay's block reuse saves on the GPT step of ``examples/lm_model.py``.

    mpiexec -n 2 python benchmarks/replay_reuse.py [--reps 60]

One compiled forward+backward (2 layers, d 128, 4 heads, 16 x 64 bytes, float64, mesh
(1, n)), timed with the replay writing elementwise results into dying blocks and with that
switched off (every candidate list emptied), alternating in one process; medians of the
slowest rank, and the blocks reused per replay.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402  (the thread settings above must precede numpy)
import time  # noqa: E402

import numpy as np  # noqa: E402
from lm_handwritten import lm_model  # noqa: E402
from mpi4py import MPI  # noqa: E402

import mtensor as mt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=60)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((1, comm.size), mesh_dim_names=("dp", "tp"))
    ids = np.random.default_rng(1).integers(0, lm_model.VOCAB, (16, 65))
    params = lm_model.init_params(mesh, 2, 128, 4, 64)
    x, y = lm_model.distribute(lm_model.one_hot(ids), mesh)
    step = mt.compile(mt.value_and_grad(lm_model.loss))
    step(params, x, y)
    step(params, x, y)
    replay = step.traced.replay
    sides = {"reuse": list(replay.into), "fresh": [()] * len(replay.into)}
    times = {name: [] for name in sides}
    reused = 0
    for rep in range(args.reps):
        for name in (list(sides) if rep % 2 else list(sides)[::-1]):
            replay.into = sides[name]
            comm.Barrier()
            start = time.perf_counter()
            step(params, x, y)
            times[name].append(time.perf_counter() - start)
            reused = max(reused, replay.reused)
    med = {k: comm.allreduce(float(np.median(v)), op=MPI.MAX) for k, v in times.items()}
    if comm.rank == 0:
        print(f"{comm.size} ranks: reuse {med['reuse'] * 1e3:.1f} ms, fresh "
              f"{med['fresh'] * 1e3:.1f} ms, reuse / fresh {med['reuse'] / med['fresh']:.3f}; "
              f"{reused} blocks reused per replay")


if __name__ == "__main__":
    main()
