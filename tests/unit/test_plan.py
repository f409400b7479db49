"""The redistribute planner: every transition, nesting, caching, and a property test (no MPI)."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.cost.model import CostModel, bus_bytes
from mtensor.placement import Partial, Replicate, Shard, local_shape, max_local_shape
from mtensor.redistribute.plan import (
    Plan,
    _direct,
    _moves,
    _search,
    plan_cache_info,
    plan_redistribute,
)

R, P = Replicate(), Partial()
S0, S1 = Shard(0), Shard(1)


@pytest.fixture(autouse=True)
def fresh_plan_caches():
    """Plans are cached: start each test empty so that it really runs the planner."""
    _search.cache_clear()
    _direct.cache_clear()
    max_local_shape.cache_clear()


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


# --- plans run on simulated ranks --------------------------------------------------------------
# Blocks of every mesh coordinate are made from a whole array by the layout's meaning (mesh dim 0
# splits first; Partial terms reduce, later mesh dims first), each step is applied to them as the
# collective would, and after every step the blocks must mean the whole array again.

REDUCE = {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum}


def _piece(block, dim, n, k):
    return np.array_split(block, n, axis=dim)[k]


def make_blocks(full, layout, mesh, rng):
    """{coord: block} holding ``full`` in ``layout``."""
    blocks = {(): full}
    for i, p in enumerate(layout):
        n, grown = mesh[i], {}
        for c, b in blocks.items():
            if isinstance(p, Shard):
                terms = [_piece(b, p.dim, n, k) for k in range(n)]
            elif isinstance(p, Replicate):
                terms = [b] * n
            else:
                noise = [rng.integers(0, 4, b.shape).astype(b.dtype) for _ in range(n - 1)]
                if p.reduce_op in ("max", "min"):
                    sign = -1 if p.reduce_op == "max" else 1
                    terms = [b] + [b + sign * x for x in noise]
                else:
                    first = b * (n if p.reduce_op == "avg" else 1) - sum(noise, np.zeros_like(b))
                    terms = [first] + noise
            grown.update({c + (k,): t for k, t in enumerate(terms)})
        blocks = grown
    return blocks


def meaning(blocks, layout, mesh):
    """The whole array the blocks hold: fold the mesh dims, the last one first."""
    for i in reversed(range(len(layout))):
        p, folded = layout[i], {}
        for c in blocks:
            if c[i] == 0:
                group = [blocks[c[:i] + (k,)] for k in range(mesh[i])]
                if isinstance(p, Shard):
                    folded[c[:i]] = np.concatenate(group, axis=p.dim)
                elif isinstance(p, Replicate):
                    assert all(np.array_equal(g, group[0]) for g in group), "replicas differ"
                    folded[c[:i]] = group[0]
                else:
                    total = group[0]
                    for g in group[1:]:
                        total = REDUCE[p.reduce_op](total, g)
                    folded[c[:i]] = total / len(group) if p.reduce_op == "avg" else total
        blocks = folded
    return blocks[()]


def apply_step(blocks, kind, i, src, dst, mesh):
    """Every rank's block after step ``kind`` on mesh dim ``i`` (``src`` -> ``dst``)."""
    out, n = {}, mesh[i]
    for c, b in blocks.items():
        group = [blocks[c[:i] + (k,) + c[i + 1:]] for k in range(n)]
        k = c[i]
        if kind in ("all_reduce", "reduce_scatter"):
            total = group[0]
            for g in group[1:]:
                total = REDUCE[src.reduce_op](total, g)
            total = total / n if src.reduce_op == "avg" else total
            out[c] = total if kind == "all_reduce" else _piece(total, dst.dim, n, k)
        elif kind == "all_gather":
            out[c] = np.concatenate(group, axis=src.dim)
        elif kind == "all_to_all":
            out[c] = _piece(np.concatenate(group, axis=src.dim), dst.dim, n, k)
        elif kind == "local_slice":
            out[c] = _piece(b, dst.dim, n, k)
        else:  # local_partial: one term holds the value (sum), or every one does
            keep = k == 0 or dst.reduce_op != "sum"
            out[c] = b if keep else np.zeros_like(b)
    return out


KINDS = {("P", "R"): "all_reduce", ("P", "S"): "reduce_scatter", ("S", "R"): "all_gather",
         ("S", "S"): "all_to_all", ("R", "S"): "local_slice", ("R", "P"): "local_partial"}


def _letter(p):
    return repr(p)[0]


def run_plan(plan, full, mesh, model, itemsize, rng):
    """Simulate ``plan`` and check each step's data, bytes and the plan's price."""
    layout = tuple(d if n == 1 else s for s, d, n in zip(plan.src, plan.dst, mesh))
    blocks = make_blocks(full, layout, mesh, rng)
    cost = 0.0
    for step in plan.steps:
        assert step.before == layout and step.src == layout[step.mesh_dim]
        assert step.dst == step.after[step.mesh_dim]
        assert KINDS[_letter(step.src), _letter(step.dst)] == step.kind
        sized = step.after if step.kind in ("all_gather", "local_slice") else step.before
        nbytes = math.prod(local_shape(full.shape, mesh, sized, (0,) * len(mesh))) * itemsize
        assert nbytes == max(b.size for b in (blocks if sized is step.before else
                                              apply_step(blocks, step.kind, step.mesh_dim,
                                                         step.src, step.dst, mesh)).values()
                             ) * itemsize
        assert step.comm_bytes == bus_bytes(step.kind, mesh[step.mesh_dim], nbytes)
        cost += model.step_time(step.kind, step.mesh_dim, mesh[step.mesh_dim], nbytes)
        blocks = apply_step(blocks, step.kind, step.mesh_dim, step.src, step.dst, mesh)
        layout = step.after
        for c, b in blocks.items():
            assert b.shape == local_shape(full.shape, mesh, layout, c)
        np.testing.assert_array_equal(meaning(blocks, layout, mesh), full, err_msg=repr(step))
    assert layout == plan.dst
    assert plan.cost == pytest.approx(cost, rel=1e-12, abs=0)
    return plan


def _legal(layout, i, dst, full, mesh, rng):
    """A step is legal when the simulated collective leaves the blocks meaning the array."""
    kind = KINDS.get((_letter(layout[i]), _letter(dst)))
    if kind is None:
        return None
    after = layout[:i] + (dst,) + layout[i + 1:]
    blocks = apply_step(make_blocks(full, layout, mesh, rng), kind, i, layout[i], dst, mesh)
    ok = all(b.shape == local_shape(full.shape, mesh, after, c) for c, b in blocks.items())
    return kind if ok and np.array_equal(meaning(blocks, after, mesh), full) else None


def brute_best(src, dst, full, mesh, model, itemsize, rng):
    """(collectives, seconds) of the best chain: Dijkstra over steps found legal by simulation."""
    start = tuple(d if n == 1 else s for s, d, n in zip(src, dst, mesh))
    options = [R] + [Shard(d) for d in range(full.ndim)]
    best, todo = {start: (0, 0.0)}, [start]
    while todo:
        todo.sort(key=lambda lay: best[lay])
        layout = todo.pop(0)
        for i, n in enumerate(mesh):
            extra = [dst[i]] if isinstance(dst[i], Partial) else []
            for p in options + extra:
                if n == 1 or p == layout[i]:
                    continue
                kind = _legal(layout, i, p, full, mesh, rng)
                if kind is None:
                    continue
                after = layout[:i] + (p,) + layout[i + 1:]
                sized = after if kind in ("all_gather", "local_slice") else layout
                nbytes = math.prod(local_shape(full.shape, mesh, sized, (0,) * len(mesh)))
                ncoll, t = best[layout]
                rank = (ncoll + (not kind.startswith("local")),
                        t + model.step_time(kind, i, n, nbytes * itemsize))
                if rank < best.get(after, (math.inf, math.inf)):
                    best[after] = rank
                    todo.append(after)
    return best[tuple(dst)]


LAYOUT_CASES = [
    ((2,), [S0], [R]), ((3,), [P], [S1]), ((2, 2), [S0, S0], [S1, S0]),
    ((2, 2), [S0, S0], [R, R]), ((2, 2), [P, Partial("max")], [R, R]),
    ((2, 2), [Partial("max"), P], [S0, R]), ((2, 3), [S1, P], [P, S1]),
    ((2, 2), [R, R], [P, Partial("min")]), ((3, 2), [S0, S1], [S1, S0]),
    ((2, 1, 2), [S0, P, S0], [R, S1, R]), ((2, 2, 2), [S0, S0, S1], [S1, S0, S0]),
    ((2, 2), [Partial("avg"), S0], [S0, Partial("avg")]), ((1, 3), [S0, S0], [S1, P]),
    ((2, 2), [S0, R], [S0, P]), ((2, 2), [S1, R], [S0, S1]),
    ((2, 2), [R, S0], [S0, S0]), ((2, 3), [R, S1], [S1, S1]),  # a slice, then one all-to-all
]
MODEL_CASES = [CostModel(), CostModel(alpha=1e-3, beta=1e8),
               CostModel(per_dim=((1e-3, 1e6), (1e-6, 1e10), (1e-5, 1e9)), copy_beta=1e7)]


@pytest.mark.parametrize("model", MODEL_CASES)
@pytest.mark.parametrize("mesh, src, dst", LAYOUT_CASES)
def test_plans_move_the_data_and_are_the_best_legal_chain(mesh, src, dst, model):
    rng = np.random.default_rng(3)
    full = rng.integers(-4, 5, (7, 5)).astype(float)
    plan = run_plan(plan_redistribute(tuple(src), tuple(dst), full.shape, mesh, 8, model),
                    full, mesh, model, 8, rng)
    ncoll, t = brute_best(tuple(src), tuple(dst), full, mesh, model, 8, rng)
    assert len(plan.collectives) == ncoll
    assert plan.cost == pytest.approx(t, rel=1e-12, abs=0)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.data(), MODELS)
def test_random_plans_move_the_data(mesh, data, model):
    mesh = tuple(mesh)
    src = tuple(data.draw(st.lists(PLACEMENTS, min_size=len(mesh), max_size=len(mesh))))
    dst = tuple(data.draw(st.lists(PLACEMENTS, min_size=len(mesh), max_size=len(mesh))))
    shape = tuple(data.draw(st.lists(st.integers(0, 7), min_size=3, max_size=3)))
    itemsize = data.draw(st.sampled_from([1, 4, 8]))
    rng = np.random.default_rng(0)
    full = rng.integers(-4, 5, shape).astype(float)
    run_plan(plan_redistribute(src, dst, shape, mesh, itemsize, model), full, mesh, model,
             itemsize, rng)


def test_step_and_plan_describe_themselves():
    plan = plan_redistribute((S0, P), (R, R), (8, 4), (2, 2), 4)
    assert [repr(s) for s in plan.steps] == [
        "all_reduce(mesh_dim=1: P(sum) -> R, 64 B)",      # 2 * 1/2 * (4 x 4 x 4 B)
        "all_gather(mesh_dim=0: S(0) -> R, 64 B)",        # 1/2 * (8 x 4 x 4 B)
    ]
    assert plan.src == (S0, P) and plan.dst == (R, R)
    local = plan_redistribute((R,), (S0,), (8, 4), (2,), 4)
    assert local.collectives == () and len(local.steps) == 1
    assert plan.collectives == plan.steps


def test_relabelled_size_one_dims_keep_the_requested_layouts():
    plan = plan_redistribute((S0, P), (S1, R), (6, 4), (1, 3), 8)
    assert plan.src == (S0, P) and plan.dst == (S1, R)
    assert [s.before for s in plan.steps] == [(S1, P)]
    assert plan_redistribute((P,), (S0,), (4,), (1,), 8) == Plan((), 0.0, (P,), (S0,))


def test_no_plan_names_the_layouts():
    # a 1-D tensor has no dim 2 to split: the search runs dry
    with pytest.raises(ValueError) as info:
        _search((R,), (Shard(2),), (4,), (2,), 8, CostModel(alpha=7.7e-9))
    assert str(info.value) == "redistribute: no plan from [R] to [S(2)] for shape (4,)"


def test_moves_skip_size_one_dims_and_offer_the_targets_partial():
    moves = set(_moves((R, R), (R, Partial("max")), (1, 2), 2))
    assert moves == {(1, S0, "local_slice"), (1, S1, "local_slice"),
                     (1, Partial("max"), "local_partial")}


@pytest.mark.parametrize("mesh, src, dst", [
    ((2, 2), [P, Partial("max")], [S0, R]), ((2, 2, 2), [P, Partial("max"), R], [S0, R, R]),
    ((2, 2, 2), [P, R, Partial("max")], [S0, R, R]), ((2, 2, 2), [P, R, Partial("min")], [R, S1, R]),
])
def test_terms_of_a_later_other_partial_reduce_first(mesh, src, dst):
    # Reduce-scattering mesh dim 0 first would all-reduce a smaller block on the other mesh
    # dim, so it is cheaper, but wrong: the later Partial's terms must combine first.
    model = CostModel(per_dim=((1e-6, 1e10), (1e-3, 1e6), (1e-3, 1e6)))
    full = np.random.default_rng(5).integers(-4, 5, (8, 6)).astype(float)
    plan = plan_redistribute(tuple(src), tuple(dst), full.shape, mesh, 8, model)
    run_plan(plan, full, mesh, model, 8, np.random.default_rng(6))
    later = next(i for i, p in enumerate(src) if i and isinstance(p, Partial))
    assert plan.collectives[0].mesh_dim == later
