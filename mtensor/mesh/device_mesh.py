"""DeviceMesh: a named N-D grid of MPI ranks, one sub-communicator per mesh dim.

Ranks are laid out row-major over the mesh (an MPI Cartesian communicator without
reordering) in node order: the ranks of a node (an MPI ``COMM_TYPE_SHARED`` split, named by
hostname) take consecutive positions, so the innermost mesh dims stay inside a node when
their sizes allow (``layout="node"``, the default; on one node it is rank order, so rank
``r`` sits at ``np.unravel_index(r, shape)``); ``layout="rank"`` keeps rank order anyway.
``mesh.nodes`` names each position's node and ``mesh.intra_node`` says, per mesh dim,
whether its groups stay inside a node; a heavy dim (``tp``) across nodes is warned about.
Each mesh dim (and the whole mesh) gets a ``Communicator`` of the backend chosen for it
(``comm.BACKENDS``; ``comm.select`` on a GPU mesh); ``get_group`` still hands out the mpi4py
communicator itself.  A ``"cuda"`` mesh binds each rank to GPU ``local_rank % count``, the
local rank coming from an MPI ``COMM_TYPE_SHARED`` split.  MPI is loaded when the first mesh
is built, and so is the abort-on-error hook.
"""
from __future__ import annotations

import math
import os
import sys
from typing import Optional, Sequence, Tuple, Union

from .. import comm as _comm
from .. import modes
from ..comm import abort, select
from ..cost.model import for_links, get_cost_model
from ..device import arrays as device
from . import nodes as mesh_nodes
from . import topology


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
    if device_type not in device.DEVICES:
        raise _mesh_error(f"device_type {device_type!r} is not supported",
                          f"use one of {tuple(device.DEVICES)}")
    return shape


class DeviceMesh:
    """An N-D grid of ranks with a communicator for the whole mesh and one per mesh dim."""

    def __init__(self, comm, shape, dim_names, device_type, groups, coordinate,
                 communicators, whole, nodes):
        """``communicators``: (backend name, Communicator) per mesh dim; ``whole``: the pair
        of the whole mesh; ``nodes``: the node of each mesh position, row-major."""
        from mpi4py import MPI
        self.comm = comm
        self.shape: Tuple[int, ...] = tuple(shape)
        self.mesh_dim_names: Optional[Tuple[str, ...]] = (
            tuple(dim_names) if dim_names is not None else None
        )
        self.device_type = device_type
        self._groups = tuple(groups)
        self._communicators = tuple(c for _, c in communicators)
        self.whole_backend, self._whole = whole
        # the backend that runs each mesh dim's collectives ("mpi", "staged", "nccl", ...)
        self.backends = tuple(name for name, _ in communicators)
        self.coordinate: Tuple[int, ...] = tuple(coordinate)
        self.nodes: Tuple[str, ...] = tuple(nodes)
        # per mesh dim: whether each of its groups sits inside one node (the fast link)
        self.intra_node: Tuple[bool, ...] = topology.intra_node(self.shape, self.nodes)
        # per mesh dim: (ranks per node, nodes) where every group's collectives may run in
        # two levels (a dim whose groups differ is priced flat on every rank: plans must agree)
        self.two_level = tuple(
            topology.uniform_split(self.shape, self.nodes, d) if name == "mpi-hier" else ()
            for d, name in enumerate(self.backends))
        world = MPI.COMM_WORLD.Get_group()
        group = comm.Get_group()
        self.world_ranks = tuple(group.Translate_ranks(list(range(comm.size)), world))
        group.Free()
        # device and backends too: a plan bound on one mesh must not run on a twin whose
        # communicators differ
        self._key = (self.shape, self.mesh_dim_names, self.world_ranks, device_type,
                     self.backends, tuple(id(c) for c in self._communicators))
        self._hash = hash(self._key)
        self._submeshes = {}
        self._priced = (None, None)      # (current cost model, it with this mesh's links)
        self.is_local = False   # the one-rank mesh of local_map's blocks (local_mesh)

    def cost_model(self):
        """The cost model plans on this mesh use: the current one with this mesh's links
        (``cost.for_links``: dims across nodes slower, priced in two levels where they run
        so, until ``mt.calibrate`` measures them); kept until the current model changes, as
        every eager redistribute asks for it."""
        current = get_cost_model()
        if self._priced[0] is not current:
            self._priced = (current, for_links(current, self.intra_node, self.two_level))
        return self._priced[1]

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

    def __getitem__(self, name) -> "DeviceMesh":
        """The 1-D sub-mesh along ``name`` that holds this rank; ``mesh["dp", "tp"]``: the
        sub-mesh of several dims (in the order given), a collective over the whole mesh the
        first time (an MPI ``Cart_sub``): a pipeline stage's (dp, tp) mesh."""
        if isinstance(name, tuple):
            return self._submesh(tuple(self._dim_index(n) for n in name))
        dim = self._dim_index(name)
        if dim not in self._submeshes:
            group = self._groups[dim]
            names = None if self.mesh_dim_names is None else (self.mesh_dim_names[dim],)
            mine = (self.backends[dim], self._communicators[dim])
            nodes = topology.group_nodes(self.shape, self.nodes, self.coordinate, dim)
            self._submeshes[dim] = DeviceMesh(
                group, (self.shape[dim],), names, self.device_type, (group,),
                (self.coordinate[dim],), (mine,), mine, nodes,
            )
        return self._submeshes[dim]

    def _submesh(self, dims) -> "DeviceMesh":
        if len(dims) == 1:
            return self[dims[0]]
        if sorted(dims) != list(dims) or len(set(dims)) != len(dims):
            raise ValueError(f"DeviceMesh: sub-mesh dims {dims} must be distinct and in mesh "
                             f"order (mesh dims {self.mesh_dim_names or self.shape})")
        if dims not in self._submeshes:
            comm = self.comm.Sub([d in dims for d in range(self.ndim)])
            names = None if self.mesh_dim_names is None else tuple(
                self.mesh_dim_names[d] for d in dims)
            pairs = tuple((self.backends[d], self._communicators[d]) for d in dims)
            whole = _communicator(self.whole_backend, comm, self.device_type)
            nodes = topology.sub_nodes(self.shape, self.nodes, self.coordinate, dims)
            self._submeshes[dims] = DeviceMesh(
                comm, tuple(self.shape[d] for d in dims), names, self.device_type,
                tuple(self._groups[d] for d in dims), tuple(self.coordinate[d] for d in dims),
                pairs, whole, nodes)
        return self._submeshes[dims]

    def local_mesh(self) -> "DeviceMesh":
        """The one-rank mesh of this rank alone (``MPI.COMM_SELF``), on this mesh's device:
        where a differentiable ``to_local`` and ``local_map`` put a rank's own blocks, so
        the tape follows numpy code on them without any rank waiting on another."""
        return local_mesh(self.device_type)

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

    def __enter__(self) -> "DeviceMesh":
        """``with mesh:`` makes this mesh the default of ``mt.zeros`` & co. and
        ``distribute_tensor`` inside the block; nested blocks restore the outer mesh."""
        modes.active.meshes.append(self)
        return self

    def __exit__(self, *exc) -> None:
        modes.active.meshes.pop()

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, DeviceMesh) and self._key == other._key)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        names = "" if self.mesh_dim_names is None else f", mesh_dim_names={self.mesh_dim_names}"
        comm = "" if self.device_type == "cpu" else f", backends={self.backends}"
        where = topology.describe(self.mesh_dim_names, self.intra_node, len(set(self.nodes)))
        where = f", {where}" if where else ""
        return f"DeviceMesh({self.device_type!r}, shape={self.shape}{names}{comm}{where})"


def init_device_mesh(*args, **kwargs) -> DeviceMesh:
    """``init_device_mesh(mesh_shape, mesh_dim_names=None, device_type=None, comm=None,
    backend=None)``: build a mesh over ``comm`` (``MPI.COMM_WORLD`` by default); collective
    over ``comm``.

    DTensor's positional form works too: ``init_device_mesh("cuda", (2, 4), mesh_dim_names=
    ...)``.  ``backend``: the communication backend of every mesh dim, or one name per mesh
    dim (default: ``"mpi"`` on the host; on a GPU ``MTENSOR_GPU_COMM`` or ``"auto"``).
    ``layout="node"`` (default) lays ranks out node by node, ``"rank"`` in rank order;
    ``heavy``: mesh dim names whose crossing of a node boundary is warned about."""
    if args and isinstance(args[0], str):       # init_device_mesh(device_type, mesh_shape, ...)
        kwargs["device_type"], args = args[0], args[1:]
    return _build(*args, **kwargs)


def _build(mesh_shape: Sequence[int], mesh_dim_names: Optional[Sequence[str]] = None,
           device_type: Optional[str] = None, comm=None,
           backend: Union[str, Sequence[str], None] = None, layout: str = "node",
           heavy: Sequence[str] = ("tp",)) -> DeviceMesh:
    from mpi4py import MPI
    abort.install_once()
    comm = MPI.COMM_WORLD if comm is None else comm
    device_type = "cpu" if device_type is None else device_type
    shape = _check_mesh_args(mesh_shape, mesh_dim_names, device_type, comm.size)
    backend = select.default_backend(device_type) if backend is None else backend
    backends = (backend,) * len(shape) if isinstance(backend, str) else tuple(backend)
    if len(backends) != len(shape):
        raise _mesh_error(f"backend {backend!r} names {len(backends)} backends for "
                          f"{len(shape)} mesh dims", "give one name, or one per mesh dim")
    for name in backends:
        if name != "auto":
            _comm.backend(name)
    if layout not in ("node", "rank"):
        raise _mesh_error(f"layout {layout!r} is not one of 'node', 'rank'",
                          "pass layout='node' (innermost mesh dims inside a node) or 'rank'")
    key = (comm.py2f(), shape, None if mesh_dim_names is None else tuple(mesh_dim_names),
           device_type, device.DEVICES[device_type], backends, layout, tuple(heavy),
           os.environ.get(FAKE_NODES))
    mesh = _built.get(key)
    if mesh is None:
        labels = _node_labels(comm)
        _bind(device_type, labels, comm.rank)
        order = topology.node_order(labels) if layout == "node" else tuple(range(comm.size))
        if order != tuple(range(comm.size)):          # ranks laid out node by node
            comm = comm.Split(0, key=order.index(comm.rank))
        nodes = tuple(labels[r] for r in order)
        cart = comm.Create_cart(list(shape), periods=[False] * len(shape), reorder=False)
        coordinate = cart.Get_coords(cart.rank)
        groups = [cart.Sub([d == k for k in range(len(shape))]) for d in range(len(shape))]
        communicators = [
            mesh_nodes.two_level(b, g, device_type, shape, nodes, coordinate, d)
            or _communicator(b, g, device_type) for d, (b, g) in enumerate(zip(backends, groups))]
        whole = _communicator(backends[0], cart, device_type)
        mesh = _built[key] = DeviceMesh(cart, shape, mesh_dim_names, device_type, groups,
                                        coordinate, communicators, whole, nodes)
        mesh_nodes.warn_heavy(mesh, heavy)
    return mesh


# MTENSOR_NODE_OF_RANK="0,0,1,1": the node of each rank of the communicator, instead of
# asking MPI (tests and the two-node bed tell ranks they sit on other nodes)
FAKE_NODES = "MTENSOR_NODE_OF_RANK"


def _node_labels(comm) -> tuple:
    """The node of each rank of ``comm`` (the same tuple on every rank): its hostname, from
    an MPI ``COMM_TYPE_SHARED`` split (a host with several shared-memory domains counts each)."""
    fake = os.environ.get(FAKE_NODES)
    if fake:
        labels = tuple(f"node{v.strip()}" for v in fake.split(","))
        if len(labels) != comm.size:
            raise _mesh_error(f"{FAKE_NODES}={fake!r} names {len(labels)} ranks but the "
                              f"communicator has {comm.size}", "give one node per rank")
        return labels
    from mpi4py import MPI
    shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
    leader = shared.allreduce(comm.rank, op=MPI.MIN)
    shared.Free()
    seen = comm.allgather((MPI.Get_processor_name(), leader))
    hosts = {}
    for host, lead in seen:
        hosts.setdefault(host, set()).add(lead)
    return tuple(host if len(hosts[host]) == 1 else f"{host}#{lead}" for host, lead in seen)


def _communicator(name: str, raw, device_type: str):
    """(name, backend ``name`` over ``raw``); ``auto``: what ``select`` picks for the group."""
    if name == "auto":
        name = "mpi" if device_type == "cpu" else select.choose(device_type, raw)
    return name, _comm.backend(name)(raw)


def _bind(device_type: str, labels, rank: int) -> None:
    """Bind this rank to its GPU: ``local_rank % count`` among the ranks of its node."""
    if device_type == "cpu":
        return
    local_rank = labels[:rank].count(labels[rank])
    device.bind(device_type, local_rank)


def local_mesh(device_type: str) -> DeviceMesh:
    """This rank's one-rank mesh on ``device_type`` (not a collective; the device stays
    bound as the rank's own meshes bound it; a GPU one stages through the host, though
    nothing laid out on one rank needs a collective)."""
    key = ("local", device_type)
    mesh = _built.get(key)
    if mesh is None:
        from mpi4py import MPI
        cart = MPI.COMM_SELF.Create_cart([1], periods=[False], reorder=False)
        group = cart.Sub([True])
        name = "mpi" if device_type == "cpu" else "staged"
        mesh = _built[key] = DeviceMesh(
            cart, (1,), None, device_type, (group,), (0,),
            ((name, _comm.backend(name)(group)),), (name, _comm.backend(name)(cart)),
            (MPI.Get_processor_name(),))
        mesh.is_local = True
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
