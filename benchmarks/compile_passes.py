"""What each of the compiler's passes buys: the GPT step of ``examples/lm_model.py``
(forward and backward, ``lm_step_vs_handwritten.py``'s sizes) compiled with every exact pass,
with each pass switched off in turn, with none, with the fast passes, and with the gradient
tape's composites unfused (``value_and_grad(fuse=False)``); eager with and without the
composites; the hand-written numpy + mpi4py step as the yardstick, all in one launch.

    mpiexec -n 2 python benchmarks/compile_passes.py [--reps 15 --layers 2 --d-model 128]

Sides in a random order each rep; medians of the slowest rank; ratios to the hand-written step.  Rank 0 prints a
markdown table; ``--json PATH`` also writes it (``tables.emit``).  One BLAS thread per rank.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402  (the thread settings above must precede numpy)

from lm_handwritten import lm_model, make_step  # noqa: E402
from mpi4py import MPI  # noqa: E402
from mtensor_side import add_gpt_flags, gpt_problem, step_mesh, time_sides  # noqa: E402
from tables import emit  # noqa: E402

import mtensor as mt  # noqa: E402
from mtensor.trace_compile.passes import EXACT  # noqa: E402


def side(fn, args, passes=None, fuse=True):
    """() -> loss of ``value_and_grad(fn)``, compiled with ``passes`` unless None."""
    step = mt.value_and_grad(fn, fuse=fuse)
    if passes is not None:
        step = mt.compile(step, passes=passes)

    def run():
        return float(step(*args)[0])
    return run


def sides_of(args):
    out = {"compiled, exact passes": side(lm_model.loss, args, "exact")}
    for name in EXACT:
        out[f"compiled, without {name}"] = side(lm_model.loss, args,
                                                tuple(p for p in EXACT if p != name))
    out["compiled, no passes"] = side(lm_model.loss, args, ())
    out["compiled, fast passes"] = side(lm_model.loss, args, "fast")
    out["compiled, composites unfused"] = side(lm_model.loss, args, "exact", fuse=False)
    out["eager"] = side(lm_model.loss, args)
    out["eager, composites unfused"] = side(lm_model.loss, args, fuse=False)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_flags(parser, reps=15)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    mesh = step_mesh(comm.size)
    sizes, ids, dparams, x, y = gpt_problem(args, mesh, lm_model)
    hand = make_step(lm_model.init_params(None, *sizes), *mesh.shape, comm)
    sides = {"hand-written": lambda: hand(ids)[0], **sides_of((dparams, x, y))}
    losses = {name: run() for name, run in sides.items()}       # traces the compiled sides
    med = time_sides(sides, args.reps, comm)
    if comm.rank == 0:
        lines = [f"{comm.size} ranks, mesh {tuple(mesh.shape)} (dp, tp); GPT layers "
                 f"{args.layers}, d_model {args.d_model}, seq {args.seq}, batch {args.batch}; "
                 f"{args.reps} reps, medians of the slowest rank", "",
                 "| side | ms/step | / hand-written | loss - hand's |", "|---|---:|---:|---:|"]
        for name, t in med.items():
            lines.append(f"| {name} | {t * 1e3:.2f} | {t / med['hand-written']:.3f} | "
                         f"{losses[name] - losses['hand-written']:+.1e} |")
        emit(args.json, lines, {"ranks": comm.size, "median_s": med, "losses": losses})
    hand.free()


if __name__ == "__main__":
    main()
