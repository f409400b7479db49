"""Every layout to every layout through real MPI, compared with numpy on the full array."""
import numpy as np
import pytest
from mpi_helpers import (
    WORLD,
    assert_all_ranks,
    dtensor_of,
    expected_block,
    host,
    layouts,
    random_array,
    share,
)

import mtensor as mt
from mtensor.dtensor import relayout
from mtensor.placement import Partial, Replicate, Shard
from mtensor.redistribute import plan_redistribute

# Even on most meshes, uneven, and smaller than the mesh (empty shards).
SHAPES = [(12, 8), (7, 5), (2, 3)]
REDUCE_OPS = ["avg", "max", "min"]


def sweep(mesh, full, sources, targets, exact=True, part=(0, 1)):
    """Redistribute every source to every target (pair ``i`` where ``i % n == k`` for
    ``part=(k, n)``); return what went wrong on this rank."""
    failures, (k, n), i = [], part, -1
    for src in sources:
        x = dtensor_of(full, mesh, src)
        for dst in targets:
            i += 1
            if i % n != k:
                continue
            with mt.CommDebugMode() as comm:
                y = x.redistribute(mesh, dst)
            got, want = host(y.to_local()), expected_block(full, mesh, dst)
            plan = plan_redistribute(x.placements, dst, full.shape, mesh.shape, full.itemsize)
            same = np.array_equal(got, want) if exact else np.allclose(got, want)
            if not (same and got.dtype == full.dtype and y.placements == tuple(dst)
                    and y.shape == full.shape
                    and comm.get_total_counts() == len(plan.collectives)):
                failures.append(f"{list(src)} -> {list(dst)} shape {full.shape}")
    return failures


@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_layout_to_every_layout(mesh, shape):
    full = random_array(shape)
    failures = sweep(mesh, full, layouts(mesh.ndim, 2), layouts(mesh.ndim, 2, ()),
                     part=share(mesh, SHAPES.index(shape), len(SHAPES)))
    assert_all_ranks(not failures, f"{len(failures)} bad, e.g. {failures[:3]}")


@pytest.mark.mpi
def test_three_dim_tensor(mesh):
    if mesh.ndim > 2:
        pytest.skip("5^3 x 4^3 layout pairs on a 3-D mesh: covered by the 2-D tensor sweep")
    full = random_array((3, 4, 5), seed=3)
    failures = sweep(mesh, full, layouts(mesh.ndim, 3), layouts(mesh.ndim, 3, ()))
    assert_all_ranks(not failures, f"{len(failures)} bad, e.g. {failures[:3]}")


@pytest.mark.mpi
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_partial_reduce_ops(mesh, op):
    full = random_array((7, 5), seed=4)
    sources = [s for s in layouts(mesh.ndim, 2, (op,)) if Partial(op) in s]
    failures = sweep(mesh, full, sources, layouts(mesh.ndim, 2, ()), exact=op != "avg",
                     part=share(mesh, REDUCE_OPS.index(op), len(REDUCE_OPS)))
    assert_all_ranks(not failures, f"{len(failures)} bad, e.g. {failures[:3]}")


@pytest.mark.mpi
def test_to_partial_internally(mesh):
    full = random_array((5, 6), seed=5)
    targets = [t for t in layouts(mesh.ndim, 2, ("sum", "max")) if any(
        isinstance(p, Partial) for p in t) and len({p for p in t if isinstance(p, Partial)}) == 1]
    x = dtensor_of(full, mesh, (Shard(0),) + (Replicate(),) * (mesh.ndim - 1))
    failures = []
    for dst in targets:
        y = relayout(x, dst)
        back = host(y)
        if not np.array_equal(back, full):
            failures.append(f"S(0) -> {list(dst)} -> R")
    assert_all_ranks(not failures, f"{failures[:3]}")


@pytest.mark.mpi
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_, np.complex128])
def test_dtypes_travel_unchanged(mesh, dtype):
    full = (random_array((9, 4), seed=6) % 2 if dtype == np.bool_ else
            np.abs(random_array((9, 4), seed=6))).astype(dtype)
    ops = () if dtype == np.bool_ else ("sum",)
    moves = [((Shard(0),), (Replicate(),)), ((Shard(0),), (Shard(1),)),
             ((Replicate(),), (Shard(1),))] + [((Partial(o),), (r,)) for o in ops
                                               for r in (Replicate(), Shard(0))]
    rest = (Replicate(),) * (mesh.ndim - 1)
    failures = []
    for src, dst in moves:
        failures += sweep(mesh, full, [src + rest], [dst + rest])
    assert_all_ranks(not failures, f"{dtype}: {failures[:3]}")


@pytest.mark.mpi
@pytest.mark.parametrize("src, dst, collective", [
    (Shard(0), Replicate(), "all_gather"),
    (Partial(), Replicate(), "all_reduce"),
    (Partial(), Shard(1), "reduce_scatter"),
    (Shard(0), Shard(1), "all_to_all"),
    (Replicate(), Shard(0), None),
])
def test_exact_counts_and_bytes_on_1d_mesh(src, dst, collective):
    mesh = mt.init_device_mesh((WORLD.size,))
    full = random_array((WORLD.size * 4, 6), np.float32)
    x = dtensor_of(full, mesh, (src,))
    with mt.CommDebugMode() as comm:
        y = x.redistribute(mesh, [dst])
    n = WORLD.size
    want = {} if collective is None or n == 1 else {collective: 1}
    assert comm.get_comm_counts() == want
    sizes = {"all_reduce": 2 * full.nbytes, "all_gather": full.nbytes,
             "reduce_scatter": full.nbytes, "all_to_all": full.nbytes // n}
    if want:
        assert comm.get_comm_bytes() == {collective: (n - 1) * sizes[collective] // n}
        (entry,) = comm.log
        assert entry.mesh_dim == 0 and entry.dtype == "float32"
    assert np.array_equal(host(y.to_local()), expected_block(full, mesh, [dst]))


@pytest.mark.mpi
def test_public_redistribute_refuses_partial_and_bad_specs(mesh):
    x = mt.distribute_tensor(random_array((4, 4)), mesh, [Replicate()] * mesh.ndim)
    with pytest.raises(ValueError, match="contain Partial"):
        x.redistribute(mesh, [Partial()] * mesh.ndim)
    with pytest.raises(ValueError, match=f"have {mesh.ndim + 1} entries but the mesh"):
        x.redistribute(mesh, [Replicate()] * (mesh.ndim + 1))
    with pytest.raises(ValueError, match="shard tensor dim 2 but the tensor has shape"):
        x.redistribute(mesh, [Shard(2)] + [Replicate()] * (mesh.ndim - 1))
    other = mt.init_device_mesh((WORLD.size,) if mesh.ndim > 1 else (1, WORLD.size))
    with pytest.raises(ValueError, match="different meshes"):
        x.redistribute(other, [Replicate()] * other.ndim)


@pytest.mark.mpi
@pytest.mark.parametrize("shape", [(12, 24), (12, 7), (5, 24)], ids=str)
def test_all_to_all_takes_the_even_call_alike_on_every_rank(mesh, shape):
    """S(0) -> S(1) over the last mesh dim: both dims split evenly, every rank passes
    ``EvenExchange`` counts (MPI_Alltoall); otherwise a plain pair (Alltoallv) on every rank,
    since one rank's counts may be even while another's are not (mixed calls hang)."""
    from mtensor.comm import mpi_host
    from mtensor.comm.protocol import EvenExchange

    if getattr(mesh, "device_type", "cpu") != "cpu":
        pytest.skip("the host backend's call (device legs: tested by their own backends)")
    n = mesh.shape[-1]
    rest = [Replicate()] * (mesh.ndim - 1)
    full = random_array(shape, seed=4)
    seen, original = [], mpi_host.MPIHost.all_to_all

    def recording(self, send, recv, counts, op):
        seen.append(type(counts) is EvenExchange)
        return original(self, send, recv, counts, op)

    mpi_host.MPIHost.all_to_all = recording
    try:
        y = dtensor_of(full, mesh, rest + [Shard(0)]).redistribute(mesh, rest + [Shard(1)])
    finally:
        mpi_host.MPIHost.all_to_all = original
    even = shape[0] % n == 0 and shape[1] % n == 0
    want = [] if n == 1 else [even]
    every = WORLD.allgather(seen)
    assert_all_ranks(np.array_equal(host(y.to_local()), expected_block(full, mesh, y.placements))
                     and all(s == want for s in every), f"{every}, want {want}")


@pytest.mark.mpi
def test_a_kept_output_buffer_is_reused_only_once_nothing_holds_it():
    """A small collective's output buffer is kept by its bound step: a later call writes into
    it again only when no DTensor, block or view of it is alive."""
    if WORLD.size == 1:
        pytest.skip("one rank: S(0) -> R runs no collective")
    mesh = mt.init_device_mesh((WORLD.size,))
    full = random_array((WORLD.size * 3, 4), seed=7)
    x = dtensor_of(full, mesh, (Shard(0),))
    first = x.redistribute(mesh, [Replicate()])
    second = x.redistribute(mesh, [Replicate()])
    view = second.to_local()[1:]
    del second
    third = x.redistribute(mesh, [Replicate()])
    address = third.to_local().ctypes.data
    ok = (not np.shares_memory(first.to_local(), third.to_local())
          and not np.shares_memory(view, third.to_local())
          and all(np.array_equal(host(y.to_local()), full) for y in (first, third))
          and np.array_equal(view, full[1:]))
    del third
    fourth = x.redistribute(mesh, [Replicate()])
    reused = fourth.to_local().ctypes.data == address
    assert_all_ranks(ok and reused and np.array_equal(host(fourth.to_local()), full),
                     f"ok {ok}, reused {reused}")


@pytest.mark.mpi
def test_eager_redistribute_plans_again_under_a_new_cost_model():
    """The eager lane keeps what a request resolved to only while the cost model it was
    planned under is the current one."""
    from mtensor.cost.model import CostModel, get_cost_model, set_cost_model
    from mtensor.dtensor import redistribution

    mesh = mt.init_device_mesh((WORLD.size,))
    x = dtensor_of(random_array((WORLD.size * 2, 3), seed=8), mesh, (Shard(0),))
    before = get_cost_model()
    seen = []
    try:
        for model in (before, CostModel(alpha=12e-6, beta=1.2e8)):
            set_cost_model(model)
            x.redistribute(mesh, [Replicate()])
            (move,) = [m for (i, _), m in mt.dtensor._MOVES.items() if i == id(x._spec)
                       and m[0] is x._spec]
            seen.append(move[1] is model and move[2] is redistribution(
                x._spec, (Replicate(),), mesh.cost_model())[0])
    finally:
        set_cost_model(before)
    assert_all_ranks(all(seen), f"{seen}")


@pytest.mark.mpi
def test_kept_output_buffers_stay_within_their_budget(monkeypatch):
    from mtensor.redistribute import execute

    if WORLD.size == 1:
        pytest.skip("one rank: S(0) -> R runs no collective")
    mesh = mt.init_device_mesh((WORLD.size,))
    monkeypatch.setattr(execute, "KEEP_BUDGET", execute._kept[0])   # spent
    x = dtensor_of(random_array((WORLD.size * 5, 3), seed=9), mesh, (Shard(0),))
    y = x.redistribute(mesh, [Replicate()])
    (step,) = mt.dtensor._MOVES[(id(x._spec), (Replicate(),))][2]._runs
    assert_all_ranks(step.spare is None and not step.keeps
                     and np.array_equal(host(y.to_local()), host(x.full_tensor())),
                     f"spare {step.spare is not None}, keeps {step.keeps}")
