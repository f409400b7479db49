"""DeviceMesh over real communicators."""
import numpy as np
import pytest
from mpi_helpers import WORLD, mesh_shapes

import mtensor as mt


@pytest.mark.mpi
@pytest.mark.parametrize("shape", mesh_shapes(), ids=str)
def test_mesh_layout_is_row_major(shape):
    names = tuple(f"d{i}" for i in range(len(shape)))
    mesh = mt.init_device_mesh(shape, mesh_dim_names=names)
    assert mesh.shape == shape and mesh.ndim == len(shape) and mesh.size() == WORLD.size
    assert mesh.mesh_dim_names == names and mesh.device_type == "cpu"
    assert mesh.get_coordinate() == list(np.unravel_index(WORLD.rank, shape))
    for dim, name in enumerate(names):
        group = mesh.get_group(name)
        assert group is mesh.get_group(dim) and group.size == shape[dim]
        assert group.rank == mesh.get_coordinate()[dim]
        # the group holds exactly the ranks that agree on every other coordinate
        others = group.allgather([c for i, c in enumerate(mesh.get_coordinate()) if i != dim])
        assert all(o == others[0] for o in others)
        sub = mesh[name]
        assert sub.shape == (shape[dim],) and sub.mesh_dim_names == (name,)
        assert sub.get_coordinate() == [mesh.get_coordinate()[dim]] and sub is mesh[name]
        assert mesh.size(name) == shape[dim]


@pytest.mark.mpi
def test_meshes_compare_by_shape_names_and_ranks():
    a = mt.init_device_mesh((WORLD.size,), mesh_dim_names=("x",))
    b = mt.init_device_mesh((WORLD.size,), mesh_dim_names=("x",))
    c = mt.init_device_mesh((WORLD.size,), mesh_dim_names=("y",))
    assert a == b and hash(a) == hash(b) and a != c
    assert "DeviceMesh('cpu', shape=" in repr(a)


@pytest.mark.mpi
@pytest.mark.parametrize("kwargs, message", [
    (dict(mesh_shape=(WORLD.size + 1,)),
     f"holds {WORLD.size + 1} ranks but the communicator has {WORLD.size}; launch with"),
    (dict(mesh_shape=(WORLD.size, 2)), "ranks but the communicator has"),
    (dict(mesh_shape=()), "must be a non-empty tuple"),
    (dict(mesh_shape=(WORLD.size,), mesh_dim_names=("a", "b")), "must name each of the 1"),
    (dict(mesh_shape=(WORLD.size,), device_type="tpu"), "device_type 'tpu' is not supported"),
])
def test_bad_mesh_raises_on_every_rank(kwargs, message):
    with pytest.raises(ValueError, match=message):
        mt.init_device_mesh(**kwargs)


@pytest.mark.mpi
def test_unknown_mesh_dim_name():
    mesh = mt.init_device_mesh((WORLD.size,), mesh_dim_names=("dp",))
    with pytest.raises(KeyError, match="no mesh dim named 'tp'"):
        mesh["tp"]
    with pytest.raises(IndexError, match="out of range"):
        mesh.get_group(3)
