"""The replay: a scheduled graph run on new inputs, with no planning at all.

Compute nodes call their recorded local function; buckets start (nonblocking), wait, or run
(blocking) through ``comm``.  While anything is in flight, each compute node is followed by
one ``Testall``: MPICH and Open MPI advance a started collective only inside MPI calls, and
that poll (about a microsecond) is what lets a transfer move while numpy computes.  Every
instruction's span is kept for ``export_trace``.
"""
from __future__ import annotations

import time

from ..comm import guard, nonblocking, run as run_blocking
from .buckets import Bucket

_COMPUTE, _START, _WAIT, _RUN = range(4)


class Replay:
    def __init__(self, graph, buckets, program):
        nodes = graph.nodes
        self.name = graph.name
        self.template = [None] * graph.nslots
        for slot, value in graph.consts.items():
            self.template[slot] = value
        self.buckets = [Bucket([nodes[m].fn for m in b], [nodes[m].ins[0] for m in b],
                               [nodes[m].outs[0] for m in b]) for b in buckets]
        kinds = {"start": _START, "wait": _WAIT, "run": _RUN}
        self.steps = [(_COMPUTE, nodes[k]) if what == "compute" else (kinds[what], k)
                      for what, k in program]
        self.spans = []

    def __call__(self, inputs) -> list:
        """Run on ``inputs`` ({slot: value}); returns every slot's value."""
        env = list(self.template)
        for slot, value in inputs.items():
            env[slot] = value
        clock = time.perf_counter
        spans = self.spans = []
        flight = {}         # bucket -> (request, send, recv, started at)
        requests = []
        for what, arg in self.steps:
            if what == _COMPUTE:
                start = clock()
                result = arg.fn(*[env[s] for s in arg.ins])
                outs = arg.outs
                if len(outs) == 1:
                    env[outs[0]] = result
                elif outs:
                    for s, r in zip(outs, result):
                        env[s] = r
                if requests:
                    nonblocking.test_all(requests)
                spans.append((arg.name, "compute", start, clock()))
            elif what == _START:
                bucket = self.buckets[arg]
                start = clock()
                send, recv = bucket.pack(env)
                self._announce(bucket)
                request = nonblocking.start(bucket.kind, bucket.group, send, recv,
                                            bucket.counts, bucket.op)
                guard.after()
                flight[arg] = (request, send, recv, start)
                requests.append(request)
            elif what == _WAIT:
                request, _, recv, start = flight.pop(arg)
                bucket = self.buckets[arg]
                self._announce(bucket, agree=False)
                try:
                    nonblocking.wait(request)
                finally:
                    guard.after()
                requests.remove(request)
                self._finish(bucket, recv, env, start, spans)
            else:
                bucket = self.buckets[arg]
                start = clock()
                send, recv = bucket.pack(env)
                self._announce(bucket)
                try:
                    run_blocking(bucket.kind, bucket.group, send, recv, bucket.counts, bucket.op)
                finally:
                    guard.after()
                self._finish(bucket, recv, env, start, spans)
        return env

    def _announce(self, bucket, agree=True) -> None:
        if guard.state.active:
            guard.state.op = f"compiled {self.name} (a bucket of {len(bucket.members)})"
            guard.before(bucket.kind, bucket.mesh_dim, bucket.global_shapes, bucket.dtype,
                         bucket.mesh.comm, agree)

    @staticmethod
    def _finish(bucket, recv, env, start, spans) -> None:
        bucket.unpack(recv, env)
        bucket.record()
        spans.append((f"{bucket.kind} x{len(bucket.members)}", "collective", start,
                      time.perf_counter()))
