"""Fuzzing over real MPI: hypothesis draws shapes, meshes and placements, every rank draws
the same examples (derandomized, no example database), and every check is agreed by all
ranks, so a failure shrinks in lockstep instead of splitting the ranks.

MTENSOR_FUZZ_EXAMPLES sets the examples per property (default 15: part of the normal run);
the long run is ``MTENSOR_FUZZ_EXAMPLES=500 MTENSOR_MPI_SIZES=2,3,4 python -m pytest
tests/test_mpi_suites.py``.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi_helpers import WORLD, assert_all_ranks, dtensor_of, host, random_array

import mtensor as mt
from mtensor import Partial, Replicate, Shard

EXAMPLES = int(os.environ.get("MTENSOR_FUZZ_EXAMPLES", "15"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=list(HealthCheck), print_blob=False)
MESHES = {n: [s for s in [(n,), (1, n), (2, n // 2), (n // 2, 2)] if np.prod(s) == n]
          for n in range(1, 9)}
_meshes = {}


def mesh_of(shape):
    if shape not in _meshes:
        _meshes[shape] = mt.init_device_mesh(shape)
    return _meshes[shape]


@st.composite
def layouts(draw, mesh_ndim, ndim, partial=True):
    """Placements per mesh dim; Partials of one reduce op per layout (mixed ops have no
    defined order of reduction)."""
    op = draw(st.sampled_from(["sum", "avg", "max", "min"]))
    options = [Replicate()] + [Shard(d) for d in range(ndim)] + ([Partial(op)] if partial else [])
    return tuple(draw(st.sampled_from(options)) for _ in range(mesh_ndim))


@st.composite
def cases(draw, partial=True):
    mesh = draw(st.sampled_from(MESHES[WORLD.size]))
    shape = tuple(draw(st.lists(st.integers(0, 7), min_size=1, max_size=3)))
    return mesh, shape, draw(layouts(len(mesh), len(shape), partial))


@pytest.mark.mpi
@FUZZ
@given(cases(), st.data())
def test_fuzz_redistribute(case, data):
    mesh_shape, shape, src = case
    dst = data.draw(layouts(len(mesh_shape), len(shape), partial=False))
    full = random_array(shape)
    x = dtensor_of(full, mesh_of(mesh_shape), src)
    y = x.redistribute(placements=dst)
    ok = np.array_equal(host(y), full) and y.placements == dst
    assert_all_ranks(ok, f"{mesh_shape} {shape} {src} -> {dst}")


@pytest.mark.mpi
@FUZZ
@given(cases(), st.data())
def test_fuzz_binary_op_with_broadcasting(case, data):
    mesh_shape, shape, left = case
    other = tuple(data.draw(st.sampled_from([1, n])) for n in shape[data.draw(st.integers(0, len(shape))):])
    right = data.draw(layouts(len(mesh_shape), len(other)))
    op = data.draw(st.sampled_from([np.add, np.multiply, np.subtract, np.maximum]))
    a, b = random_array(shape, seed=1), random_array(other, seed=2)
    mesh = mesh_of(mesh_shape)
    got = op(dtensor_of(a, mesh, left, seed=1), dtensor_of(b, mesh, right, seed=2))
    assert_all_ranks(np.array_equal(host(got), op(a, b)),
                     f"{op.__name__} {mesh_shape} {shape}{left} {other}{right}")


@pytest.mark.mpi
@FUZZ
@given(cases(), st.data())
def test_fuzz_reduction(case, data):
    mesh_shape, shape, layout = case
    axis = data.draw(st.one_of(st.none(), st.integers(0, len(shape) - 1)))
    name = data.draw(st.sampled_from(["sum", "mean", "max", "min", "argmax", "any"]))
    keepdims = data.draw(st.booleans()) if name != "argmax" else False
    a = random_array(shape, seed=3)
    if name in ("max", "min", "argmax") and (a.size == 0 or (axis is not None and shape[axis] == 0)):
        return
    x = dtensor_of(a, mesh_of(mesh_shape), layout)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.asarray(getattr(np, name)(a, axis=axis, keepdims=keepdims))
        got = host(getattr(np, name)(x, axis=axis, keepdims=keepdims))
    ok = got.dtype == want.dtype and np.allclose(got, want, equal_nan=True)
    assert_all_ranks(ok, f"{name} axis={axis} {mesh_shape} {shape} {layout}")


@pytest.mark.mpi
@FUZZ
@given(cases(), st.data())
def test_fuzz_matmul(case, data):
    mesh_shape, shape, left = case
    if len(shape) > 2:
        shape = shape[:2]
        left = tuple(Replicate() if p == Shard(2) else p for p in left)
    k = shape[-1]
    out_cols = data.draw(st.integers(0, 5))
    right = data.draw(layouts(len(mesh_shape), 2))
    a, b = random_array(shape, seed=4), random_array((k, out_cols), seed=5)
    mesh = mesh_of(mesh_shape)
    got = dtensor_of(a, mesh, left, seed=4) @ dtensor_of(b, mesh, right, seed=5)
    assert_all_ranks(np.array_equal(host(got), a @ b), f"{mesh_shape} {shape}{left} @ {right}")
