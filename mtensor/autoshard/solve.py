"""Choosing every item's choice: one mesh dim at a time, exactly by an integer program where
it is small enough, else by a documented heuristic.

Sharding rules are written for one mesh dim, so the search is too: with the choices of the
other mesh dims held, one mesh dim's choices form an integer program after Alpa's
intra-operator pass (Zheng et al., OSDI 2022): a binary per (item, choice), one choice per
item, and per edge a continuous share per (placement produced, placement wanted) pair whose
marginals are the two items' choices, so the edge's price is paid for the pair chosen.
Memory is one linear constraint.  ``scipy.optimize.milp`` (HiGHS) solves it.  The mesh dims
are solved in turn, each with the others' latest choices (the block sizes its prices read),
until a round changes nothing, once outermost first and once innermost first; the cheaper
plan by its bill is kept.

Beyond ``EXACT_LIMIT`` variables, or without scipy, each mesh dim is decided by a greedy pass
in program order (every item takes its cheapest choice given its producers') followed by
sweeps of iterated conditional modes (each item re-picks given all its neighbours) until
none changes; memory over the budget is priced by a multiplier doubled until the plan fits.

A mesh dim over the budget with the others as they stand (at first all replicated) holds
the least memory it can, so the next mesh dim's program has the room; the whole plan's
memory is checked against the budget at the end (``NoPlan`` when it does not fit).
"""
from __future__ import annotations

import time
from typing import Dict, List

import numpy as np

from ..placement import Replicate
from .bill import bill
from .problem import Pricer, Problem, wanted

EXACT_LIMIT = 200_000   # variables of one mesh dim's integer program
ROUNDS = 4


class NoPlan(ValueError):
    """No plan fits the memory budget."""


def initial(problem: Problem) -> List[List[int]]:
    """Every item's most replicated choice on every mesh dim (pins and sources: theirs)."""
    out = []
    for item in problem.items:
        per_dim = []
        for choices in item.choices:
            whole = [i for i, c in enumerate(choices)
                     if c.output == Replicate() and all(p == Replicate() for p in c.inputs)]
            per_dim.append(whole[0] if whole else 0)
        out.append(per_dim)
    return out


def solve(problem: Problem, model, exact_limit: int = EXACT_LIMIT):
    """(assignment: per item the choice index per mesh dim, how it was solved, seconds).
    The descent over mesh dims can settle in a different plan depending on which mesh dim
    goes first, so it runs outermost first and innermost first and keeps the plan with the
    lower predicted step time (the outermost-first one on a tie)."""
    start = time.perf_counter()
    dims = [d for d, n in enumerate(problem.mesh_shape) if n > 1]
    best, programs = None, {}
    for order in (dims, dims[::-1]) if len(dims) > 1 else (dims,):
        assignment, methods = _descend(problem, model, exact_limit, order, programs)
        step = bill(problem, assignment, model).step_s
        if best is None or step < best[0] * (1 - 1e-9):
            best = (step, assignment, methods)
    _, assignment, methods = best
    if problem.budget is not None:
        pricer = Pricer(problem, model)
        pricer.at(0, assignment)
        held = _memory_used(problem, pricer, assignment, 0)
        if held > problem.budget * (1 + 1e-9):
            raise NoPlan(f"auto_shard: no layout found within the memory budget of "
                         f"{problem.budget:,.0f} bytes per rank (the least found holds "
                         f"{held:,.0f}); raise the budget or use a larger mesh")
    return assignment, " + ".join(sorted(methods)) or "nothing to decide", \
        time.perf_counter() - start


def _descend(problem: Problem, model, exact_limit: int, dims, programs: dict):
    """Mesh dims solved in ``dims``' order, each with the others' latest choices, until a
    round changes nothing; ``programs`` keeps each mesh dim's constraints (they do not
    depend on the other dims' choices: only the prices and the memory row do)."""
    pricer = Pricer(problem, model)
    assignment = initial(problem)
    methods = set()
    stale = set(dims)           # mesh dims whose prices changed since they were solved
    for _ in range(ROUNDS):
        for dim in dims:
            if dim not in stale:
                continue
            before = [a[dim] for a in assignment]
            methods.add(_solve_dim(problem, pricer, assignment, dim, exact_limit, programs))
            stale.discard(dim)
            if [a[dim] for a in assignment] != before:
                stale |= set(dims) - {dim}
        if not stale:
            break
    return assignment, methods


def _solve_dim(problem, pricer, assignment, dim, exact_limit, programs) -> str:
    pricer.at(dim, assignment)
    if dim not in programs:
        programs[dim] = _Program(problem, dim)
    if programs[dim].index.nvars <= exact_limit:
        try:
            from scipy.optimize import milp  # noqa: F401  (the solver is optional)
        except ImportError:
            pass
        else:
            _exact(problem, pricer, assignment, dim, programs[dim])
            return "exact (integer program)"
    _heuristic(problem, pricer, assignment, dim)
    return "heuristic (greedy + iterated conditional modes)"


class _Index:
    """Variable numbering of one mesh dim's integer program."""

    def __init__(self, problem: Problem, dim: int):
        self.x: List[int] = []          # first variable of each item
        n = 0
        for item in problem.items:
            self.x.append(n)
            n += len(item.choices[dim])
        self.pairs = []                 # per edge: (placements produced, wanted, first var)
        for e in problem.edges:
            src, dst = problem.items[e.src], problem.items[e.dst]
            produced = sorted({c.output for c in src.choices[dim]}, key=repr)
            want = sorted({wanted(dst, dim, c, e.slot) for c in range(len(dst.choices[dim]))},
                          key=repr)
            self.pairs.append((produced, want, n))
            n += len(produced) * len(want)
        self.nvars = n


class _Program:
    """One mesh dim's integer program as far as it is fixed: the variables (``index``), one
    choice per item, each edge's shares marginalising to its two items' choices, which
    variables are integral, and the tie-break nudge."""

    def __init__(self, problem: Problem, dim: int):
        self.index = index = _Index(problem, dim)
        self.rows, self.cols, self.vals, self.lower, self.upper = [], [], [], [], []
        for i, item in enumerate(problem.items):
            self.constraint([(index.x[i] + c, 1.0) for c in range(len(item.choices[dim]))], 1, 1)
        for e, (produced, want, base) in zip(problem.edges, index.pairs):
            src, dst = problem.items[e.src], problem.items[e.dst]
            for a, p in enumerate(produced):
                self.constraint([(base + a * len(want) + b, 1.0) for b in range(len(want))]
                                + [(index.x[e.src] + c, -1.0) for c, ch in
                                   enumerate(src.choices[dim]) if ch.output == p], 0, 0)
            for b, q in enumerate(want):
                self.constraint([(base + a * len(want) + b, 1.0) for a in range(len(produced))]
                                + [(index.x[e.dst] + c, -1.0) for c in range(len(dst.choices[dim]))
                                   if wanted(dst, dim, c, e.slot) == q], 0, 0)
        self.integrality = np.zeros(index.nvars)
        for i, item in enumerate(problem.items):
            self.integrality[index.x[i]:index.x[i] + len(item.choices[dim])] = 1
        self.nudge = _tie_break(problem, index, dim)

    def constraint(self, terms, lo, hi) -> None:
        r = len(self.lower)
        for col, val in terms:
            self.rows.append(r)
            self.cols.append(col)
            self.vals.append(val)
        self.lower.append(lo)
        self.upper.append(hi)


def _exact(problem: Problem, pricer: Pricer, assignment, dim: int, program: _Program) -> None:
    from scipy.optimize import LinearConstraint, milp
    from scipy.sparse import coo_array

    index = program.index
    cost = np.zeros(index.nvars)
    for i, item in enumerate(problem.items):
        for c in range(len(item.choices[dim])):
            cost[index.x[i] + c] = pricer.item_cost(i, c)
    for e, (produced, want, base) in zip(problem.edges, index.pairs):
        for a, p in enumerate(produced):
            for b, q in enumerate(want):
                cost[base + a * len(want) + b] = pricer.edge_cost(e, p, q)
    rows, cols, vals = program.rows, program.cols, program.vals
    lower, upper = program.lower, program.upper
    if problem.budget is not None:          # the memory row: its prices read the other dims
        memory = np.zeros(index.nvars)
        for i, nbytes in problem.memory:
            for c in range(len(problem.items[i].choices[dim])):
                memory[index.x[i] + c] += pricer.memory(i, c, nbytes)
        kept = [(k, m) for k, m in enumerate(memory) if m]
        rows = rows + [len(lower)] * len(kept)
        cols = cols + [k for k, _ in kept]
        vals = vals + [m for _, m in kept]
        lower, upper = lower + [0], upper + [problem.budget]
    integrality = program.integrality
    matrix = coo_array((vals, (rows, cols)), shape=(len(lower), index.nvars)).tocsr()
    scale = max(float(cost.max()), 1e-30)  # seconds are tiny: keep HiGHS's tolerances apt
    result = milp(cost / scale + program.nudge, integrality=integrality,
                  bounds=(0, 1), constraints=LinearConstraint(matrix, lower, upper),
                  options={"mip_rel_gap": 0})
    if result.x is None:      # only the memory constraint can make it infeasible
        # over budget with the other mesh dims as they stand (at first, all replicated):
        # hold the least memory this mesh dim can (then the fastest such), so that the next
        # mesh dim's program sees the room it leaves; the budget is checked at the end
        objective = memory / max(float(memory.max()), 1e-30) + 1e-6 * cost / scale
        result = milp(objective, integrality=integrality, bounds=(0, 1),
                      constraints=LinearConstraint(matrix[:-1], lower[:-1], upper[:-1]))
    for i, item in enumerate(problem.items):
        values = result.x[index.x[i]:index.x[i] + len(item.choices[dim])]
        assignment[i][dim] = int(np.argmax(values))


# Layouts priced the same on one mesh dim are told apart by a nudge toward the later-listed
# choice of each item, far below any real difference but above HiGHS's tolerances: without
# it, which of the tied optima HiGHS returned varied from run to run on a loaded machine (8
# ranks on 2 cores), and the descent over mesh dims then ended in different plans (for the
# 2x4 Megatron test, one in four runs a plan with one all-gather more on tp, 0.10 ms more
# by its own bill: a worse local optimum of the descent, not a tie).
TIE_BREAK = 1e-5


def _tie_break(problem: Problem, index, dim) -> np.ndarray:
    nudge = np.zeros(index.nvars)
    for i, item in enumerate(problem.items):
        n = len(item.choices[dim])
        nudge[index.x[i]:index.x[i] + n] = TIE_BREAK * np.arange(n)[::-1] / max(n, 1)
    return nudge


def _neighbours(problem: Problem) -> Dict[int, list]:
    out: Dict[int, list] = {}
    for e in problem.edges:
        out.setdefault(e.src, []).append(e)
        out.setdefault(e.dst, []).append(e)
    return out


def _local_cost(problem, pricer, assignment, dim, i, c, around, penalty, held) -> float:
    """Item ``i``'s own price with choice ``c``, its edges' given its neighbours' choices,
    and its memory (``held[i]`` bytes whole) times ``penalty``."""
    total = pricer.item_cost(i, c)
    for e in around.get(i, ()):
        src_c = c if e.src == i else assignment[e.src][dim]
        dst_c = c if e.dst == i else assignment[e.dst][dim]
        p = problem.items[e.src].choices[dim][src_c].output
        q = wanted(problem.items[e.dst], dim, dst_c, e.slot)
        total += pricer.edge_cost(e, p, q)
    if penalty and i in held:
        total += penalty * pricer.memory(i, c, held[i])
    return total


def _memory_used(problem, pricer, assignment, dim) -> float:
    return sum(pricer.memory(i, assignment[i][dim], nbytes)
               for i, nbytes in problem.memory)


def _heuristic(problem: Problem, pricer: Pricer, assignment, dim: int) -> None:
    around = _neighbours(problem)
    incoming = {i: [e for e in around.get(i, ()) if e.dst == i] for i in range(len(problem.items))}
    held: Dict[int, float] = {}
    for i, nbytes in problem.memory:
        held[i] = held.get(i, 0.0) + nbytes
    penalty = 0.0
    for _ in range(40):
        for i, item in enumerate(problem.items):   # greedy, producers first
            options = range(len(item.choices[dim]))
            assignment[i][dim] = min(options, key=lambda c: _local_cost(
                problem, pricer, assignment, dim, i, c, {i: incoming[i]}, penalty, held))
        for _ in range(10):                         # iterated conditional modes
            changed = False
            for i, item in enumerate(problem.items):
                best = min(range(len(item.choices[dim])), key=lambda c: _local_cost(
                    problem, pricer, assignment, dim, i, c, around, penalty, held))
                changed |= best != assignment[i][dim]
                assignment[i][dim] = best
            if not changed:
                break
        if problem.budget is None or _memory_used(problem, pricer, assignment,
                                                  dim) <= problem.budget:
            return
        penalty = max(penalty * 2, 1e-12)
