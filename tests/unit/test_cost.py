"""Bus-bandwidth bytes and the alpha-beta model (no MPI)."""
import pytest

from mtensor.cost.model import CostModel, bus_bytes


@pytest.mark.parametrize("kind, n, size, expected", [
    ("all_reduce", 4, 1024, 1536),       # 2 (n-1)/n S
    ("all_gather", 4, 1024, 768),        # (n-1)/n S
    ("reduce_scatter", 8, 1024, 896),
    ("all_to_all", 2, 1000, 500),
    ("all_reduce", 1, 1024, 0),          # one rank moves nothing
    ("local_slice", 4, 1024, 0),
])
def test_bus_bytes(kind, n, size, expected):
    assert bus_bytes(kind, n, size) == expected


def test_step_time_uses_per_dim_links():
    model = CostModel(alpha=1e-6, beta=1e9, per_dim=((1e-3, 1e6),))
    assert model.step_time("all_reduce", 0, 2, 2000) == pytest.approx(1e-3 + 2000 / 1e6)
    assert model.step_time("all_reduce", 1, 2, 2000) == pytest.approx(1e-6 + 2000 / 1e9)
    assert model.step_time("local_slice", 0, 2, 1e10) == pytest.approx(1.0)


def test_change_time_prices_one_mesh_dim_change():
    from mtensor.placement import Partial, Replicate, Shard
    m = CostModel(alpha=1e-6, beta=1e9, copy_beta=1e10)
    R, P, S0, S1 = Replicate(), Partial(), Shard(0), Shard(1)
    block = 4000  # bytes of this rank's block before the change, on 4 ranks
    assert m.change_time(S0, S0, 0, 4, block) == 0 and m.change_time(P, R, 0, 1, block) == 0
    assert m.change_time(S0, R, 0, 4, block) == pytest.approx(1e-6 + 3 * block / 1e9)
    assert m.change_time(P, R, 0, 4, block) == pytest.approx(1e-6 + 1.5 * block / 1e9)
    assert m.change_time(P, S1, 0, 4, block) == pytest.approx(1e-6 + 0.75 * block / 1e9)
    assert m.change_time(S0, S1, 0, 4, block) == pytest.approx(1e-6 + 0.75 * block / 1e9)
    assert m.change_time(R, S1, 0, 4, block) == pytest.approx(block / 4 / 1e10)
    assert m.change_time(R, P, 0, 4, block) == pytest.approx(block / 1e10)
    # a gather is dearer than keeping partial terms, and dearer than an all-to-all
    assert m.change_time(S0, R, 0, 4, block) > m.change_time(S0, S1, 0, 4, block) > 0


@pytest.mark.parametrize("kind, n, size, expected", [
    ("all_reduce", 2, 1000, 1000),       # 2 * 1/2 * S
    ("all_gather", 2, 1000, 500),
    ("all_gather", 1, 1000, 0),
    ("reduce_scatter", 3, 1000, 666),    # 2/3 S, rounded down
    ("all_to_all", 1, 1000, 0),
    ("local_partial", 8, 1000, 0),
])
def test_bus_bytes_on_two_and_one_ranks(kind, n, size, expected):
    assert bus_bytes(kind, n, size) == expected


def test_links_and_overlap_rates_per_mesh_dim():
    m = CostModel(alpha=1.0, beta=2.0, per_dim=((3.0, 4.0), (5.0, 6.0)),
                  overlap_rate=0.25, rate_per_dim=(0.5,))
    assert m.link(0) == (3.0, 4.0) and m.link(1) == (5.0, 6.0) and m.link(2) == (1.0, 2.0)
    assert m.rate(0) == 0.5 and m.rate(1) == 0.25 and m.rate(5) == 0.25
    assert CostModel(alpha=1.0, beta=2.0).link(0) == (1.0, 2.0)


def test_defaults_are_shared_memory_mpi():
    # the documented defaults: 5 us latency, 4 GB/s links, 10 GB/s local copies, and no data
    # moving behind compute (rate 0, no slowdown), one pair for every mesh dim
    m = CostModel()
    assert (m.alpha, m.beta, m.copy_beta) == (5e-6, 4e9, 1e10)
    assert (m.overlap_rate, m.overlap_slowdown, m.per_dim, m.rate_per_dim) == (0.0, 0.0, (), ())
    assert m.rate(0) == 0.0 and m.link(3) == (5e-6, 4e9)


@pytest.mark.parametrize("kind, expected", [
    ("all_reduce", 2.0 + 2 * 3 * 4000 / 4 / 8.0),   # alpha + bus bytes / beta
    ("all_gather", 2.0 + 3 * 4000 / 4 / 8.0),
    ("reduce_scatter", 2.0 + 3 * 4000 / 4 / 8.0),
    ("all_to_all", 2.0 + 3 * 4000 / 4 / 8.0),
    ("local_slice", 4000 / 16.0),                     # a copy: no latency, copy_beta
    ("local_partial", 4000 / 16.0),
])
def test_step_time_by_hand(kind, expected):
    m = CostModel(alpha=2.0, beta=8.0, copy_beta=16.0)
    assert m.step_time(kind, 0, 4, 4000) == expected


def test_change_time_of_every_pair_by_hand():
    from mtensor.placement import Partial, Replicate, Shard
    m = CostModel(alpha=2.0, beta=8.0, copy_beta=16.0)
    R, P, M, S0, S1 = Replicate(), Partial(), Partial("max"), Shard(0), Shard(1)
    n, b = 4, 4000
    gather = 2.0 + 3 * (b * n) / 4 / 8.0        # all-gather of the n blocks
    reduce = 2.0 + 2 * 3 * b / 4 / 8.0          # all-reduce of the block
    expected = {
        (S0, R): gather,
        (S0, P): gather + b * n / 16.0,           # gather, then zero all but one term
        (S0, S1): 2.0 + 3 * b / 4 / 8.0,          # all-to-all of the block
        (P, R): reduce,
        (P, M): reduce + b / 16.0,                # reduce, then make terms of the other op
        (P, S0): 2.0 + 3 * b / 4 / 8.0,           # reduce-scatter of the block
        (R, S0): b // n / 16.0,                   # slice a quarter out
        (R, P): b / 16.0,                         # copy and zero
        (R, R): 0.0, (P, P): 0.0, (S1, S1): 0.0,
    }
    for (src, dst), t in expected.items():
        assert m.change_time(src, dst, 0, n, b) == t, (src, dst)
        assert m.change_time(src, dst, 0, 1, b) == 0.0   # one rank: nothing to move
    assert m.change_time(R, S0, 0, 3, 1000) == 333 / 16.0   # the slice rounds down


def test_per_dim_links_price_change_time():
    from mtensor.placement import Partial, Replicate
    m = CostModel(alpha=1.0, beta=1.0, per_dim=((10.0, 2.0),))
    assert m.change_time(Partial(), Replicate(), 0, 2, 100) == 10.0 + 100 / 2.0
    assert m.change_time(Partial(), Replicate(), 1, 2, 100) == 1.0 + 100 / 1.0


def test_set_cost_model_replaces_the_default():
    from mtensor.cost.model import get_cost_model, set_cost_model
    before = get_cost_model()
    other = CostModel(alpha=1.0)
    try:
        set_cost_model(other)
        assert get_cost_model() is other
    finally:
        set_cost_model(before)
    assert get_cost_model() is before
