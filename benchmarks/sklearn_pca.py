"""scikit-learn's PCA on row-split DTensors against scikit-learn on numpy in one process.

    mpiexec -n 2 python benchmarks/sklearn_pca.py [--log2-rows 20] [--cols 64] [--reps 3]
                                                  [--json PATH]

``PCA(n_components=8, svd_solver="covariance_eigh").fit_transform(X)`` of a ``2**log2_rows x
cols`` float64 matrix.  mtensor: ``X`` split by rows over every rank (each rank draws its own
rows), scikit-learn unchanged under ``array_api_dispatch=True``; numpy: rank 0 fits the
whole matrix while the other ranks wait without spinning (``algorithms.alone``), so numpy
has the cores to itself.  The sides take turns in every repetition; medians (mtensor: the
slowest rank); the ratio is one-process time over distributed time (above 1: distributed
is faster).  Run with one BLAS thread per rank (``benchmarks/run.py`` sets it): one core
per rank against numpy on one core.
"""
import argparse
import json
import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
from algorithms import alone, distributed  # noqa: E402
from mpi4py import MPI  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402

import mtensor as mt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2-rows", type=int, default=20)
    parser.add_argument("--cols", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", help="also write the results here (rank 0)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    mesh = mt.init_device_mesh((comm.size,))
    shape = (2 ** args.log2_rows, args.cols)
    X = mt.random.default_rng(0).standard_normal(shape, mesh=mesh, placements=[mt.Shard(0)])
    X = X * np.linspace(0.5, 2.0, args.cols)           # distinct variances: a clear spectrum
    whole = X.full_tensor() if comm.rank == 0 else None
    if comm.rank:
        X.full_tensor()                                 # the gather is a collective

    def ours():
        with sklearn.config_context(array_api_dispatch=True):
            return PCA(8, svd_solver="covariance_eigh").fit_transform(X)

    def theirs():
        return PCA(8, svd_solver="covariance_eigh").fit_transform(whole)

    ours()                                              # warm-up: plans, pools
    times = {"mtensor": [], "numpy": []}
    got = want = None
    for rep in range(args.reps):
        sides = [("mtensor", distributed, ours), ("numpy", alone, theirs)]
        for side, how, fn in sides[rep % 2:] + sides[:rep % 2]:
            took, result = how(comm, fn)
            times[side].append(took)
            got, want = (result, want) if side == "mtensor" else (got, result)
    z = mt.asnumpy(got)
    ok = comm.bcast(bool(comm.rank != 0 or np.allclose(
        np.abs(z), np.abs(want), rtol=1e-6, atol=1e-6)))
    ours_s, theirs_s = (float(np.median(times[k])) for k in ("mtensor", "numpy"))
    if comm.rank == 0:
        print(f"\n{comm.size} ranks on {os.cpu_count()} cores, median of {args.reps}\n")
        print("| case | scikit-learn on numpy, one process (s) | on DTensors, split (s) | "
              "numpy / mtensor | equal |")
        print("|---|---:|---:|---:|---|")
        print(f"| PCA covariance_eigh, {shape[0]} x {shape[1]} float64 | {theirs_s:.3f} | "
              f"{ours_s:.3f} | {theirs_s / ours_s:.2f} | {ok} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": comm.size, "cores": os.cpu_count(), "reps": args.reps,
                           "rows": [{"case": f"scikit-learn PCA covariance_eigh ({shape[0]} x "
                                             f"{shape[1]} float64)", "numpy_s": theirs_s,
                                     "mtensor_s": ours_s, "ratio": theirs_s / ours_s,
                                     "correct": ok}]}, f, indent=1)


if __name__ == "__main__":
    main()
