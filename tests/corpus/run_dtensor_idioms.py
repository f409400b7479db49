"""Runs the DTensor idioms (dtensor_idioms*.py) with mtensor and compares with numpy.

    mpiexec -n 4 python tests/corpus/run_dtensor_idioms.py [--only SUBSTRING] [--quiet]

Each idiom runs on a 1-D mesh of the world; its results (DTensors gathered with full_tensor())
are compared with its single-process numpy reference as run_corpus.py compares, alike on
every rank:

    PASS         numpy's shape, dtype and values (or the same exception type numpy's raises)
    REFUSED      the documented TypeError that says to call full_tensor(), or the refusal
                 the idiom names (a documented error for what it asks)
    WRONG        any other answer or exception, or ranks that disagree
    WRONG-KNOWN  a WRONG listed in KNOWN_WRONG (an mtensor bug reported, not yet fixed):
                 counted apart, not failing; once it passes, the run fails until it is removed

Rank 0 prints the table and ``dtensor idioms: P pass, R refused, W wrong of T``; the exit
status is 1 when a case is WRONG (or a KNOWN_WRONG case no longer is).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dtensor_idioms  # noqa: E402
import dtensor_idioms_grad  # noqa: E402
import dtensor_idioms_issues  # noqa: E402
import dtensor_idioms_local_map  # noqa: E402
from run_corpus import agree, difference, gather, refused_op  # noqa: E402

import mtensor as mt  # noqa: E402
from mtensor.mesh.device_mesh import world_mesh  # noqa: E402

IDIOMS = (dtensor_idioms.IDIOMS + dtensor_idioms_issues.IDIOMS + dtensor_idioms_local_map.IDIOMS
          + dtensor_idioms_grad.IDIOMS)

# idiom name -> (rank counts where it is wrong, what is wrong); see tests/corpus/README.md.
KNOWN_WRONG = {
    "readme_mixed_partial_types": (
        {1, 2, 3, 4, 8}, "placements [P(sum), P(max)] are accepted (spec.check_placements does "
        "not refuse mixed reduce ops); DTensor raises ValueError: the value depends on the "
        "order of the reductions"),
}


def call(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", gather(fn(*args))
        except Exception as error:   # one idiom's failure must not stop the corpus
            return "raise", error


def classify(case, mesh):
    """(status, detail) of one idiom, from this rank's point of view."""
    ref_kind, ref = call(case.reference, mesh.size(), *case.inputs())
    kind, got = call(case.fn, mesh, *case.inputs())
    if kind == "raise":
        if isinstance(got, TypeError) and "full_tensor()" in str(got):
            return "REFUSED", refused_op(got)
        if any(isinstance(got, kind_) and text in str(got) for kind_, text in case.refuses):
            return "REFUSED", f"{type(got).__name__}: {str(got)[:120]}"
        if ref_kind == "raise" and type(ref) is type(got):
            return "PASS", f"raises {type(got).__name__} as it should"
        return "WRONG", f"{type(got).__name__}: {str(got)[:300]}"
    if ref_kind == "raise":
        return "WRONG", f"the right answer is {type(ref).__name__}: {str(ref)[:80]}; " \
                        f"mtensor gives an answer"
    detail = difference(ref, got)
    return ("WRONG", detail) if detail else ("PASS", "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the idioms whose name contains this")
    parser.add_argument("--quiet", action="store_true", help="print only what does not pass")
    args = parser.parse_args(argv)
    if not os.environ.get("MTENSOR_TIMEOUT"):
        mt.set_timeout(60)
    mesh = world_mesh()
    world = mesh.size()
    rank0 = mesh.get_coordinate()[0] == 0
    counts = {"PASS": 0, "REFUSED": 0, "WRONG": 0, "WRONG-KNOWN": 0}
    fixed = []
    start = time.perf_counter()
    if rank0:
        print(f"| idiom | result | detail |   ({world} ranks)\n|---|---|---|")
    for case in (c for c in IDIOMS if args.only in c.name):
        status, detail = agree(mesh, *classify(case, mesh))
        known = KNOWN_WRONG.get(case.name)
        if known and world in known[0]:
            if status == "WRONG":
                status = "WRONG-KNOWN"
            else:
                fixed.append(case.name)
        counts[status] += 1
        if rank0 and (status != "PASS" or not args.quiet):
            print(f"| {case.name} | {status} | {detail} |", flush=True)
    if rank0:
        for name in fixed:
            print(f"KNOWN_WRONG lists {name} at {world} ranks but it no longer is wrong: "
                  f"remove it from KNOWN_WRONG")
        total = sum(counts.values())
        print(f"\ndtensor idioms: {counts['PASS']} pass, {counts['REFUSED']} refused, "
              f"{counts['WRONG']} wrong of {total} ({counts['WRONG-KNOWN']} wrong-known; "
              f"{world} ranks, {time.perf_counter() - start:.1f} s)", flush=True)
    return 1 if counts["WRONG"] or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
