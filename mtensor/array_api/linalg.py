"""The array API's ``linalg`` extension on DTensors: numpy 2's ``np.linalg`` functions, whose
signatures are the standard's, each reaching its DTensor rule (TSQR and the SVD on split tall
matrices, whole-matrix solvers on every rank) through ``__array_function__``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
           "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm"]

cholesky = np.linalg.cholesky
cross = np.linalg.cross
det = np.linalg.det
diagonal = np.linalg.diagonal
eigh = np.linalg.eigh
eigvalsh = np.linalg.eigvalsh
inv = np.linalg.inv
matmul = np.linalg.matmul
matrix_norm = np.linalg.matrix_norm
matrix_power = np.linalg.matrix_power
matrix_rank = np.linalg.matrix_rank
matrix_transpose = np.linalg.matrix_transpose
outer = np.linalg.outer
pinv = np.linalg.pinv
qr = np.linalg.qr
slogdet = np.linalg.slogdet
solve = np.linalg.solve
svd = np.linalg.svd
svdvals = np.linalg.svdvals
tensordot = np.linalg.tensordot
trace = np.linalg.trace
vecdot = np.linalg.vecdot
vector_norm = np.linalg.vector_norm

