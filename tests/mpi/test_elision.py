"""Eager temporary elision (``elision.into_temporary``): an op on a temporary DTensor
writes its result into the temporary's block, as numpy does for its own temporaries, where
nobody can tell: never into a named value, never where the result's dtype differs, and
under a gradient tape only where no rule reads the temporary's value."""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, dtensor_of, host

import mtensor as mt

FULL = np.linspace(-1.0, 1.0, 24).reshape(6, 4)


def _x(mesh, full=FULL):
    return mt.distribute_tensor(full, mesh, [mt.Shard(0)] + [mt.Replicate()] * (mesh.ndim - 1))


def _address(x) -> int:
    """Where ``x``'s block starts, on the host or a (fake) device."""
    block = x._local
    ptr = getattr(getattr(block, "data", None), "ptr", None)     # CuPy's device address
    return block.__array_interface__["data"][0] if ptr is None else ptr


def _temporary(make, where):
    """``make()``, its block's address noted in ``where`` (no reference kept)."""
    t = make()
    where.append(_address(t))
    return t


@pytest.mark.mpi
def test_ops_on_a_temporary_write_into_its_block_and_a_named_value_is_never_written(mesh):
    x = _x(mesh)
    seen = []
    y = np.exp(_temporary(lambda: x * 2.0, seen))          # a unary ufunc
    z = _temporary(lambda: x - 1.0, seen) * 3.0            # an operator
    named = x * 2.0
    w = np.exp(named) + named
    empty = not x.to_local().size          # an empty block: numpy may place it anywhere
    ok = (np.allclose(host(y), np.exp(FULL * 2)) and np.allclose(host(z), (FULL - 1) * 3)
          and np.allclose(host(named), FULL * 2)
          and np.allclose(host(w), np.exp(FULL * 2) + FULL * 2)
          and (empty or [_address(y), _address(z)] == seen))
    assert_all_ranks(ok, "elision wrote where it should not, or not where it should")


@pytest.mark.mpi
def test_a_result_of_another_dtype_gets_its_own_block(mesh):
    """abs of a complex temporary is real, an integer division a float, isnan boolean,
    float32 with a numpy float64 scalar float64: each as numpy gives it."""
    c = _x(mesh, FULL + 2j * FULL)
    i = _x(mesh, np.arange(24).reshape(6, 4))
    f = _x(mesh, FULL.astype(np.float32))
    cases = [(abs(c * 1), abs((FULL + 2j * FULL) * 1)),
             ((i * 1) / i.__add__(1), (np.arange(24).reshape(6, 4) * 1)
              / (np.arange(24).reshape(6, 4) + 1)),
             (np.isnan(c * 1), np.isnan((FULL + 2j * FULL) * 1)),
             ((f * 1) + np.float64(2.5), FULL.astype(np.float32) * 1 + np.float64(2.5))]
    bad = [k for k, (got, want) in enumerate(cases)
           if got.dtype != want.dtype or not np.allclose(host(got), want)]
    assert_all_ranks(not bad, f"cases {bad}")


@pytest.mark.mpi
def test_under_a_tape_only_where_no_rule_reads_the_temporary(mesh):
    x, w = _x(mesh), _x(mesh, FULL[::-1].copy())
    seen, results = [], []

    def f(x, w):
        y = np.exp(_temporary(lambda: x * 2.0, seen))      # exp reads its result: elided
        results.append(_address(y))
        v = _temporary(lambda: x + 1.0, seen) * w          # the product reads both: not
        results.append(_address(v))
        return (y + v).sum()
    value, (gx, gw) = mt.value_and_grad(f, argnums=(0, 1))(x, w)
    W = FULL[::-1]
    ok = (np.allclose(host(gx), 2 * np.exp(2 * FULL) + W) and np.allclose(host(gw), FULL + 1)
          and np.isclose(float(value), (np.exp(2 * FULL) + (FULL + 1) * W).sum())
          and (not x.to_local().size or (results[0] == seen[0] and results[1] != seen[1])))
    assert_all_ranks(ok, f"addresses {seen} {results}")


@pytest.mark.mpi
def test_a_constant_temporary_overwritten_under_a_tape_is_kept_as_its_spec(mesh):
    """``(c * 2) + w``: the constant product takes the sum in place; the tape's entry keeps
    it as a ghost (its spec), not as the DTensor that now holds the sum."""
    from mtensor.autodiff.tape import Ghost

    c, w = _x(mesh), _x(mesh, FULL[::-1].copy())
    kept = []

    def f(w):
        y = (c * 2.0) + w
        kept.append(mt.modes.active.tape.entries[-1].operands)
        return (y * y).sum()
    value, g = mt.value_and_grad(f)(w)
    want = 2 * (2 * FULL + FULL[::-1])
    (operands,) = kept
    ok = type(operands[0]) is Ghost and np.allclose(host(g), want)
    assert_all_ranks(ok, f"{[type(o).__name__ for o in operands]}")


def _row_parallel(mesh, rng_seed=3):
    """``x @ w`` with the contracted dim sharded on the mesh's last dim: a temporary of
    partial sums (``Partial`` there), and the numpy operands."""
    rng = np.random.default_rng(rng_seed)
    X, W = rng.standard_normal((6, 8)), rng.standard_normal((8, 5))
    rest = [mt.Replicate()] * (mesh.ndim - 1)
    x = mt.distribute_tensor(X, mesh, rest + [mt.Shard(1)])
    w = mt.distribute_tensor(W, mesh, rest + [mt.Shard(0)])
    return x, w, X, W


@pytest.mark.mpi
def test_a_temporary_of_partial_sums_is_reduced_in_its_own_block(mesh):
    """``np.tanh(x @ w)``: the product's partial sums are all-reduced in place (one
    all-reduce, MPI_IN_PLACE) and tanh writes into the same block; a named tensor of
    partial sums keeps its terms and its layout (reading never changes a layout)."""
    x, w, X, W = _row_parallel(mesh)
    seen = []
    with mt.CommDebugMode() as comms:
        y = np.tanh(_temporary(lambda: x @ w, seen))
    named = x @ w
    terms = named.to_local().copy()
    z = np.exp(named)
    reduced_in_place = mesh.shape[-1] == 1 or _address(y) == seen[0]
    ok = (np.allclose(host(y), np.tanh(X @ W)) and np.allclose(host(z), np.exp(X @ W))
          and y.placements == z.placements and isinstance(named.placements[-1], mt.Partial)
          and np.array_equal(host(named.to_local()), host(terms))
          and comms.get_comm_counts().get("all_reduce", 0) == (mesh.shape[-1] > 1)
          and reduced_in_place)
    assert_all_ranks(ok, f"{y.placements} {comms.get_comm_counts()} {reduced_in_place}")


@pytest.mark.mpi
def test_a_temporary_of_partial_averages_is_divided_in_place(mesh):
    """``np.exp(p * 0.5)`` of partial averages: reduced in place, then divided there."""
    full = np.arange(12.0).reshape(3, 4)
    p = dtensor_of(full, mesh, [mt.Replicate()] * (mesh.ndim - 1) + [mt.Partial("avg")])
    y = np.exp(p * 0.5)
    assert_all_ranks(np.allclose(host(y), np.exp(full * 0.5)), f"{host(y)}")


@pytest.mark.mpi
def test_a_temporary_of_partial_sums_under_a_tape(mesh):
    """tanh's rule reads its output, not its operand: the product is reduced and
    overwritten in place while the tape records, and the gradients are numpy's."""
    x, w, X, W = _row_parallel(mesh)
    seen, results = [], []

    def f(x, w):
        y = np.tanh(_temporary(lambda: x @ w, seen))
        results.append(_address(y))
        return (y * y).sum()
    value, (gx, gw) = mt.value_and_grad(f, argnums=(0, 1))(x, w)
    T = np.tanh(X @ W)
    dz = 2 * T * (1 - T * T)
    ok = (np.isclose(float(value), (T * T).sum()) and np.allclose(host(gx), dz @ W.T)
          and np.allclose(host(gw), X.T @ dz)
          and (mesh.shape[-1] == 1 or results[0] == seen[0]))
    assert_all_ranks(ok, f"addresses {seen} {results}")


@pytest.mark.mpi
def test_a_partial_cotangent_the_walk_alone_holds_is_reduced_in_its_own_block(mesh):
    """``u = a * b`` feeding a column-parallel product: u's cotangent is a Partial sum that
    the multiply's two gradients both read, reduced once, in place (MPI_IN_PLACE); a
    cotangent the walk hands to two operands (``u + u``) is held twice and reduced into a
    block of its own.  Every gradient is numpy's."""
    from mtensor.redistribute.execute import Program

    rng = np.random.default_rng(5)
    A, B, W = rng.standard_normal((6, 8)), rng.standard_normal((6, 8)), rng.standard_normal((8, 4))
    rest = [mt.Replicate()] * (mesh.ndim - 1)
    a, b = (mt.distribute_tensor(v, mesh, rest + [mt.Replicate()]) for v in (A, B))
    w = mt.distribute_tensor(W, mesh, rest + [mt.Shard(1)])
    calls = []
    original = Program.reduce_in_place

    def counted(self, local):
        calls.append(local.nbytes)
        return original(self, local)

    def loss(a, b, w, twice):
        u = a * b
        y = ((u + u) if twice else u) @ w
        return (y * y).sum()
    Program.reduce_in_place = counted
    try:
        grads = [mt.grad(loss, argnums=(0, 1, 2))(a, b, w, twice) for twice in (False, True)]
    finally:
        Program.reduce_in_place = original
    ok = True
    for (ga, gb, gw), k in zip(grads, (1, 2)):
        U = k * A * B
        dy = 2 * U @ W
        ok &= (np.allclose(host(gw), U.T @ dy) and np.allclose(host(ga), k * (dy @ W.T) * B)
               and np.allclose(host(gb), k * (dy @ W.T) * A))
    in_place = mesh.shape[-1] == 1 or len(calls) >= 1
    assert_all_ranks(ok and in_place, f"values {ok}, in-place reductions {calls}")
