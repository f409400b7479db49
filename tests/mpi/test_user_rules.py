"""Ops taught from user code with ``mt.register_sharding``, run on every layout of every mesh
against numpy; and ``with mesh:`` as the default mesh of the constructors."""
import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, assert_each_raises, dtensor_of, host
from op_sweep import sweep

import mtensor as mt
from mtensor import Partial, Replicate, Shard


@mt.register_sharding(np.unwrap)
def unwrap_rule(call):
    """np.unwrap runs along ``axis``: split there it needs the axis whole; split along any
    other dim it runs on each block."""
    ndim = call.operands[0].ndim
    axis = call.args["axis"] % ndim
    return [(Shard(d), Shard(d)) for d in range(ndim) if d != axis]


@mt.register_sharding(np.trapezoid, override=True)   # replaces the built-in one (ops on DTensors)
def trapezoid_rule(call):
    """Linear in ``y`` (sum terms integrate to sum terms); ``y`` split off the axis keeps the
    split, at its place in the output; sample points ``x``, where given, are used whole.
    This one rule replaces the built-in composition: what it runs is numpy's kernel."""
    y = call.operands[0]
    axis = call.args["axis"] % y.ndim
    whole = (Replicate(),) * (len(call.operands) - 1)
    kept = [d for d in range(y.ndim) if d != axis]
    return ([((Shard(d),) + whole, Shard(kept.index(d))) for d in kept]
            + [((Partial(),) + whole, Partial())])


def phases(*shape, seed=0):
    """Wrapped angles of a drifting phase: unwrap adds multiples of 2 pi along the axis."""
    steps = np.random.default_rng(seed).uniform(-0.5, 2.5, shape)
    return np.angle(np.exp(1j * steps.cumsum(axis=-1)))


def _check(failures, what):
    assert_all_ranks(not failures, f"{what}: {failures[:3]} ({len(failures)} layouts fail)")


@pytest.mark.mpi
@pytest.mark.parametrize("shape, axis", [((7, 5), 0), ((7, 5), -1), ((9,), 0)], ids=str)
def test_unwrap_taught_by_the_user_on_every_layout(mesh, shape, axis):
    _check(sweep(mesh, lambda p: np.unwrap(p, axis=axis), phases(*shape)), f"unwrap {axis}")


@pytest.mark.mpi
def test_the_taught_rule_keeps_a_split_off_the_axis_and_moves_one_along_it(mesh):
    p = phases(8, 6)
    last = mesh.ndim - 1
    rows = [Replicate()] * last + [Shard(0)]
    x = dtensor_of(p, mesh, rows)
    with mt.CommDebugMode() as kept:
        along_rows = np.unwrap(x, axis=1)
    with mt.CommDebugMode() as moved:
        along_cols = np.unwrap(x, axis=0)
    ok = (along_rows.placements == tuple(rows) and kept.get_total_counts() == 0
          and (moved.get_total_counts() > 0) == (mesh.shape[last] > 1)
          and np.allclose(host(along_rows), np.unwrap(p, axis=1))
          and np.allclose(host(along_cols), np.unwrap(p, axis=0)))
    assert_all_ranks(ok, f"{kept.get_comm_counts()} {moved.get_comm_counts()}")


@pytest.mark.mpi
def test_a_keyword_constant_and_partial_terms_follow_the_rule(mesh):
    y, x = phases(6, 7), np.linspace(0, 2, 7) ** 2
    _check(sweep(mesh, lambda t: np.trapezoid(t, x=x, axis=1), y), "trapezoid x=")
    _check(sweep(mesh, lambda t: np.trapezoid(t, axis=0), y), "trapezoid axis=0")
    terms = dtensor_of(y, mesh, [Partial()] * mesh.ndim)
    with mt.CommDebugMode() as comm:
        out = np.trapezoid(terms, dx=0.5)
    ok = out.placements == (Partial(),) * mesh.ndim and comm.get_total_counts() == 0
    assert_all_ranks(ok and np.allclose(host(out), np.trapezoid(y, dx=0.5)), "partial terms")


@pytest.mark.mpi
def test_errors_of_a_taught_op_raise_on_every_rank(mesh):
    x = mt.distribute_tensor(phases(4, 3), mesh, [Replicate()] * mesh.ndim)
    assert_each_raises({
        "bad axis": (lambda: np.unwrap(x, axis=2), np.exceptions.AxisError, "axis 2"),
        "no rule": (lambda: np.packbits(x > 0), TypeError, "no sharding rule"),
    })


# --- with mesh: the default mesh of the constructors -------------------------------------

@pytest.mark.mpi
def test_constructors_inside_with_mesh_use_it(mesh):
    rows = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    with mesh as entered:
        made = {
            "zeros": (mt.zeros((8, 4), placements=rows), np.zeros((8, 4))),
            "ones": (mt.ones((8, 4), placements=rows), np.ones((8, 4))),
            "full": (mt.full((5,), 2.5, placements=rows), np.full((5,), 2.5)),
            "arange": (mt.arange(7, placements=rows), np.arange(7)),
            "empty": (mt.empty((6, 2), placements=rows), None),
            "random": (mt.random.default_rng(3).standard_normal((8, 4), placements=rows),
                       host(mt.random.default_rng(3).standard_normal((8, 4), mesh=mesh))),
        }
    bad = [name for name, (x, want) in made.items()
           if x.device_mesh is not mesh or x.placements != tuple(rows)
           or (want is not None and not np.array_equal(host(x), want))]
    assert_all_ranks(entered is mesh and not bad, f"wrong: {bad}")


@pytest.mark.mpi
def test_nested_with_mesh_restores_the_outer_one_and_outside_there_is_none(mesh):
    inner = mt.init_device_mesh((WORLD.size,))
    with mesh:
        with inner:
            a = mt.zeros((4,))
        b = mt.ones((4,))
        try:
            with inner:
                raise KeyError("leaves the block")
        except KeyError:
            pass
        c = mt.zeros((4,))
    ok = a.device_mesh is inner and b.device_mesh is mesh and c.device_mesh is mesh
    assert_all_ranks(ok, "the innermost block's mesh, then the outer one again")
    assert_each_raises({
        f: (lambda f=f: getattr(mt, f)((4,)), TypeError, f"{f}: pass mesh= (a DeviceMesh) to "
            f"say where the tensor lives, or call it inside a `with mesh:` block")
        for f in ("zeros", "ones", "empty")
    } | {"rng": (lambda: mt.random.default_rng(0).random((4,)), TypeError, "random: pass mesh=")})


@pytest.mark.mpi
def test_distribute_tensor_inside_with_mesh(mesh):
    a = np.arange(12.).reshape(4, 3)
    with mesh:
        x = mt.distribute_tensor(a, placements=[Shard(0)] + [Replicate()] * (mesh.ndim - 1))
        r = mt.distribute_tensor(a)
    assert_all_ranks(x.device_mesh is mesh and np.array_equal(host(x), a), "default mesh")
    assert_all_ranks(r.placements == (Replicate(),) * mesh.ndim and np.array_equal(host(r), a),
                     "default placements")
