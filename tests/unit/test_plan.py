"""The redistribute planner: every transition, nesting, caching, and a property test (no MPI)."""
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.placement import Partial, Replicate, Shard
from mtensor.redistribute.cost import CostModel
from mtensor.redistribute.plan import _direct, _search, plan_cache_info, plan_redistribute

R, P = Replicate(), Partial()
S0, S1 = Shard(0), Shard(1)


def kinds(src, dst, shape=(8, 8), mesh=(4,), itemsize=8):
    plan = plan_redistribute(tuple(src), tuple(dst), shape, mesh, itemsize)
    return [(s.kind, s.mesh_dim) for s in plan.steps]


@pytest.mark.parametrize("src, dst, expected", [
    ([S0], [R], [("all_gather", 0)]),
    ([P], [R], [("all_reduce", 0)]),
    ([P], [S1], [("reduce_scatter", 0)]),
    ([S0], [S1], [("all_to_all", 0)]),
    ([R], [S1], [("local_slice", 0)]),
    ([R], [P], [("local_partial", 0)]),
    ([S0], [P], [("all_gather", 0), ("local_partial", 0)]),
    ([Partial("max")], [Partial("min")], [("all_reduce", 0), ("local_partial", 0)]),
    ([S1], [S1], []),
])
def test_single_dim_transitions(src, dst, expected):
    assert kinds(src, dst) == expected


def test_transitions_on_each_dim_of_a_2d_mesh():
    assert kinds([S0, P], [S0, R], mesh=(2, 2)) == [("all_reduce", 1)]
    assert kinds([P, S1], [S0, S1], mesh=(2, 2)) == [("reduce_scatter", 0)]
    assert sorted(kinds([S0, S1], [R, R], mesh=(2, 2))) == [("all_gather", 0), ("all_gather", 1)]


def test_nested_shards_unsplit_the_inner_mesh_dim_first():
    # [S0, S0]: mesh dim 1 splits the pieces of mesh dim 0, so it must go first.
    assert kinds([S0, S0], [R, R], mesh=(2, 2)) == [("all_gather", 1), ("all_gather", 0)]
    steps = kinds([S0, S0], [S1, S0], mesh=(2, 2))
    assert steps == [("all_gather", 1), ("all_to_all", 0), ("local_slice", 1)]


_FRESH = itertools.count(1)


def test_size_one_mesh_dims_are_relabelled_without_steps():
    assert kinds([S0, P], [R, R], mesh=(1, 4)) == [("all_reduce", 1)]
    assert kinds([P], [S0], mesh=(1,)) == []


def test_plans_are_cached():
    model = CostModel(alpha=1.234e-6 * (1 + next(_FRESH) * 1e-9))   # a model no run saw
    before = plan_cache_info()
    first = plan_redistribute((S0, R), (R, S1), (6, 10), (2, 2), 4, model)
    second = plan_redistribute((S0, R), (R, S1), (6, 10), (2, 2), 4, model)
    after = plan_cache_info()
    assert first == second
    assert after.misses == before.misses + 1 and after.hits == before.hits + 1


def test_comm_bytes_follow_the_bus_convention():
    (step,) = plan_redistribute((P,), (R,), (16, 8), (4,), 4).steps
    assert step.comm_bytes == 2 * 3 * (16 * 8 * 4) // 4
    (step,) = plan_redistribute((S0,), (R,), (16, 8), (4,), 4).steps
    assert step.comm_bytes == 3 * (16 * 8 * 4) // 4


def test_cost_model_prefers_cheaper_path_on_slow_dim():
    # Gathering over a slow mesh dim 0 late (on the smaller piece) is not possible, but
    # the planner must at least price both dims with their own links.
    slow0 = CostModel(per_dim=((1e-3, 1e6), (1e-6, 1e10)))
    plan = plan_redistribute((S0, S1), (R, R), (64, 64), (2, 2), 8, slow0)
    assert plan.cost > plan_redistribute((S0, S1), (R, R), (64, 64), (2, 2), 8).cost


PLACEMENTS = st.sampled_from([R, P, Partial("max"), S0, S1, Shard(2)])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=1, max_size=3),
    st.data(),
)
def test_every_plan_reaches_its_target_by_legal_steps(mesh, data):
    ndim = 3
    src = tuple(data.draw(st.lists(PLACEMENTS, min_size=len(mesh), max_size=len(mesh))))
    dst = tuple(data.draw(st.lists(PLACEMENTS, min_size=len(mesh), max_size=len(mesh))))
    shape = tuple(data.draw(st.lists(st.integers(0, 7), min_size=ndim, max_size=ndim)))
    plan = plan_redistribute(src, dst, shape, tuple(mesh), 8)
    layout = tuple(d if n == 1 else s for s, d, n in zip(src, dst, mesh))
    for step in plan.steps:
        assert step.before == layout and mesh[step.mesh_dim] > 1
        changed = [i for i in range(len(mesh)) if step.before[i] != step.after[i]]
        assert changed == [step.mesh_dim]
        for p in (step.src, step.dst):
            if isinstance(p, Shard):  # no later mesh dim may split the dim being moved
                later = zip(step.before[step.mesh_dim + 1:], mesh[step.mesh_dim + 1:])
                assert all(q != p or n == 1 for q, n in later)
        assert not (isinstance(step.src, Partial) and isinstance(step.dst, Partial))
        layout = step.after
    assert layout == dst


MODELS = st.sampled_from([CostModel(), CostModel(alpha=1e-3, beta=1e8),
                          CostModel(per_dim=((1e-3, 1e6), (1e-6, 1e10), (1e-5, 1e9)))])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data(), MODELS)
def test_one_step_shortcut_is_never_dearer_than_the_search(mesh, data, model):
    """Layouts that differ on one mesh dim skip the search; the search must not beat that."""
    mesh = tuple(mesh)
    src = tuple(data.draw(st.lists(PLACEMENTS, min_size=len(mesh), max_size=len(mesh))))
    i = data.draw(st.integers(0, len(mesh) - 1))
    dst = src[:i] + (data.draw(PLACEMENTS),) + src[i + 1:]
    shape = tuple(data.draw(st.lists(st.integers(0, 9), min_size=3, max_size=3)))
    start = tuple(d if n == 1 else s for s, d, n in zip(src, dst, mesh))  # as the planner does
    direct = _direct(start, dst, shape, mesh, 8, model)
    if direct is not None and direct.steps:
        searched = _search(start, dst, shape, mesh, 8, model)
        assert len(searched.collectives) >= len(direct.collectives)
        if len(searched.collectives) == len(direct.collectives):
            assert direct.cost <= searched.cost * (1 + 1e-12)
