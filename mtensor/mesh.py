"""DeviceMesh: a named N-D grid of MPI ranks, one sub-communicator per mesh dim.

Ranks are laid out row-major over the mesh (an MPI Cartesian communicator without
reordering), so rank ``r`` of the parent communicator sits at ``np.unravel_index(r, shape)``.
Each mesh dim (and the whole mesh) gets a ``Communicator`` of the backend chosen for it
(``comm.BACKENDS``); ``get_group`` still hands out the mpi4py communicator itself.  MPI is
loaded when the first mesh is built, and so is the abort-on-error hook.
"""
from __future__ import annotations

import math
import sys
from typing import Optional, Sequence, Tuple, Union

from . import comm as _comm
from .comm import abort
from .device import DEVICES


def _mesh_error(what: str, fix: str) -> ValueError:
    return ValueError(f"init_device_mesh: {what}; {fix}")


def _check_mesh_args(mesh_shape, mesh_dim_names, device_type, comm_size) -> Tuple[int, ...]:
    shape = tuple(int(s) for s in mesh_shape)
    if not shape or any(s < 1 for s in shape):
        raise _mesh_error(f"mesh_shape {shape} must be a non-empty tuple of sizes >= 1",
                          "pass e.g. (4,) or (2, 2)")
    if math.prod(shape) != comm_size:
        raise _mesh_error(
            f"mesh_shape {shape} holds {math.prod(shape)} ranks but the communicator has "
            f"{comm_size}",
            f"launch with mpiexec -n {math.prod(shape)} or pass a shape whose product is {comm_size}",
        )
    if mesh_dim_names is not None:
        names = tuple(mesh_dim_names)
        if len(names) != len(shape) or len(set(names)) != len(names):
            raise _mesh_error(
                f"mesh_dim_names {names} must name each of the {len(shape)} mesh dims once",
                f"pass {len(shape)} distinct names",
            )
    if device_type not in DEVICES:
        raise _mesh_error(f"device_type {device_type!r} is not supported",
                          f"use one of {tuple(DEVICES)}")
    return shape


class DeviceMesh:
    """An N-D grid of ranks with a communicator for the whole mesh and one per mesh dim."""

    def __init__(self, comm, shape, dim_names, device_type, groups, coordinate,
                 backends=("mpi",)):
        from mpi4py import MPI
        self.comm = comm
        self.shape: Tuple[int, ...] = tuple(shape)
        self.mesh_dim_names: Optional[Tuple[str, ...]] = (
            tuple(dim_names) if dim_names is not None else None
        )
        self.device_type = device_type
        self._groups = tuple(groups)
        self.backends = tuple(backends)
        self._communicators = tuple(_comm.backend(b)(g) for b, g in zip(self.backends, groups))
        self._whole = _comm.backend(self.backends[0])(comm)
        self.coordinate: Tuple[int, ...] = tuple(coordinate)
        world = MPI.COMM_WORLD.Get_group()
        group = comm.Get_group()
        self._world_ranks = tuple(group.Translate_ranks(list(range(comm.size)), world))
        group.Free()
        # device and backends too: a plan bound on one mesh must not run on a twin whose
        # communicators differ
        self._key = (self.shape, self.mesh_dim_names, self._world_ranks, device_type,
                     self.backends)
        self._hash = hash(self._key)
        self._submeshes = {}

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def size(self, mesh_dim: Union[int, str, None] = None) -> int:
        if mesh_dim is None:
            return math.prod(self.shape)
        return self.shape[self._dim_index(mesh_dim)]

    def get_coordinate(self):
        """This rank's position on the mesh, one index per mesh dim."""
        return list(self.coordinate)

    def get_rank(self) -> int:
        return self.comm.rank

    def get_group(self, mesh_dim: Union[int, str] = 0):
        """The mpi4py communicator of the ranks that share every coordinate but ``mesh_dim``."""
        return self._groups[self._dim_index(mesh_dim)]

    def communicator(self, mesh_dim: Union[int, str, None] = None):
        """The ``Communicator`` of mesh dim ``mesh_dim`` (None: of the whole mesh)."""
        if mesh_dim is None:
            return self._whole
        return self._communicators[self._dim_index(mesh_dim)]

    def __getitem__(self, name: str) -> "DeviceMesh":
        """The 1-D sub-mesh along ``name`` that holds this rank."""
        dim = self._dim_index(name)
        if dim not in self._submeshes:
            group = self._groups[dim]
            names = None if self.mesh_dim_names is None else (self.mesh_dim_names[dim],)
            self._submeshes[dim] = DeviceMesh(
                group, (self.shape[dim],), names, self.device_type, (group,),
                (self.coordinate[dim],), (self.backends[dim],),
            )
        return self._submeshes[dim]

    def _dim_index(self, mesh_dim: Union[int, str]) -> int:
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise KeyError(
                    f"DeviceMesh: no mesh dim named {mesh_dim!r}; "
                    f"this mesh's dims are {self.mesh_dim_names}"
                )
            return self.mesh_dim_names.index(mesh_dim)
        if not -self.ndim <= mesh_dim < self.ndim:
            raise IndexError(f"DeviceMesh: mesh dim {mesh_dim} out of range for a {self.ndim}-D mesh")
        return mesh_dim % self.ndim

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, DeviceMesh) and self._key == other._key)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        names = "" if self.mesh_dim_names is None else f", mesh_dim_names={self.mesh_dim_names}"
        return f"DeviceMesh({self.device_type!r}, shape={self.shape}{names})"


def init_device_mesh(
    mesh_shape: Sequence[int],
    mesh_dim_names: Optional[Sequence[str]] = None,
    device_type: Optional[str] = None,
    comm=None,
    backend: Union[str, Sequence[str]] = "mpi",
) -> DeviceMesh:
    """Build a mesh over ``comm`` (``MPI.COMM_WORLD`` by default); collective over ``comm``.
    ``backend``: the communication backend of every mesh dim, or one name per mesh dim."""
    from mpi4py import MPI
    abort.install_once()
    comm = MPI.COMM_WORLD if comm is None else comm
    device_type = "cpu" if device_type is None else device_type
    shape = _check_mesh_args(mesh_shape, mesh_dim_names, device_type, comm.size)
    backends = (backend,) * len(shape) if isinstance(backend, str) else tuple(backend)
    if len(backends) != len(shape):
        raise _mesh_error(f"backend {backend!r} names {len(backends)} backends for "
                          f"{len(shape)} mesh dims", "give one name, or one per mesh dim")
    for name in backends:
        _comm.backend(name)
    key = (comm.py2f(), shape, None if mesh_dim_names is None else tuple(mesh_dim_names),
           device_type, backends)
    mesh = _built.get(key)
    if mesh is None:
        cart = comm.Create_cart(list(shape), periods=[False] * len(shape), reorder=False)
        coordinate = cart.Get_coords(cart.rank)
        groups = [cart.Sub([d == k for k in range(len(shape))]) for d in range(len(shape))]
        mesh = _built[key] = DeviceMesh(cart, shape, mesh_dim_names, device_type, groups,
                                        coordinate, backends)
    return mesh


def world_mesh() -> DeviceMesh:
    """The 1-D mesh of every rank of ``MPI.COMM_WORLD`` (a collective the first time)."""
    from mpi4py import MPI
    return init_device_mesh((MPI.COMM_WORLD.size,))


def mpi_running() -> bool:
    """Whether MPI is loaded and initialised, asked without loading it."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is not None and mpi.Is_initialized()


# Meshes built so far, by (communicator, shape, names, device, backends): building the same
# mesh again returns it, as every rank asks alike.  MPI has a few thousand communicator ids
# per process, and a mesh holds ndim + 1 communicators, so a program (or a test suite) that
# builds a mesh per step would otherwise run out.
_built: dict = {}
