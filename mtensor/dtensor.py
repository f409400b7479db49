"""The DTensor type: a local block plus the spec (mesh, placements, global shape, dtype).

Blocks live on the mesh's device: a GPU mesh wraps CuPy arrays, and host data given to a
constructor is copied there (``distribute_tensor`` cuts and sends on the host, then copies
each rank's block up).  Constructors (``distribute_tensor``, ``DTensor.from_local``) and layout changes
(``redistribute``, ``full_tensor``) live here; the collectives come from the redistribute
planner and executor, the checks from ``spec``.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np

from . import modes, views
from .comm import guard
from .cost.model import active_model
from .device import arrays as device
from .placement import (
    Placement,
    Replicate,
    Shard,
    local_shape,
    local_slices,
    mesh_coords,
    reduced,
)
from .redistribute.execute import bind_program
from .spec import (
    DTensorSpec,
    check_dtype,
    check_local_shapes,
    check_placements,
    check_same_mesh,
    check_shape,
    check_target_placements,
    infer_global_shape,
)


class DTensor:
    """A tensor distributed over a DeviceMesh.  ``shape`` is the global shape."""

    # _view: how this tensor views another (views.View) or None; _version: bumped by every
    # write to this tensor's block, so views of it know when they are stale; _reduced: for a
    # tensor of partial terms an op needed whole, (version, epoch, the reduced DTensor);
    # _windows: [views.stamp, {key: block}, {geom: widths}] the block widened by halo rows,
    # shared by the windowed reads (stencil slices) made while the content is unchanged,
    # and the widths read so far (decide._widened).
    # _ghost: the gradient tape's stand-in for this tensor (autodiff.tape.Ghost), or None.
    __slots__ = ("_local", "_spec", "_view", "_version", "_reduced", "_windows", "_ghost")

    def __init__(self, local: np.ndarray, spec: DTensorSpec):
        self._local = local
        self._spec = spec
        self._view = None
        self._version = 0
        self._reduced = None
        self._windows = None
        self._ghost = None

    @property
    def placements(self):
        return self._spec.placements

    @property
    def device_mesh(self):
        return self._spec.mesh

    @property
    def shape(self):
        return self._spec.shape

    @property
    def dtype(self):
        return self._spec.dtype

    @property
    def ndim(self) -> int:
        return len(self._spec.shape)

    @property
    def size(self) -> int:
        """Number of elements of the global tensor (numpy's meaning of ``size``)."""
        return math.prod(self._spec.shape)

    @property
    def itemsize(self) -> int:
        return self._spec.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the global tensor (numpy's ``nbytes`` of the full array), not of the block."""
        return self.size * self._spec.dtype.itemsize

    @property
    def spec(self) -> DTensorSpec:
        return self._spec

    def to_local(self, *, grad_placements: Optional[Sequence[Placement]] = None):
        """This rank's block (no communication).

        Inside ``value_and_grad``, of a value that depends on a parameter, the block comes
        as a DTensor of a one-rank mesh (``mesh.local_mesh()``) that the tape follows, so
        numpy code on it and ``DTensor.from_local`` back keep the gradient; its cotangent
        returns as a DTensor laid out as ``grad_placements`` (default: this tensor's, Partial
        made Replicate)."""
        if modes.is_tracked(self):
            return modes.active.tape.local_of(self, grad_placements)
        block = self._block()
        self._reduced = None      # the caller may write the block in place, which may be a
        x = self                  # view of a widened block its bases' slices share
        while x is not None:
            x._windows = None
            x = x._view.parent if x._view is not None else None
        return block

    def _block(self):
        """This rank's block, for mtensor's own plans (never followed by the tape)."""
        modes.refuse_while_tracing("to_local()")
        if self._view is not None:
            views.sync(self)
        return self._local

    def reduced_form(self) -> "DTensor":
        """This tensor as ops read it: the reduced twin an earlier op made of its partial
        terms while no write has touched it since (the same value, reduced once however
        often it is read), else itself.  Its own placements and block never change."""
        twin = self._reduced
        if twin is not None and twin[0] == self._version and twin[1] == views.state.epoch:
            return twin[2]
        return self

    def full_tensor(self) -> np.ndarray:
        """The whole tensor on every rank (a collective: every rank must call it)."""
        if modes.is_tracked(self):
            raise TypeError("value_and_grad: full_tensor() (or np.asarray, float) of a value "
                            "that depends on a parameter leaves the gradient's graph; keep "
                            "it a DTensor inside the differentiated function")
        modes.refuse_while_tracing("full_tensor() (or np.asarray, float, bool)")
        replicated = (Replicate(),) * self.device_mesh.ndim
        guard.state.op = "full_tensor"
        return relayout(self, replicated)._local

    def redistribute(self, device_mesh=None, placements: Optional[Sequence[Placement]] = None):
        """The same tensor laid out as ``placements`` on the same mesh (a collective)."""
        spec = self._spec
        if device_mesh is not None and device_mesh is not spec.mesh:
            check_same_mesh("redistribute", spec.mesh, device_mesh)
        if placements is None:
            placements = spec.placements
        now = modes.active
        if (self._view is None and self._reduced is None and now.tape is None
                and now.tracer is None and now.autoshard is None):
            # a plain eager tensor: what this request resolved to, in one lookup (a small
            # collective's whole added cost is Python, paid on every call)
            key = (id(spec), tuple(placements))
            move = _MOVES.get(key)
            if move is None or move[0] is not spec or move[1] is not active_model[0]:
                move = _resolve(spec, key)
            guard.state.op = "redistribute"
            return self if move[2] is None else DTensor(move[2](self._local), move[3])
        placements = check_target_placements("redistribute", placements, spec.mesh,
                                             spec.shape)
        guard.state.op = "redistribute"
        out = relayout(self, placements)
        if modes.active.tape is not None:
            modes.active.tape.push("redistribute", (self,), (self.placements,), out)
        if modes.active.autoshard is not None:
            modes.active.autoshard.pinned(self, out)
        return out

    def __array__(self, dtype=None, copy=None):
        if self.device_mesh.device_type != "cpu":
            raise TypeError(
                f"implicit conversion of a DTensor on a {self.device_mesh.device_type!r} mesh "
                f"to a NumPy array is not allowed (CuPy's rule: it hides a device-to-host "
                f"copy); call mt.asnumpy(x) for a numpy array, or x.full_tensor() for a "
                f"device one")
        full = self.full_tensor()       # numpy asks for a numpy array
        return full if dtype is None else full.astype(dtype)

    def __repr__(self) -> str:
        return (
            f"DTensor(shape={self.shape}, dtype={self.dtype}, "
            f"placements={list(self.placements)}, mesh={self.device_mesh})"
        )

    @staticmethod
    def from_local(local, device_mesh, placements, shape=None, run_check: bool = False, *,
                   grad_placements: Optional[Sequence[Placement]] = None):
        """Wrap each rank's block; with ``shape=None`` the global shape is gathered from them.

        Blocks must follow the ``numpy.array_split`` layout of the placements.  With
        ``run_check=True`` every rank's dtype and block shape are checked against that layout
        and a mismatch raises the same error on every rank.  ``local`` may be a block of a
        one-rank mesh (a differentiable ``to_local``'s): the gradient then flows back to it,
        the cotangent laid out as ``grad_placements`` (default: ``placements`` with
        Partial made Replicate: every term of a sum has the sum's gradient, as DTensor) before
        its block is taken.
        """
        term = local if type(local) is DTensor else None
        if term is not None:
            local = own_block(term, device_mesh)
        local = device.to_device(local if device.is_block(local) else np.asarray(local),
                                 device_mesh.device_type)
        check_dtype("from_local", local.dtype)
        placements = check_placements("from_local", placements, device_mesh, local.shape)
        sharded = any(isinstance(p, Shard) for p in placements)
        if shape is None and not sharded and not run_check:
            shape = local.shape
        elif shape is None or run_check:
            # the blocks may differ in shape (uneven shards): the check compares ndim only
            with guarded("from_local", "allgather", (None,) * local.ndim, local.dtype,
                         device_mesh):
                blocks = device_mesh.communicator().allgather_object(
                    (local.shape, local.dtype.str))
            if shape is None:
                shape = infer_global_shape(blocks, device_mesh.shape, placements)
            check_local_shapes(blocks, device_mesh.shape, placements, tuple(shape))
        shape = check_shape("from_local", shape, local.ndim)
        out = DTensor(local, DTensorSpec(device_mesh, placements, shape, local.dtype))
        if term is not None and modes.is_tracked(term):
            grads = reduced(placements) if grad_placements is None else check_placements(
                "from_local (grad_placements)", grad_placements, device_mesh, local.shape)
            modes.active.tape.push("from_local", (term,), (tuple(grads),), out)
        return out


def relayout(x: DTensor, placements) -> DTensor:
    """``x`` in any validated placements, Partial included: the redistribution the layers
    above use (ops, writes, gradients and checkpoints need Partial targets, which the public
    ``redistribute`` refuses)."""
    if x._view is not None:
        views.sync(x)
    spec = x._spec
    if placements == spec.placements:
        return x
    source = x.reduced_form()
    if placements == source._spec.placements:       # the twin's copy: a node when tracing
        tracer = modes.active.tracer
        block = source._local
        block = block.copy() if tracer is None else tracer.call("copy", _copy, (block,))
        return DTensor(block, source._spec)
    program, out_spec = redistribution(source._spec, placements, spec.mesh.cost_model())
    return DTensor(program(source._local), out_spec)


_MOVES: dict = {}


def _resolve(spec: DTensorSpec, key) -> tuple:
    """What ``redistribute(key[1])`` of a ``spec`` tensor resolves to, kept by the spec's
    id: (spec, cost model, the checked target's bound program or None where the layout
    already is the target, the output spec)."""
    target = check_target_placements("redistribute", key[1], spec.mesh, spec.shape)
    program, out = ((None, spec) if target == spec.placements else
                    redistribution(spec, target, spec.mesh.cost_model()))
    if len(_MOVES) >= 4096:
        _MOVES.clear()
    move = _MOVES[key] = (spec, active_model[0], program, out)
    return move


def _copy(block):
    return block.copy()


def own_block(term: "DTensor", device_mesh):
    """The block a one-rank-mesh DTensor holds, for ``from_local``; a DTensor of any other
    mesh is refused (its block alone is not this rank's block of anything)."""
    if term.device_mesh is not device_mesh.local_mesh():
        raise TypeError(
            f"from_local: local is a DTensor of shape {term.shape} on {term.device_mesh}; "
            f"pass this rank's block (x.to_local()), not a distributed tensor")
    if term._view is not None:
        views.sync(term)
    return term._local


@contextmanager
def guarded(op: str, kind: str, shape, dtype, mesh):
    """Announce a constructor's collective to the check mode and the timeout."""
    if guard.state.active:
        guard.state.op = op
        guard.before(kind, -1, tuple(shape), dtype, mesh.comm)
    try:
        yield
    finally:
        guard.after()


@lru_cache(maxsize=4096)
def redistribution(spec: DTensorSpec, placements, model):
    """(bound program, output spec) for one layout change: a repeat call plans nothing."""
    program = bind_program(spec.mesh, spec.placements, placements, spec.shape, spec.dtype,
                           model)
    return program, DTensorSpec(spec.mesh, placements, spec.shape, spec.dtype)


def _scatter_from(array, spec: DTensorSpec, root: int) -> np.ndarray:
    """Root sends every rank its block: one Bcast if nothing is sharded, else one Scatterv."""
    mesh = spec.mesh
    mine = local_shape(spec.shape, mesh.shape, spec.placements, mesh.coordinate)
    out = device.empty(mine, spec.dtype)
    is_root = mesh.comm.rank == root
    if not any(isinstance(p, Shard) for p in spec.placements):
        if is_root:
            out[...] = array
        with guarded("distribute_tensor", "broadcast", spec.shape, spec.dtype, mesh):
            mesh.communicator().broadcast(out, root)
        modes.count_collective("broadcast", -1, out.shape, out.dtype, out.nbytes,
                               mesh.whole_backend)
        return out
    coords = mesh_coords(mesh.shape)
    counts = [math.prod(local_shape(spec.shape, mesh.shape, spec.placements, c)) for c in coords]
    send = None
    if is_root:
        send = np.concatenate(
            [array[local_slices(spec.shape, mesh.shape, spec.placements, c)].reshape(-1)
             for c in coords]
        )
    with guarded("distribute_tensor", "scatter", spec.shape, spec.dtype, mesh):
        mesh.communicator().scatter(send, out, counts, root)
    modes.count_collective("scatter", -1, out.shape, out.dtype, out.nbytes,
                           mesh.whole_backend)
    return out


def distribute_tensor(array, device_mesh=None, placements=None,
                      src_data_rank: Optional[int] = 0) -> DTensor:
    """Distribute a full array.  Values come from rank ``src_data_rank`` of the mesh (one
    scatter or broadcast); with ``None`` every rank cuts its block from its own copy.
    ``device_mesh`` None: the enclosing ``with mesh:`` block's; ``placements`` None:
    Replicate on every mesh dim (DTensor's default)."""
    modes.refuse_while_tracing("distribute_tensor (make DTensors outside and pass them in)")
    device_mesh = modes.default_mesh("distribute_tensor", device_mesh)
    if placements is None:
        placements = (Replicate(),) * device_mesh.ndim
    array = device.to_host(array) if device.on_device(array) else np.asarray(array)
    check_dtype("distribute_tensor", array.dtype)
    placements = check_placements("distribute_tensor", placements, device_mesh, array.shape)
    # Partial mesh dims are sent as Replicate; the planner's local R -> P step then makes the
    # partial terms (Partial(sum) keeps the value at coordinate 0 only).
    sent = reduced(placements)
    spec = DTensorSpec(device_mesh, sent, tuple(array.shape), array.dtype)
    if src_data_rank is None:
        local = np.array(array[local_slices(array.shape, device_mesh.shape, sent,
                                            device_mesh.coordinate)])
    else:
        if not 0 <= src_data_rank < device_mesh.size():
            raise ValueError(
                f"distribute_tensor: src_data_rank={src_data_rank} is not a rank of the mesh "
                f"{device_mesh.shape} (0..{device_mesh.size() - 1}); pass one, or None"
            )
        local = _scatter_from(array, spec, src_data_rank)
    local = device.to_device(local, device_mesh.device_type)
    return relayout(DTensor(local, spec), placements)


def asnumpy(x) -> np.ndarray:
    """The whole of DTensor ``x`` as a numpy array on every rank (a collective), from any
    device: the explicit way out where ``np.asarray`` refuses (a GPU mesh).  Other values go
    through ``np.asarray`` (device arrays: their own ``asnumpy``)."""
    if type(x) is DTensor:
        return device.to_host(x.full_tensor())
    return device.to_host(x) if device.on_device(x) else np.asarray(x)

