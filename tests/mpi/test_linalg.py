"""numpy's linear algebra on DTensors: norms, TSQR and the factorisations on it, the small
dense problems and the products, compared with numpy on the whole arrays over many layouts
(Partial included), float32 and float64, uneven blocks and blocks shorter than wide."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi_helpers import WORLD, assert_all_ranks, host, random_array
from op_sweep import sweep

import mtensor as mt

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

M = random_array((7, 5), seed=1)           # blocks of 2 or fewer rows: shorter than wide
TALL = random_array((23, 3), seed=2)       # blocks taller than wide on every mesh
WIDE = random_array((3, 6), seed=3)
SQ = random_array((4, 4), seed=4) + 20 * np.eye(4)
SPD = SQ @ SQ.T
STACK = random_array((5, 3, 3), seed=5) + 10 * np.eye(3)
V = random_array((7,), seed=6)
V3 = random_array((4, 3), seed=7)
I = random_array((4, 4), np.int64, seed=9)
C = (random_array((9, 3), seed=10) + 1j * random_array((9, 3), seed=11))


def _signs(q, r):
    """QR with diag(R) >= 0 (ours already is; numpy's LAPACK signs are flipped to match)."""
    flip = np.where(np.diagonal(r) < 0, -1.0, 1.0)
    return q * flip, r * flip[:, None]


def _signs_only_r(r):
    return r * np.where(np.diagonal(r) < 0, -1.0, 1.0)[:, None]


def _abs_usv(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.abs(u), s, np.abs(vh)


def _lstsq(a, b):
    x, res, rank, s = np.linalg.lstsq(a, b)
    return x, res, s, np.asarray(rank) + 0 * s[:1].sum()   # rank compared as a value


FLAT = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]
AXES = [(None, 0), (1, 1), (2, 0), (0, 1), (np.inf, 0), (-np.inf, 1), (3, 0), (0.5, 1),
        (2, (1, 0)), ("nuc", (1, 0)), (-1, (1, 0)), (np.inf, (1, 0)), (-np.inf, (1, 0))]


def _norms(orders):
    return lambda x: tuple(np.linalg.norm(x, *o) for o in orders)


# a batch with a singular matrix, split over more ranks than it has matrices on 3+ ranks
BATCH = np.stack([SQ[:2, :2], [[1.0, 2.0], [2.0, 4.0]], SQ[2:, 2:]])

CASES = {
    "per_matrix_tol": (lambda x: (np.linalg.matrix_rank(x, tol=np.array([0.1, 0.2, 0.3])),
                                  np.linalg.matrix_rank(x[:2], tol=np.array([0.1, 0.2])),
                                  np.linalg.pinv(x, rcond=np.array([0.1, 0.2, 0.3]))), BATCH),
    "norm_matrix": (_norms([(o,) for o in FLAT]), M),
    "norm_axes": (_norms(AXES), M),
    "norm_vector": (_norms([(None,), (1,), (-3,), (0,), (np.inf,)]), V),
    "norm_keepdims": (lambda x: (np.linalg.norm(x, keepdims=True),
                                 np.linalg.norm(x, 2, axis=(0, 1), keepdims=True),
                                 np.linalg.norm(x, 1, axis=1, keepdims=True)), M),
    "norm_stack": (lambda x: (np.linalg.norm(x, 2, axis=(1, 2)), np.linalg.norm(x, axis=2),
                              np.linalg.norm(x, "fro", axis=(2, 0))), STACK),
    "norm_int_complex": (lambda x, y: (np.linalg.norm(x, np.inf), np.linalg.norm(y),
                                       np.linalg.norm(y, "nuc")), I, C),
    "qr": (lambda x: _signs(*np.linalg.qr(x)), M),
    "qr_tall": (lambda x: _signs(*np.linalg.qr(x)) + (_signs_only_r(np.linalg.qr(x, "r")),),
                TALL),
    "qr_wide": (lambda x: _signs(*np.linalg.qr(x)), WIDE),
    "qr_complete": (lambda x: np.abs(np.linalg.qr(x, mode="complete")[1]), M),
    "svd": (lambda x: _abs_usv(x) + (np.linalg.svd(x, compute_uv=False),), TALL),
    "svd_wide": (lambda x: _abs_usv(x) + (np.linalg.svd(x)[1],), WIDE),
    "svd_short_blocks": (lambda x: (np.linalg.svd(x, compute_uv=False), np.linalg.pinv(x),
                                    np.linalg.matrix_rank(x) + 0), M),
    "pinv_wide": (np.linalg.pinv, WIDE),
    "lstsq": (_lstsq, TALL, random_array((23, 2), seed=12)),
    "lstsq_1d": (_lstsq, M, V),
    "lstsq_wide": (_lstsq, WIDE, random_array((3,), seed=13)),
    "solve": (np.linalg.solve, SQ, random_array((4, 3), seed=14)),
    "solve_vector": (np.linalg.solve, SQ, random_array((4,), seed=15)),
    "stack": (lambda x: (np.linalg.inv(x), np.linalg.det(x), *np.linalg.slogdet(x),
                         *np.linalg.eig(x)), STACK),
    "square": (lambda x: (np.linalg.eigvals(x), np.linalg.inv(x),
                          np.linalg.matrix_power(x, -2)), SQ),
    "spd": (lambda x: (*np.linalg.eigh(x), np.linalg.eigvalsh(x, "U"), np.linalg.cholesky(x),
                       np.linalg.cholesky(x, upper=True)), SPD),
    "matrix_power": (lambda x: tuple(np.linalg.matrix_power(x, k) for k in (0, 1, 2, 5)), I),
    "outer": (lambda x, y: (np.outer(x, y), np.linalg.outer(x, x)), V, V3),
    "inner": (lambda x, y: (np.inner(x, y), np.inner(x[0], x[1])), M,
              random_array((3, 5), seed=16)),
    "vdot": (lambda x, y: (np.vdot(x, x), np.vdot(y, y)), M, C),
    "kron": (lambda x, y: (np.kron(x, y), np.kron(x[0], y)), M, SQ[:2, :3]),
    "cross": (lambda x, y: (np.cross(x, y), np.linalg.cross(x, y), np.cross(x, y[:, :2]),
                            np.cross(x[:, :2], y), np.cross(x[:, :2], y[:, :2]),
                            np.cross(x.T, y.T, axisa=0, axisb=0, axisc=0)), V3, V3[::-1] + 1),
}


@pytest.mark.mpi
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(mesh, name):
    fn, *arrays = CASES[name]
    failures = sweep(mesh, fn, *arrays, limit=4 if len(arrays) == 1 else 5)
    assert_all_ranks(not failures, f"{name}: {failures[:3]} ({len(failures)} layouts fail)")


def _rows(mesh):
    return [mt.Shard(0)] * mesh.ndim


def _close(got, want, dtype):
    got, want = host(got), np.asarray(want)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    return got.dtype == want.dtype and got.shape == want.shape and np.allclose(
        got, want, rtol=tol, atol=tol)


@pytest.mark.mpi
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtypes_and_rows(mesh, dtype):
    """Results keep numpy's dtype; Q and U stay split like the rows, R, s, Vh replicated."""
    a_full = TALL.astype(dtype)
    a = mt.distribute_tensor(a_full, mesh, _rows(mesh))
    q, r = np.linalg.qr(a)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    x, res, rank, sv = np.linalg.lstsq(a, a_full[:, 0] + 1)
    xn, resn, rankn, svn = np.linalg.lstsq(a_full, a_full[:, 0] + 1)
    checks = {
        "qr": _close(np.vstack(_signs(host(q), host(r))),
                     np.vstack(_signs(*np.linalg.qr(a_full))), dtype),
        "svd": _close(host(s), np.linalg.svd(a_full, compute_uv=False), dtype)
        and _close((host(u) * host(s)) @ host(vh), a_full, dtype),
        "lstsq": _close(host(x), xn, dtype) and _close(host(res), resn, dtype)
        and rank == rankn and _close(host(sv), svn, dtype),
        "norm": _close(host(np.linalg.norm(a, 2)), np.linalg.norm(a_full, 2), dtype)
        and _close(host(np.linalg.norm(a, axis=0)), np.linalg.norm(a_full, axis=0),
                   dtype),
        "inv": _close(np.linalg.inv(mt.distribute_tensor(SQ.astype(dtype), mesh, _rows(mesh))),
                      np.linalg.inv(SQ.astype(dtype)), dtype),
        "layout": list(q.placements) == _rows(mesh) and list(u.placements) == _rows(mesh)
        and all(p == mt.Replicate() for t in (r, s, vh) for p in t.placements),
    }
    assert_all_ranks(all(checks.values()), f"{dtype.__name__}: {checks}")


@pytest.mark.mpi
def test_tsqr_moves_only_r_factors(mesh):
    a = mt.distribute_tensor(TALL, mesh, _rows(mesh))
    with mt.CommDebugMode() as comm:
        q, r = np.linalg.qr(a)
    counts = comm.get_comm_counts()
    ok = set(counts) <= {"all_gather"} and comm.get_total_counts() <= mesh.ndim
    assert_all_ranks(ok, f"qr moved {counts}")


@pytest.mark.mpi
def test_batch_split_errors_agree(mesh):
    """A singular matrix in one rank's part of a split batch raises on every rank."""
    stack = np.repeat(SQ[None], 8, axis=0)
    stack[-1] = 0
    a = mt.distribute_tensor(stack, mesh, _rows(mesh))
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.inv(a)
    eig = np.linalg.eigvals(mt.distribute_tensor(
        np.stack([np.eye(2)] * 7 + [[[0.0, -1.0], [1.0, 0.0]]]), mesh, _rows(mesh)))
    assert_all_ranks(eig.dtype == np.complex128 and np.allclose(
        host(eig)[-1], [1j, -1j]), f"eigvals dtype {eig.dtype}")


@pytest.mark.mpi
def test_refused_on_tape_and_trace(mesh):
    a = mt.distribute_tensor(TALL, mesh, _rows(mesh))
    with pytest.raises(TypeError, match="gradients"):
        mt.value_and_grad(lambda x: np.linalg.qr(x)[1].sum())(a)
    with pytest.raises(TypeError, match="mt.compile"):
        mt.compile(lambda x: np.linalg.svd(x, compute_uv=False))(a)
    value, grad = mt.value_and_grad(lambda x: np.linalg.norm(x))(a)
    ok = np.allclose(host(grad), TALL / np.linalg.norm(TALL))
    assert_all_ranks(ok and np.isclose(float(value), np.linalg.norm(TALL)), "norm's gradient")


_meshes = {}


def _mesh(shape):
    if shape not in _meshes:
        _meshes[shape] = mt.init_device_mesh(shape)
    return _meshes[shape]


MESHES = [s for s in [(WORLD.size,), (2, WORLD.size // 2)] if np.prod(s) == WORLD.size]


@pytest.mark.mpi
@settings(max_examples=12, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck), print_blob=False)
@given(st.sampled_from(MESHES), st.integers(1, 6), st.integers(0, 30), st.integers(0, 3),
       st.booleans())
def test_tsqr_property(mesh_shape, n, extra, layout, single):
    """Q R = A, Q orthonormal, R upper triangular with diag >= 0, |R| = |numpy's R|."""
    mesh = _mesh(mesh_shape)
    m = n + extra
    full = np.random.default_rng(m * 7 + n).standard_normal((m, n))
    full = full.astype(np.float32) if single else full
    options = [mt.Shard(0), mt.Replicate(), mt.Shard(1), mt.Partial()]
    placements = [options[(layout + i) % 4] for i in range(mesh.ndim)]
    q, r = np.linalg.qr(mt.distribute_tensor(full, mesh, placements, src_data_rank=None))
    qf, rf = host(q), host(r)
    tol = 1e-4 if single else 1e-10
    ok = (qf.dtype == rf.dtype == full.dtype and np.allclose(qf @ rf, full, atol=tol)
          and np.allclose(qf.T @ qf, np.eye(n), atol=tol) and np.allclose(np.tril(rf, -1), 0)
          and np.all(np.diagonal(rf) >= 0)
          and np.allclose(rf, np.abs(np.linalg.qr(full)[1]) * np.sign(rf), atol=tol))
    assert_all_ranks(ok, f"{mesh_shape} {full.shape} {placements} {full.dtype}")
