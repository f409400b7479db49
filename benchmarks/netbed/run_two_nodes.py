"""The two-node bed: 2 ranks in each of two network namespaces, ``two_nodes.py``, RESULTS.

    sudo python benchmarks/netbed/run_two_nodes.py [--rate 1gbit] [--out benchmarks/netbed/TWO_NODES.md]

hydra's fork launcher is told the namespaces are two hosts (``-hosts mtnet0:2,mtnet1:2``),
so MPICH sees two nodes: shared memory between the 2 ranks of a namespace, TCP (libfabric
``tcp``) over the rate-limited veth pair between namespaces, and an MPI
``COMM_TYPE_SHARED`` split that tells mtensor which rank sits on which node.  The bed is
removed however the run ends.  Without root or iproute2 it prints "skipped: <reason>" and
exits 0.
"""
import argparse
import os
import shlex
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import netns  # noqa: E402
from run import raise_on_signal, run_once  # noqa: E402


# flat all-reduce algorithms of MPICH that do not follow the nodes (a ring crosses the link
# twice; recursive doubling sends the whole buffer at each of its steps)
FLAT_ALGORITHMS = ("ring", "recursive_doubling")


def _ms(seconds):
    return f"{1e3 * seconds:.1f}"


def report(res, rate, command) -> str:
    cfg, meg, ar = res["config"], res["megatron"], res["allreduce"]
    t = meg["median_s"]
    lines = [
        "# Two nodes on one machine: tp inside vs across nodes, two-level all-reduce", "",
        f"Written by `{command}`.", "",
        f"4 ranks: 2 in network namespace `mtnet0`, 2 in `mtnet1`, hydra's fork launcher told "
        f"they are two hosts, so MPICH uses shared memory inside a namespace and TCP over a "
        f"veth pair limited to {rate} per direction (`tc tbf`) between them; mtensor sees the "
        f"nodes {ar['nodes']} (an MPI `COMM_TYPE_SHARED` split).  The machine has 2 cores: "
        f"the 4 ranks share them, so compute is slow and both layouts pay the same for it.  "
        f"Medians of interleaved reps, the slowest rank's, in ms.  Load average "
        f"before/after: {res['load'][0]:.1f}/{res['load'][1]:.1f}; the launch took "
        f"{res['seconds']:.0f} s.", "",
        f"Launch: `{res['launch']}`", "",
        "## Megatron MLP step: where the tp dim sits", "",
        f"Two blocks of `tanh(x @ A) @ B`, A column- and B row-parallel on tp, batch "
        f"{cfg['batch']} rows sharded on dp, d {cfg['d']}, hidden {4 * cfg['d']}, float32, "
        f"`mt.value_and_grad`; {cfg['reps']} reps.  Same mesh shape (2, 2) laid out by node; "
        f"only the names of its dims differ.", "",
        "| layout | mesh | eager | compiled |", "|---|---|---|---|"]
    for label in ("tp inside", "tp across"):
        lines.append(f"| {label} | `{meg['layouts'][label]}` | {_ms(t[label + ' eager'])} | "
                     f"{_ms(t[label + ' compiled'])} |")
    lines += ["", f"tp across / tp inside: eager "
              f"{t['tp across eager'] / t['tp inside eager']:.2f}x, compiled "
              f"{t['tp across compiled'] / t['tp inside compiled']:.2f}x (loss "
              f"{meg['loss']:.6f} on every side).", "",
              "## Sum all-reduce of float32 over the 4 ranks", "",
              f"Flat: MPI's own `Allreduce` (raw mpi4py), and mtensor's `redistribute` "
              f"Partial -> Replicate on a 1-D mesh told it is one node (backend "
              f"`{ar['backends']['mtensor flat']}`).  Two-level: the same on the real layout "
              f"(backend `{ar['backends']['mtensor two-level']}`: reduce-scatter inside the "
              f"nodes, all-reduce of the halves across, all-gather inside; used above "
              f"{ar['backends']['crossover_bytes'] / 1024:.0f} KiB, the crossover the default "
              f"inter-node link gives).  {cfg['allreduce_reps']} reps.  One launch per MPICH "
              f"all-reduce algorithm: its default (the ch4 device picks, node-aware), and "
              f"with `MPIR_CVAR_DEVICE_COLLECTIVES=none` and "
              f"`MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM` set, the flat algorithms a "
              f"node-unaware MPI runs (the two-level one then runs them on its smaller "
              f"groups).", ""]
    for label, part in res["allreduce_under"].items():
        lines += [f"### {label}", "", "| MiB | raw mpi4py (flat) | mtensor flat | "
                  "mtensor two-level | raw / two-level |", "|---|---|---|---|---|"]
        for mib, row in part["median_s"].items():
            raw, flat, two = (row[k] for k in ("raw mpi4py (flat)", "mtensor flat",
                                               "mtensor two-level"))
            lines.append(f"| {mib} | {_ms(raw)} | {_ms(flat)} | {_ms(two)} | "
                         f"{raw / two:.2f} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", default=netns.DEFAULT_RATE)
    ap.add_argument("--batch", default="4096")
    ap.add_argument("--d", default="256")
    ap.add_argument("--reps", default="10")
    ap.add_argument("--sizes", default="1,4,16,64")
    ap.add_argument("--allreduce-reps", default="5")
    ap.add_argument("--timeout", type=int, default=600, help="seconds for the launch")
    ap.add_argument("--out", default=str(HERE / "TWO_NODES.md"))
    args = ap.parse_args(argv)
    reason = netns.unavailable()
    if reason:
        print(f"skipped: {reason}")
        return 0
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_on_signal)
    script = ["--batch", args.batch, "--d", args.d, "--reps", args.reps, "--sizes", args.sizes,
              "--allreduce-reps", args.allreduce_reps]
    command = "python benchmarks/netbed/run_two_nodes.py " + shlex.join(
        argv if argv is not None else sys.argv[1:])
    load = os.getloadavg()[0]
    with netns.bed(args.rate):
        print(netns.describe(), flush=True)
        result = run_once(script, args.timeout, {}, script="two_nodes.py", per_node=2)
        result["allreduce_under"] = {"MPICH default": result["allreduce"]}
        for algorithm in FLAT_ALGORITHMS:
            env = {"MPIR_CVAR_DEVICE_COLLECTIVES": "none",
                   "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": algorithm}
            again = run_once([*script, "--no-megatron"], args.timeout, env,
                             script="two_nodes.py", per_node=2)
            result["allreduce_under"][f"MPICH {algorithm}"] = again["allreduce"]
    result["load"] = (load, os.getloadavg()[0])
    text = report(result, args.rate, command.strip())
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
