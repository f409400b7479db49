"""Pipeline schedules as data: per rank, the list of (forward | backward, micro-batch, stage)
actions it runs in order, generated and checked by pure code (no MPI).

A model cut into ``S = ranks * virtual`` stages runs stage ``s`` on rank ``s % ranks``
(Megatron's interleaved placement; with ``virtual=1`` stage ``s`` is rank ``s``).  A
forward ``F(k, s)`` needs stage ``s - 1``'s output of micro-batch ``k`` (a message from its
rank, unless ``s == 0``) and sends its own to stage ``s + 1``; a backward ``B(k, s)`` needs
``F(k, s)`` done on its own rank and stage ``s + 1``'s input gradient (unless ``s`` is the
last stage) and sends its own input gradient to stage ``s - 1``.

- ``gpipe``: every forward, then every backward (GPipe): activations of all ``m``
  micro-batches are held at once;
- ``one_f_one_b``: ``ranks - r - 1`` forwards to fill the pipe, then one forward and one
  backward in turn, then the remaining backwards (PipeDream-flush, Megatron's default): at
  most ``ranks - r`` micro-batches' activations on rank ``r``;
- ``interleaved_1f1b``: ``virtual`` stages per rank visited round-robin (Megatron's
  interleaved schedule), which divides the bubble by about ``virtual``.

``check`` proves a schedule complete and ordered; ``simulation.simulate`` runs it, finding
any deadlock and predicting its bubble.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

FORWARD, BACKWARD = "F", "B"
MAX_MESSAGES = 8191   # unique tags per step: MPI guarantees tags up to 32767 (4 per message)


@dataclass(frozen=True)
class Action:
    """One step of a rank: the forward or backward of ``microbatch`` through ``stage``."""

    phase: str
    microbatch: int
    stage: int

    def __str__(self) -> str:
        return f"{self.phase}{self.microbatch}" + (f"s{self.stage}" if self.stage else "")


@dataclass(frozen=True)
class Schedule:
    """``actions[r]``: rank ``r``'s actions in the order it runs them."""

    name: str
    ranks: int
    microbatches: int
    virtual: int
    actions: Tuple[Tuple[Action, ...], ...]

    @property
    def stages(self) -> int:
        return self.ranks * self.virtual

    def rank_of(self, stage: int) -> int:
        return stage % self.ranks

    def source(self, action: Action) -> Optional[int]:
        """The stage whose message ``action`` waits for (None: its input is local)."""
        s = action.stage + (-1 if action.phase == FORWARD else 1)
        return s if 0 <= s < self.stages else None

    def target(self, action: Action) -> Optional[int]:
        """The stage ``action`` sends its result to (None: it sends nothing)."""
        return self.source(Action(BACKWARD if action.phase == FORWARD else FORWARD,
                                  action.microbatch, action.stage))

    def tag(self, action: Action) -> int:
        """The tag of the message ``action`` sends (its receiver computes the same from the
        sender's action): unique per micro-batch, stage and direction within a step."""
        return 2 * (action.microbatch * self.stages + action.stage) + (action.phase == BACKWARD)

    def incoming_tag(self, action: Action) -> int:
        """The tag of the message ``action`` receives."""
        other = FORWARD if action.phase == FORWARD else BACKWARD
        return self.tag(Action(other, action.microbatch, self.source(action)))

    def __str__(self) -> str:
        width = max(len(str(a)) for row in self.actions for a in row)
        rows = [(f"rank {r}: " + " ".join(f"{str(a):<{width}}" for a in row)).rstrip()
                for r, row in enumerate(self.actions)]
        return f"{self.name} ({self.ranks} ranks, {self.microbatches} micro-batches" + (
            f", {self.virtual} stages per rank" if self.virtual > 1 else "") + ")\n" + \
            "\n".join(rows)


def _check_sizes(name: str, ranks: int, microbatches: int, virtual: int = 1) -> None:
    if ranks < 1 or microbatches < 1 or virtual < 1:
        raise ValueError(f"{name}: ranks {ranks}, micro-batches {microbatches} and stages per "
                         f"rank {virtual} must each be at least 1")
    if microbatches * ranks * virtual > MAX_MESSAGES:
        raise ValueError(f"{name}: {microbatches} micro-batches x {ranks * virtual} stages "
                         f"need more than {MAX_MESSAGES} message tags in one step; use fewer "
                         f"micro-batches")


def gpipe(ranks: int, microbatches: int) -> Schedule:
    """Every forward, then every backward, on each rank (GPipe)."""
    _check_sizes("gpipe", ranks, microbatches)
    rows = tuple(tuple([Action(FORWARD, k, r) for k in range(microbatches)]
                       + [Action(BACKWARD, k, r) for k in range(microbatches)])
                 for r in range(ranks))
    return Schedule("gpipe", ranks, microbatches, 1, rows)


def one_f_one_b(ranks: int, microbatches: int) -> Schedule:
    """Warm up with ``ranks - r - 1`` forwards, then one forward and one backward in turn,
    then cool down with the remaining backwards (1F1B)."""
    _check_sizes("1f1b", ranks, microbatches)
    rows = []
    for r in range(ranks):
        warm = min(ranks - r - 1, microbatches)
        row = [Action(FORWARD, k, r) for k in range(warm)]
        for k in range(microbatches - warm):
            row += [Action(FORWARD, warm + k, r), Action(BACKWARD, k, r)]
        row += [Action(BACKWARD, k, r) for k in range(microbatches - warm, microbatches)]
        rows.append(tuple(row))
    return Schedule("1f1b", ranks, microbatches, 1, tuple(rows))


def interleaved_1f1b(ranks: int, microbatches: int, virtual: int) -> Schedule:
    """Megatron's interleaved 1F1B: rank ``r`` holds stages ``r, r + ranks, ...``; its
    forwards visit them round-robin in groups of ``ranks`` micro-batches (its backwards in
    the reverse stage order), after a warm-up of ``2 (ranks - r - 1) + (virtual - 1) ranks``
    forwards.  ``microbatches`` must be a multiple of ``ranks``."""
    _check_sizes("interleaved_1f1b", ranks, microbatches, virtual)
    if microbatches % ranks:
        raise ValueError(f"interleaved_1f1b: {microbatches} micro-batches is not a multiple "
                         f"of {ranks} ranks; the round-robin over stages goes in groups of "
                         f"{ranks}")
    total = microbatches * virtual

    def nth(r: int, n: int, phase: str) -> Action:
        group = (n // ranks) % virtual
        chunk = group if phase == FORWARD else virtual - 1 - group
        k = (n // (ranks * virtual)) * ranks + n % ranks
        return Action(phase, k, chunk * ranks + r)

    rows = []
    for r in range(ranks):
        warm = total if microbatches == ranks else min(
            2 * (ranks - r - 1) + (virtual - 1) * ranks, total)
        row = [nth(r, n, FORWARD) for n in range(warm)]
        for n in range(total - warm):
            row += [nth(r, warm + n, FORWARD), nth(r, n, BACKWARD)]
        row += [nth(r, n, BACKWARD) for n in range(total - warm, total)]
        rows.append(tuple(row))
    return Schedule("interleaved_1f1b", ranks, microbatches, virtual, tuple(rows))


SCHEDULES = {"gpipe": gpipe, "1f1b": one_f_one_b, "interleaved_1f1b": interleaved_1f1b}


def make(name: str, ranks: int, microbatches: int, virtual: int = 1) -> Schedule:
    """The schedule called ``name`` (one of ``SCHEDULES``)."""
    if name not in SCHEDULES:
        raise ValueError(f"pipeline: unknown schedule {name!r}; use one of {sorted(SCHEDULES)}")
    if name == "interleaved_1f1b":
        return interleaved_1f1b(ranks, microbatches, virtual)
    if virtual != 1:
        raise ValueError(f"pipeline: {name} runs one stage per rank (virtual=1, not "
                         f"{virtual}); use 'interleaved_1f1b' for several")
    return SCHEDULES[name](ranks, microbatches)


def check(schedule: Schedule) -> None:
    """ValueError unless every (phase, micro-batch, stage) runs exactly once, on its
    stage's rank, with each forward before its backward."""
    seen: Dict[Action, int] = {}
    for r, row in enumerate(schedule.actions):
        for i, a in enumerate(row):
            if schedule.rank_of(a.stage) != r:
                raise ValueError(f"{schedule.name}: rank {r} runs {a}, whose stage {a.stage} "
                                 f"lives on rank {schedule.rank_of(a.stage)}")
            if a in seen:
                raise ValueError(f"{schedule.name}: {a} runs twice on rank {r}")
            if a.phase == BACKWARD and Action(FORWARD, a.microbatch, a.stage) not in seen:
                raise ValueError(f"{schedule.name}: rank {r} runs {a} before its forward")
            seen[a] = i
    want = {Action(p, k, s) for p in (FORWARD, BACKWARD)
            for k in range(schedule.microbatches) for s in range(schedule.stages)}
    missing = sorted(str(a) for a in want - set(seen))
    if missing or len(seen) != len(want):
        raise ValueError(f"{schedule.name}: actions missing: {missing[:8]}")
