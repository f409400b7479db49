"""``mt.auto_shard`` and ``mt.shard_hint``: annotate a few tensors, the search places the
rest (the idea of GSPMD and Shardy, on an eager MPI library).

    plan = mt.auto_shard(train_step, params, state, x, y, mesh=mesh,
                         fixed={"x": [Shard(0), Replicate()], "y": [Shard(0), Replicate()]},
                         memory_budget="4GiB")
    params = plan.distribute(params)
    step = plan.compile()
    print(plan.explain())

Arguments are named by pytree path: the step's parameter name, then the keys or indices
down the tree, joined by "/" (``params/w1``, ``batch/0``).  A ``fixed`` key pins every
DTensor leaf at or under that path.  DTensor leaves are the layouts searched (free unless
pinned); numpy arrays and other values are passed through as they are (an optimizer's
local blocks: laid out like their parameters once ``adam_init`` runs on the planned ones).
"""
from __future__ import annotations

import inspect

import numpy as np
import optree

from ..cost import sizes
from ..dtensor import DTensor, distribute_tensor, guarded
from ..placement import Replicate
from ..pytree import NAMESPACE
from ..spec import check_target_placements
from .bill import bill
from .plan import Plan
from .record import record
from .search import diagnose_pins, search
from .solve import EXACT_LIMIT


def parse_bytes(budget):
    """``"4GiB"``, ``"512 MB"`` or a number of bytes; None stays None."""
    return sizes.parse_bytes(budget, "auto_shard: memory_budget")


def _arg_names(step, n: int):
    try:
        params = list(inspect.signature(step).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:n]
    return names + [f"arg{i}" for i in range(len(names), n)]


def _paths(name: str, tree):
    paths, leaves, spec = optree.tree_flatten_with_path(tree, none_is_leaf=True,
                                                         namespace=NAMESPACE)
    return ["/".join([name, *map(str, p)]) for p in paths], leaves, spec.unflatten


def _pins(fixed, leaves, mesh):
    """path -> validated placements for every DTensor leaf a ``fixed`` key names."""
    out = {}
    for key, placements in (fixed or {}).items():
        hit = [(path, x) for path, x in leaves if path == key or path.startswith(key + "/")]
        if not hit:
            raise ValueError(f"auto_shard: fixed names {key!r}, which holds no DTensor "
                             f"argument; the DTensor arguments are "
                             f"{', '.join(p for p, _ in leaves) or 'none'}")
        for path, x in hit:
            layout = check_target_placements(f"auto_shard: fixed[{key!r}]", placements, mesh,
                                             x.shape)
            out[path] = layout
    return out


def auto_shard(step, *args, mesh, fixed=None, memory_budget=None, optimizer_slots: int = 2,
               exact_limit: int = EXACT_LIMIT) -> Plan:
    """Search the layouts of ``step(*args)``'s DTensor arguments and of every op it runs
    (forward, backward and all: one graph), minimising the predicted step time (the cost
    model's communication plus each op's compute divided by its shards) under
    ``memory_budget`` per rank (arguments, gradients, ``optimizer_slots`` arrays of
    optimizer state per parameter, activations kept for the backward).  Runs the step once
    on replicated copies (a collective: every rank calls it; the arguments are not
    changed) and returns a :class:`Plan`."""
    names = _arg_names(step, len(args))
    trees, leaves = [], []
    for name, arg in zip(names, args):
        paths, arg_leaves, rebuild = _paths(name, arg)
        trees.append((paths, rebuild, arg_leaves))
        leaves += [(p, x) for p, x in zip(paths, arg_leaves) if type(x) is DTensor]
    for path, x in leaves:
        if x.device_mesh != mesh:
            raise ValueError(f"auto_shard: argument {path} lives on {x.device_mesh}, not on "
                             f"the mesh {mesh} being planned; distribute it there")
    pins = _pins(fixed, leaves, mesh)
    replicated = [Replicate()] * mesh.ndim
    copies, leaves_at = [], []
    for paths, rebuild, arg_leaves in trees:
        copied = []
        for path, x in zip(paths, arg_leaves):
            if type(x) is DTensor:
                x = distribute_tensor(x.full_tensor(), mesh, replicated)
                leaves_at.append((path, x, pins.get(path)))
            elif isinstance(x, np.ndarray):
                x = x.copy()
            copied.append(x)
        copies.append(rebuild(copied))
    graph = record(step, copies, mesh, leaves_at, optimizer_slots)
    model = mesh.cost_model()
    solution = _agreed(search(graph, model, parse_bytes(memory_budget), exact_limit), mesh,
                       model)
    return Plan(step, mesh, solution, [(paths, rebuild) for paths, rebuild, _ in trees],
                lambda: diagnose_pins(solution, model, exact_limit))


def _agreed(solution, mesh, model):
    """Rank 0's choices on every rank.  Every rank searched the same problem and HiGHS is
    deterministic, but a plan that differed by one choice would deadlock the step, so the
    choices are broadcast (one small collective) rather than trusted."""
    mine = np.array(solution.assignment, np.int64)
    agreed = mine.copy()
    with guarded("auto_shard", "broadcast", agreed.shape, agreed.dtype, mesh):
        mesh.communicator().broadcast(agreed, 0)
    if not np.array_equal(agreed, mine):
        solution.assignment = agreed.tolist()
        solution.bill = bill(solution.problem, solution.assignment, model)
    return solution


def shard_hint(x, placements):
    """``x`` laid out as ``placements`` (``x.redistribute``): inside a step ``auto_shard``
    plans, a pin on that value which the search keeps (JAX's
    ``with_sharding_constraint``); outside, an ordinary redistribution."""
    if type(x) is not DTensor:
        raise TypeError(f"shard_hint: expected a DTensor, got {type(x).__name__}")
    return x.redistribute(x.device_mesh, placements)
