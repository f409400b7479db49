"""Gray-Scott reaction-diffusion: numpy code that updates slice views in place, run on
DTensors split by rows and checked against plain numpy.

    mpiexec -n 4 python examples/gray_scott.py [--size 128] [--steps 200]

``step`` is written for numpy arrays, as the classic numpy versions of this model are
(``u = U[1:-1, 1:-1]`` then ``u += ...``): it writes the interior of ``U`` and ``V``
through views.  The same function runs on the DTensors; a view across the split rows is
written through to its base, so ``U`` changes as in numpy.  Every rank also runs the
numpy version and the two are compared at the end; the collectives of one step are
counted with ``CommDebugMode``.
"""
import argparse

import numpy as np
from mpi4py import MPI

import mtensor as mt

Du, Dv, F, K = 0.16, 0.08, 0.035, 0.065


def step(U, V):
    u, v = U[1:-1, 1:-1], V[1:-1, 1:-1]
    Lu = U[0:-2, 1:-1] + U[1:-1, 0:-2] - 4 * u + U[1:-1, 2:] + U[2:, 1:-1]
    Lv = V[0:-2, 1:-1] + V[1:-1, 0:-2] - 4 * v + V[1:-1, 2:] + V[2:, 1:-1]
    uvv = u * v * v
    u += Du * Lu - uvv + F * (1 - u)
    v += Dv * Lv + uvv - (F + K) * v


def initial(size):
    """The usual start: U = 1, V = 0, a perturbed square in the middle."""
    U, V = np.ones((size, size)), np.zeros((size, size))
    r, mid = size // 10, size // 2
    rng = np.random.default_rng(0)
    U[mid - r:mid + r, mid - r:mid + r] = 0.50 + 0.02 * rng.random((2 * r, 2 * r))
    V[mid - r:mid + r, mid - r:mid + r] = 0.25 + 0.02 * rng.random((2 * r, 2 * r))
    return U, V


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((world.size,))
    u, v = initial(args.size)
    U, V = (mt.distribute_tensor(a, mesh, [mt.Shard(0)]) for a in (u, v))
    with mt.CommDebugMode() as comm:
        step(U, V)
    step(u, v)
    for _ in range(args.steps - 1):
        step(U, V)
        step(u, v)
    diff = max(float(np.abs(np.asarray(U) - u).max()), float(np.abs(np.asarray(V) - v).max()))
    if world.rank == 0:
        print(f"mesh {mesh.shape}, {args.size}x{args.size}, {args.steps} steps")
        print(f"collectives per step: {comm.get_comm_counts()}")
        print(f"max |mtensor - numpy|: {diff:.3g}")
        print(f"matches numpy: {diff < 1e-10}")


if __name__ == "__main__":
    main()
