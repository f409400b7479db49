"""DTensor constructors and accessors over real MPI, compared with numpy."""
import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, expected_block, host, layouts, random_array

import mtensor as mt
from mtensor.placement import Partial, Replicate, Shard


@pytest.mark.mpi
@pytest.mark.parametrize("src_data_rank", [0, None, -1])
@pytest.mark.parametrize("shape", [(7, 5), (2, 3)], ids=str)
def test_distribute_tensor_matches_numpy(mesh, shape, src_data_rank):
    root = WORLD.size - 1 if src_data_rank == -1 else src_data_rank
    full = random_array(shape)
    # Only the source rank's values matter: the others pass garbage of the same shape.
    mine = full if root is None or WORLD.rank == root else full * 0 - 99
    failures = []
    for placements in layouts(mesh.ndim, 2, ("sum", "max")):
        if len({p for p in placements if isinstance(p, Partial)}) > 1:
            continue
        x = mt.distribute_tensor(mine, mesh, placements, src_data_rank=root)
        ok = (np.array_equal(host(x), full) and x.shape == shape
              and x.placements == placements and x.dtype == full.dtype)
        if not all(isinstance(p, Partial) for p in placements):
            ok = ok and x.to_local().shape == expected_block(full, mesh, placements).shape
        if not ok:
            failures.append(list(placements))
    assert_all_ranks(not failures, f"src {root}: {failures[:3]}")


@pytest.mark.mpi
def test_distribute_tensor_counts_one_scatter(mesh):
    full = random_array((8, 4))
    with mt.CommDebugMode() as comm:
        mt.distribute_tensor(full, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
        mt.distribute_tensor(full, mesh, [Replicate()] * mesh.ndim)
        mt.distribute_tensor(full, mesh, [Shard(1)] * mesh.ndim, src_data_rank=None)
    assert comm.get_comm_counts() == {"scatter": 1, "broadcast": 1}


@pytest.mark.mpi
def test_from_local_infers_uneven_global_shape(mesh):
    failures = []
    for shape in [(7, 5), (2, 3), (0, 4)]:
        full = random_array(shape)
        for placements in layouts(mesh.ndim, 2, ()):
            x = mt.DTensor.from_local(expected_block(full, mesh, placements), mesh, placements)
            if x.shape != shape or not np.array_equal(host(x), full):
                failures.append((shape, list(placements), x.shape))
    assert_all_ranks(not failures, f"{failures[:3]}")


@pytest.mark.mpi
def test_from_local_run_check_accepts_good_blocks(mesh):
    full = random_array((7, 5), np.float32)
    placements = [Shard(0)] + [Shard(1)] * (mesh.ndim - 1)
    block = expected_block(full, mesh, placements)
    x = mt.DTensor.from_local(block, mesh, placements, shape=(7, 5), run_check=True)
    assert x.dtype == np.float32 and np.array_equal(host(x), full)
    if mesh.device_type == "cpu":      # a GPU mesh copies a host block up
        assert x.to_local() is block


@pytest.mark.mpi(min_size=2)
def test_from_local_run_check_catches_a_bad_block_on_every_rank():
    mesh = mt.init_device_mesh((WORLD.size,))
    rows = 4 * WORLD.size
    block = np.ones((5 if WORLD.rank == 1 else 4, 3))
    with pytest.raises(ValueError, match=r"rank 1 \(mesh coordinate \[1\]\) holds a block of "
                                         r"shape \(5, 3\)"):
        mt.DTensor.from_local(block, mesh, [Shard(0)], shape=(rows, 3), run_check=True)
    # Without shape= the inferred global shape is (4n+1, 3): array_split puts the extra row
    # on rank 0, so rank 1's block is still wrong and every rank says so.
    with pytest.raises(ValueError, match="holds a block of shape"):
        mt.DTensor.from_local(block, mesh, [Shard(0)])


@pytest.mark.mpi(min_size=2)
def test_from_local_run_check_catches_dtype_disagreement():
    mesh = mt.init_device_mesh((WORLD.size,))
    block = np.ones((2, 2), dtype=np.float32 if WORLD.rank == 1 else np.float64)
    with pytest.raises(ValueError, match="rank 1 holds dtype float32 but rank 0 holds float64"):
        mt.DTensor.from_local(block, mesh, [Replicate()], run_check=True)


@pytest.mark.mpi
def test_properties_repr_and_asarray(mesh):
    full = random_array((6, 4), np.float32)
    x = mt.distribute_tensor(full, mesh, [Shard(1)] + [Replicate()] * (mesh.ndim - 1))
    assert (x.shape, x.ndim, x.size, x.dtype) == ((6, 4), 2, 24, np.float32)
    assert x.device_mesh == mesh and x.placements[0] == Shard(1)
    assert repr(x).startswith("DTensor(shape=(6, 4), dtype=float32, placements=[S(1)")
    if mesh.device_type == "cpu":
        assert np.array_equal(np.asarray(x), full)
        assert np.asarray(x, dtype=np.float64).dtype == np.float64
    else:                               # CuPy's rule: the host copy must be asked for
        with pytest.raises(TypeError, match="mt.asnumpy"):
            np.asarray(x)
    assert np.array_equal(mt.asnumpy(x), full)
    assert x.redistribute() is x


@pytest.mark.mpi
def test_constructor_errors_name_the_problem(mesh):
    full = random_array((4, 4))
    with pytest.raises(ValueError, match=r"shard tensor dim 5 but the tensor has shape \(4, 4\)"):
        mt.distribute_tensor(full, mesh, [Shard(5)] * mesh.ndim)
    with pytest.raises(ValueError, match="placements .* have 0 entries"):
        mt.distribute_tensor(full, mesh, [])
    with pytest.raises(TypeError, match="placements must be Shard"):
        mt.distribute_tensor(full, mesh, ["S0"] * mesh.ndim)
    with pytest.raises(ValueError, match="src_data_rank=99 is not a rank"):
        mt.distribute_tensor(full, mesh, [Replicate()] * mesh.ndim, src_data_rank=99)
    with pytest.raises(ValueError, match=r"shape \(4,\) does not fit a 2-D local block"):
        mt.DTensor.from_local(full, mesh, [Replicate()] * mesh.ndim, shape=(4,))
    x = mt.distribute_tensor(full, mesh, [Shard(-1)] * mesh.ndim)
    assert x.placements == (Shard(1),) * mesh.ndim
