"""The replay: a scheduled graph run on new inputs, with no planning at all.

Compute nodes call their recorded local function; buckets start (nonblocking), wait, or run
(blocking) through ``comm``.  While anything is in flight, each compute node is followed by
one ``Testall``: MPICH and Open MPI advance a started collective only inside MPI calls, and
that poll (about a microsecond) is what lets a transfer move while numpy computes.  The end
time of every instruction is kept, from which ``export_trace`` draws the spans.

A node whose operand may take its result (``Node.into``, the in-place pass's) writes it
into that operand's block (``out=``) when the operand dies at that instruction, nothing
else holds the block (no view, no DTensor, no pool: the replay's own reference is the only
one) and the block has the shape, dtype and strides the result had when it was fresh: the
replay then reuses warm memory instead of a fresh allocation per elementwise op, and every
later op sees the same array, so the bits stay eager's (a block of other strides would
change the order later reductions add in).
"""
from __future__ import annotations

import sys
import time
from collections import deque

import numpy as np

from ..comm import guard
from ..device.arrays import is_block, owns_memory
from ..step_kinds import POINT_TO_POINT
from .buckets import Bucket

_COMPUTE, _START, _WAIT, _RUN = range(4)


class Replay:
    """A scheduled graph bound for running: the program's instructions (compute, start,
    wait, run) with their slots, the buckets they start, and the slots to drop after each
    one.  Calling it runs the step on new inputs; it keeps each run's instruction end times
    for ``export_trace`` and ``explain``."""

    def __init__(self, graph, buckets, program):
        nodes = graph.nodes
        self.name = graph.name
        self.template = [None] * graph.nslots
        for slot, value in graph.consts.items():
            self.template[slot] = value
        self.buckets = [Bucket([nodes[m].fn for m in b], [nodes[m].ins[0] for m in b],
                               [nodes[m].outs[0] for m in b], nodes[b[0]].where)
                        for b in buckets]
        kinds = {"start": _START, "wait": _WAIT, "run": _RUN}
        self.steps = [(_COMPUTE, (nodes[k].fn, nodes[k].ins, nodes[k].outs))
                      if what == "compute" else (kinds[what], k) for what, k in program]
        self.frees = self._last_uses(nodes, program, graph)
        self.into = [tuple(s for s in nodes[k].into if s in free) if what == "compute" else ()
                     for (what, k), free in zip(program, self.frees)]
        # per instruction: a start or run whose bucket's input dies there (may reduce in place)
        self.dying = [what in (_START, _RUN) and self.buckets[arg].ins[0] in free
                      for (what, arg), free in zip(self.steps, self.frees)]
        self.results = [None] * len(program)   # (shape, dtype, strides) of such a result
        self.reused = 0                         # blocks the latest run wrote a result into
        self.program = program
        self.labels = [nodes[k].name if what == "compute" else
                       f"{self.buckets[k].kind} x{len(self.buckets[k].members)}"
                       for what, k in program]
        self.marks = []
        self.history = deque(maxlen=5)   # the latest runs' marks, for explain's compute times

    def __call__(self, inputs) -> list:
        """Run on ``inputs`` ({slot: value}); returns every slot's value."""
        env = list(self.template)
        for slot, value in inputs.items():
            env[slot] = value
        clock = time.perf_counter
        marks = self.marks = [clock()]   # when each instruction ended (one clock read each)
        self.history.append(marks)
        flight = {}                      # bucket -> (request, send, recv)
        self.reused = 0
        requests = []
        for i, ((what, arg), free) in enumerate(zip(self.steps, self.frees)):
            if what == _COMPUTE:
                self._compute(env, i, arg, requests)
            elif what == _START:
                self._start(env, i, arg, flight, requests)
            elif what == _WAIT:
                self._wait(env, arg, flight, requests)
            else:
                self._blocking(env, i, arg)
            for s in free:
                env[s] = None
            marks.append(clock())
        return env

    def _compute(self, env, i, step, requests) -> None:
        """A kernel on its slots' blocks, into a dying operand's block where one fits; then a
        test of the requests in flight, so they progress behind the next kernel."""
        fn, ins, outs = step
        into = self._reusable(env, i) if self.into[i] else None
        if into is not None:
            result = fn(*[env[s] for s in ins], out=into)
            self.reused += 1
        else:
            result = fn(*[env[s] for s in ins])
            if self.into[i] and is_block(result):
                self.results[i] = (result.shape, result.dtype, result.strides)
        if len(outs) == 1:
            env[outs[0]] = result
        elif outs:
            for s, r in zip(outs, result):
                env[s] = r
        if requests:
            self.buckets[0].group.test_all(requests)

    def _start(self, env, i, index, flight, requests) -> None:
        """Pack bucket ``index`` and start its nonblocking collective."""
        bucket = self.buckets[index]
        send, recv = bucket.pack(env, self._alone(env, i, bucket))
        self.reused += send is recv
        self._announce(bucket)
        request = bucket.group.start(bucket.kind, send, recv, bucket.counts, bucket.op)
        guard.after()
        flight[index] = (request, send, recv)
        requests.append(request)

    def _wait(self, env, index, flight, requests) -> None:
        """Wait for bucket ``index``'s collective and unpack its result into the slots."""
        request, _, recv = flight.pop(index)
        bucket = self.buckets[index]
        self._announce(bucket, agree=False)
        try:
            bucket.group.wait(request)
        finally:
            guard.after()
        requests.remove(request)
        bucket.unpack(recv, env)
        bucket.count()

    def _blocking(self, env, i, index) -> None:
        """Bucket ``index`` as one blocking collective (overlap off, or nothing to hide it)."""
        bucket = self.buckets[index]
        send, recv = bucket.pack(env, self._alone(env, i, bucket))
        self.reused += send is recv
        self._announce(bucket)
        try:
            bucket.run(send, recv, bucket.counts, bucket.op)
        finally:
            guard.after()
        bucket.unpack(recv, env)
        bucket.count()

    def _reusable(self, env, i):
        """A dying operand's block that step ``i``'s ufunc may write its result into, or
        None: one only the env list holds."""
        meta = self.results[i]
        if meta is None:
            return None
        for s in self.into[i]:
            if _references(env, s) != _ALONE:
                continue
            block = env[s]
            if (is_block(block) and (block.shape, block.dtype, block.strides) == meta
                    and owns_memory(block)):
                return block
        return None

    def _alone(self, env, i, bucket) -> bool:
        """Whether step ``i`` (a start or run) may reduce its bucket's input in place: the
        slot dies there and only the env list holds its block."""
        return self.dying[i] and _references(env, bucket.ins[0]) == _ALONE

    def _last_uses(self, nodes, program, graph):
        """Per instruction, the slots nothing reads after it: dropped there, so the replay
        holds no more intermediates than eager code does (and numpy reuses warm memory)."""
        keep = {s for s, _ in graph.outputs if s is not None}
        last = {}
        for i, (what, k) in enumerate(program):
            node_or_bucket = nodes[k] if what == "compute" else self.buckets[k]
            if what != "start":
                last.update((s, i) for s in node_or_bucket.outs if s not in last)
            if what != "wait":
                last.update((s, i) for s in node_or_bucket.ins)
        frees = [[] for _ in program]
        for s, i in last.items():
            if s not in keep:
                frees[i].append(s)
        return [tuple(f) for f in frees]

    def node_seconds(self, traced_seconds):
        """Per graph node, its median compute seconds over this rank's latest (up to 5)
        complete replays (the poll after it included), or ``traced_seconds`` before any."""
        runs = [m for m in self.history if len(m) == len(self.program) + 1]
        out = list(traced_seconds)
        if not runs:
            return out
        took = np.diff(np.array(runs), axis=1)
        for i, (what, k) in enumerate(self.program):
            if what == "compute":
                out[k] = float(np.median(took[:, i]))
        return out

    @property
    def spans(self):
        """(name, "compute" | "collective", start, end) of the latest run: a compute node or
        blocking collective spans its instruction; a started one runs until its wait ends."""
        out, started = [], {}
        for i, (what, arg) in enumerate(self.steps[:len(self.marks) - 1]):
            begin, end = self.marks[i], self.marks[i + 1]
            if what == _START:
                started[arg] = begin
            elif what != _WAIT:
                out.append((self.labels[i], "compute" if what == _COMPUTE else "collective",
                             begin, end))
            else:
                out.append((self.labels[i], "collective", started.pop(arg), end))
        return out

    def _announce(self, bucket, agree=True) -> None:
        if guard.state.active:
            guard.state.op = f"compiled {self.name} (a bucket of {len(bucket.members)})"
            guard.before(bucket.kind, bucket.mesh_dim, bucket.global_shapes, bucket.dtype,
                         bucket.mesh.comm, agree and bucket.kind not in POINT_TO_POINT)


def _references(env, slot) -> int:
    """The reference count of ``env[slot]`` as seen from here."""
    block = env[slot]
    return sys.getrefcount(block)


# What ``_references`` reads for a block only the env list holds: measured through the same
# function, not assumed (interpreters count the references of a call differently)
_ALONE = _references([np.empty(1)], 0)
