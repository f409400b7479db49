"""numpy's write semantics on DTensors, compared with numpy bit for bit: in-place operators,
item assignment (basic, masks, fancy with repeats), views that write through both ways,
ufunc.at, out= of both kinds, copyto and friends.  Partial operands and targets hold
genuine terms (different on every rank), so wrong algebra cannot pass by luck."""
import operator

import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, assert_each_raises, dtensor_of, host, layouts, thin
from op_sweep import sample

import mtensor as mt

R, S0, S1, PS = mt.Replicate(), mt.Shard(0), mt.Shard(1), mt.Partial("sum")


def same(got, want, what):
    got = mt.asnumpy(got)
    ok = got.shape == want.shape and got.dtype == want.dtype and np.array_equal(
        got, want, equal_nan=want.dtype.kind in "fc")
    assert_all_ranks(ok, f"{what}: got\n{got}\nwant\n{want}")


def data(shape, dtype=np.float64, seed=0, low=-9, high=10):
    return np.random.default_rng(seed).integers(low, high, size=shape).astype(dtype)


def targets(mesh, ndim=2, limit=10):
    return thin(sample(layouts(mesh.ndim, ndim, ("sum",)), limit), mesh)


# x op= y for every in-place operator; y of every kind (layouts, numpy, scalar, broadcast)
FLOAT_OPS = [operator.iadd, operator.isub, operator.imul, operator.itruediv]
INT_OPS = [operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior,
           operator.ixor, operator.ilshift, operator.irshift]


def _operands(mesh, y, row):
    yield "numpy", y
    yield "scalar", y.dtype.type(y.flat[0]).item()
    yield "numpy row", row
    for placements in sample(layouts(mesh.ndim, 2, ("sum",)), 3):
        yield f"DTensor {placements}", dtensor_of(y, mesh, placements)
    yield "DTensor row", dtensor_of(row, mesh, [R] * mesh.ndim)


@pytest.mark.mpi
@pytest.mark.parametrize("op", FLOAT_OPS + INT_OPS, ids=lambda f: f.__name__)
def test_inplace_operators_write_the_target_in_its_layout(mesh, op):
    floats = op in FLOAT_OPS
    dtype = np.float64 if floats else np.int64
    x = data((7, 6), dtype) if floats else data((7, 6), dtype, low=1, high=40)
    y = (2.0 ** data((7, 6), np.int64, seed=1, low=-2, high=3) * np.sign(data((7, 6), seed=2)
         + 0.5) if floats else data((7, 6), dtype, seed=1, low=1, high=4))
    row = y[0]
    for placements in targets(mesh, limit=6 if floats else 4):
        for what, other in _operands(mesh, y, row):
            X = dtensor_of(x, mesh, placements)
            alias = X
            alias = op(alias, other)
            want = op(x.copy(), host(other) if what.startswith("DTensor") else other)
            assert alias is X and X.placements == tuple(placements)
            same(X, want, f"{op.__name__} {placements} with {what}")


@pytest.mark.mpi
def test_inplace_keeps_numpys_casting_rule_on_every_rank(mesh):
    X = dtensor_of(np.zeros((5, 3), np.int64), mesh, [S0] + [R] * (mesh.ndim - 1))
    assert_each_raises({
        "int += float": (lambda: operator.iadd(X, 0.5), TypeError, "same_kind"),
        "int /= int": (lambda: operator.itruediv(X, 2), TypeError, "same_kind"),
        "+= a larger operand": (lambda: operator.iadd(X, np.ones((2, 5, 3), np.int64)),
                                ValueError, "broadcast"),
    })


# the loops of real numpy code: parameter lists updated in place
@pytest.mark.mpi
def test_adagrad_loop_over_parameter_lists_matches_numpy(mesh):
    shapes = [(6, 5), (5, 5), (5,)]
    params = [data(s, seed=i) for i, s in enumerate(shapes)]
    grads = [data(s, seed=10 + i) * 3 for i, s in enumerate(shapes)]
    mems = [np.zeros(s) for s in shapes]
    lay = [[S0] + [R] * (mesh.ndim - 1), [R] * mesh.ndim, [PS] * mesh.ndim]
    P = [dtensor_of(p, mesh, lay[i][:mesh.ndim] if p.ndim == 2 else [R] * mesh.ndim)
         for i, p in enumerate(params)]
    G = [dtensor_of(g, mesh, [PS] * mesh.ndim) for g in grads]
    M = [dtensor_of(m, mesh, [S0] * mesh.ndim if m.ndim == 2 else [R] * mesh.ndim) for m in mems]
    for step in range(2):
        for param, dparam, mem in zip(params, grads, mems):
            np.clip(dparam, -5, 5, out=dparam)
            mem += dparam * dparam
            param += -0.125 * dparam / np.sqrt(mem + 1e-8)
        for param, dparam, mem in zip(P, G, M):
            np.clip(dparam, -5, 5, out=dparam)
            mem += dparam * dparam
            param += -0.125 * dparam / np.sqrt(mem + 1e-8)
    for got, want in zip(P + G + M, params + grads + mems):
        same(got, want, "adagrad")


def gray_scott(U, V, Du=0.25, Dv=0.125, F=0.0625, k=0.0625):
    """One Gray-Scott reaction-diffusion step as numpy code writes it (slice views updated
    in place).  Dyadic coefficients keep every sum exact, so the comparison is bit for bit
    whatever order partial terms add in."""
    u, v = U[1:-1, 1:-1], V[1:-1, 1:-1]
    Lu = U[0:-2, 1:-1] + U[1:-1, 0:-2] - 4 * u + U[1:-1, 2:] + U[2:, 1:-1]
    Lv = V[0:-2, 1:-1] + V[1:-1, 0:-2] - 4 * v + V[1:-1, 2:] + V[2:, 1:-1]
    uvv = u * v * v
    u += Du * Lu - uvv + F * (1 - u)
    v += Dv * Lv + uvv - (F + k) * v


@pytest.mark.mpi
def test_stencil_writes_through_slice_views(mesh):
    u0, v0 = data((9, 8), low=0, high=4) / 4, data((9, 8), seed=1, low=0, high=4) / 4
    for placements in sample(layouts(mesh.ndim, 2, ()), 6):
        u, v = u0.copy(), v0.copy()
        U, V = dtensor_of(u, mesh, placements), dtensor_of(v, mesh, placements)
        for _ in range(2):
            gray_scott(u, v)
            gray_scott(U, V)
        same(U, u, f"U {placements}")
        same(V, v, f"V {placements}")


VIEWS = {
    "interior": lambda a: a[1:-1, 1:-1],
    "strided rows": lambda a: a[::2],
    "reversed": lambda a: a[::-1, 1::3],
    "column": lambda a: a[:, 3],
    "transpose": lambda a: a.T,
    "new axis": lambda a: a[None, 2:],
    "view of a view": lambda a: a[1:][:, ::2].T,
    "ravel": lambda a: a.ravel(),
    "reshape": lambda a: a.reshape(3, 2, 8),
    "reshape of a transpose": lambda a: a.T.reshape(-1),    # numpy copies, then writes back
    "swapaxes, moveaxis": lambda a: np.moveaxis(np.swapaxes(a, 0, 1)[1:], 0, 1),
    "expand_dims, squeeze": lambda a: np.squeeze(np.expand_dims(a, 0)[:, ::2], 0),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", VIEWS)
def test_views_alias_their_base_both_ways(mesh, name):
    take = VIEWS[name]
    for placements in targets(mesh, limit=8):
        a = data((6, 8))
        A = dtensor_of(a, mesh, placements)
        v, V = take(a), take(A)
        v += 1
        V += 1
        same(A, a, f"{name} {placements}: base after a write to the view")
        a[2:4] = -a[2:4] * 3
        A[2:4] = -A[2:4] * 3
        same(V, v, f"{name} {placements}: view after a write to the base")
        v[...] = 7
        V[...] = 7
        same(A, a, f"{name} {placements}: base after assigning the whole view")


@pytest.mark.mpi
def test_masks_and_fancy_indices_with_repeats(mesh):
    for placements in targets(mesh, limit=8):
        x = data((7, 6))
        X = dtensor_of(x, mesh, placements)
        x[x > 2] = 0
        X[X > 2] = 0
        same(X, x, f"DTensor mask {placements}")
        mask = data((7, 6), seed=5) > 0
        x[mask] = np.arange(mask.sum())
        X[mask] = np.arange(mask.sum())
        same(X, x, f"numpy mask with values {placements}")
        M = dtensor_of(mask, mesh, [R if p == PS else p for p in placements])
        x[mask] += 1.0
        X[M] += 1.0
        same(X, x, f"DTensor mask, +=, {placements}")
        rows, cols = np.array([0, 0, 6, 2, 0]), np.array([1, 1, 5, 0, 1])
        x[rows] = x[rows[::-1]] * 2
        X[rows] = X[rows[::-1]] * 2
        same(X, x, f"fancy rows with repeats {placements}")
        x[rows, cols] += 5           # buffered: a repeated index adds once
        X[rows, cols] += 5
        same(X, x, f"fancy += with repeats {placements}")
        x[:, [4, 1]] -= x[:, :2]
        X[:, [4, 1]] -= X[:, :2]
        same(X, x, f"columns -= {placements}")
        x[np.arange(7), data((7,), np.int64, seed=6, low=0, high=6)] = -1
        X[np.arange(7), data((7,), np.int64, seed=6, low=0, high=6)] = -1
        same(X, x, f"cross-entropy pick {placements}")


@pytest.mark.mpi
def test_ufunc_at_is_unbuffered(mesh):
    for placements in sample(layouts(mesh.ndim, 2, ()), 8):
        x = data((7, 6))
        X = dtensor_of(x, mesh, placements)
        idx = (np.array([0, 0, 3, 6, 0]), np.array([2, 2, 1, 5, 2]))
        np.add.at(x, idx, 1)
        np.add.at(X, idx, 1)
        np.subtract.at(x, np.array([1, 1, 4]), x[0])
        np.subtract.at(X, np.array([1, 1, 4]), X[0])
        np.negative.at(x, (slice(None), 3))
        np.negative.at(X, (slice(None), 3))
        same(X, x, f"ufunc.at {placements}")
    P = dtensor_of(np.zeros((4, 3)), mesh, [PS] * mesh.ndim)
    with pytest.raises(TypeError, match=r"add.at: target placements \[P\(sum\)"):
        np.add.at(P, [0], 1)
    # into a plain array (binning with np.searchsorted's DTensor result): every rank applies
    # the gathered indices and values to its copy
    idx, vals = np.array([3, 0, 3, 6, 3, 1, 0]), data((7,), seed=3)
    for placements in sample(layouts(mesh.ndim, 1, ("sum",)), 4):
        want, got = np.zeros(8), np.zeros(8)
        np.add.at(want, idx, vals)
        np.add.at(got, dtensor_of(idx, mesh, placements), dtensor_of(vals, mesh, placements))
        assert_all_ranks(np.array_equal(got, want), f"add.at into numpy {placements}")


@pytest.mark.mpi
def test_out_arguments_of_both_kinds(mesh):
    x, y = data((6, 5)), data((6, 5), seed=1)
    for placements in targets(mesh, limit=6):
        X, Y = dtensor_of(x, mesh, placements), dtensor_of(y, mesh, [S1] + [R] * (mesh.ndim - 1))
        Z = dtensor_of(np.zeros((6, 5)), mesh, [S0] * mesh.ndim)
        assert np.add(X, Y, out=Z) is Z
        same(Z, x + y, f"add out=DTensor {placements}")
        np.multiply(X, 2, out=X)
        same(X, x * 2, f"multiply out=self {placements}")
        w = np.ones((6, 5))
        w += Y                                  # numpy target, DTensor operand
        same(w, 1 + y, f"numpy += DTensor {placements}")
        out = np.empty((6, 5))
        assert np.subtract(X, Y, out=out) is out
        same(out, x * 2 - y, f"subtract out=numpy {placements}")
        s = dtensor_of(np.zeros(5), mesh, [R] * mesh.ndim)
        np.sum(X, axis=0, out=s)
        same(s, (x * 2).sum(axis=0), f"sum out= {placements}")
        q, r = np.empty((6, 5)), np.empty((6, 5))
        np.divmod(X, 3, out=(q, r))
        same(q, (x * 2) // 3, "divmod out= quotient")
        same(r, (x * 2) % 3, "divmod out= remainder")


@pytest.mark.mpi
def test_copyto_put_place_putmask_fill_diagonal_fill(mesh):
    for placements in targets(mesh, limit=6):
        x, y = data((5, 5)), data((5, 5), seed=1)
        X, Y = dtensor_of(x, mesh, placements), dtensor_of(y, mesh, [S0] * mesh.ndim)
        np.copyto(x, y, where=y > 0)
        np.copyto(X, Y, where=Y > 0)
        same(X, x, f"copyto where {placements}")
        np.put(x, [0, 7, 7, 24], [9, 8])
        np.put(X, [0, 7, 7, 24], [9, 8])
        np.place(x, x < 0, [-1, -2])
        np.place(X, X < 0, [-1, -2])
        np.putmask(x, x > 5, y)
        np.putmask(X, X > 5, Y)
        np.fill_diagonal(x, [4, 5])
        np.fill_diagonal(X, [4, 5])
        same(X, x, f"put/place/putmask/fill_diagonal {placements}")
        X.fill(3)
        same(X, np.full((5, 5), 3.0), f"fill {placements}")
    I = dtensor_of(np.zeros((3, 3), np.int64), mesh, [S0] * mesh.ndim)
    assert_each_raises({"copyto float into int": (lambda: np.copyto(I, np.ones((3, 3))),
                                                  TypeError, "same_kind")})


@pytest.mark.mpi
def test_writes_raise_clear_errors_on_every_rank(mesh):
    X = dtensor_of(np.zeros((4, 3)), mesh, [S0] * mesh.ndim)
    assert_each_raises({
        "setitem of a wrong shape": (
            lambda: operator.setitem(X, Ellipsis, np.ones(2)), ValueError,
            "could not broadcast input array from shape (2,) into shape (4, 3)"),
        "setitem out of bounds": (lambda: operator.setitem(X, 4, 1), IndexError, "out of bounds"),
        "@= changing the shape": (lambda: operator.imatmul(X, np.ones((3, 2))), ValueError,
                                  "in-place @ needs the shape of x back"),
    })


@pytest.mark.mpi
def test_compiled_step_writes_in_place_like_eager(mesh):
    lay = [S0] + [R] * (mesh.ndim - 1)

    def step(U, V, W, G):
        gray_scott(U, V)
        W -= 0.5 * G
        W[0] = 0
        return (U * V).sum()

    u, v, w, g = (data((9, 8), seed=s, low=0, high=4) / 4 for s in range(4))
    compiled = mt.compile(step)
    U, V, W, G = (dtensor_of(a.copy(), mesh, lay) for a in (u, v, w, g))
    for _ in range(2):
        total = compiled(U, V, W, G)
        want = step(u, v, w, g)
    same(U, u, "compiled U")
    same(W, w, "compiled W")
    assert_all_ranks(np.isclose(float(total), want), f"{float(total)} != {want}")


@pytest.mark.mpi
def test_value_and_grad_refuses_in_place_writes_it_depends_on(mesh):
    W = dtensor_of(data((4, 3)), mesh, [R] * mesh.ndim)
    x = dtensor_of(data((2, 4)), mesh, [R] * mesh.ndim)

    def bumped_param(w):
        w += 1
        return (x @ w).sum()

    def bumped_input(w):
        h = x @ w
        x[0] = 0
        return h.sum()

    assert_each_raises({fn.__name__: (lambda fn=fn: mt.value_and_grad(fn)(W), TypeError,
                                       "writes in place into a DTensor the gradient")
                        for fn in (bumped_param, bumped_input)})
