"""``mt.compile``: trace a step once per input signature, then replay its graph.

The first call with a new signature runs the function eagerly through the normal dispatch
with the recording executor on (so it returns the eager result), and builds the graph; the
bucketing and scheduling passes turn it into a replay.  Later calls with the same signature
only run the replay: no rules, no choices, no plans.

The signature is the structure of the arguments, the spec of every DTensor, shape and dtype
(and whether it holds zeros or non-finite values, which dispatch's choices depend on) of
every array, and the value of everything else.  DTensors the function reads must be
arguments: a DTensor it captures from outside, and anything it makes from constants or
``mt.random`` draws, is a constant of the graph (held by reference, so in-place optimizer
updates of it are still seen).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import modes, views
from ..debug.explain import Explanation
from ..debug.trace_export import export_trace
from ..decide import const_key
from ..device.arrays import is_block
from ..dtensor import DTensor
from ..overlap.auto_buckets import choose_buckets
from ..overlap.bucketing import plan_buckets
from ..overlap.replay import Replay
from ..overlap.schedule import plan_schedule
from ..pytree import flatten, structure
from ..step_kinds import POINT_TO_POINT
from .graph import Graph
from .passes import pass_names, run_passes
from .prefetch import PrefetchOptions
from .tracer import Tracer

_MB = 1 << 20


def compile(fn=None, *, bucket_cap_mb="auto", first_bucket_mb: float = 1,
            overlap="auto", inflight_cap_mb: float = 100, prefetch="auto",
            reshard_after_forward="auto", memory_budget=None, passes="exact"):
    """``fn`` traced once per input signature and replayed with bucketed, overlapped
    collectives; usable as ``mt.compile(fn, ...)`` or as a decorator ``@mt.compile(...)``.

    ``overlap="auto"`` starts a bucket early and waits for it late only where the cost model
    says its link moves bytes behind compute (``CostModel.rate``: a calibrated network, or a
    mesh dim across nodes); in shared memory the cores that compute also copy, so there a
    bucket runs as one blocking call, which costs less than a nonblocking start, polls and a
    wait.  ``True``: overlap every bucket; ``False``: none.

    ``bucket_cap_mb="auto"`` splits the collectives into buckets where the cost model says
    the step finishes earliest, from the compute times of the trace, agreed across ranks
    (``overlap.auto_buckets``); a number caps every bucket at that many MB (the first at
    ``first_bucket_mb``), as DDP does.

    Parameters split over the batch dims (ZeRO-3, FSDP: ``auto_shard(memory_budget=)``'s
    plan) are gathered where an op needs them whole (``overlap.prefetch``).  ``prefetch``:
    how many blocks' gathers run ahead of the compute, in forward and backward ("auto": one
    more than the depth the cost model's timeline finds fastest; 0: none; None: every
    gather at its earliest).  ``reshard_after_forward``: drop each gathered copy after the forward and
    gather again in the backward (True), keep it (False), or "auto": reshard when the
    arguments plus the copies kept for the backward exceed ``memory_budget`` (bytes or
    "4GiB"; None: keep).

    ``passes``: the graph passes run on the trace before bucketing (``trace_compile.passes``):
    ``"exact"`` (default: constant folding, exact algebraic simplification, common
    subexpressions, dead code, in-place accumulation; the replay equals the eager step bit
    for bit), ``"fast"`` (also rewrites that may change the last bit: ``x + 0``,
    ``x ** 2``/``x ** 3`` as products, a sum of a broadcast as a product), ``None``, or a
    sequence of pass names; ``explain`` shows what each did."""
    options = dict(bucket_cap_mb=bucket_cap_mb, first_bucket_mb=first_bucket_mb,
                   overlap=overlap, inflight_cap_mb=inflight_cap_mb, prefetch=prefetch,
                   reshard_after_forward=reshard_after_forward, memory_budget=memory_budget,
                   passes=passes)
    if fn is None:
        return lambda f: Compiled(f, **options)
    return Compiled(fn, **options)


def _leaf_key(leaf):
    if type(leaf) is DTensor:
        return leaf.spec
    if is_block(leaf):
        return const_key(leaf)
    try:
        hash(leaf)
    except TypeError:
        raise TypeError(f"mt.compile: an argument of type {type(leaf).__name__} is neither a "
                        f"DTensor, a numpy array nor a hashable value, so calls cannot be "
                        f"told apart; pass it as one of those") from None
    return type(leaf), leaf


class _Traced:
    """One signature's graph and its replay."""

    def __init__(self, graph: Graph, buckets, program, replay: Replay, seconds, chosen_by,
                 prefetch=None, passes=()):
        self.graph, self.buckets, self.program, self.replay = graph, buckets, program, replay
        self.seconds = seconds          # per node: the slowest rank's when auto agreed them
        self.chosen_by = chosen_by      # how the buckets were chosen, for explain
        self.prefetch = prefetch        # Prefetch: the parameter gathers' depth and resharding
        self.passes = passes            # PassReport per graph pass, in order


class Compiled:
    """``mt.compile(fn)``: ``fn`` traced once per input signature (the leaves' specs, shapes
    and dtypes), then replayed.  The first call with a new signature runs ``fn`` eagerly
    under a ``Tracer`` and keeps its ``Graph``; the bucketing and schedule passes turn the
    graph's collectives into buckets and a program of start/wait/compute instructions, and
    every later call with that signature runs the ``Replay`` of that program on the new
    inputs (no dispatch, no planning).  Eager and replayed results are bit for bit alike."""

    def __init__(self, fn, bucket_cap_mb, first_bucket_mb, overlap, inflight_cap_mb,
                 prefetch="auto", reshard_after_forward="auto", memory_budget=None,
                 passes="exact"):
        functools.update_wrapper(self, fn)
        self.passes = pass_names(passes)
        self.gathers = PrefetchOptions(prefetch, reshard_after_forward, memory_budget)
        self.fn, self.overlap = fn, overlap
        if overlap not in (True, False, "auto"):
            raise TypeError(f"mt.compile: overlap must be True, False or \"auto\", not "
                            f"{overlap!r}")
        if bucket_cap_mb != "auto" and not isinstance(bucket_cap_mb, (int, float)):
            raise TypeError(f"mt.compile: bucket_cap_mb must be \"auto\" or a number of MB, "
                            f"not {bucket_cap_mb!r}")
        self.auto = bucket_cap_mb == "auto"
        self.cap = 25 * _MB if self.auto else int(bucket_cap_mb * _MB)
        self.first_cap = int(first_bucket_mb * _MB)
        self.inflight_cap = int(inflight_cap_mb * _MB)
        self._traces: dict = {}
        self._last = None

    @property
    def traced(self) -> "_Traced":
        """The trace of the latest call's signature: graph, buckets, program, replay."""
        if self._last is None:
            raise RuntimeError(f"mt.compile: {self.fn.__name__} has not been called yet")
        return self._last

    @property
    def graph(self) -> Graph:
        """The graph of the latest call's signature."""
        return self.traced.graph

    def traced_for(self, args, kwargs=None):
        """The trace these arguments would replay (None: the next call traces)."""
        return self._traces.get(structure((args, kwargs or {}), _leaf_key))

    def trace_count(self) -> int:
        return len(self._traces)

    def export_trace(self, path) -> None:
        """Write the latest replay's compute and collective spans of every rank as one
        Chrome trace / Perfetto JSON file (a collective: every rank must call it)."""
        export_trace(self.traced, path)

    def explain(self) -> Explanation:
        """The comm bill of the latest call's signature (see ``mt.explain``)."""
        return Explanation(self.traced)

    def __call__(self, *args, **kwargs):
        if modes.active.tracer is not None:       # inside another compiled function: part of its trace
            return self.fn(*args, **kwargs)
        if modes.active.tape is not None:
            raise TypeError(f"mt.compile: {self.fn.__name__} is compiled, so value_and_grad "
                            f"cannot see its ops; take the gradient inside the compiled "
                            f"function instead")
        leaves, _ = flatten((args, kwargs))
        key = structure((args, kwargs), _leaf_key)
        traced = self._traces.get(key)
        if traced is None:
            result, traced = self._trace(args, kwargs, leaves)
            self._traces[key] = self._last = traced
            return result
        self._last = traced
        graph = traced.graph
        env = traced.replay({s: _value(leaf) for s, leaf in zip(graph.inputs, leaves)
                             if s is not None})
        views.new_epoch()
        return graph.rebuild([_output(env, slot, spec) for slot, spec in graph.outputs])

    def _trace(self, args, kwargs, leaves):
        tracer = Tracer()
        views.new_epoch()
        inputs = [tracer.input(_value(leaf)) if _is_array(leaf) else None for leaf in leaves]
        modes.active.tracer = tracer
        try:
            result = self.fn(*args, **kwargs)
            out_leaves, rebuild = flatten(result)
            outputs = [(tracer.ref(_value(o)), o.spec if type(o) is DTensor else None)
                       if _is_array(o) else (None, o) for o in out_leaves]
        finally:
            modes.active.tracer = None
        meshes = [leaf.device_mesh for leaf in leaves + out_leaves if type(leaf) is DTensor]
        graph = Graph(self.fn.__name__, tracer.nodes, len(tracer.values), tracer.consts,
                      inputs, outputs, rebuild, meshes[0] if meshes else None,
                      _nbytes(leaves), _nbytes(out_leaves), tracer.avals(),
                      tracer.private_consts(), tracer.notes)
        graph, reports = run_passes(graph, self.passes)
        graph, resharded = self.gathers.resharded(graph)
        seconds = agreed_seconds(graph) if self.auto else None
        agreed = seconds is not None
        if seconds is not None:
            buckets = choose_buckets(graph.nodes, seconds, graph.cost_model())
            chosen_by = "auto: where the cost model finishes them earliest"
        else:
            buckets = plan_buckets(graph.nodes, self.cap, self.first_cap)
            chosen_by = (f"cap {self.cap / _MB:g} MB, first {self.first_cap / _MB:g} MB"
                         + (" (auto: no one mesh to agree the times on, or the ranks' graphs "
                            "differ, so the default cap)" if self.auto else ""))
            seconds = [n.seconds for n in graph.nodes]
        overlaps = self._overlaps(graph.nodes, buckets)
        chosen = self.gathers.plan(graph, buckets, overlaps, self.inflight_cap,
                                   seconds if agreed else None, resharded)
        program = plan_schedule(graph.nodes, buckets, overlaps, self.inflight_cap,
                                chosen.limits)
        return result, _Traced(graph, buckets, program, Replay(graph, buckets, program),
                               seconds, chosen_by, chosen, reports)

    def _overlaps(self, nodes, buckets):
        """Per bucket: whether it may start early and be waited for late."""
        if self.overlap != "auto":
            return [self.overlap] * len(buckets)
        return [moves_behind_compute(nodes[b[0]].fn) for b in buckets]


def moves_behind_compute(collective) -> bool:
    """Whether ``collective``'s link moves bytes while the rank computes (``rate`` > 0 on
    its mesh dim, the mesh's links applied)."""
    return collective.mesh.cost_model().rate(collective.mesh_dim) > 0


def agreed_seconds(graph):
    """Each node's traced compute time, the largest over the ranks (the slowest rank sets the
    pace), so that every rank chooses the same buckets; None where the ranks' graphs differ
    in length, the collectives span several meshes (no one communicator to agree on) or
    the graph sends point to point (each pipeline stage runs its own program), decided
    before any communication."""
    seconds = np.array([n.seconds for n in graph.nodes], np.float64)
    if any(n.fn.kind in POINT_TO_POINT for n in graph.collectives()):
        return None           # a pipeline stage's: the ranks run different programs
    meshes = {id(n.fn.mesh): n.fn.mesh for n in graph.collectives()}
    if not meshes:
        return seconds.tolist()
    if len(meshes) > 1:
        return None
    comm = next(iter(meshes.values())).communicator()
    sizes = np.array([len(seconds), -len(seconds)], np.float64)
    comm.all_reduce(sizes, sizes, None, "max")
    if sizes[0] != -sizes[1]:
        return None
    comm.all_reduce(seconds, seconds, None, "max")
    return seconds.tolist()


def _is_array(leaf) -> bool:
    return type(leaf) is DTensor or is_block(leaf)


def _nbytes(leaves) -> int:
    return sum(_value(leaf).nbytes for leaf in leaves if _is_array(leaf))


def _value(leaf):
    return leaf._local if type(leaf) is DTensor else leaf


def _output(env, slot, spec_or_value):
    if slot is None:
        return spec_or_value              # a non-array result, returned as it was
    return DTensor(env[slot], spec_or_value) if spec_or_value is not None else env[slot]


def explain(fn, *args, **kwargs) -> Explanation:
    """The comm bill of ``fn(*args, **kwargs)``: each op's strategy, each collective with its
    mesh dim and bytes, totals, per-rank memory, and how ``mt.compile`` buckets and overlaps
    them.  A plain function is compiled first and traced, which runs it once, collectives
    included (every rank must call this); a compiled one already traced for these
    arguments runs nothing.  To price a model from shapes alone, see ``debug.price``."""
    step = fn if isinstance(fn, Compiled) else compile(fn)
    if step.traced_for(args, kwargs) is None:
        step(*args, **kwargs)
    return Explanation(step.traced_for(args, kwargs))
