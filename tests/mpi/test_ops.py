"""The op sweep over real MPI: every op family on many input layouts, compared with numpy.

Shapes are uneven on purpose (7 rows) and smaller than the mesh (3 rows on 4 or 8 ranks give
empty shards).
"""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, random_array
from op_sweep import sweep

X = random_array((7, 5), seed=1)
Y = random_array((7, 5), seed=2)
ROW = random_array((5,), seed=3)
COL = random_array((7, 1), seed=4)
SMALL = random_array((3, 4), seed=5)

POINTWISE = {
    "add": (lambda x, y: x + y, X, Y),
    "sub_row": (lambda x, r: x - r, X, ROW),
    "mul_col": (lambda x, c: x * c, X, COL),
    "div": (lambda x, y: x / (y * y + 1), X, Y),
    "scalar": (lambda x: 2.0 * x - 1, X),
    "rscalar": (lambda x: 3 - x / 2, X),
    "exp": (lambda x: np.exp(x / 10), X),
    "neg_abs": (lambda x: -abs(x), X),
    "maximum": (lambda x, y: np.maximum(x, y), X, Y),
    "compare": (lambda x, y: x >= y, X, Y),
    "where": (lambda x, y: np.where(x > 0, x, y), X, Y),
    "clip": (lambda x: np.clip(x, -3, 4), X),
    "astype": (lambda x: x.astype(np.float32), X),
    "divmod": (lambda x: np.divmod(x, 4), X),
    "floordiv_pow": (lambda x: (x // 3) ** 2, X),
    "empty_shards": (lambda s, y: s * 2 + y[:3, :4], SMALL, Y),
}

CONTRACTIONS = {
    "matmul": (lambda a, b: a @ b, X, random_array((5, 6), seed=6)),
    "matmul_vec": (lambda a, v: a @ v, X, ROW),
    "vec_matmul": (lambda v, b: v @ b, ROW, random_array((5, 6), seed=6)),
    "batched": (lambda a, b: np.matmul(a, b), random_array((3, 4, 5), seed=7),
                random_array((5, 2), seed=8)),
    "batched_both": (lambda a, b: a @ b, random_array((3, 4, 5), seed=7),
                     random_array((3, 5, 2), seed=9)),
    "einsum": (lambda a, b: np.einsum("ij,kj->ik", a, b), X, Y),
    "einsum_ellipsis": (lambda a, b: np.einsum("...j,jk", a, b), X, random_array((5, 3), seed=6)),
    "dot": (lambda a, b: np.dot(a, b), X, random_array((5, 3), seed=6)),
    "tensordot": (lambda a, b: np.tensordot(a, b, axes=([0], [0])), X, Y),
    "gram": (lambda a: a.T @ a, X),
}

REDUCTIONS = [
    ("sum", None, False), ("sum", 0, False), ("sum", 1, True), ("mean", 0, False),
    ("mean", None, False), ("mean", (0, 1), True), ("prod", 0, False), ("max", 0, False),
    ("max", None, False), ("min", 1, True), ("argmax", 0, False), ("argmin", None, False),
    ("any", 0, False), ("all", None, False), ("var", 0, False), ("std", 1, False),
]


def _check(failures, what):
    assert_all_ranks(not failures, f"{what}: {failures[:3]} ({len(failures)} layouts fail)")


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise(mesh, name):
    fn, *arrays = POINTWISE[name]
    _check(sweep(mesh, fn, *arrays, partial_ops=("sum", "max")), name)


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CONTRACTIONS))
def test_contractions(mesh, name):
    fn, *arrays = CONTRACTIONS[name]
    _check(sweep(mesh, fn, *arrays), name)


@pytest.mark.mpi
@pytest.mark.parametrize("op,axis,keepdims", REDUCTIONS, ids=str)
@pytest.mark.parametrize("data", [X, SMALL, X > 0], ids=["7x5", "3x4", "bool"])
def test_reductions(mesh, data, op, axis, keepdims):
    if data.dtype == bool and op in ("var", "std", "prod", "mean"):
        pytest.skip("numpy arithmetic on bools is not what this tests")

    def fn(x):
        return getattr(np, op)(x, axis=axis, keepdims=keepdims)
    partial = ("sum",) if op in ("sum", "mean", "var", "std") else ("max",)
    _check(sweep(mesh, fn, data, partial_ops=partial), f"{op} axis={axis}")
