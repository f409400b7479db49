"""The active modes, as slots at the bottom of the package.

Dispatch, the executors, views and writes call through these slots; the layers that provide
the modes register into them: ``value_and_grad`` puts its tape in ``active.tape`` (and its
memo of laid-out operands in ``active.reuse`` during the backward pass), ``mt.compile`` its
tracer in ``active.tracer``, each ``CommDebugMode`` itself in ``active.counters``, and
``debug.region`` the name of the region running in ``active.region`` (and the gradient
pass ``"backward"`` in ``active.phase`` while it runs), and ``mt.auto_shard`` its recorder
or a plan's strategies in ``active.autoshard``; ``with mesh:`` pushes the mesh on
``active.meshes``, the default of the constructors (:func:`default_mesh`).  So a low
layer imports this module only, never the layer above that fills it.  (The check mode and
the timeout are the communication layer's own: ``comm.guard``.)
"""
from __future__ import annotations


class Modes:
    __slots__ = ("tape", "reuse", "tracer", "counters", "region", "phase", "autoshard",
                 "meshes")

    def __init__(self):
        self.tape = None       # the recording gradient tape: push(op, operands, ...)
        self.reuse = None      # during a backward pass: operands already laid out, by id
        self.tracer = None     # mt.compile's recording executor: call(...), collective(...)
        self.counters = []     # CommDebugModes: add(collective, mesh_dim, shape, dtype, bytes)
        self.region = ""       # the named region of the program (debug.region) now running
        self.phase = "forward"  # "backward" while value_and_grad's backward pass runs
        # mt.auto_shard: strategy(call, choices, into) -> a plan's choice or None;
        # ran(name, operands, params, out, target); like(grad, leaf); pinned(x, out)
        self.autoshard = None
        self.meshes = []       # the DeviceMeshes of the enclosing `with mesh:` blocks, inner last


active = Modes()


def default_mesh(op: str, mesh=None):
    """``mesh`` when given, else the mesh of the innermost ``with mesh:`` block (JAX's
    habit); a TypeError naming ``op`` when there is neither."""
    if mesh is not None:
        return mesh
    if active.meshes:
        return active.meshes[-1]
    raise TypeError(f"{op}: pass mesh= (a DeviceMesh) to say where the tensor lives, or call "
                    f"it inside a `with mesh:` block")


def is_tracked(value) -> bool:
    """Whether the recording tape follows ``value`` (it depends on a parameter)."""
    tape = active.tape
    return tape is not None and tape.follows(value)


def count_collective(collective: str, mesh_dim: int, shape, dtype, nbytes: int,
                     backend: str = "mpi") -> None:
    """Called by the executors right after a collective returns (one list check when no
    CommDebugMode is active); ``backend``: the communicator's name (``mpi``, ``nccl``, ...)."""
    for counter in active.counters:
        counter.add(collective, mesh_dim, shape, dtype, nbytes, backend)


def effect(name: str, fn, *args) -> None:
    """Run ``fn(*args)``, which updates arrays in place (a write, an optimizer step); while
    tracing it becomes a graph node, so the replay repeats it in the same place."""
    if active.tracer is None:
        fn(*args)
    else:
        active.tracer.call(name, fn, args, nout=0, kind="effect")


def refuse_while_tracing(what: str) -> None:
    """Reading DTensor values while tracing would freeze them (and any branch on them)."""
    if active.tracer is not None:
        raise TypeError(
            f"mt.compile: {what} reads DTensor values while tracing; a compiled step replays "
            f"the ops it recorded and cannot follow values or branches on them. Return the "
            f"DTensor from the compiled function and read it outside, or call the function "
            f"without mt.compile")
