"""``np.linalg`` on DTensors, and numpy's products: the products from pointwise ops and
contractions (``products``), the norms (``norms``), the factorisations on TSQR
(``decompositions``) and the solvers (``solve``)."""
from ..diagonal import linalg_diagonal as diagonal
from ..diagonal import linalg_trace as trace
from ..shapes import matrix_transpose
from .decompositions import qr, svd, svdvals
from .norms import matrix_norm, norm, vector_norm
from .products import (
    cross,
    dot,
    einsum,
    inner,
    kron,
    matmul,
    multi_dot,
    outer,
    tensordot,
    vdot,
    vecdot,
)
from .solve import lstsq, matrix_power, matrix_rank, pinv, solve

__all__ = ["cross", "diagonal", "dot", "einsum", "inner", "kron", "lstsq", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm",
           "outer", "pinv", "qr", "solve", "svd", "svdvals", "tensordot", "trace", "vdot",
           "vecdot", "vector_norm"]
