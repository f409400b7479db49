"""Why annotations matter: the two-matmul block H = X @ A; Y = H @ B on an N-rank mesh.

    mpiexec -n 4 python examples/propagator.py --annotation good --d 256
    python examples/propagator.py --dry-run --mesh-size 8 --d 8192 --annotation bad

good: X replicated, A split by columns, B by rows (Megatron): H stays split, Y comes out as
partial sums, and one all-reduce makes it whole; comm bytes stay flat as the mesh grows and
the weights' memory is divided by N.
bad: X split by rows (the batch), A by rows, B by columns: the sharding rules still find the
cheapest way through (the chooser prices every option), but it takes three collectives and
several times the bytes.

``--annotate x-only`` lets the whole-graph search (``mt.auto_shard``) place the rest: only X
is pinned (replicated), and the search chooses A, B, H and Y (the weights may not be held
whole when ``--memory-budget`` is below them: 1 GiB by default, at d 8192 a quarter of A and
B); the table sets its bill beside the good and bad annotations', and the bad annotation
pinned whole is diagnosed: its cost against the best plan, and the pin to change.  With
``--dry-run`` the search runs from shapes alone; under mpiexec the plan also runs and its
collectives are counted.

    python examples/propagator.py --annotate x-only --dry-run --mesh-size 8 --d 8192
    mpiexec -n 4 python examples/propagator.py --annotate x-only --d 256

Each row is one step, with the placements it produced and the collectives it inserted
(bytes per rank, bus-bandwidth convention).  ``--dry-run`` prices the block from shapes
alone (no arrays, no MPI ranks needed), so ``--d 8192`` runs on a laptop; a real run (under
mpiexec with N ranks) counts what really ran with CommDebugMode and reports the share of
communication ``mt.compile`` predicts it can hide.  Both print the same totals line.
"""
import argparse
from collections import Counter

import numpy as np

import mtensor as mt
from mtensor import Replicate, Shard
from mtensor.debug.price import AbstractTensor, price_op, price_redistribute

R = Replicate()
ANNOTATIONS = {"good": (R, Shard(1), Shard(0)), "bad": (Shard(0), Shard(0), Shard(1))}


def shapes(args):
    return {"X": (args.batch, args.d), "A": (args.d, 4 * args.d), "B": (4 * args.d, args.d)}


def dry_run(args):
    """Rows of (step, placements, [(collective, mesh dim, bytes)]) and per-rank bytes held."""
    mesh, dtype = (args.mesh_size,), np.dtype(np.float32)
    x, a, b = (AbstractTensor(s, dtype, (p,)) for s, p in
               zip(shapes(args).values(), ANNOTATIONS[args.annotation]))
    h = price_op("matmul", [x, a], mesh)
    y = price_op("matmul", [h.output, b], mesh)
    out = AbstractTensor(y.output.shape, dtype, (R,))
    rows = [("H = X @ A", h.output.placements, h.collectives),
            ("Y = H @ B", y.output.placements, y.collectives),
            ("Y -> Replicate", out.placements, price_redistribute(y.output, (R,), mesh))]
    held = sum(t.block_bytes(mesh) for t in (x, a, b, h.output, out))
    return rows, held, None


def real_arrays(args, placements):
    """(mesh, X, A, B) for a real run: the arrays drawn from seed 0 and laid out as
    ``placements`` (one per array) on a 1-D mesh of every rank."""
    from mpi4py import MPI
    if MPI.COMM_WORLD.size != args.mesh_size:
        raise SystemExit(f"propagator.py: a real run needs {args.mesh_size} ranks "
                         f"(mpiexec -n {args.mesh_size}), or --dry-run")
    mesh = mt.init_device_mesh((args.mesh_size,))
    rng = mt.random.default_rng(0)
    return (mesh, *(rng.standard_normal(s, mesh=mesh, placements=[p]).astype(np.float32)
                    for s, p in zip(shapes(args).values(), placements)))


def real_run(args):
    mesh, x, a, b = real_arrays(args, ANNOTATIONS[args.annotation])
    rows, steps = [], [("H = X @ A", lambda v: v["X"] @ v["A"], "H"),
                       ("Y = H @ B", lambda v: v["H"] @ v["B"], "Y"),
                       ("Y -> Replicate", lambda v: v["Y"].redistribute(mesh, [R]), "out")]
    values = {"X": x, "A": a, "B": b}
    for label, fn, name in steps:
        with mt.CommDebugMode() as comm:
            values[name] = fn(values)
        rows.append((label, values[name].placements,
                     tuple((r.collective, r.mesh_dim, r.bytes) for r in comm.log)))
    held = sum(values[k].to_local().nbytes for k in ("X", "A", "B", "H", "out"))

    def block(x, a, b):
        return (x @ a @ b).redistribute(mesh, [R])
    step = mt.compile(block)
    step(x, a, b)
    return rows, held, mt.explain(step, x, a, b).hidden_fraction


def positive(text):
    """argparse type: an integer >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return int(text)


def _collective_text(collectives):
    counts = Counter((c[0], c[1]) for c in collectives)
    return ", ".join(f"{k} (mesh dim {d})" + (f" x{n}" if n > 1 else "")
                     for (k, d), n in counts.items()) or "none"


def block_graph(args, pins):
    """The block as the search sees it, from shapes: X, A, B arguments, Y read whole."""
    from mtensor.autoshard import GraphBuilder
    g = GraphBuilder((args.mesh_size,))
    x, a, b = (g.leaf(name, shape, np.float32, pins.get(name))
               for name, shape in shapes(args).items())
    h = g.op("matmul", x, a)
    y = g.op("matmul", h, b)
    g.pin(y, (R,))
    return g.graph


def annotate(args):
    """The search's plan with only X pinned, beside the hand-written annotations' bills."""
    from mtensor.autoshard import diagnose_pins, parse_bytes, search
    from mtensor.autoshard.explain import pins_text
    budget = parse_bytes(args.memory_budget)
    auto = search(block_graph(args, {"X": (R,)}), budget=budget)
    (_, _, h), (_, _, y) = auto.op_layouts()
    layouts = auto.leaf_layouts()
    lines = [f"x-only: X {shapes(args)['X']} pinned [R]; the search chose A {list(layouts['A'])}, "
             f"B {list(layouts['B'])}, H {list(h)}, Y {list(y)} ({auto.method}, "
             f"{auto.seconds:.3f} s; memory budget {args.memory_budget} per rank)",
             "| annotation | collectives | comm bytes per rank |", "|---|---|---:|"]
    for name in ("good", "bad"):
        args.annotation = name
        every = [c for _, _, cs in dry_run(args)[0] for c in cs]
        lines.append(f"| {name} | {_collective_text(every)} | {sum(c[2] for c in every):,} |")
    every = auto.bill.collectives
    lines.append(f"| x-only (auto_shard) | {_collective_text(every)} | "
                 f"{sum(c[2] for c in every):,} |")
    bad = dict(zip(("X", "A", "B"), ((p,) for p in ANNOTATIONS["bad"])))
    pinned = search(block_graph(args, bad), budget=budget)
    lines.append("the bad annotation pinned whole:")
    lines += pins_text(diagnose_pins(pinned))
    lines.append(f"totals: collectives {len(every)} bytes {sum(c[2] for c in every)}")
    if not args.dry_run:
        lines.append(run_auto(args))
    return lines


def run_auto(args):
    """The x-only plan run under mpiexec through mt.auto_shard: what it really moved."""
    mesh, x, a, b = real_arrays(args, (R, R, R))

    def block(x, a, b):
        return (x @ a @ b).redistribute(mesh, [R])
    plan = mt.auto_shard(block, x, a, b, mesh=mesh, fixed={"x": [R]},
                         memory_budget=args.memory_budget)
    step = plan.compile()
    laid = plan.distribute(x, a, b)
    with mt.CommDebugMode() as comm:
        step(*laid)
    moved = [(r.collective, r.mesh_dim, r.bytes) for r in comm.log]
    return (f"run: {_collective_text(moved)}, {sum(c[2] for c in moved):,} B per rank "
            f"(A {list(plan.layout_of('a'))}, B {list(plan.layout_of('b'))})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh-size", type=positive, default=None,
                        help="N ranks, N >= 1 (default: world size; 8 in a dry run)")
    parser.add_argument("--d", type=positive, default=256, help="hidden size (A is d x 4d)")
    parser.add_argument("--batch", type=positive, default=16)
    parser.add_argument("--annotation", choices=sorted(ANNOTATIONS), default="good")
    parser.add_argument("--dry-run", action="store_true", help="price from shapes alone")
    parser.add_argument("--annotate", choices=["x-only"],
                        help="pin X only and let mt.auto_shard place the rest")
    parser.add_argument("--memory-budget", default="1GiB",
                        help="per rank, for --annotate (default 1GiB)")
    args = parser.parse_args()
    if args.mesh_size is None:
        args.mesh_size = 8 if args.dry_run else _world_size()
    if args.annotate:
        lines = annotate(args)
        if args.dry_run or _rank() == 0:
            print("\n".join(lines))
        return
    rows, held, hidden = (dry_run if args.dry_run else real_run)(args)
    if not args.dry_run and _rank() != 0:
        return
    x_p, a_p, b_p = ANNOTATIONS[args.annotation]
    print(f"{args.annotation} annotation: X {shapes(args)['X']} [{x_p}], A {shapes(args)['A']} "
          f"[{a_p}], B {shapes(args)['B']} [{b_p}], float32, {args.mesh_size} ranks"
          f"{' (dry run)' if args.dry_run else ''}")
    print("| step | placements | collectives inserted | comm bytes per rank |\n|---|---|---|---:|")
    for label, placements, collectives in rows:
        print(f"| {label} | {list(placements)} | {_collective_text(collectives)} | "
              f"{sum(c[2] for c in collectives):,} |")
    every = [c for _, _, cs in rows for c in cs]
    print(f"memory per rank (X, A, B, H, Y): {held / 2**20:.2f} MiB")
    print("overlap: " + ("n/a in a dry run (no compute is timed)" if hidden is None else
                         f"{100 * hidden:.0f}% of communication predicted hidden by mt.compile"))
    print(f"totals: collectives {len(every)} bytes {sum(c[2] for c in every)}")


def _world_size():
    from mpi4py import MPI
    return MPI.COMM_WORLD.size


def _rank():
    from mpi4py import MPI
    return MPI.COMM_WORLD.rank


if __name__ == "__main__":
    main()
