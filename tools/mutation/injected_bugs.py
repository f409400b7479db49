"""Hand-injected bugs, one at a time, each in a fresh copy of the package, against the tests:
is every one caught, and by which test?  ("passes": that run did not see it; a bug in code
that only runs under MPI passes the unit tests by nature.)  (The pure layers' mutation score comes from mutmut;
these are the bugs in the executor, the communicator and the optimizers that only the MPI
suites can catch, and the ones issue 22 found slipping through.)

    python tools/mutation/injected_bugs.py [--ranks 2] [--out table.md]

Each bug replaces one exact piece of source (it must occur once).  The copy then runs the
unit tests and the MPI suites at ``--ranks`` ranks under a timeout; a bug is caught when a
run fails, and the first failing test is named.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BUGS = [
    ("all-reduce drops the last rank's term", "mtensor/comm/mpi_host.py",
     "    def all_reduce(self, send, recv, counts, op) -> None:\n",
     "    def all_reduce(self, send, recv, counts, op) -> None:\n"
     "        if op == 'sum' and self.size > 1 and self.rank == self.size - 1:\n"
     "            send = send * 0\n"),
    ("P(sum) * P(sum) kept as P(sum)", "mtensor/ops/pointwise.py",
     '    "multiply": _one_partial(SUM_AVG),\n',
     '    "multiply": _join(_one_partial(SUM_AVG), _all_partial(("sum",))),\n'),
    ("Adam without bias correction", "mtensor/optim.py",
     "    p -= lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)\n",
     "    p -= lr * m / (np.sqrt(v) + eps)\n"),
    ("MPI's built-in MAX/MIN on floats (drops NaN)", "mtensor/comm/mpi_host.py",
     "_MPI_FLOAT_OPS = dict(_MPI_OPS, max=_nan_op(np.maximum), min=_nan_op(np.minimum))\n",
     "_MPI_FLOAT_OPS = dict(_MPI_OPS)\n"),
    ("uneven all-gather sent as an even one", "mtensor/comm/mpi_host.py",
     "    def all_gather(self, send, recv, counts, op) -> None:\n        if _even(counts):\n",
     "    def all_gather(self, send, recv, counts, op) -> None:\n        if True:\n"),
    ("a fused bucket hands its members' results back in reverse", "mtensor/overlap/buckets.py",
     "        for i, (m, out) in enumerate(zip(self.members, self.outs)):\n",
     "        for i, (m, out) in enumerate(zip(self.members, self.outs[::-1])):\n"),
    ("nested shards split in the wrong order", "mtensor/placement.py",
     "    for mesh_dim, placement in enumerate(placements):\n        if isinstance(placement, Shard):\n"
     "            start, stop = bounds[placement.dim]\n",
     "    for mesh_dim, placement in reversed(list(enumerate(placements))):\n"
     "        if isinstance(placement, Shard):\n            start, stop = bounds[placement.dim]\n"),
]


def _copy(where: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.egg-info")
    for name in ("mtensor", "tests", "examples", "benchmarks"):
        shutil.copytree(ROOT / name, where / name, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", where)


def _inject(where: Path, path: str, old: str, new: str) -> None:
    target = where / path
    text = target.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"injected_bugs: {path} holds the original of this bug "
                         f"{text.count(old)} times, not once: update BUGS")
    target.write_text(text.replace(old, new))


def _first_failure(output: str) -> str:
    found = (re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.M)
             or re.search(r"^\[rank \d+\] (\S+::\S+) FAILED", output, re.M))
    if found:
        return found.group(1)
    mpi_error = re.search(r"^.*(?:Fatal error|MPI_ERR_\w+).*$", output, re.M)
    if mpi_error:
        return "an MPI error: " + mpi_error.group(0).strip()[:80]
    if "timed out" in output or "Timeout" in output:
        return "(a hang, ended by the timeout)"
    return "(a failed run: see its output)"


def _run(cmd, where: Path, timeout: int):
    env = dict(os.environ, PYTHONPATH=str(where), MTENSOR_MPI_SUITE="1",
               MTENSOR_TIMEOUT="60", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen(cmd, cwd=where, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out = proc.communicate()[0] + "\ntimed out"
    return proc.returncode, out


def check(bug, ranks: int, timeout: int):
    name, path, old, new = bug
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        _copy(where)
        _inject(where, path, old, new)
        mpiexec = str(Path(sys.executable).parent / "mpiexec")
        runs = {"unit": [sys.executable, "-m", "pytest", "tests/unit", "-q", "-x",
                         "-p", "no:randomly"],
                f"mpi {ranks} ranks": [mpiexec, "-n", str(ranks), sys.executable, "-m",
                                       "pytest", "tests/mpi", "--with-mpi", "-q",
                                       "-p", "no:randomly"]}
        found = {}
        for label, cmd in runs.items():
            code, out = _run(cmd, where, timeout)
            found[label] = None if code == 0 else _first_failure(out)
        return name, path, found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run")
    ap.add_argument("--out", help="also write the table here")
    ap.add_argument("--only", help="only the bugs whose name contains this text")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    rows = ["| injected bug | file | unit tests | MPI suites at "
            f"{args.ranks} ranks |", "|---|---|---|---|"]
    missed = 0
    bugs = [b for b in BUGS if args.only is None or args.only in b[0]]
    for bug in bugs:
        name, path, found = check(bug, args.ranks, args.timeout)
        cells = [f"caught: `{v}`" if v else "passes" for v in found.values()]
        missed += all(v is None for v in found.values())
        rows.append(f"| {name} | `{path}` | {' | '.join(cells)} |")
        print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(f"\n{table}\n\n{len(bugs) - missed} of {len(bugs)} caught "
          f"({time.perf_counter() - start:.0f} s)")
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
