"""One forward+backward of the byte-level GPT of ``examples/lm_model.py``: mtensor eager and
compiled (``mt.compile``) vs the same step written by hand as Megatron with numpy and mpi4py
(``lm_handwritten.py``) vs PyTorch DTensor (``lm_torch.py``, when it and torch import).

    mpiexec -n 4 python benchmarks/lm_step_vs_handwritten.py [--layers 2 --d-model 128
        --heads 4 --seq 64 --batch 16 --reps 10]

Mesh (2, n/2) = (dp, tp) (n = 2: (1, 2)), every side on the same shards: the parameters in
``lm_model.layouts`` (Megatron's splits on tp, replicated on dp), the batch split over dp.
mtensor runs ``mt.value_and_grad(lm_model.loss)`` on one-hot inputs and targets placed
[Shard(0), Shard(2)] (built before timing); its gradients come back with their parameters'
placements, so the dp reduction is inside the step on every side, and so is reading the loss
as a float.  Once before timing the losses are compared (mtensor, compiled and hand-written
agree to 1e-10 relative) and each side's collectives counted on one step: mtensor's (eager and
compiled) from ``mt.CommDebugMode``, the hand-written side's by its own all-reduces, all in
the bus-bandwidth convention (an all-reduce of S bytes on n ranks moves 2(n-1)/n*S).
The sides run in a random order each rep; medians of the slowest rank.  Rank 0 prints a markdown table;
``--json PATH`` also writes it and the numbers behind it (``tables.emit``).
torch is optional: without it, without ``lm_torch.py``, or with MTENSOR_BENCH_NO_TORCH=1,
its row reads "n/a".

One thread per rank: OMP/OPENBLAS/MKL_NUM_THREADS default to 1 below, before numpy is
imported.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402  (the thread settings above must precede numpy)
from collections import Counter  # noqa: E402

import numpy as np  # noqa: E402
from lm_handwritten import lm_model, make_step  # noqa: E402
from mpi4py import MPI  # noqa: E402
from mtensor_side import (  # noqa: E402
    add_gpt_flags,
    gpt_problem,
    mtensor_side,
    step_mesh,
    time_sides,
)
from tables import emit  # noqa: E402

import mtensor as mt  # noqa: E402

LOSS_RTOL, GRAD_RTOL = 1e-10, 1e-8
SIDES = ("mtensor", "compiled", "hand", "torch")
MESH_DIMS = {0: "dp", 1: "tp", -1: "mesh"}


def make_torch_side(params, mesh, ids):
    """``lm_torch.make_torch_step`` as () -> (loss, None), or None when torch or the module
    is missing or MTENSOR_BENCH_NO_TORCH is set."""
    if os.environ.get("MTENSOR_BENCH_NO_TORCH"):
        return None
    try:
        from lm_torch import make_torch_step
    except ImportError:
        return None
    step = make_torch_step(params, *mesh.shape)

    def run():
        return step(ids), None
    return run


def recorded(run):
    """The ``mt.CommDebugMode`` of one mtensor step (eager or compiled)."""
    with mt.CommDebugMode() as mode:
        run()
    return mode


def mtensor_comm(mode):
    """{group: {"calls": {collective: n}, "bytes": b}} of a step's ``CommDebugMode``."""
    out = {}
    for r in mode.log:
        entry = out.setdefault(MESH_DIMS.get(r.mesh_dim, str(r.mesh_dim)),
                               {"calls": Counter(), "bytes": 0})
        entry["calls"][r.collective] += 1
        entry["bytes"] += r.bytes
    return {k: {"calls": dict(v["calls"]), "bytes": v["bytes"]} for k, v in out.items()}


def hand_comm(step, ids):
    """The same record of one hand-written step (all-reduces only)."""
    before_calls, before_bytes = dict(step.calls), dict(step.bytes)
    step(ids)
    return {k: {"calls": {"all_reduce": step.calls[k] - before_calls[k]},
                "bytes": step.bytes[k] - before_bytes[k]}
            for k in step.calls if step.calls[k] > before_calls[k]}


def gradient_error(grads, hand_grads, comm):
    """The largest |mtensor - hand-written| over every rank's gradient blocks, relative to
    the largest entry of that gradient."""
    worst = 0.0
    for k, g in hand_grads.items():
        scale = comm.allreduce(float(np.abs(g).max(initial=0)), op=MPI.MAX) or 1.0
        worst = max(worst, float(np.abs(grads[k].to_local() - g).max(initial=0)) / scale)
    return comm.allreduce(worst, op=MPI.MAX)


def verify(sides, params, comm):
    """Each side's loss on one step (the first calls, outside the timing).  mtensor's
    gradients (eager and compiled) must carry their ``params``' placements and agree with
    the hand-written blocks, their losses with the hand-written one."""
    results = {name: run() for name, run in sides.items()}
    hand_loss, hand_grads = results["hand"]
    for name in ("mtensor", "compiled"):
        loss, grads = results[name]
        wrong = [k for k in params if grads[k].placements != params[k].placements]
        if wrong:
            raise AssertionError(f"{name} gradients not laid out like their parameters: {wrong}")
        rel = abs(loss - hand_loss) / abs(hand_loss)
        if rel >= LOSS_RTOL:
            raise AssertionError(f"{name} loss {loss!r} vs hand-written {hand_loss!r}: "
                                 f"relative difference {rel:.1e}")
        err = gradient_error(grads, hand_grads, comm)
        if err >= GRAD_RTOL:
            raise AssertionError(f"{name} gradients vs hand-written: relative error {err:.1e}")
    return {name: result[0] for name, result in results.items()}


def format_kinds(record):
    """'(dp: all_reduce 30, tp: all_reduce 12)' for a comm record."""
    return "(" + (", ".join(f"{group}: " + ", ".join(f"{c} {n}" for c, n in sorted(
        e["calls"].items())) for group, e in sorted(record.items())) or "none") + ")"


def comm_cells(record):
    """Calls and KiB on tp, then on dp, of a comm record ("n/a" for a side not counted)."""
    if record is None:
        return ["n/a"] * 4
    empty = {"calls": {}, "bytes": 0}
    return [cell for e in (record.get(group, empty) for group in ("tp", "dp"))
            for cell in (str(sum(e["calls"].values())), f"{e['bytes'] / 1024:.1f}")]


def report_lines(args, mesh, losses, med, comm_records, bill):
    """The markdown table: per side its loss, median step, ratio to hand-written, tokens/s
    and, for the sides counted, the collectives of one step on rank 0 per group; then
    mtensor's eager step billed per block (``bill``: ``CommDebugMode.bill``)."""
    tokens = args.batch * args.seq
    lines = [f"{mesh.size()} ranks, mesh {tuple(mesh.shape)} (dp, tp); layers {args.layers}, "
             f"d_model {args.d_model}, heads {args.heads}, seq {args.seq}, batch {args.batch}, "
             f"float64; {args.reps} reps", "",
             "| side | loss | ms/step | / hand | tokens/s | tp calls | tp KiB | dp calls | "
             "dp KiB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in SIDES:
        timing = ([f"{losses[name]:.15f}", f"{med[name] * 1e3:.2f}",
                   f"{med[name] / med['hand']:.3f}", f"{tokens / med[name]:.0f}"]
                  if name in med else ["n/a"] * 4)
        lines.append("| " + " | ".join([name, *timing, *comm_cells(comm_records.get(name))])
                     + " |")
    lines += ["", "Collectives by kind (bytes: bus-bandwidth convention): " + "; ".join(
        f"{name} {format_kinds(record)}" for name, record in comm_records.items())]
    lines += ["", "mtensor's eager step per block (rank 0):", "", "```", *bill.splitlines(), "```"]
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_flags(parser)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    n = comm.size
    mesh = step_mesh(n)
    sizes, ids, dparams, x, y = gpt_problem(args, mesh, lm_model)
    params = lm_model.init_params(None, *sizes)
    hand = make_step(params, *mesh.shape, comm)
    sides = {"mtensor": mtensor_side(lm_model.loss, (dparams, x, y)),
             "compiled": mtensor_side(lm_model.loss, (dparams, x, y), compiled=True),
             "hand": lambda: hand(ids)}
    torch_side = make_torch_side(params, mesh, ids)
    if torch_side is not None:
        sides["torch"] = torch_side
    losses = verify(sides, dparams, comm)
    eager, compiled = recorded(sides["mtensor"]), recorded(sides["compiled"])
    comm_records = {"mtensor": mtensor_comm(eager), "compiled": mtensor_comm(compiled),
                    "hand": hand_comm(hand, ids)}
    med = time_sides(sides, args.reps, comm)
    if comm.rank == 0:
        emit(args.json, report_lines(args, mesh, losses, med, comm_records,
                                     eager.bill(mesh.mesh_dim_names)),
             {"ranks": n, "mesh": list(mesh.shape), "layers": args.layers,
              "d_model": args.d_model, "heads": args.heads, "seq": args.seq,
              "batch": args.batch, "reps": args.reps,
              "losses": {k: losses.get(k) for k in SIDES},
              "median_s": {k: med.get(k) for k in SIDES}, "comm": comm_records})
    hand.free()
    if torch_side is not None:
        import torch.distributed

        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
