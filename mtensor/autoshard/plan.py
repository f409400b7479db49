"""A plan: the search's layouts of a step's arguments and of every op, laid onto DTensors
(``distribute``) and run (``compile``: ``mt.compile`` with dispatch handed the plan's
strategy for each op in turn, so the collectives inserted are the plan's, not the greedy
chooser's)."""
from __future__ import annotations

import functools

import numpy as np

from .. import modes
from ..dtensor import DTensor, distribute_tensor
from ..ops import Choice
from ..pytree import flatten
from ..spec import fmt_placements
from ..trace_compile.compile import compile as mt_compile
from .explain import explain


class Forcer:
    """In ``modes.active.autoshard`` while a plan's step runs: op k of the run gets the
    plan's strategy for op k of the recorded graph.  A strategy the rule does not offer for
    the operands as they come (a value check made the rule drop partial terms) or that
    cannot write into an ``out=`` target's layout falls back to dispatch's chooser; the
    fallbacks are counted (``plan.fallbacks``)."""

    def __init__(self, plan):
        self.plan, self.ops, self.next = plan, plan.solution.op_layouts(), 0

    def strategy(self, call, choices, into):
        if self.next >= len(self.ops):
            raise ValueError(f"auto_shard: the step ran more ops than the {len(self.ops)} "
                             f"recorded ({call.describe()} is extra); a planned step must "
                             f"run the same ops on every call (no branches on values)")
        node, ins, out = self.ops[self.next]
        shapes = tuple(o.shape for o in call.operands)
        if node.name != call.name or shapes != tuple(o.shape for o in node.call.operands):
            raise ValueError(f"auto_shard: op {self.next} of the step is {call.describe()} but "
                             f"the recorded step ran {node.call.describe()} there; a planned "
                             f"step must run the same ops on every call")
        offered = set(choices)
        fits = all(Choice(tuple(layout[d] for layout in ins), out[d]) in offered
                   for d in range(len(out)))
        if not fits or (into is not None and tuple(into) != out):
            self.plan.fallbacks += 1
            return None
        return ins, out, 0.0

    def ran(self, name, operands, params, out, target=None, used=None):
        self.next += 1

    def like(self, grad, leaf):
        pass

    def pinned(self, x, out):
        pass


class Plan:
    """What ``mt.auto_shard`` returns."""

    def __init__(self, step, mesh, solution, arg_trees, diagnose):
        self.step, self.mesh, self.solution = step, mesh, solution
        self._diagnose, self._report = diagnose, None
        self._trees = arg_trees            # per argument: (paths of its leaves, rebuild)
        self.fallbacks = 0
        layouts = solution.leaf_layouts()
        self.placements = tuple(
            rebuild([list(layouts[p]) if p in layouts else None for p in paths])
            for paths, rebuild in arg_trees)

    @property
    def pins(self):
        """The pins' diagnosis (``autoshard.search.PinReport``; None when nothing was
        pinned): the plan against the best plan without the pins, searched on first use."""
        if self._report is None:
            self._report = self._diagnose()
        return self._report

    @property
    def bill(self):
        """The predicted comm, compute and memory of one step (``autoshard.bill.Bill``)."""
        return self.solution.bill

    def layout_of(self, path: str) -> tuple:
        """The placements chosen for the argument leaf at ``path`` (e.g. ``"params/w1"``)."""
        layouts = self.solution.leaf_layouts()
        if path not in layouts:
            raise KeyError(f"auto_shard: no DTensor argument at {path!r}; the paths are "
                           f"{', '.join(layouts)}")
        return layouts[path]

    def distribute(self, *args):
        """The step's arguments (numpy arrays or DTensors where the step takes DTensors)
        laid out as planned; other leaves as they are.  Pass the arguments from the first,
        as many as needed: one argument gives one tree back, several a tuple."""
        out, layouts = [], self.solution.leaf_layouts()
        for arg, (paths, _) in zip(args, self._trees):
            leaves, rebuild = flatten(arg)
            out.append(rebuild([self._lay(leaf, layouts.get(path), path)
                                for leaf, path in zip(leaves, paths)]))
        return out[0] if len(out) == 1 else tuple(out)

    def _lay(self, leaf, layout, path):
        if layout is None:
            return leaf
        if type(leaf) is DTensor:
            return leaf.redistribute(self.mesh, list(layout))
        if isinstance(leaf, np.ndarray):
            return distribute_tensor(leaf, self.mesh, list(layout))
        raise TypeError(f"auto_shard: plan.distribute: {path} was a DTensor when planned but "
                        f"is a {type(leaf).__name__} now; pass a numpy array or a DTensor")

    def run(self, *args, **kwargs):
        """One eager call of the step with the plan's strategies."""
        forcer = Forcer(self)
        previous, modes.active.autoshard = modes.active.autoshard, forcer
        try:
            return self.step(*args, **kwargs)
        finally:
            modes.active.autoshard = previous

    def compile(self, **options):
        """The step through ``mt.compile`` (``options`` are its own), traced with the plan's
        strategies."""
        @functools.wraps(self.step)
        def planned(*args, **kwargs):
            return self.run(*args, **kwargs)
        return mt_compile(planned, **options)

    def explain(self) -> str:
        names = self.mesh.mesh_dim_names
        return explain(self.solution, self.pins, names,
                       getattr(self.step, "__name__", "step"))

    def __repr__(self) -> str:
        layouts = ", ".join(f"{p}: {fmt_placements(l)}" for p, l in self.solution.leaf_layouts().items())
        return f"Plan({layouts})"
