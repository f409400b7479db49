"""Bus-bandwidth bytes and the alpha-beta model (no MPI)."""
import pytest

from mtensor.redistribute.cost import CostModel, bus_bytes


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
