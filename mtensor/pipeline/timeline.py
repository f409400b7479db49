"""Each stage's measured timeline (compute, send, receive, idle) and the bubble against the
schedule's prediction.

A stage's timeline is a list of spans (action, kind, start, end), in seconds from the rank's
start of the step: ``forward`` and ``backward`` are the stage's compute (its own
collectives included), ``recv`` the wait for a message, ``send`` the start of one (and, at
the end, the wait for every send), ``other`` what a compiled replay runs outside the actions
(gradient sums, the final reductions).  An eager call's come from the runner's clock; a
compiled step's from its replay's instruction times, each instruction given to the action
whose ``debug.region`` (``"stage{s} mb{k}"``) and phase its node was traced in.

The measured bubble is ``1 - sum(busy) / (ranks x longest span)``, busy being forward plus
backward; the prediction is the schedule simulated with each action's measured compute
time (``simulation.simulate``): the bubble the schedule itself leaves for that compute, which
for stages of one cost is ``(p - 1) / (m + p - 1)`` with GPipe and 1F1B; the measurement
adds what the messages and waits cost.  Spans start at each rank's own start of the step
(ranks' clocks are not compared), which for a step that follows a synchronising one (a loss
read, an optimizer's reduction) is a common start to within a message's latency.

``timelines(step)`` gathers every stage's (a collective over the pipeline dim); ``mt.explain``
of a compiled pipelined step shows this rank's stage.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List

from ..debug import explain
from .api import Pipeline
from .schedules import BACKWARD, FORWARD, Action, Schedule
from .simulation import simulate

COMPUTE = ("forward", "backward")
_REGION = re.compile(r"stage(\d+) mb(\d+)(?:/|$)")
_LABEL = re.compile(r"[FB](\d+)(?:s(\d+))?")
_WIDTH = 60


@dataclass
class StageTimeline:
    """Rank ``rank``'s spans of one step of ``schedule``."""

    schedule: Schedule
    rank: int
    spans: List[tuple]

    def total(self, *kinds) -> float:
        return sum(end - start for _, kind, start, end in self.spans if kind in kinds)

    @property
    def busy(self) -> float:
        return self.total(*COMPUTE)

    @property
    def span(self) -> float:
        """From the start of the step to the end of the stage's last action."""
        ends = [end for _, kind, _, end in self.spans if kind in COMPUTE]
        return max(ends, default=0.0)

    def mean(self, kind: str) -> float:
        times = [end - start for _, k, start, end in self.spans if k == kind]
        return sum(times) / len(times) if times else 0.0

    @property
    def idle_share(self) -> float:
        return 0.0 if self.span <= 0 else 1.0 - self.busy / self.span

    def predicted_idle_share(self) -> float:
        """This stage's idle share of its own span in the schedule simulated with its
        measured mean forward and backward times."""
        costs = [(self.mean("forward"), self.mean("backward"))] * self.schedule.ranks
        return simulate(self.schedule, costs=costs).stage_idle(self.rank)

    def bar(self, width: int = _WIDTH, end: float = None) -> str:
        """The stage as a row of characters: F forward, B backward, . idle or waiting."""
        end = end or self.span or 1.0
        row = ["."] * width
        for _, kind, start, stop in self.spans:
            if kind in COMPUTE:
                for i in range(int(start / end * width), min(width, int(stop / end * width) + 1)):
                    row[i] = kind[0].upper()
        return "".join(row)

    def __str__(self) -> str:
        s = self.schedule
        lines = [f"pipeline stage timeline: rank {self.rank} of {s.ranks} on the pipeline dim, "
                 f"{s.name}, {s.microbatches} micro-batches",
                 f"  |{self.bar()}|  {1e3 * self.span:.3f} ms",
                 f"  forward {1e3 * self.total('forward'):.3f} ms, backward "
                 f"{1e3 * self.total('backward'):.3f} ms, receive waits "
                 f"{1e3 * self.total('recv'):.3f} ms, sends {1e3 * self.total('send'):.3f} ms, "
                 f"other {1e3 * self.total('other'):.3f} ms",
                 f"  idle {100 * self.idle_share:.1f}% of the stage's span; the schedule "
                 f"predicts {100 * self.predicted_idle_share():.1f}% for these compute times"]
        return "\n".join(lines)


@dataclass
class Timelines:
    """Every stage's timeline of one step, and the bubble measured against the prediction."""

    stages: List[StageTimeline]

    @property
    def schedule(self) -> Schedule:
        return self.stages[0].schedule

    @property
    def measured_bubble(self) -> float:
        longest = max(t.span for t in self.stages)
        busy = sum(t.busy for t in self.stages)
        return 0.0 if longest <= 0 else 1.0 - busy / (len(self.stages) * longest)

    def predicted_bubble(self) -> float:
        """The schedule simulated with each action's measured compute time: the bubble the
        schedule leaves for the compute this step did (the measurement adds what messages
        and waits cost)."""
        return simulate(self.schedule, durations=self.durations()).bubble

    def durations(self) -> dict:
        """Each action's measured compute seconds."""
        s, out = self.schedule, {}
        for t in self.stages:
            for label, kind, start, end in t.spans:
                if kind in COMPUTE:
                    action = _action(label, kind, s)
                    out[action] = out.get(action, 0.0) + end - start
        return out

    def __str__(self) -> str:
        s, longest = self.schedule, max(t.span for t in self.stages) or 1.0
        p, m, v = s.ranks, s.microbatches, s.virtual
        lines = [f"pipeline: {s.name}, {p} stage ranks, {m} micro-batches"
                 + (f", {v} stages per rank" if v > 1 else "")
                 + "; F forward, B backward, . idle (each rank from its own start)"]
        for t in self.stages:
            lines.append(f"  rank {t.rank}  |{t.bar(end=longest)}|  busy {1e3 * t.busy:8.3f} ms"
                         f" of {1e3 * t.span:8.3f} ms, receive waits "
                         f"{1e3 * t.total('recv'):.3f} ms")
        lines.append(f"  bubble: measured {100 * self.measured_bubble:.1f}%, predicted "
                     f"{100 * self.predicted_bubble():.1f}% for the compute measured, "
                     f"(p - 1) / (v m + p - 1) = {100 * (p - 1) / (v * m + p - 1):.1f}%")
        return "\n".join(lines)


def _action(label: str, kind: str, schedule: Schedule) -> Action:
    """The action of a span's label (``F3``, ``B0s2``)."""
    found = _LABEL.fullmatch(label)
    stage = int(found[2]) if found[2] else 0
    return Action(FORWARD if kind == "forward" else BACKWARD, int(found[1]), stage)


def from_run(run) -> StageTimeline:
    """An eager call's timeline (``StepRun.events``, absolute clock)."""
    spans = [(label, kind, start - run.start, end - run.start)
             for label, kind, start, end in run.events]
    return StageTimeline(run.schedule, run.rank, spans)


def from_replay(traced) -> StageTimeline:
    """A compiled step's latest replay (or, before any, its trace times) as a timeline: each
    instruction's time given to its action and kind."""
    schedule, rank, _, _ = traced.graph.notes["pipeline"]
    nodes, replay = traced.graph.nodes, traced.replay
    marks = replay.marks if len(replay.marks) == len(replay.program) + 1 else None
    spans, now = [], 0.0
    for i, (what, k) in enumerate(replay.program):
        took = marks[i + 1] - marks[i] if marks else _traced_time(what, k, nodes, replay)
        label, kind = _instruction(what, k, nodes, replay)
        if spans and spans[-1][:2] == (label, kind):
            spans[-1] = (label, kind, spans[-1][2], now + took)
        else:
            spans.append((label, kind, now, now + took))
        now += took
    return StageTimeline(schedule, rank, spans)


def _instruction(what, k, nodes, replay):
    """(action label, kind) of one instruction of the replay's program."""
    if what == "compute":
        return _action_of(*nodes[k].where)
    bucket = replay.buckets[k]
    if bucket.kind == "recv":
        return "", "recv" if what == "wait" else "other"
    if bucket.kind == "send":
        return "", "send"
    return _action_of(*bucket.where)     # a stage's own collective: part of its compute


def _action_of(region: str, phase: str):
    found = _REGION.match(region)
    if found is None:
        return "", "other"
    stage, mb = int(found[1]), int(found[2])
    kind = "forward" if phase == "forward" else "backward"
    return f"{kind[0].upper()}{mb}" + (f"s{stage}" if stage else ""), kind


def _traced_time(what, k, nodes, replay) -> float:
    return nodes[k].seconds if what == "compute" else 0.0


def timelines(step) -> Timelines:
    """Every stage's timeline of ``step``'s latest call (a collective over the pipeline
    dim: every rank calls it): ``step`` is a ``Pipeline`` (its latest eager call) or an
    ``mt.compile``'d function that runs one (its latest replay)."""
    if isinstance(step, Pipeline):
        if step.last is None:
            raise RuntimeError("mt.pipeline.timelines: the pipeline has not run yet")
        mine, mesh, dim = from_run(step.last), step.mesh, step.dim
    else:
        try:
            traced = step.traced
        except (AttributeError, RuntimeError):     # not compiled, or not called yet
            traced = None
        if traced is None or "pipeline" not in traced.graph.notes:
            raise TypeError(f"mt.pipeline.timelines: {step!r} is neither a Pipeline nor a "
                            f"compiled function that ran one")
        mine = from_replay(traced)
        _, _, mesh, dim = traced.graph.notes["pipeline"]
    return Timelines(mesh.communicator(dim).allgather_object(mine))


def _section(traced):
    """``mt.explain``'s section for a compiled pipelined step: this rank's stage."""
    if "pipeline" not in traced.graph.notes:
        return None
    return from_replay(traced)


explain.SECTIONS.append(_section)
