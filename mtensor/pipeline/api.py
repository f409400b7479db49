"""``mt.pipeline.value_and_grad``: a model's layers split into stages along a pipeline mesh
dim, micro-batches run through them on a schedule, and the loss and gradients returned as
``mt.value_and_grad`` returns them.

    mesh = mt.init_device_mesh((pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
    step = mt.pipeline.value_and_grad(stage, loss, mesh, schedule="1f1b")
    value, grads = step(params, inputs, targets)      # lists of micro-batches

``stage(params, x, where)`` runs one stage: ``where`` (a ``Stage``) says which (``first``,
``last``, the global ``layers`` it holds); ``params`` is the parameter tree as the stage sees
it (``stages``: a leaf split over ``pp`` as the list of the stage's layers, each a DTensor
of the stage's ``(dp, tp)`` mesh; a replicated leaf as itself there); ``x`` is the
micro-batch on the first stage and the previous stage's output elsewhere; it returns one
DTensor.  Or a list of functions ``stage[s](params, x)``, one per stage.  ``loss(params,
y, target)`` turns the last stage's output into a scalar.

The gradients come back laid out like the parameters, added over the micro-batches and
reduced once (each stage's over its own data-parallel ranks; a shared leaf's over ``pp``
too); the value is the mean of the micro-batches' losses, a float64 0-d DTensor whose sum
over ``pp`` is still pending (the last stage holds it; reading it, ``float(value)``, is the
one reduction).  Under ``mt.compile`` the whole step, messages included, is recorded and
replayed.
"""
from __future__ import annotations

import numpy as np

from .. import modes
from ..device import arrays as device
from ..dtensor import DTensor
from ..placement import Replicate
from ..pytree import flatten, structure
from . import schedules
from .run import StepRun, on_stage
from .stages import StageLayout


def value_and_grad(stage, loss, mesh, *, schedule: str = "1f1b", virtual: int = 1,
                   dim: str = "pp") -> "Pipeline":
    """A pipelined ``value_and_grad`` of ``loss(stages(...))`` over ``mesh``'s dim ``dim``;
    see the module's docstring.  ``schedule``: ``"gpipe"``, ``"1f1b"`` or
    ``"interleaved_1f1b"`` (with ``virtual`` stages per rank).  Builds the stage mesh (a
    collective over ``mesh`` the first time)."""
    return Pipeline(stage, loss, mesh, schedule, virtual, dim)


class Pipeline:
    """A pipelined step: ``pipe(params, inputs, targets) -> (value, grads)``.  ``timeline``
    is this rank's latest eager call (``timelines`` gathers every stage's)."""

    def __init__(self, stage, loss, mesh, schedule="1f1b", virtual=1, dim="pp"):
        names = mesh.mesh_dim_names or ()
        if dim not in names:
            raise ValueError(f"mt.pipeline: the mesh {mesh} has no dim named {dim!r}; build "
                             f"it with mesh_dim_names=({dim!r}, 'dp', 'tp') (or pass dim=)")
        if mesh.ndim < 2:
            raise ValueError(f"mt.pipeline: the mesh {mesh} has only the pipeline dim; add a "
                             f"data-parallel one (size 1 is fine): e.g. shape ({mesh.shape[0]}, "
                             f"1) with names ({dim!r}, 'dp')")
        if schedule not in schedules.SCHEDULES:
            raise ValueError(f"mt.pipeline: unknown schedule {schedule!r}; use one of "
                             f"{sorted(schedules.SCHEDULES)}")
        self.mesh, self.dim, self.name, self.virtual = mesh, names.index(dim), schedule, virtual
        self.stage, self.loss = stage, loss
        schedules.make(schedule, mesh.shape[self.dim], 1 if virtual == 1 else
                       mesh.shape[self.dim], virtual)          # refuse bad sizes now
        stages = mesh.shape[self.dim] * virtual
        if isinstance(stage, (list, tuple)) and len(stage) != stages:
            raise ValueError(f"mt.pipeline: {len(stage)} stage functions for {stages} stages "
                             f"({mesh.shape[self.dim]} ranks on {dim!r} x {virtual} per rank)")
        self.stage_mesh = mesh[tuple(n for n in names if n != dim)]
        self.specs: dict = {}       # what the messages of each call signature hold
        self._layouts: dict = {}
        self._schedules: dict = {}
        self.last = None            # the latest eager call's StepRun (its timeline)

    def schedule_for(self, microbatches: int) -> schedules.Schedule:
        """The schedule of a call with ``microbatches`` micro-batches."""
        found = self._schedules.get(microbatches)
        if found is None:
            found = self._schedules[microbatches] = schedules.make(
                self.name, self.mesh.shape[self.dim], microbatches, self.virtual)
        return found

    def __call__(self, params, inputs, targets):
        if modes.active.tape is not None:
            raise TypeError("mt.pipeline: the pipelined step takes its own gradients; call it "
                            "outside value_and_grad (it returns the loss and the gradients)")
        inputs, targets = list(inputs), list(targets)
        if not inputs or len(inputs) != len(targets):
            raise ValueError(f"mt.pipeline: pass one target per micro-batch input (got "
                             f"{len(inputs)} inputs and {len(targets)} targets, at least 1)")
        for what, tree in (("input", inputs), ("target", targets)):
            self._check_batch(what, tree)
        signature = structure((params, inputs, targets), _leaf_key)
        layout = self._layouts.get(signature)
        if layout is None:
            layout = self._layouts[signature] = StageLayout(
                self.mesh, self.dim, self.stage_mesh, params, self.virtual)
        run = StepRun(self, self.schedule_for(len(inputs)), layout, params, inputs, targets,
                      signature)
        totals, _ = run.run()
        grads = layout.gradients(params, totals)
        value = run.lifted_loss()
        self.last = run
        return value, grads

    def _check_batch(self, what: str, trees) -> None:
        for k, tree in enumerate(trees):
            for leaf in flatten(tree)[0]:
                if type(leaf) is DTensor and (leaf.device_mesh != self.mesh or not
                                              isinstance(leaf.placements[self.dim], Replicate)):
                    raise ValueError(
                        f"mt.pipeline: micro-batch {what} {k} is a DTensor of shape "
                        f"{leaf.shape} {list(leaf.placements)} on {leaf.device_mesh}; lay it "
                        f"out on the pipeline's mesh, replicated over its pipeline dim (each "
                        f"rank cuts its own block: distribute_tensor(..., src_data_rank=None))")

    def on_stage(self, tree):
        return on_stage(tree, self.mesh, self.dim, self.stage_mesh)

    def call_stage(self, params, x, where):
        fn = self.stage[where.index] if isinstance(self.stage, (list, tuple)) else None
        y = fn(params, x) if fn is not None else self.stage(params, x, where)
        if type(y) is not DTensor or y.device_mesh != self.stage_mesh:
            found = f"a DTensor on {y.device_mesh}" if type(y) is DTensor else type(y).__name__
            raise TypeError(f"mt.pipeline: stage {where.index} must return one DTensor of its "
                            f"stage mesh {self.stage_mesh} (what the next stage receives); it "
                            f"returned {found}")
        return y

    def call_loss(self, params, y, target, microbatches: int):
        value = self.loss(params, y, target)
        if type(value) is not DTensor or value.shape != () or value.dtype.kind != "f":
            raise TypeError(f"mt.pipeline: the loss must return a scalar float DTensor; it "
                            f"returned {getattr(value, 'shape', type(value).__name__)}")
        return value if microbatches == 1 else value / microbatches

    def zeros_scalar(self):
        return device.to_device(np.zeros((), np.float64), self.mesh.device_type)


def _leaf_key(leaf):
    if type(leaf) is DTensor:
        return leaf.spec
    if device.is_block(leaf):
        return (leaf.shape, leaf.dtype)
    try:
        hash(leaf)
    except TypeError:
        return type(leaf).__name__
    return type(leaf), leaf
