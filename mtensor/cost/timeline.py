"""The predicted timeline of a scheduled step: when each bucket starts, moves and finishes,
and how long the step takes, from the compute times and the cost model.

What it models (each item is what the network test bed showed; ``benchmarks/netbed``):
- **One link per mesh dim, first come first served.**  Buckets started together do not move
  at the same time: a bucket's bytes go after those of every bucket started before it on the
  same link.  Pricing each bucket alone against the compute around it (the earlier model)
  predicted 85% hidden where 40-50% was measured, because 8 buckets of 36 ms cannot all
  move during 175 ms of compute.
- **Phases that need a poll.**  A collective on n ranks moves in ``bus_factor * (n - 1)``
  phases (a ring; MPICH's two-rank all-reduce is a reduce-scatter then an all-gather), and
  MPI starts the next phase only inside an MPI call: during compute, at the ``Testall``
  after each compute node; inside a wait, at once.
- **Behind compute, each message moves at a rate.**  Inside an MPI call a link moves its
  phases one after another at full speed.  Behind compute every posted phase moves at once,
  each at ``overlap_rate`` of the link's speed, together at most at full speed: 0 in shared
  memory, where the cores copy the bytes themselves inside MPI calls; ~0.4 on the 1 Gbit
  bed, where a lone 4 MiB all-reduce behind 12 ms and 36 ms matmuls moved ~40% of the time
  in both (a fixed window of work per poll, tried first, fitted the two with ~5 and ~14 ms),
  while four in flight kept the link ~90% busy.
- **Compute and transfers share the cores.**  Compute runs ``1 + overlap_slowdown`` times
  slower while a link moves behind it.  ``mt.calibrate`` measures the rate and the slowdown.
- **Nothing after the last bucket.**  The step ends when its last wait ends.

Everything here is pure and deterministic: given the same agreed compute times every rank
predicts the same timeline, so ``bucket_cap_mb="auto"`` can choose from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from ..step_kinds import STEP_KINDS

START_OVERHEAD_S = 20e-6   # the CPU cost of posting one nonblocking collective (pack aside)


@dataclass(frozen=True)
class BucketCost:
    """What the timeline needs of a bucket: its link (mesh dim) and the share of that link's
    speed kept behind compute, its standalone time on the link, in how many phases it moves,
    and the CPU time its start costs (packing a fused bucket is a memory copy)."""

    link: int
    seconds: float
    phases: int
    start_s: float
    rate: float = 1.0


def bucket_cost(kind: str, mesh_dim: int, n: int, bus_bytes: int, send_bytes: int,
                fused: bool, model) -> BucketCost:
    """Price a bucket of collective ``kind`` on ``n`` ranks of ``mesh_dim`` moving
    ``bus_bytes`` per rank; a ``fused`` one first packs its ``send_bytes`` (and unpacks)."""
    alpha, beta = model.link(mesh_dim)
    phases = 1 if STEP_KINDS[kind].neighbours else max(1, STEP_KINDS[kind].bus_factor * (n - 1))
    pack = 2 * send_bytes / model.copy_beta if fused else 0.0
    return BucketCost(mesh_dim, alpha + bus_bytes / beta, phases, START_OVERHEAD_S + pack,
                      model.rate(mesh_dim))


@dataclass
class Timeline:
    step_s: float                       # predicted wall time of the step
    compute_s: float                    # the compute nodes alone
    comm_s: float                       # the buckets alone, one after another
    costs: Sequence[BucketCost] = ()
    start: Dict[int, float] = field(default_factory=dict)     # bucket -> start time
    end: Dict[int, float] = field(default_factory=dict)       # bucket -> last byte moved
    exposed: Dict[int, float] = field(default_factory=dict)   # bucket -> CPU time waiting on it

    @property
    def hidden_fraction(self) -> float:
        """1 - (step - compute - starts) / comm, within [0, 1]: the share of communication
        that costs no time, as ``benchmarks/netbed`` measures it (the CPU cost of starting
        and packing buckets is not communication, so it is taken out first)."""
        if self.comm_s <= 0:
            return 0.0
        starts = sum(self.costs[k].start_s for k in self.start)
        exposed = self.step_s - self.compute_s - starts
        return min(1.0, max(0.0, 1.0 - exposed / self.comm_s))


def simulate(program: Sequence[Tuple[str, int]], node_seconds: Sequence[float],
             costs: Sequence[BucketCost], overlap_slowdown: float = 0.0) -> Timeline:
    """Run ``program`` (the scheduling pass's instructions) on the model's clock."""
    sim = _Sim(costs, overlap_slowdown)
    for what, k in program:
        if what == "compute":
            sim.compute(node_seconds[k])
        elif what == "start":
            sim.start(k)
        elif what == "wait":
            sim.wait(k)
        else:
            sim.start(k)
            sim.wait(k)
    compute = sum(node_seconds[k] for what, k in program if what == "compute")
    return Timeline(sim.now, compute, sum(c.seconds for c in costs), tuple(costs), sim.started,
                    sim.ended, sim.exposed)


class _Phase:
    def __init__(self, bucket: int, seconds: float):
        self.bucket, self.left = bucket, seconds


class _Sim:
    """The clock, each link's queue of posted phases, and each started bucket's progress."""

    def __init__(self, costs, slowdown):
        self.costs, self.slowdown = costs, slowdown
        self.phases_left = [c.phases for c in costs]
        self.queued = [False] * len(costs)
        self.rates = {c.link: c.rate for c in costs}
        self.queues: Dict[int, List[_Phase]] = {link: [] for link in self.rates}
        self.now = 0.0
        self.inflight: List[int] = []
        self.started, self.ended, self.exposed = {}, {}, {}

    def _post(self) -> None:
        """An MPI call: every bucket in flight whose phase is done queues its next one."""
        for k in self.inflight:
            if not self.queued[k] and self.phases_left[k]:
                self.queued[k] = True
                cost = self.costs[k]
                self.queues[cost.link].append(_Phase(k, cost.seconds / cost.phases))

    def _advance(self, wall: float, in_mpi: bool) -> None:
        """Move every link for ``wall`` seconds.  ``in_mpi``: the CPU waits inside MPI, so a
        link moves its phases one after another at full speed and a finished phase queues
        the next at once.  Else (behind compute) every queued phase moves at once, each at
        the link's rate, together at most at full speed, and a finished phase waits for the
        next poll to queue its successor."""
        end = self.now + wall
        while self.now < end:
            speeds = {link: self._speeds(q, in_mpi, self.rates[link])
                      for link, q in self.queues.items() if q}
            moving = [(link, i, v) for link, vs in speeds.items() for i, v in enumerate(vs)
                      if v > 0]
            if not moving:
                break
            step = min([end - self.now] + [self.queues[link][i].left / v
                                           for link, i, v in moving])
            self.now += step
            for link, i, v in moving:
                self.queues[link][i].left -= step * v
            for link in speeds:
                done = [p for p in self.queues[link] if p.left <= 1e-15]
                self.queues[link] = [p for p in self.queues[link] if p.left > 1e-15]
                for p in done:
                    self._phase_done(p.bucket)
            if in_mpi:
                self._post()
        self.now = end

    @staticmethod
    def _speeds(queue, in_mpi: bool, rate: float):
        """The share of its link's speed of each queued phase that moves, in queue order
        (inside MPI only the first one moves)."""
        if in_mpi:
            return [1.0]
        return [min(rate, 1.0 / len(queue))] * len(queue)

    def _phase_done(self, k: int) -> None:
        self.phases_left[k] -= 1
        self.queued[k] = False
        if not self.phases_left[k]:
            self.ended[k] = self.now

    def _busy_for(self) -> float:
        """Seconds some link keeps moving behind compute, if nothing new is queued: until its
        slowest phase is done (the phases share the link, each at most at its rate)."""
        busy = 0.0
        for link, q in self.queues.items():
            rate = self.rates[link]
            if not q or rate <= 0:
                continue
            left = sorted(p.left for p in q)
            t, moved = 0.0, 0.0
            for i, x in enumerate(left):        # phases finish in order of what they have left
                speed = min(rate, 1.0 / (len(left) - i))
                t += (x - moved) / speed
                moved = x
            busy = max(busy, t)
        return busy

    def compute(self, seconds: float) -> None:
        busy, slow = self._busy_for(), 1.0 + self.slowdown
        wall = seconds * slow if busy >= seconds * slow else busy + seconds - busy / slow
        self._advance(wall, in_mpi=False)
        if self.inflight:
            self._post()                   # the Testall after each compute node

    def start(self, k: int) -> None:
        self.now += self.costs[k].start_s
        self.started[k] = self.now
        self.inflight.append(k)
        self._post()

    def wait(self, k: int) -> None:
        began = self.now
        while self.phases_left[k]:
            self._post()
            self._advance(min(q[0].left for q in self.queues.values() if q), in_mpi=True)
        self.exposed[k] = self.now - began
        self.inflight.remove(k)


# mt.calibrate's probes: (all-reduces, compute chunks after each one's start, chunk length
# as a share of one all-reduce's time)
PROBES = ((4, 1, 1 / 3), (4, 1, 2 / 3), (1, 3, 1 / 3), (1, 1, 1.0))


def probe_program(nbuckets: int, nchunks: int):
    """A probe's program: per bucket, start it and run ``nchunks`` compute nodes (a poll
    after each); then wait for every bucket.  Returns (program, number of compute nodes)."""
    program, nodes = [], 0
    for k in range(nbuckets):
        program.append(("start", k))
        program += [("compute", nodes + i) for i in range(nchunks)]
        nodes += nchunks
    return program + [("wait", k) for k in range(nbuckets)], nodes


def fit_overlap(comm_s: float, phases: int, measured: Sequence[float]) -> Tuple[float, float]:
    """(rate, slowdown) of this model for the probes of ``PROBES`` (``measured``: per probe,
    a chunk's seconds alone, the probe's seconds, a chunk's seconds inside it).  The
    slowdown is measured directly (chunks inside the probes against alone: a fit of the
    probe times alone trades it off against the rate); the rate is the one of a grid of
    0, 0.05, ..., 1 whose model predicts the probe times best (least squared relative error;
    ties go to the smaller rate)."""
    alone, probes, inside = measured[0::3], measured[1::3], measured[2::3]
    ratios = sorted(i / a for a, i in zip(alone, inside) if a > 0)
    slowdown = min(1.0, max(0.0, ratios[len(ratios) // 2] - 1.0)) if ratios else 0.0
    slowdown = round(slowdown, 2)
    best = None
    for rate in [i / 20 for i in range(21)]:
        err = sum((predict_probe(probe, comm_s, phases, chunk_s, rate, slowdown)
                   / probe_s - 1) ** 2
                  for probe, chunk_s, probe_s in zip(PROBES, alone, probes))
        if best is None or err < best[0] - 1e-12:
            best = (err, rate)
    return best[1], slowdown


def predict_probe(probe, comm_s: float, phases: int, chunk_s: float, rate: float,
                  slowdown: float) -> float:
    """The model's seconds for ``probe`` (a row of ``PROBES``) with these chunk seconds."""
    nbuckets, nchunks, _ = probe
    program, nodes = probe_program(nbuckets, nchunks)
    cost = [BucketCost(0, comm_s, phases, 0.0, rate)] * nbuckets
    return simulate(program, [chunk_s] * nodes, cost, slowdown).step_s
