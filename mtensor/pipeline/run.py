"""One pipelined step on this rank: its actions of the schedule, in order.

A forward runs the stage function (and, on the last stage, the loss divided by the number
of micro-batches) with a gradient tape of its own that follows the stage's parameter views
and its input, keeps the tape, and sends the output on.  A backward walks that tape back
from the gradient the next stage sent (on the last stage, from the loss) with
``value_and_grad``'s own walk (``autodiff.api.walk_back``), adds the parameters' gradients
to the stage's running totals (their data-parallel sums left pending, as
``value_and_grad(reduce=False)`` leaves them: no communication per micro-batch) and sends
its input's gradient back.  Receives are posted one action ahead, sends never block and are
waited for at the end; each action runs in the ``debug.region`` ``"stage{s} mb{k}"`` (its
backward too), so ``CommDebugMode`` bills collectives per stage and micro-batch.

An exception inside the schedule would leave the other stages waiting for messages that
never come, so on a pipeline of several ranks it ends the job on every rank
(``comm.abort.abort_with``) with the stage, the action and the traceback.
"""
from __future__ import annotations

import time

import numpy as np

from .. import modes
from ..autodiff import tape
from ..autodiff.api import walk_back
from ..comm.abort import abort_with
from ..debug.region import region
from ..dtensor import DTensor, relayout
from ..placement import Partial, Replicate
from ..pytree import flatten
from ..spec import DTensorSpec
from .p2p import Messenger
from .schedules import FORWARD, Action
from .stages import Stage, sub_spec


class StepRun:
    """The state of one call on this rank: the posted receives, the tapes kept between a
    micro-batch's forward and backward, the gradient totals, the loss, the timeline."""

    def __init__(self, pipe, schedule, layout, params, inputs, targets, signature):
        self.pipe, self.schedule, self.layout = pipe, schedule, layout
        self.inputs, self.targets = inputs, targets
        self.rank = pipe.mesh.coordinate[pipe.dim]
        self.views = [layout.view(params, c) for c in range(schedule.virtual)]
        self.messenger = Messenger(pipe.mesh, pipe.dim, pipe.stage_mesh, pipe.specs,
                                   signature)
        self.saved, self.totals, self.loss = {}, [None] * schedule.virtual, None
        self.events = []            # (label, kind, start, end): the stage's timeline

    def run(self):
        tracer = modes.active.tracer
        if tracer is not None:          # for mt.explain and timelines of the replay
            tracer.notes["pipeline"] = (self.schedule, self.rank, self.pipe.mesh, self.pipe.dim)
        actions = self.schedule.actions[self.rank]
        receipts = {0: self._post(actions[0])} if actions else {}
        self.start = time.perf_counter()
        for i, action in enumerate(actions):
            try:
                self._action(action, receipts, i, actions)
            except Exception as e:
                self._fail(action, e)
        t = time.perf_counter()
        try:
            self.messenger.close()
        except Exception as e:
            self._fail(None, e)
        self.events.append(("sends", "send", t, time.perf_counter()))
        return self.totals, self.loss

    def _action(self, action: Action, receipts, i: int, actions) -> None:
        label = str(action)
        t0 = time.perf_counter()
        incoming = self._incoming(action, receipts.pop(i))
        t1 = time.perf_counter()
        if i + 1 < len(actions):
            receipts[i + 1] = self._post(actions[i + 1])
        if action.phase == FORWARD:
            out = self._forward(action, incoming)
        else:
            out = self._backward(action, incoming)
        t2 = time.perf_counter()
        target = self.schedule.target(action)
        if target is not None:
            self.messenger.send(out, self.schedule.rank_of(target), self.schedule.tag(action))
        t3 = time.perf_counter()
        self.events += [(label, "recv", t0, t1),
                        (label, "forward" if action.phase == FORWARD else "backward", t1, t2),
                        (label, "send", t2, t3)]

    def _post(self, action: Action):
        source = self.schedule.source(action)
        if source is None:
            return None
        return self.messenger.post(self.schedule.rank_of(source),
                                   self.schedule.incoming_tag(action))

    def _incoming(self, action: Action, receipt):
        if receipt is not None:
            return self.messenger.take(receipt)
        if action.phase == FORWARD:                  # the first stage reads the micro-batch
            return self.pipe.on_stage(self.inputs[action.microbatch])
        return None                                  # the last stage seeds from its loss

    def _info(self, action: Action) -> Stage:
        chunk = action.stage // self.schedule.ranks
        return Stage(action.stage, self.schedule.stages, self.layout.layers(chunk))

    def _forward(self, action: Action, x):
        chunk = action.stage // self.schedule.ranks
        tree, followed = self.views[chunk]
        info = self._info(action)
        follow = list(followed) + ([x] if type(x) is DTensor and not info.first else [])
        recorded = tape.start(follow)
        try:
            with region(f"stage{action.stage} mb{action.microbatch}"):
                y = self.pipe.call_stage(tree, x, info)
                out = y
                if info.last:
                    target = self.pipe.on_stage(self.targets[action.microbatch])
                    out = self.pipe.call_loss(tree, y, target, self.schedule.microbatches)
        finally:
            tape.stop()
        self.saved[(action.microbatch, action.stage)] = (recorded, x, out, follow)
        if info.last:
            self.loss = out if self.loss is None else self.loss + out
            return None
        return y

    def _backward(self, action: Action, cotangent):
        recorded, x, out, follow = self.saved.pop((action.microbatch, action.stage))
        chunk = action.stage // self.schedule.ranks
        _, followed = self.views[chunk]
        seed = np.ones_like(out) if cotangent is None else cotangent
        done, left = walk_back(recorded, {recorded.key(out): seed}, followed, reduce=False)
        grads = [done[id(leaf)] for leaf in followed]
        total = self.totals[chunk]
        self.totals[chunk] = grads if total is None else [t + g for t, g in zip(total, grads)]
        if action.stage == 0:
            return None
        dx = left.get(recorded.key(x))
        return np.zeros_like(x) if dx is None else dx

    def _fail(self, action, error) -> None:
        """Raise on a one-rank pipeline; else end the job (the other stages wait for this
        one's messages, which an exception cannot reach)."""
        if self.schedule.ranks == 1:
            raise error
        where = "waiting for its sends" if action is None else f"in {_describe(action)}"
        abort_with(f"mt.pipeline: stage rank {self.rank} of {self.schedule.ranks} raised "
                   f"{type(error).__name__}: {error} {where}; the other stages wait for its "
                   f"messages")

    def lifted_loss(self):
        """The step's loss on the whole mesh: the last stage's sum over micro-batches (a
        float64 0-d DTensor), pending over the pipeline dim (the other stages hold 0)."""
        pipe = self.pipe
        sub = (Replicate(),) * pipe.stage_mesh.ndim
        if self.loss is not None:
            block = relayout(self.loss, sub).astype(np.float64)._local
        else:
            block = pipe.zeros_scalar()
        placements = list(sub)
        placements.insert(pipe.dim, Partial("sum"))
        return DTensor(block, DTensorSpec(pipe.mesh, tuple(placements), (), np.dtype("float64")))


def _describe(action: Action) -> str:
    phase = "the forward" if action.phase == FORWARD else "the backward"
    return f"{phase} of micro-batch {action.microbatch} through stage {action.stage}"


def on_stage(tree, mesh, dim: int, stage_mesh):
    """A micro-batch's DTensor leaves (replicated over the pipeline dim) as DTensors of the
    stage mesh (the same blocks)."""
    leaves, rebuild = flatten(tree)
    out = []
    for leaf in leaves:
        if type(leaf) is DTensor:
            leaf = DTensor(leaf._local, sub_spec(leaf.spec, dim, stage_mesh, leaf.shape))
        out.append(leaf)
    return rebuild(out)
