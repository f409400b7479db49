"""``np.linalg`` on DTensors, and numpy's products: the products from pointwise ops and
contractions (``products``), the norms (``norms``), the factorisations on TSQR
(``decompositions``) and the solvers (``solve``)."""
from .decompositions import qr, svd, svdvals
from .norms import norm
from .products import cross, dot, einsum, inner, kron, matmul, outer, tensordot, vdot
from .solve import lstsq, matrix_power, matrix_rank, pinv, solve

__all__ = ["cross", "dot", "einsum", "inner", "kron", "lstsq", "matmul", "matrix_power",
           "matrix_rank", "norm", "outer", "pinv", "qr", "solve", "svd", "svdvals",
           "tensordot", "vdot"]
