"""Schedules run on ideal ranks: sends that never block (``Isend``), receives that wait, so
a run finds any deadlock (``DeadlockError``) and gives each action's start and end from the
compute times.  The predicted bubble, the idle share of ``ranks x makespan``, is
``(ranks - 1) / (m + ranks - 1)`` for GPipe and 1F1B whatever the forward and backward cost.

``cores``: ranks that share fewer cores than they are (processor sharing: the running
actions progress at ``cores / running`` of their speed each), the prediction for an
oversubscribed machine such as the 2-core test machine running 4 stages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .schedules import BACKWARD, FORWARD, Action, Schedule, check


class DeadlockError(RuntimeError):
    """A schedule whose ranks all wait for messages nobody will send."""


@dataclass
class Simulated:
    """``spans[r]``: (action, start, end) of rank ``r``'s actions; ``makespan``: when the
    last ends; ``bubble``: the idle share of ``ranks x makespan``."""

    spans: List[List[tuple]]
    makespan: float

    @property
    def busy(self) -> List[float]:
        return [sum(end - start for _, start, end in row) for row in self.spans]

    @property
    def bubble(self) -> float:
        if self.makespan <= 0:
            return 0.0
        return 1.0 - sum(self.busy) / (len(self.spans) * self.makespan)

    def stage_idle(self, rank: int) -> float:
        """Rank ``rank``'s idle share of its own span (from 0 to its last action's end)."""
        row = self.spans[rank]
        end = row[-1][2] if row else 0.0
        return 0.0 if end <= 0 else 1.0 - self.busy[rank] / end


def simulate(schedule: Schedule, forward: float = 1.0, backward: float = 2.0,
             latency: float = 0.0, costs: Optional[Sequence[Tuple[float, float]]] = None,
             cores: Optional[int] = None, durations: Optional[Dict[Action, float]] = None
             ) -> Simulated:
    """Run ``schedule``: an action starts once its rank is free and its message has arrived
    (``latency`` after its sender's end); sends never block.  ``costs[r]``: (forward,
    backward) seconds of rank ``r`` (default: ``forward`` and ``backward`` everywhere);
    ``durations``: seconds of each action, over ``costs`` (a run's own, measured);
    ``cores``: how many cores the ranks share (None: one each).  DeadlockError when every
    rank left waits."""
    check(schedule)
    per_rank = costs or [(forward, backward)] * schedule.ranks
    durations = durations or {}
    costs = [{a: durations.get(a, per_rank[r][a.phase == BACKWARD]) for a in row}
             for r, row in enumerate(schedule.actions)]
    if cores is not None and cores < schedule.ranks:
        return _shared(schedule, costs, latency, cores)
    done: Dict[Action, float] = {}
    at = [0] * schedule.ranks
    free = [0.0] * schedule.ranks
    spans: List[List[tuple]] = [[] for _ in range(schedule.ranks)]
    remaining = sum(len(row) for row in schedule.actions)
    while remaining:
        progressed = False
        for r, row in enumerate(schedule.actions):
            while at[r] < len(row):
                a = row[at[r]]
                ready = _ready(schedule, a, done, latency)
                if ready is None:
                    break
                start = max(free[r], ready)
                end = start + costs[r][a]
                spans[r].append((a, start, end))
                done[a], free[r] = end, end
                at[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            _deadlock(schedule, at)
    return Simulated(spans, max(free))


def _deadlock(schedule: Schedule, at) -> None:
    waiting = ", ".join(f"rank {r} at {row[at[r]]}" for r, row in enumerate(schedule.actions)
                        if at[r] < len(row))
    raise DeadlockError(f"{schedule.name}: every rank left waits for a message: {waiting}")


def _shared(schedule: Schedule, costs, latency: float, cores: int) -> Simulated:
    """``simulate`` with the running actions sharing ``cores``: event by event, each runs at
    ``min(1, cores / running)`` of its speed."""
    done: Dict[Action, float] = {}
    at = [0] * schedule.ranks
    running: Dict[int, list] = {}            # rank -> [action, work left, start]
    spans: List[List[tuple]] = [[] for _ in range(schedule.ranks)]
    now, left = 0.0, sum(len(row) for row in schedule.actions)
    while left:
        arrivals = []
        for r, row in enumerate(schedule.actions):
            if r in running or at[r] == len(row):
                continue
            ready = _ready(schedule, row[at[r]], done, latency)
            if ready is not None and ready <= now:
                a = row[at[r]]
                running[r] = [a, costs[r][a], now]
            elif ready is not None:
                arrivals.append(ready)
        if not running:
            if not arrivals:
                _deadlock(schedule, at)
            now = min(arrivals)
            continue
        rate = min(1.0, cores / len(running))
        step = min(work for _, work, _ in running.values()) / rate
        step = min([step] + [t - now for t in arrivals])
        now += step
        for r in list(running):
            running[r][1] -= step * rate
            a, work, start = running[r]
            if work <= 1e-12:
                spans[r].append((a, start, now))
                done[a] = now
                del running[r]
                at[r] += 1
                left -= 1
    return Simulated(spans, now)


def _ready(schedule: Schedule, action: Action, done, latency: float) -> Optional[float]:
    """When ``action``'s input exists on its rank (None: not yet produced)."""
    times = []
    if action.phase == BACKWARD:
        own = done.get(Action(FORWARD, action.microbatch, action.stage))
        if own is None:
            return None
        times.append(own)
    source = schedule.source(action)
    if source is not None:
        sent = done.get(Action(action.phase, action.microbatch, source))
        if sent is None:
            return None
        local = schedule.rank_of(source) == schedule.rank_of(action.stage)
        times.append(sent + (0.0 if local else latency))
    return max(times, default=0.0)     # the first forward and the last backward start at once


def predicted_bubble(schedule: Schedule, forward: float = 1.0, backward: float = 2.0) -> float:
    """The idle share of the schedule on ideal ranks with these compute times."""
    return simulate(schedule, forward, backward).bubble


def peak_in_flight(schedule: Schedule) -> List[int]:
    """Per rank, the most micro-batches whose forward ran and backward has not: how many
    stages' activations it holds at once."""
    out = []
    for row in schedule.actions:
        live = peak = 0
        for a in row:
            live += 1 if a.phase == FORWARD else -1
            peak = max(peak, live)
        out.append(peak)
    return out
