"""Every benchmark in one command: writes benchmarks/RESULTS.md and benchmarks/plots/*.png.

    python benchmarks/run.py --ranks 2,4,8 [--quick] [--out DIR] [--timeout S]

Launches, each under ``mpiexec`` with one BLAS/OpenMP thread per rank and a wall-clock limit
(the whole process group is killed past it), and collects the JSON their rank 0 writes:

1. ``collectives.py`` at each rank count: all-reduce, all-gather, reduce-scatter, all-to-all
   through mtensor ``redistribute`` vs raw mpi4py vs torch.distributed (gloo);
2. ``dispatch_vs_torch.py`` at the smallest rank count: per-op cost, numpy vs mtensor vs
   torch vs DTensor;
3. ``train_step_vs_handwritten.py`` at each rank count: Megatron MLP forward+backward,
   mtensor eager vs hand-written numpy+mpi4py vs DTensor;
4. the same step at 1 and each rank count with a fixed global batch (strong scaling) and with
   a fixed batch per data-parallel rank (weak scaling);
5. ``algorithms.py`` and ``sklearn_pca.py`` at each rank count: sort, cumsum, diff and TSQR
   of split arrays, and scikit-learn's PCA on row-split DTensors, vs numpy (scikit-learn on
   numpy) on the whole array in one process;
6. ``compile_dp.py`` (``mt.compile``'s buckets and replay cost), ``guards_cost.py`` (check
   mode, timeout), ``checkpoint.py`` and ``lm_step_vs_handwritten.py`` (the byte-level GPT:
   mtensor eager and compiled vs hand-written Megatron, then with torch DTensor) at each rank
   count, ``writes.py`` and a larger checkpoint at the smallest;
7. with ``--netbed`` (root, about 9 more minutes): ``netbed/run.py --no-async``, overlap over a
   rate-limited link between network namespaces (it writes ``netbed/RESULTS.md``; its table
   is copied in).

Every comparison runs its sides interleaved inside one launch.  torch is optional: without it,
or with MTENSOR_BENCH_NO_TORCH=1, its columns read "n/a".  ``--quick`` runs tiny sizes (the
smoke test in tests/test_benchmarks_run.py).  A failed launch is reported in RESULTS.md and
makes the exit status 1; the other sections are still written.
"""
import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
THREADS = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
# batch: the global batch of the strong runs and the batch per dp rank of the weak ones
FULL = {"batch": "256", "train": ["--d", "512", "--reps", "15"], "dispatch": ["--reps", "40"],
        "collectives": [], "algorithms": [], "sklearn": [], "compile": [], "guards": [], "writes": [],
        "checkpoint": ["--mib", "64"], "checkpoint_large": ["--mib", "256"],
        "lm": ["--reps", "10"]}
QUICK = {"batch": "16", "train": ["--d", "8", "--reps", "2"], "dispatch": ["--quick"],
         "collectives": ["--quick"],
         "algorithms": ["--log2n", "12", "--rows", "2048", "--cols", "8", "--reps", "1"],
         "sklearn": ["--log2-rows", "10", "--cols", "8", "--reps", "1"],
         "compile": ["--params", "4", "--size", "64", "--reps", "2"], "guards": ["--reps", "2"],
         "writes": ["--reps", "2", "--n", "256"],
         "checkpoint": ["--mib", "1", "--reps", "1", "--warmup", "0"],
         "checkpoint_large": ["--mib", "2", "--reps", "1", "--warmup", "0"],
         "lm": ["--layers", "1", "--d-model", "32", "--seq", "16", "--batch", "4", "--reps", "2"]}


def mpiexec():
    if os.environ.get("MTENSOR_MPIEXEC"):
        return os.environ["MTENSOR_MPIEXEC"]
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else (shutil.which("mpiexec") or "mpiexec")


class Launcher:
    """Runs one benchmark script under mpiexec and returns the JSON its rank 0 wrote."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.failures = []

    def __call__(self, n, script, args, **extra_env):
        what = " ".join([*(f"{k}={v}" for k, v in extra_env.items()), "mpiexec", "-n", str(n),
                         "python", f"benchmarks/{script}", *args])
        print(f"[run.py] {what}", flush=True)
        fd, path = tempfile.mkstemp(suffix=".json", prefix="mtensor-bench-")
        os.close(fd)
        env = dict(os.environ, **THREADS, PYTHONUNBUFFERED="1", **extra_env)
        start = time.perf_counter()
        proc = subprocess.Popen(
            [mpiexec(), "-n", str(n), sys.executable, str(HERE / script), *args, "--json", path],
            cwd=HERE.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.timeout)
            why = None if proc.returncode == 0 else f"exit status {proc.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            why = f"no result after {self.timeout} s (killed)"
        try:
            with open(path) as f:
                result = json.load(f) if why is None else None
        except (OSError, ValueError):
            result, why = None, why or "no JSON written"
        finally:
            os.unlink(path)
        print(f"[run.py]   {time.perf_counter() - start:.1f} s" + (f", FAILED: {why}" if why
                                                                  else ""), flush=True)
        if why:
            print(out[-4000:], flush=True)
            self.failures.append(f"`{what}`: {why}")
        return result


def run_netbed(launch):
    """The net bed's first table (from the netbed/RESULTS.md it writes), or None when it
    failed or was skipped (noted like a failed launch)."""
    what = "python benchmarks/netbed/run.py --no-async"
    print(f"[run.py] {what}", flush=True)
    proc = subprocess.run([sys.executable, str(HERE / "netbed" / "run.py"), "--no-async"],
                          cwd=HERE.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=dict(os.environ, **THREADS))
    skipped = next((ln for ln in proc.stdout.splitlines() if ln.startswith("skipped")), None)
    if proc.returncode != 0 or skipped:
        print(proc.stdout[-4000:], flush=True)
        launch.failures.append(f"`{what}`: {skipped or f'exit status {proc.returncode}'}")
        return None
    lines = (HERE / "netbed" / "RESULTS.md").read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
    stop = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:stop]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="2,4,8", help="comma-separated world sizes")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--out", default=str(HERE),
                        help="folder for RESULTS.md and plots/ (default: benchmarks/)")
    parser.add_argument("--timeout", type=int, help="seconds per launch (default 900, quick 90)")
    parser.add_argument("--netbed", action="store_true",
                        help="also run netbed/run.py --no-async (root; about 9 minutes)")
    args = parser.parse_args()
    ranks = sorted({int(n) for n in args.ranks.split(",")})
    cfg = QUICK if args.quick else FULL
    launch = Launcher(args.timeout or (90 if args.quick else 900))
    start = time.perf_counter()

    results = {"ranks": ranks, "quick": args.quick, "collectives": {}, "gloo": {},
               "strong": {}, "weak": {}, "train_no_torch": {}, "algorithms": {}}
    # gloo's threads slow the MPI sides down when they share the cores (2x on small buffers
    # here), so mtensor vs mpi4py runs without torch, and the gloo comparison in its own run
    with_torch = (importlib.util.find_spec("torch") is not None
                  and not os.environ.get("MTENSOR_BENCH_NO_TORCH"))
    for n in ranks:
        results["collectives"][n] = launch(n, "collectives.py", cfg["collectives"],
                                           MTENSOR_BENCH_NO_TORCH="1")
        if with_torch:
            results["gloo"][n] = launch(n, "collectives.py", cfg["collectives"])
    results["dispatch"] = launch(ranks[0], "dispatch_vs_torch.py", cfg["dispatch"])
    train = "train_step_vs_handwritten.py"
    for n in sorted({1, *ranks}):
        results["strong"][n] = launch(n, train, ["--batch", cfg["batch"], *cfg["train"]])
    for n in ranks if with_torch else ():  # mtensor vs hand again, gloo's threads absent
        results["train_no_torch"][n] = launch(n, train, ["--batch", cfg["batch"], *cfg["train"]],
                                              MTENSOR_BENCH_NO_TORCH="1")
    for n in sorted({1, *ranks}):  # dp == 1 (mesh (1, n)): the strong run is the weak one too
        strong = results["strong"][n]
        if strong and strong["mesh"][0] == 1:
            results["weak"][n] = strong
        else:
            results["weak"][n] = launch(n, train, ["--batch-per-dp", cfg["batch"], *cfg["train"]])
    lm = "lm_step_vs_handwritten.py"
    results["lm"] = {n: launch(n, lm, cfg["lm"], MTENSOR_BENCH_NO_TORCH="1") for n in ranks}
    results["lm_torch"] = {n: launch(n, lm, cfg["lm"]) for n in ranks} if with_torch else {}
    for n in ranks:
        results["algorithms"][n] = launch(n, "algorithms.py", cfg["algorithms"])
    results["sklearn"] = {n: launch(n, "sklearn_pca.py", cfg["sklearn"]) for n in ranks}
    for key, script in (("compile", "compile_dp.py"), ("guards", "guards_cost.py"),
                        ("checkpoint", "checkpoint.py")):
        results[key] = {n: launch(n, script, cfg[key]) for n in ranks}
    results["writes"] = {ranks[0]: launch(ranks[0], "writes.py", cfg["writes"])}
    results["checkpoint_large"] = {ranks[0]: launch(ranks[0], "checkpoint.py",
                                                    cfg["checkpoint_large"])}
    results["netbed"] = run_netbed(launch) if args.netbed else None
    results["failures"] = launch.failures
    results["seconds"] = time.perf_counter() - start

    from report import write_report

    out = Path(args.out)
    write_report(results, out, argv=" ".join(["python", "benchmarks/run.py", *sys.argv[1:]]))
    print(f"[run.py] wrote {out / 'RESULTS.md'} in {results['seconds']:.0f} s"
          + (f"; {len(launch.failures)} launch(es) failed" if launch.failures else ""))
    return 1 if launch.failures else 0


if __name__ == "__main__":
    sys.exit(main())
