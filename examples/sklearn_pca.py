"""scikit-learn on DTensors: PCA and a Ridge fit of a tall matrix split by rows over the ranks.

    pip install ".[mpich,sklearn]"
    mpiexec -n 8 python examples/sklearn_pca.py [--rows 200000] [--cols 32]

scikit-learn's own estimators, unchanged: with ``array_api_dispatch=True`` they call the
array API namespace of their input (``x.__array_namespace__()``, here ``mtensor.array_api``),
so every ``xp.mean``, ``X.T @ X`` and ``xp.linalg.eigh`` runs as a DTensor op.  No rank
holds the matrix: each draws its own rows (``mt.random``: the same values on any mesh).
PCA's ``covariance_eigh`` solver reduces the ``cols x cols`` covariance (one all-reduce),
takes its eigenvectors on every rank, and projects each rank's rows locally, so the
projected data stays split by rows; Ridge's ``svd`` solver runs the distributed SVD (TSQR)
and predicts each rank's rows locally.  Both are checked against scikit-learn on numpy
(rank 0 gathers the matrix for that), and the collectives they ran are counted.
SciPy must see SCIPY_ARRAY_API=1 before it loads: the first lines set it.
"""
import argparse
import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
from mpi4py import MPI  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.linear_model import Ridge  # noqa: E402

import mtensor as mt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--cols", type=int, default=32)
    args = parser.parse_args()
    mesh = mt.init_device_mesh((MPI.COMM_WORLD.size,), mesh_dim_names=("rows",))
    rng = mt.random.default_rng(0)
    rows = [mt.Shard(0)]
    mix = rng.standard_normal((args.cols, args.cols), mesh=mesh, placements=[mt.Replicate()])
    X = rng.standard_normal((args.rows, args.cols), mesh=mesh, placements=rows) @ mix
    y = X @ np.linspace(-1.0, 1.0, args.cols) + 0.1 * rng.standard_normal(
        (args.rows,), mesh=mesh, placements=rows)

    with sklearn.config_context(array_api_dispatch=True), mt.CommDebugMode() as pca_comm:
        pca = PCA(n_components=4, svd_solver="covariance_eigh").fit(X)
        Z = pca.transform(X)
    with sklearn.config_context(array_api_dispatch=True), mt.CommDebugMode() as ridge_comm:
        ridge = Ridge(alpha=1.0, solver="svd").fit(X, y)
        pred = ridge.predict(X)

    x_np, y_np, z, p = (mt.asnumpy(a) for a in (X, y, Z, pred))     # every rank takes part
    if MPI.COMM_WORLD.rank == 0:
        ref_pca = PCA(n_components=4, svd_solver="covariance_eigh").fit(x_np)
        ref_ridge = Ridge(alpha=1.0, solver="svd").fit(x_np, y_np)
        signs = np.sign(np.sum(z * ref_pca.transform(x_np), axis=0))
        pca_ok = (np.allclose(mt.asnumpy(pca.explained_variance_), ref_pca.explained_variance_)
                  and np.allclose(z * signs, ref_pca.transform(x_np), atol=1e-8))
        ridge_ok = (np.allclose(mt.asnumpy(ridge.coef_), ref_ridge.coef_)
                    and np.allclose(p, ref_ridge.predict(x_np)))
        print(f"X {X.shape} split {list(X.placements)} over {mesh.size()} ranks")
        print(f"PCA:   transform {list(Z.placements)}, collectives "
              f"{pca_comm.get_comm_counts()}, matches scikit-learn on numpy: {pca_ok}")
        print(f"Ridge: predict {list(pred.placements)}, collectives "
              f"{ridge_comm.get_comm_counts()}, matches scikit-learn on numpy: {ridge_ok}")


if __name__ == "__main__":
    main()
