"""Runs the corpus of public numpy code on DTensors and compares with numpy.

    mpiexec -n 4 python tests/corpus/run_corpus.py [--only SUBSTRING] [--quiet]

Each snippet runs on its numpy inputs (the reference), then on the same inputs as DTensors on a
1-D mesh of the world: every array input Shard(0), then the snippet's second layout (all
Replicate, or Shard on the last dim).  DTensor results are gathered with full_tensor() (through
tuples, lists and dicts) and each case is classified, alike on every rank:

    PASS     equal to numpy: same shape and dtype; ints and bools exact, floats np.allclose
             (rtol 1e-9, atol 1e-9 x the largest magnitude of numpy's answer)
    REFUSED  a TypeError that says to call full_tensor() (the documented refusal)
    WRONG    any other answer or exception (or ranks that disagree)

Rank 0 prints the table and ``corpus: P pass, R refused, W wrong of T``; the exit status is 1
when a case is WRONG.  A snippet that raises on some ranks only leaves the others in a
collective: MTENSOR_TIMEOUT (60 s unless set) aborts the job there and names the collective.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import snippets_matlab  # noqa: E402
import snippets_ml  # noqa: E402
import snippets_ml_models  # noqa: E402
import snippets_numpy100  # noqa: E402
import snippets_numpy100_more  # noqa: E402
import snippets_stats  # noqa: E402

import mtensor as mt  # noqa: E402
from mtensor.mesh.device_mesh import world_mesh  # noqa: E402

SOURCES = (snippets_numpy100, snippets_numpy100_more, snippets_matlab, snippets_ml,
           snippets_ml_models, snippets_stats)
SNIPPETS = [s for module in SOURCES for s in module.SNIPPETS]
LAYOUTS = {"shard0": "S(0)", "replicate": "R", "last": "S(-1)"}


def distribute(inputs, mesh, layout):
    """Every array with a dim becomes a DTensor in ``layout``; scalars stay as they are."""
    def place(a):
        if not isinstance(a, np.ndarray) or a.ndim == 0:
            return a
        if layout == "replicate":
            placement = mt.Replicate()
        else:
            placement = mt.Shard(0 if layout == "shard0" else a.ndim - 1)
        return mt.distribute_tensor(a, mesh, [placement], src_data_rank=None)
    return tuple(place(a) for a in inputs)


def gather(x):
    if isinstance(x, mt.DTensor):
        return x.full_tensor()
    if isinstance(x, (list, tuple)):
        return [gather(v) for v in x]
    if isinstance(x, dict):
        return {k: gather(v) for k, v in x.items()}
    return x


_ARRAYISH = (np.ndarray, np.generic, int, float, bool, complex)


def difference(ref, got, where="result"):
    """None when ``got`` equals numpy's ``ref``, else what differs."""
    if isinstance(ref, dict):
        if not isinstance(got, dict) or set(ref) != set(got):
            return f"{where}: numpy gives a dict with keys {sorted(ref)}, DTensors {got!r:.60}"
        return next((d for k in ref if (d := difference(ref[k], got[k], f"{where}[{k!r}]"))),
                    None)
    if isinstance(ref, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(ref):
            return f"{where}: numpy gives a sequence of {len(ref)}, DTensors {type(got).__name__}"
        return next((d for i, (r, g) in enumerate(zip(ref, got))
                     if (d := difference(r, g, f"{where}[{i}]"))), None)
    if not isinstance(ref, _ARRAYISH):
        return None if type(ref) is type(got) and ref == got else \
            f"{where}: numpy gives {ref!r:.40}, DTensors {got!r:.40}"
    if not isinstance(got, _ARRAYISH):
        return f"{where}: numpy gives {type(ref).__name__}, DTensors {type(got).__name__}"
    r, g = np.asarray(ref), np.asarray(got)
    if r.shape != g.shape:
        return f"{where}: shape {g.shape}, numpy {r.shape}"
    if r.dtype != g.dtype:
        return f"{where}: dtype {g.dtype}, numpy {r.dtype}"
    if r.dtype.kind in "fc":
        scale = float(np.nanmax(np.abs(r), initial=1.0)) if r.size else 1.0
        same = np.allclose(g, r, rtol=1e-9, atol=1e-9 * scale, equal_nan=True)
    else:
        same = np.array_equal(g, r)
    if same:
        return None
    bad = int(np.size(r) - np.count_nonzero(np.isclose(g, r, equal_nan=True))
              if r.dtype.kind in "fc" else np.count_nonzero(g != r))
    return f"{where}: {bad} of {r.size} values differ from numpy's"


def refused_op(error) -> str:
    """The op a refusal names: the text before its first ':' (and its arguments, if named)."""
    text = str(error)
    op = text.split(":")[0].strip()[:48]
    if "argument(s)" in text:
        op += " (" + text.split("argument(s)")[1].split(" are ")[0].strip() + ")"
    return op


def call(snip, inputs):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", gather(snip.fn(*inputs))
        except Exception as error:   # one snippet's failure must not stop the corpus
            return "raise", error


def classify(snip, layout, mesh):
    """(status, detail) of one snippet in one layout, from this rank's point of view."""
    ref_kind, ref = call(snip, snip.inputs())
    kind, got = call(snip, distribute(snip.inputs(), mesh, layout))
    if kind == "raise":
        if isinstance(got, TypeError) and "full_tensor()" in str(got):
            return "REFUSED", refused_op(got)
        if ref_kind == "raise" and type(ref) is type(got):
            return "PASS", f"raises {type(got).__name__} as numpy does"
        return "WRONG", f"{type(got).__name__}: {str(got)[:200]}"
    if ref_kind == "raise":
        return "WRONG", f"numpy raises {type(ref).__name__}: {str(ref)[:80]}; DTensors do not"
    detail = difference(ref, got)
    return ("WRONG", detail) if detail else ("PASS", "")


def agree(mesh, status, detail):
    """Every rank's status; ranks that disagree make the case WRONG (with the first rank's
    detail that is not a pass)."""
    seen = mesh.communicator().allgather_object((status, detail))
    if len({s for s, _ in seen}) > 1:
        rank, (_, why) = next((r, sd) for r, sd in enumerate(seen) if sd[0] != "PASS")
        return "WRONG", ("ranks disagree: " + ", ".join(f"{r}:{s}" for r, (s, _) in
                                                         enumerate(seen)) + f"; rank {rank}: {why}")
    return seen[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the snippets whose name contains this")
    parser.add_argument("--quiet", action="store_true", help="print only refusals, wrongs, summary")
    args = parser.parse_args(argv)
    if not os.environ.get("MTENSOR_TIMEOUT"):
        mt.set_timeout(60)
    mesh = world_mesh()
    world = mesh.size()
    rank0 = mesh.get_coordinate()[0] == 0
    counts = {"PASS": 0, "REFUSED": 0, "WRONG": 0}
    refused = {}
    start = time.perf_counter()
    if rank0:
        print(f"| snippet | layout | result | detail |   ({world} ranks)\n|---|---|---|---|")
    for snip in (s for s in SNIPPETS if args.only in s.name):
        for layout in ("shard0",) + ((snip.second,) if snip.second else ()):
            status, detail = agree(mesh, *classify(snip, layout, mesh))
            counts[status] += 1
            if status == "REFUSED":
                refused.setdefault(detail, []).append(f"{snip.name}[{LAYOUTS[layout]}]")
            if rank0 and (status != "PASS" or not args.quiet):
                print(f"| {snip.name} | {LAYOUTS[layout]} | {status} | {detail} |", flush=True)
    if rank0:
        print("\nrefused, by missing op:")
        for op, cases in sorted(refused.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"  {op}: {len(cases)}: {', '.join(cases)}")
        total = sum(counts.values())
        print(f"\ncorpus: {counts['PASS']} pass, {counts['REFUSED']} refused, "
              f"{counts['WRONG']} wrong of {total} ({len(SNIPPETS)} snippets, {world} ranks, "
              f"{time.perf_counter() - start:.1f} s)", flush=True)
    return 1 if counts["WRONG"] else 0


if __name__ == "__main__":
    sys.exit(main())
