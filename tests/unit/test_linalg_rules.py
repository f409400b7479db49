"""TSQR's plan and block kernels (``ops.plans.tsqr``) without MPI: the row layout, the
stacked R factors' rows against a brute force over mesh coordinates, numpy's factor dtypes,
and TSQR itself simulated block by block against numpy's ``qr`` of the whole matrix.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.ops.plans.tsqr import (
    factor_types,
    local_qr,
    row_layout,
    signed,
    stacked_rows,
    work_type,
)
from mtensor.placement import Partial, Replicate, Shard, local_offset, local_shape, mesh_coords

R, S0, S1, PS, PM = Replicate(), Shard(0), Shard(1), Partial("sum"), Partial("max")
RNG = np.random.default_rng(3)


def test_row_layout():
    # rows split wherever A is split (either dim) or summed, whole where A is replicated
    assert row_layout((R, S0, S1, PS, PM)) == (R, S0, S0, S0, S0)
    assert row_layout(()) == ()
    assert row_layout((R, R)) == (R, R)


def row_blocks(shape, mesh_shape, layout):
    """Each distinct row block's length: one mesh coordinate per block (0 on replicated dims)."""
    return [local_shape(shape, mesh_shape, layout, c)[0] for c in mesh_coords(mesh_shape)
            if all(x == 0 for x, p in zip(c, layout) if p == R)]


MESHES = [((1,), (S0,)), ((2,), (S0,)), ((3,), (S0,)), ((4,), (R,)), ((2, 3), (S0, S0)),
          ((2, 2), (R, S0)), ((3, 2), (S0, R)), ((2, 2, 2), (S0, R, S0)), ((5,), (S0,))]


@pytest.mark.parametrize("mesh,layout", MESHES)
def test_stacked_rows_brute_force(mesh, layout):
    for m in range(0, 14):
        for n in range(1, 6):
            blocks = row_blocks((m, n), mesh, layout)
            rows, nblocks = stacked_rows((m, n), mesh, layout)
            # block i's reduced R has min(m_i, n) rows; S stacks one R per row block
            assert nblocks == len(blocks)
            assert rows == sum(min(b, n) for b in blocks), (m, n, blocks)
            # and S, laid out like A's rows, gives every rank exactly its R's rows
            for c in mesh_coords(mesh):
                assert local_shape((rows, n), mesh, layout, c)[0] == \
                    min(local_shape((m, n), mesh, layout, c)[0], n)


def test_stacked_rows_hand_worked():
    # 10 x 3 on 3 blocks (4, 3, 3 rows): each R is 3 x 3, S has 9 rows
    assert stacked_rows((10, 3), (3,), (S0,)) == (9, 3)
    # 5 x 3 on 3 blocks (2, 2, 1 rows): each R keeps its block's rows, S has 5
    assert stacked_rows((5, 3), (3,), (S0,)) == (5, 3)
    # 6 x 2 on blocks of exactly 2 rows: 3 R's of 2 rows
    assert stacked_rows((6, 2), (3,), (S0,)) == (6, 3)
    # a replicated mesh dim does not split rows
    assert stacked_rows((8, 2), (2, 4), (R, S0)) == (8, 4)
    assert stacked_rows((8, 3), (2, 4), (S0, R)) == (6, 2)
    assert stacked_rows((7, 2), (4,), (R,)) == (2, 1)


@pytest.mark.parametrize("dtype,result,real,work", [
    (np.float32, np.float32, np.float32, np.float64),
    (np.float64, np.float64, np.float64, np.float64),
    (np.complex64, np.complex64, np.float32, np.complex128),
    (np.complex128, np.complex128, np.float64, np.complex128),
    (np.int8, np.float64, np.float64, np.float64),       # integers factor in double
    (np.uint16, np.float64, np.float64, np.float64),
    (np.bool_, np.float64, np.float64, np.float64),
])
def test_factor_and_work_types(dtype, result, real, work):
    assert factor_types(np.dtype(dtype)) == (np.dtype(result), np.dtype(real))
    assert work_type(np.dtype(dtype)) == np.dtype(work)


def test_factor_types_refuses_what_numpy_refuses():
    with pytest.raises(TypeError, match="float16 is unsupported in linalg"):
        factor_types(np.dtype(np.float16))
    with pytest.raises(TypeError, match="float16"):
        work_type(np.dtype(np.float16))


def orthonormal(q):
    np.testing.assert_allclose(q.conj().T @ q, np.eye(q.shape[1]), atol=1e-12)


@pytest.mark.parametrize("shape", [(6, 3), (3, 5), (4, 4), (1, 3), (7, 1)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_local_qr(shape, dtype):
    a = RNG.standard_normal(shape).astype(dtype)
    if dtype == np.complex128:
        a = a + 1j * RNG.standard_normal(shape)
    k = min(shape)
    q, r = local_qr(a, "reduced")
    # reduced: Q is m x k with orthonormal columns, R k x n upper triangular, Q R = A
    assert q.shape == (shape[0], k) and r.shape == (k, shape[1])
    orthonormal(q)
    np.testing.assert_allclose(np.tril(r, -1), 0)
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    none, r_only = local_qr(a, "r")
    assert none is None
    np.testing.assert_allclose(np.abs(r_only), np.abs(r), atol=1e-12)
    assert r_only.shape == (k, shape[1])


def random_matrix(shape, complex_):
    a = RNG.standard_normal(shape)
    return a + 1j * RNG.standard_normal(shape) if complex_ else a


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_signed(complex_, shape):
    a = random_matrix(shape, complex_)
    q, r = np.linalg.qr(a)
    if complex_:
        # LAPACK's complex R has a real diagonal: turn each column of Q / row of R by a
        # unit phase (Q R unchanged) so that signed has complex phases to undo
        turn = np.exp(1j * RNG.uniform(0, 2 * np.pi, min(shape)))
        q, r = q * turn, np.conj(turn)[:, None] * r
    q0, r0 = q.copy(), r.copy()
    sq, sr = signed(q, r)
    # the inputs are left alone
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(r, r0)
    d = np.diagonal(sr)
    np.testing.assert_allclose(d.imag, 0, atol=1e-12)
    assert (d.real >= 0).all()
    # |diag| unchanged, each row of R times one unit phase, Q R still A
    np.testing.assert_allclose(np.abs(d), np.abs(np.diagonal(r)))
    phase = np.diagonal(r) / np.abs(np.diagonal(r))
    np.testing.assert_allclose(sr, np.conj(phase)[:, None] * r, atol=1e-12)
    np.testing.assert_allclose(sq @ sr, a, atol=1e-12)
    assert sq.dtype == q.dtype and sr.dtype == r.dtype
    none, r_only = signed(None, r)
    assert none is None
    np.testing.assert_array_equal(r_only, sr)


def test_signed_complete_and_stacks():
    # complete Q is m x m with R m x n: only R's first n rows (the diagonal's) get phases
    a = random_matrix((2, 5, 3), True)
    q, r = np.linalg.qr(a, mode="complete")
    sq, sr = signed(q, r)
    assert sq.shape == (2, 5, 5) and sr.shape == (2, 5, 3)
    np.testing.assert_allclose(sq @ sr, a, atol=1e-12)
    np.testing.assert_array_equal(sq[..., 3:], q[..., 3:])
    d = np.diagonal(sr, axis1=-2, axis2=-1)
    np.testing.assert_allclose(d.imag, 0, atol=1e-12)
    assert (d.real >= 0).all()
    for i in range(2):
        np.testing.assert_allclose(sq[i] @ sr[i], a[i], atol=1e-12)


def test_signed_zero_diagonal_and_single_precision():
    # a zero on the diagonal keeps phase 1: that row and column are left as they are
    r = np.array([[-2.0, 1.0, 3.0], [0.0, 0.0, 5.0], [0.0, 0.0, -4.0]], np.float32)
    q = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # and no division by the zero on the way
        sq, sr = signed(q, r)
    np.testing.assert_array_equal(sr, [[2, -1, -3], [0, 0, 5], [0, 0, 4]])
    np.testing.assert_array_equal(sq, [[-1, 2, -3], [-4, 5, -6]])
    assert sq.dtype == np.float32 and sr.dtype == np.float32
    rc = np.array([[1j, 2.0], [0.0, 0.0]], np.complex64)
    _, src = signed(None, rc)
    # diagonal i: its row times conj(i) = -i
    np.testing.assert_allclose(src, [[1.0, -2j], [0.0, 0.0]])
    assert src.dtype == np.complex64


def tsqr(a, mesh, layout, mode):
    """TSQR as numpy.linalg.decompositions runs it, with the ranks simulated: each block's qr, the R factors
    stacked in the layout of A's rows, the small qr, each block's rows of Q2."""
    m, n = a.shape
    rows, nblocks = stacked_rows(a.shape, mesh, layout)
    coords = [c for c in mesh_coords(mesh) if all(x == 0 for x, p in zip(c, layout) if p == R)]
    local = {}
    stacked = np.zeros((rows, n), work_type(a.dtype))
    for c in coords:
        start = local_offset(a.shape, mesh, layout, c)[0]
        block = a[start:start + local_shape(a.shape, mesh, layout, c)[0]].astype(
            work_type(a.dtype))
        local[c] = local_qr(block, mode)
        s0 = local_offset((rows, n), mesh, layout, c)[0]
        stacked[s0:s0 + local[c][1].shape[0]] = local[c][1]
    q2, r = local_qr(stacked, mode) if nblocks > 1 else (None, local[coords[0]][1])
    if mode == "r":
        return None, signed(None, r)[1]
    parts = []
    for c in coords:
        q = local[c][0]
        if nblocks > 1:
            s0 = local_offset((rows, n), mesh, layout, c)[0]
            q = q @ q2[s0:s0 + q.shape[1]]
        parts.append(q)
    return signed(np.concatenate(parts), r)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(1, 13), st.integers(1, 5), st.sampled_from(MESHES), st.booleans(),
       st.sampled_from(["reduced", "r"]))
def test_tsqr_matches_numpy(m, n, mesh_layout, complex_, mode):
    """TSQR equals numpy's qr of the whole matrix once both are signed (unique for full rank)."""
    mesh, layout = mesh_layout
    a = random_matrix((m, n), complex_)
    q, r = tsqr(a, mesh, layout, mode)
    want_q, want_r = signed(*np.linalg.qr(a))
    np.testing.assert_allclose(r, want_r, atol=1e-10)
    if mode == "reduced":
        np.testing.assert_allclose(q, want_q, atol=1e-10)
