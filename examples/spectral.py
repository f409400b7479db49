"""A spectral solver of the heat equation u_t = nu (u_xx + u_yy) on a periodic square: numpy
code (``np.fft.fft2``, a multiplier, ``np.fft.ifft2``) run on a DTensor split by rows and
checked against the same function on numpy arrays in one process.

    mpiexec -n 4 python examples/spectral.py [--size 256] [--steps 50]

Each step multiplies the spectrum by exp(-nu |k|^2 dt), the exact propagator of every
Fourier mode.  On the DTensor ``fft2`` transforms the rows where they lie, moves the split
to the columns with one all-to-all and transforms the columns (the spectrum comes back
column-split: FFTW-MPI's "transposed out"); ``ifft2`` does the same backwards, so the
field is split by rows again.  The collectives of one step are counted with
``CommDebugMode``; the field is also checked against the exact solution of its initial
modes.
"""
import argparse

import numpy as np
from mpi4py import MPI

import mtensor as mt

NU, DT = 0.05, 0.01


def wavenumbers(n0, n1):
    """|k|^2 on the grid of a periodic square of side 2 pi."""
    k0, k1 = np.fft.fftfreq(n0, 1.0 / n0), np.fft.fftfreq(n1, 1.0 / n1)
    return k0[:, None] ** 2 + k1[None, :] ** 2


def step(u, decay):
    """One step of the heat equation: numpy code, for numpy arrays and DTensors alike."""
    return np.real(np.fft.ifft2(np.fft.fft2(u) * decay))


def initial(n):
    """Three Fourier modes, so the exact solution is known."""
    x = np.linspace(0, 2 * np.pi, n, endpoint=False)
    X, Y = np.meshgrid(x, x, indexing="ij")
    return np.sin(X) * np.cos(2 * Y) + 0.5 * np.cos(3 * X + Y) + 0.25


def exact(n, t):
    x = np.linspace(0, 2 * np.pi, n, endpoint=False)
    X, Y = np.meshgrid(x, x, indexing="ij")
    return (np.exp(-NU * 5 * t) * np.sin(X) * np.cos(2 * Y)
            + np.exp(-NU * 10 * t) * 0.5 * np.cos(3 * X + Y) + 0.25)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((world.size,))
    u = initial(args.size)
    decay = np.exp(-NU * wavenumbers(args.size, args.size) * DT)
    U = mt.distribute_tensor(u, mesh, [mt.Shard(0)])
    with mt.CommDebugMode() as comm:
        U = step(U, decay)
    u = step(u, decay)
    for _ in range(args.steps - 1):
        U = step(U, decay)
        u = step(u, decay)
    diff = float(np.abs(mt.asnumpy(U) - u).max())
    error = float(np.abs(u - exact(args.size, args.steps * DT)).max())
    if world.rank == 0:
        print(f"mesh {mesh.shape}, {args.size}x{args.size}, {args.steps} steps, "
              f"field {list(U.placements)}")
        print(f"collectives per step: {comm.get_comm_counts()}")
        print(f"max |numpy - exact|: {error:.3g}")
        print(f"max |mtensor - numpy|: {diff:.3g}")
        print(f"matches numpy: {diff < 1e-10}")


if __name__ == "__main__":
    main()
